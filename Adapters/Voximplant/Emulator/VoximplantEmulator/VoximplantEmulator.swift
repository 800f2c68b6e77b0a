public import Hummingbird
public import HummingbirdWebSocket
public import Logging
public import SwitchboardEmulation
import NIOWebSocket
import Switchboard

/// The Voximplant-style service on a real socket: `ws://127.0.0.1:PORT/ws` speaking
/// Docs/Protocols/voximplant-style.md, backed by a ``VoximplantServer``, plus `GET /health`.
public struct VoximplantEmulator: HostedEmulator {
    public let server: VoximplantServer
    public let logger: Logger

    public init(server: VoximplantServer = VoximplantServer(), logger: Logger = Logger(label: "voximplant-emulator")) {
        self.server = server
        self.logger = logger.quietedForEmulation()
    }

    /// The WebSocket URL.
    public func endpoints(host: String, port: Int) -> String { "ws://\(host):\(port)/ws" }

    public func httpRouter() -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.get("/health") { _, _ in "ok" }
        return router
    }

    public func webSocketRoutes() -> [WebSocketRoute] {
        let server = self.server
        return [
            WebSocketRoute(path: "/ws", clock: server.clock) { _, socket in
                let client = server.attach(send: socket.send, close: socket.close)
                return EmulatedSocket.Handlers(
                    receive: { frame in
                        switch frame {
                        case .text(let text): server.receive(text, from: client)
                        case .binary: socket.send(VoximplantProtocolError(1).frame(id: nil).jsonString)
                        case .failed:
                            // Over the host's 1 MiB or a broken socket: say so if possible, then close.
                            socket.send(VoximplantProtocolError(1).frame(id: nil).jsonString)
                            socket.close()
                        }
                    },
                    closed: { server.detach(client) }
                )
            }
        ]
    }
}
