import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Switchboard

/// A WebSocket server on 127.0.0.1 port 0 that runs a script per connection, frame by frame: what
/// the transport's client must cope with that the emulators never send (pings, fragments, binary
/// frames, a close of the server's own, a frame right behind the 101).
struct ScriptedWebSocketServer {
    typealias Frames = NIOAsyncChannelInboundStream<WebSocketFrame>.AsyncIterator
    typealias Script = @concurrent @Sendable (inout Frames, NIOAsyncChannelOutboundWriter<WebSocketFrame>) async throws -> Void

    private enum Upgrade: Sendable {
        case webSocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case notUpgraded
    }

    /// Serves `script` to every connection while `body` runs with the server's `ws://` URL, and
    /// returns once the scripts of the connections `body` opened have ended (the client's sockets
    /// are closed when `body` returns), so what they recorded is complete. `first` is written
    /// right behind the 101, in the same flush.
    static func withServer<Result: Sendable>(
        first: WebSocketFrame? = nil,
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
                                if let first { channel.writeAndFlush(first, promise: nil) }
                                return Upgrade.webSocket(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
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

    /// A listener that accepts and never answers: a handshake that hangs.
    static func withSilentListener<Result: Sendable>(_ body: (String) async throws -> Result) async throws -> Result {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
        return try await server.executeThenClose { connections in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await withThrowingDiscardingTaskGroup { serving in
                        for try await connection in connections {
                            serving.addTask {
                                try? await connection.executeThenClose { inbound, _ in
                                    for try await _ in inbound {}
                                }
                            }
                        }
                    }
                }
                defer { group.cancelAll() }
                return try await body("ws://127.0.0.1:\(server.channel.localAddress!.port!)/ws")
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
