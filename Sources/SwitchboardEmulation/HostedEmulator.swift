public import Hummingbird
public import HummingbirdWebSocket
public import Logging

/// An emulator served by ``EmulatorHost``: its routes and the URLs a client needs. Conforming
/// gives it `withRunning(port:_:)` for tests and the demo and `run(host:port:onBound:)` for
/// `switchboard emulate`.
public protocol HostedEmulator: Sendable {
    /// What a client is told: a URL, or several.
    associatedtype Endpoints: Sendable

    var logger: Logger { get }
    /// The HTTP routes and the WebSocket routes.
    func routers() -> (http: Router<BasicWebSocketRequestContext>, webSocket: Router<BasicWebSocketRequestContext>)
    func endpoints(host: String, port: Int) -> Endpoints
}

extension HostedEmulator {
    /// Runs the emulator on 127.0.0.1 around `body`, which gets the endpoints; stops it afterwards.
    public func withRunning<Result: Sendable>(port: Int = 0, _ body: @Sendable (Endpoints) async throws -> Result) async throws -> Result {
        let (http, webSocket) = routers()
        return try await EmulatorHost.withRunning(router: http, webSocketRouter: webSocket, port: port, logger: logger) { bound in
            try await body(endpoints(host: "127.0.0.1", port: bound))
        }
    }

    /// Runs standalone until the process is signalled; `onBound` gets the endpoints.
    public func run(host: String = "127.0.0.1", port: Int = 0, onBound: @escaping @Sendable (Endpoints) async -> Void) async throws {
        let (http, webSocket) = routers()
        try await EmulatorHost.run(router: http, webSocketRouter: webSocket, host: host, port: port, logger: logger) { bound in
            await onBound(endpoints(host: host, port: bound))
        }
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
