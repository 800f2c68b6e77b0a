import NIOCore
import NIOHTTP1
import NIOPosix
import Crypto
import Foundation
import NIOWebSocket
import Switchboard

/// A WebSocket server on 127.0.0.1 port 0 that runs a script per connection, frame by frame: what
/// the transport's client must cope with that the emulators never send (pings, fragments, binary
/// frames, text that is not UTF-8, a close of the server's own).
struct ScriptedWebSocketServer {
    typealias Frames = NIOAsyncChannelInboundStream<WebSocketFrame>.AsyncIterator
    typealias Script = @concurrent @Sendable (inout Frames, NIOAsyncChannelOutboundWriter<WebSocketFrame>) async throws -> Void

    private enum Upgrade: Sendable {
        case webSocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case notUpgraded
    }

    /// Serves `script` to every connection while `body` runs with the server's `ws://` URL, and
    /// returns once the scripts of the connections `body` opened have ended (the client's sockets
    /// are closed when `body` returns), so what they recorded is complete.
    static func withServer<Result: Sendable>(
        script: @escaping Script,
        _ body: (String) async throws -> Result
    ) async throws -> Result {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOTypedWebSocketServerUpgrader<Upgrade>(
                        shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                Upgrade.webSocket(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                            }
                        }
                    )
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
                        configuration: .init(upgradeConfiguration: .init(
                            upgraders: [upgrader],
                            notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(.notUpgraded) }
                        ))
                    )
                }
            }
        let (ended, endedContinuation) = AsyncStream.makeStream(of: Void.self)
        let started = Locked(0)
        return try await server.executeThenClose { connections in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await withThrowingDiscardingTaskGroup { serving in
                        for try await upgrade in connections {
                            started.withLock { $0 += 1 }
                            serving.addTask {
                                defer { endedContinuation.yield() }
                                guard case .webSocket(let socket) = try? await upgrade.get() else { return }
                                try? await socket.executeThenClose { inbound, outbound in
                                    var frames = inbound.makeAsyncIterator()
                                    try await script(&frames, outbound)
                                }
                            }
                        }
                    }
                }
                defer { group.cancelAll() }
                let result = try await body("ws://127.0.0.1:\(server.channel.localAddress!.port!)/ws")
                var count = 0
                for await _ in ended {
                    count += 1
                    if count == started.withLock({ $0 }) { break }
                }
                return result
            }
        }
    }

    static func text(_ text: String, fin: Bool = true, opcode: WebSocketOpcode = .text) -> WebSocketFrame {
        WebSocketFrame(fin: fin, opcode: opcode, data: ByteBuffer(string: text))
    }

    static func name(_ opcode: WebSocketOpcode) -> String {
        switch opcode {
        case .text: "text"
        case .binary: "binary"
        case .ping: "ping"
        case .pong: "pong"
        case .connectionClose: "connectionClose"
        case .continuation: "continuation"
        default: "\(opcode)"
        }
    }

    static func close(_ code: WebSocketErrorCode) -> WebSocketFrame {
        var data = ByteBuffer()
        data.write(webSocketErrorCode: code)
        return WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
    }
}

/// A plain TCP server on 127.0.0.1 port 0 that answers the first request with canned bytes
/// (`answer`, given the request's `Sec-WebSocket-Key`) and then reads until the client closes: a
/// 101 and a frame in one packet, a wrong accept key, a handshake that never comes. Channel
/// handlers only, no async channels: nothing is left to trap on when the test ends.
final class CannedTCPServer: Sendable {
    private let closes: AsyncStream<Void>
    let port: Int

    private init(port: Int, closes: AsyncStream<Void>) {
        self.port = port
        self.closes = closes
    }

    /// Returns once a client's connection has closed. One caller.
    func clientClosed() async {
        for await _ in closes { return }
    }

    static func withServer<Result: Sendable>(
        answer: (@Sendable (_ key: String) -> [UInt8])?,
        _ body: (CannedTCPServer) async throws -> Result
    ) async throws -> Result {
        let (closes, closed) = AsyncStream.makeStream(of: Void.self)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Answering(answer: answer, closed: closed))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let server = CannedTCPServer(port: listener.localAddress!.port!, closes: closes)
        do {
            let result = try await body(server)
            try? await listener.close()
            return result
        } catch {
            try? await listener.close()
            throw error
        }
    }

    private final class Answering: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let answer: (@Sendable (String) -> [UInt8])?
        let closed: AsyncStream<Void>.Continuation
        private var request = ""
        private var answered = false

        init(answer: (@Sendable (String) -> [UInt8])?, closed: AsyncStream<Void>.Continuation) {
            self.answer = answer
            self.closed = closed
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !answered else { return }
            request += String(buffer: unwrapInboundIn(data))
            guard request.hasSuffix("\r\n\r\n"), let answer else { return }
            answered = true
            let key = request.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { String($0.dropFirst("sec-websocket-key:".count)).trimmingCharacters(in: .whitespaces) } ?? ""
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: answer(key))), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            closed.yield()
            context.fireChannelInactive()
        }
    }

    /// The 101 a server answers `key` with (`accept` replaced when given), and `frames` behind it.
    static func switching(key: String, accept: String? = nil, then frames: [UInt8] = []) -> [UInt8] {
        let expected = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept ?? expected)\r\n\r\n"
        return Array(head.utf8) + frames
    }

    /// An unmasked text frame of fewer than 126 bytes, as a server sends it.
    static func textFrame(_ text: String) -> [UInt8] {
        let payload = Array(text.utf8)
        precondition(payload.count < 126)
        return [0x81, UInt8(payload.count)] + payload
    }
}
