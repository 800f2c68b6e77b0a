import Foundation
public import Hummingbird
public import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOWebSocket
import Switchboard
public import SwitchboardEmulation

/// CXone on a real socket: HTTP at `http://127.0.0.1:PORT/chat/…` (channel configuration,
/// availability, attachments, web analytics, OAuth token, large-event downloads) and the
/// WebSocket at `ws://127.0.0.1:PORT/ws`.
public struct CXoneEmulator: HostedEmulator {
    public let server: CXoneServer
    public let logger: Logger

    public init(server: CXoneServer = CXoneServer(), logger: Logger = Logger(label: "cxone-emulator")) {
        self.server = server
        self.logger = logger.quietedForEmulation()
    }

    /// The URLs a client needs.
    public struct Endpoints: Sendable {
        public var chatURL: String
        public var socketURL: String
        public var tokenURL: String
    }

    public func endpoints(host: String, port: Int) -> Endpoints {
        Endpoints(chatURL: "http://\(host):\(port)/chat", socketURL: "ws://\(host):\(port)/ws", tokenURL: "http://\(host):\(port)/")
    }

    public func httpRouter() -> Router<BasicWebSocketRequestContext> {
        let server = self.server
        let router = Router(context: BasicWebSocketRequestContext.self)
        // Each answers only for the brand and channel the server was configured with.
        router.get("/chat/1.0/brand/:brand/channel/:channel") { _, context in
            Self.unlessRefused(context, by: server) { Self.json(server.channelConfiguration) }
        }
        router.get("/chat/1.0/brand/:brand/channel/:channel/availability") { _, context in
            Self.unlessRefused(context, by: server) { Self.json(["status": server.isLiveChatOnline ? "online" : "offline"]) }
        }
        router.post("/chat/1.0/brand/:brand/channel/:channel/attachment") { request, context in
            let brand = context.parameters.get("brand"), channel = context.parameters.get("channel")
            guard server.serves(brandID: brand, channelID: channel) else {
                let refused = server.unknownChannelAnswer(brandID: brand, channelID: channel)
                return Self.json(refused.body, status: refused.status)
            }
            let body = try await request.body.collect(upTo: 64 << 20)
            let result = server.upload((try? JSONValue(parsing: Data(buffer: body))) ?? .null)
            return Self.json(result.body, status: result.status)
        }
        router.put("/web-analytics/1.0/tenants/:brand/visitors/:visitor") { request, context in
            let body = try await request.body.collect(upTo: 1 << 20)
            server.recordVisitor(context.parameters.get("visitor") ?? "", (try? JSONValue(parsing: Data(buffer: body))) ?? .null)
            return Self.json([:])
        }
        router.post("/web-analytics/1.0/tenants/:brand/visitors/:visitor/events") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            server.recordAnalytics((try? JSONValue(parsing: Data(buffer: body))) ?? .null)
            return Self.json([:])
        }
        router.post("/oauth/token") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            let result = server.token((try? JSONValue(parsing: Data(buffer: body))) ?? .null)
            return Self.json(result.body, status: result.status)
        }
        router.get("/s3/:id") { _, context in
            guard let body = server.s3Object(context.parameters.get("id") ?? "") else { return Response(status: .notFound) }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        return router
    }

    public func webSocketRoutes() -> [WebSocketRoute] {
        let server = self.server
        return [
            WebSocketRoute(path: "/ws", clock: server.clock, refuses: { _ in server.takeHandshakeFault() }) { uri, socket in
                let visitor = WebSocketRoute.query(of: uri)["visitorId"] ?? ""
                let connection = server.attach(visitorID: visitor, send: socket.send, pause: socket.pause(for:), close: socket.close)
                return EmulatedSocket.Handlers(
                    receive: { frame in
                        switch frame {
                        case .text(let text): server.receive(text, from: connection)
                        case .binary: break
                        case .failed: socket.close()
                        }
                    },
                    closed: { server.detach(connection) }
                )
            }
        ]
    }

    /// `answer()`, or the refusal of a brand or channel the server does not serve.
    static func unlessRefused(_ context: BasicWebSocketRequestContext, by server: CXoneServer, _ answer: () -> Response) -> Response {
        let brand = context.parameters.get("brand"), channel = context.parameters.get("channel")
        guard server.serves(brandID: brand, channelID: channel) else {
            let refused = server.unknownChannelAnswer(brandID: brand, channelID: channel)
            return json(refused.body, status: refused.status)
        }
        return answer()
    }

    static func json(_ value: JSONValue, status: Int = 200) -> Response {
        Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: value.jsonString)))
    }
}
