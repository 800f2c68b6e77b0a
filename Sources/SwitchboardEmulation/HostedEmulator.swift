import Foundation
public import Hummingbird
public import HummingbirdWebSocket
public import Logging
public import Switchboard

/// An emulator served by ``EmulatorHost``: its routes and the URLs a client needs. Conforming
/// gives it `withRunning(port:_:)` for tests and the demo, `run(host:port:onBound:)` for
/// `switchboard emulate`, and `inProcess()` for adapter tests without a socket.
public protocol HostedEmulator: Sendable {
    /// What a client is told: a URL, or several.
    associatedtype Endpoints: Sendable

    var logger: Logger { get }
    /// The HTTP routes (`GET /health` and the vendor's).
    func httpRouter() -> Router<BasicWebSocketRequestContext>
    /// The WebSocket endpoints; none for an HTTP-only service.
    func webSocketRoutes() -> [WebSocketRoute]
    func endpoints(host: String, port: Int) -> Endpoints
}

/// A WebSocket endpoint of an emulator, as data: ``EmulatorHost`` serves it on a socket and
/// ``InProcessNetwork`` without one, with the same model code behind both.
public struct WebSocketRoute: Sendable {
    /// The path, such as `/ws`.
    public var path: String
    /// The largest frame the emulator reads; a larger one reaches ``open`` as
    /// ``EmulatedSocket/Inbound/failed``.
    public var maxFrameSize: Int
    /// Times the pauses the emulator puts between frames (slow-reply faults).
    public var clock: SessionClock
    /// Whether the handshake to `uri` (its path and query) is refused: a handshake fault.
    public var refuses: @Sendable (_ uri: String) -> Bool
    /// Registers a socket opened to `uri` with the emulator's model and returns its handlers.
    public var open: @Sendable (_ uri: String, _ socket: EmulatedSocket) -> EmulatedSocket.Handlers

    public init(
        path: String,
        maxFrameSize: Int = EmulatorHost.maxWebSocketFrame,
        clock: SessionClock = .continuous,
        refuses: @escaping @Sendable (_ uri: String) -> Bool = { _ in false },
        open: @escaping @Sendable (_ uri: String, _ socket: EmulatedSocket) -> EmulatedSocket.Handlers
    ) {
        self.path = path
        self.maxFrameSize = maxFrameSize
        self.clock = clock
        self.refuses = refuses
        self.open = open
    }

    /// The query fields of `uri`, percent-decoded.
    public static func query(of uri: String) -> [String: String] {
        guard let start = uri.firstIndex(of: "?") else { return [:] }
        var fields: [String: String] = [:]
        for pair in uri[uri.index(after: start)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            fields[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return fields
    }
}

extension HostedEmulator {
    /// Runs the emulator on 127.0.0.1 around `body`, which gets the endpoints; stops it afterwards.
    public func withRunning<Result: Sendable>(port: Int = 0, _ body: @Sendable (Endpoints) async throws -> Result) async throws -> Result {
        try await EmulatorHost.withRunning(router: httpRouter(), webSocketRoutes: webSocketRoutes(), port: port, logger: logger) { bound in
            try await body(endpoints(host: "127.0.0.1", port: bound))
        }
    }

    /// Runs standalone until the process is signalled; `onBound` gets the endpoints.
    public func run(host: String = "127.0.0.1", port: Int = 0, onBound: @escaping @Sendable (Endpoints) async -> Void) async throws {
        try await EmulatorHost.run(router: httpRouter(), webSocketRoutes: webSocketRoutes(), host: host, port: port, logger: logger) { bound in
            await onBound(endpoints(host: host, port: bound))
        }
    }

    /// The emulator without a socket: endpoints to configure a client with, and the transports
    /// that carry its requests and sockets straight to this emulator's routes in the same
    /// process. Nothing runs in the background: a request is answered in the task that makes it,
    /// a socket's frames are carried while the link that opened it runs.
    public func inProcess() -> (endpoints: Endpoints, network: InProcessNetwork) {
        (endpoints(host: InProcessNetwork.host, port: InProcessNetwork.port), InProcessNetwork(router: httpRouter(), webSocketRoutes: webSocketRoutes(), logger: logger))
    }
}

extension Logger {
    /// The logger an emulator keeps: at `warning` or above, so tests and the demo stay quiet
    /// unless something is wrong.
    public func quietedForEmulation() -> Logger {
        var logger = self
        if logger.logLevel < .warning { logger.logLevel = .warning }
        return logger
    }
}
