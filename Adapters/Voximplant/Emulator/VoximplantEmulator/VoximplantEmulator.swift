import Hummingbird
import HummingbirdWebSocket
public import Logging
import SwitchboardEmulation
import NIOWebSocket
import Switchboard

/// The Voximplant-style service on a real socket: `ws://127.0.0.1:PORT/ws` speaking
/// Docs/Protocols/voximplant-style.md, backed by a ``VoximplantServer``, plus `GET /health`.
public struct VoximplantEmulator: Sendable {
    public let server: VoximplantServer
    public let logger: Logger

    public init(server: VoximplantServer = VoximplantServer(), logger: Logger = Logger(label: "voximplant-emulator")) {
        self.server = server
        var logger = logger
        if logger.logLevel < .warning { logger.logLevel = .warning }
        self.logger = logger
    }

    /// Runs the emulator around `body`, which gets the WebSocket URL; stops it afterwards.
    public func withRunning<Result: Sendable>(
        port: Int = 0,
        _ body: @Sendable (_ url: String) async throws -> Result
    ) async throws -> Result {
        let (router, webSocketRouter) = routers()
        return try await EmulatorHost.withRunning(router: router, webSocketRouter: webSocketRouter, port: port, logger: logger) {
            bound in try await body("ws://127.0.0.1:\(bound)/ws")
        }
    }

    /// Runs standalone until the process is signalled; `onBound` gets the WebSocket URL.
    public func run(host: String = "127.0.0.1", port: Int = 0, onBound: @escaping @Sendable (String) async -> Void) async throws {
        let (router, webSocketRouter) = routers()
        try await EmulatorHost.run(router: router, webSocketRouter: webSocketRouter, host: host, port: port, logger: logger) {
            bound in await onBound("ws://\(host):\(bound)/ws")
        }
    }

    func routers() -> (Router<BasicWebSocketRequestContext>, Router<BasicWebSocketRequestContext>) {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.get("/health") { _, _ in "ok" }
        let webSocketRouter = Router(context: BasicWebSocketRequestContext.self)
        let server = self.server
        webSocketRouter.ws("/ws") { inbound, outbound, _ in
            await EmulatedSocket.serve(inbound: inbound, outbound: outbound, maxFrameSize: 64 * 1024) { socket in
                let client = server.attach(send: socket.send, close: socket.close)
                return EmulatedSocket.Handlers(
                    receive: { frame in
                        switch frame {
                        case .text(let text): server.receive(text, from: client)
                        case .binary: socket.send(VoximplantProtocolError(1).frame(id: nil).jsonString)
                        case .failed:
                            // Over the frame limit or a broken socket: say so if possible, then close.
                            socket.send(VoximplantProtocolError(1).frame(id: nil).jsonString)
                            socket.close()
                        }
                    },
                    closed: { server.detach(client) }
                )
            }
        }
        return (router, webSocketRouter)
    }
}
