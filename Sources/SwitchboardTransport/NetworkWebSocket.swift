import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Switchboard

/// A client WebSocket straight on SwiftNIO's channel handlers: no task of its own.
///
/// The frames are read by whoever iterates ``TextWebSocket/messages`` (the link's read loop),
/// pings are answered and a peer's close is echoed on the channel's event loop, and the socket's
/// scope is the caller's task. A WSClient connection ran two tasks beside the link's own (its
/// connection and a reader feeding a stream): over WebSockets they were most of an idle
/// session's memory (#33, `Docs/Benchmarks.md`), and every inbound message hopped between them.
enum NetworkWebSocket {
    /// The handshake's parts of a `ws://` or `wss://` URL.
    struct Target: Equatable {
        var tls: Bool
        var host: String
        var port: Int
        /// The request target: the path and query as written, `/` when empty.
        var path: String
        /// The `Host` header: the host, with the port when the URL names one.
        var hostHeader: String
        var origin: String

        init?(_ url: String) {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
                  scheme == "ws" || scheme == "wss", let host = components.host, !host.isEmpty
            else { return nil }
            tls = scheme == "wss"
            self.host = host
            port = components.port ?? (tls ? 443 : 80)
            let written = components.percentEncodedPath
            path = (written.isEmpty ? "/" : written) + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
            let named = host.contains(":") ? "[\(host)]" : host
            hostHeader = components.port.map { "\(named):\($0)" } ?? named
            origin = "\(tls ? "https" : "http")://\(named)"
        }
    }

    enum Failure: Error, CustomStringConvertible {
        /// The server answered the upgrade request with something other than a WebSocket.
        case notUpgraded
        /// No open WebSocket within the configuration's connect timeout.
        case handshakeTimedOut

        var description: String {
            switch self {
            case .notUpgraded: "the server did not upgrade the connection"
            case .handshakeTimedOut: "the WebSocket handshake timed out"
            }
        }
    }

    private enum Upgrade: Sendable {
        case webSocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case notUpgraded
    }

    /// One client TLS context per process: building one reads the system's trust roots.
    private static let tlsContext = Result { try NIOSSLContext(configuration: .makeClientConfiguration()) }

    /// How long a close started by ``TextWebSocket/close()`` waits for the peer's answer before
    /// the connection is cut.
    static let closeTimeout = TimeAmount.seconds(5)

    static func withSocket<Result: Sendable>(
        url: String,
        configuration: WebSocketTransport.Configuration,
        logger: Logger,
        _ body: (TextWebSocket) async throws -> Result
    ) async throws -> Result {
        try PlainTextPolicy.check(url, allowed: configuration.allowsPlainText)
        guard let target = Target(url) else {
            throw SwitchboardError(.invalidArgument, "not a ws:// or wss:// URL")
        }
        let channel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>
        let closeSent = Locked(false)
        do {
            channel = try await open(target, configuration: configuration, closeSent: closeSent)
        } catch {
            throw WebSocketTransport.classify(error, limit: configuration.maxMessageSize, url: url)
        }
        logger.debug("WebSocket open", metadata: ["switchboard.websocket.host": "\(target.hostHeader)"])
        return try await channel.executeThenClose { inbound, outbound in
            let raw = channel.channel
            let socket = TextWebSocket(
                messages: TextWebSocket.Messages(frames: inbound, limit: configuration.maxMessageSize),
                send: { text in try await outbound.write(Frames.text(text, allocator: raw.allocator)) },
                close: { await startClose(raw, outbound: outbound, closeSent: closeSent) }
            )
            let result: Swift.Result<Result, any Error>
            do {
                result = .success(try await body(socket))
            } catch {
                result = .failure(error)
            }
            // The reader is gone with `body`, so the peer's answer to a close could not be read:
            // say goodbye and cut. How the connection ends does not change what `body` returned.
            if raw.isActive, claim(closeSent) {
                try? await outbound.write(Frames.close(.normalClosure, allocator: raw.allocator))
            }
            return try result.get()
        }
    }

    private static func startClose(
        _ channel: any Channel,
        outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>,
        closeSent: Locked<Bool>
    ) async {
        guard channel.isActive, claim(closeSent) else { return }
        try? await outbound.write(Frames.close(.normalClosure, allocator: channel.allocator))
        // The control handler cuts the connection when the peer answers; this, if it does not.
        channel.eventLoop.scheduleTask(in: closeTimeout) { channel.close(promise: nil) }
    }

    /// Whether this caller is the one to send the close frame: true once.
    static func claim(_ closeSent: Locked<Bool>) -> Bool {
        closeSent.withLock { sent in
            defer { sent = true }
            return !sent
        }
    }

    /// Connects, shakes hands (TLS, then the HTTP upgrade) and returns the open socket's channel,
    /// all within `configuration.connectTimeout`.
    private static func open(
        _ target: Target,
        configuration: WebSocketTransport.Configuration,
        closeSent: Locked<Bool>
    ) async throws -> NIOAsyncChannel<WebSocketFrame, WebSocketFrame> {
        let tls = target.tls ? try tlsContext.get() : nil
        let timeout = TimeAmount(configuration.connectTimeout)
        let started = NIODeadline.now()
        let (channel, upgrade) = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .connect(host: target.host, port: target.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: target.host))
                    }
                    let upgrade = try configureUpgrade(channel, target: target, configuration: configuration, closeSent: closeSent)
                    return (channel, upgrade)
                }
            }
        // What is left of the time limit covers TLS and the upgrade; the scheduled close fails
        // the upgrade when it has not finished by then.
        let timedOut = Locked(false)
        let deadline = channel.eventLoop.scheduleTask(deadline: started + timeout) {
            timedOut.withLock { $0 = true }
            channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        let result: Upgrade
        do {
            result = try await withTaskCancellationHandler {
                try await upgrade.get()
            } onCancel: {
                channel.close(promise: nil)
            }
        } catch {
            if timedOut.withLock({ $0 }) { throw Failure.handshakeTimedOut }
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
        switch result {
        case .webSocket(let socket):
            return socket
        case .notUpgraded:
            channel.close(promise: nil)
            throw Failure.notUpgraded
        }
    }

    private static func configureUpgrade(
        _ channel: any Channel,
        target: Target,
        configuration: WebSocketTransport.Configuration,
        closeSent: Locked<Bool>
    ) throws -> EventLoopFuture<Upgrade> {
        let limit = configuration.maxMessageSize
        // The control handler answers a broken frame itself: NIO's error handler closes the
        // channel before the error reaches the reader, which then reads a plain end.
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(maxFrameSize: limit, enableAutomaticErrorHandling: false) { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                let handlers = channel.pipeline.syncOperations
                try handlers.addHandler(NIOWebSocketFrameAggregator(
                    minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: Int.max, maxAccumulatedFrameSize: limit
                ))
                try handlers.addHandler(WebSocketControlHandler(closeSent: closeSent))
                return Upgrade.webSocket(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
            }
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target.hostHeader)
        headers.add(name: "Origin", value: target.origin)
        for (name, value) in configuration.headers { headers.replaceOrAdd(name: name, value: value) }
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: NIOTypedHTTPClientUpgradeConfiguration(
            upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: target.path, headers: headers),
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(.notUpgraded) }
        ))
        // A frame the server sends in the same packet as its 101 is the socket's first.
        pipeline.leftOverBytesStrategy = .forwardBytes
        return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
    }

    /// Client frames, masked as RFC 6455 §5.3 requires.
    enum Frames {
        static func text(_ text: String, allocator: ByteBufferAllocator) -> WebSocketFrame {
            WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: allocator.buffer(string: text))
        }

        static func close(_ code: WebSocketErrorCode, allocator: ByteBufferAllocator) -> WebSocketFrame {
            var data = allocator.buffer(capacity: 2)
            data.write(webSocketErrorCode: code)
            return WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data)
        }
    }
}

/// Answers pings, echoes the peer's close and ends the connection after the close handshake, on
/// the event loop; passes the text and binary messages on. A frame the decoder or the aggregator
/// refuses reaches the reader as its error, then the connection is closed with the code that says
/// why (1009 for a message over the limit, 1002 otherwise). Whoever sends a close frame claims
/// `closeSent` first (shared with the socket's `close` and its scope's end), so that one is sent.
final class WebSocketControlHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let sent: Locked<Bool>

    init(closeSent: Locked<Bool>) {
        self.sent = closeSent
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            guard !sent.withLock({ $0 }) else { return }
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            break
        case .connectionClose:
            guard NetworkWebSocket.claim(sent) else {
                context.close(promise: nil)
                return
            }
            // Echo the peer's code (RFC 6455 §5.5.1), then end: the peer has said it sends no more.
            var payload = frame.unmaskedData
            let code = payload.readWebSocketErrorCode() ?? .normalClosure
            let echo = NetworkWebSocket.Frames.close(code, allocator: context.channel.allocator)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(echo)).whenComplete { _ in bound.value.close(promise: nil) }
        default:
            context.fireChannelRead(data)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let code: WebSocketErrorCode
        switch error {
        case NIOWebSocketError.invalidFrameLength, NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge:
            code = .messageTooLarge
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error:
            code = .protocolError
        default:
            context.fireErrorCaught(error)
            return
        }
        // Claimed before the reader hears of the error: its scope, ending on it, must not send a
        // close of its own that this one's cut would drop.
        let mine = NetworkWebSocket.claim(sent)
        // The reader gets the error before the close ends its stream.
        context.fireErrorCaught(error)
        guard mine else {
            context.close(promise: nil)
            return
        }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let close = NetworkWebSocket.Frames.close(code, allocator: context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(close)).whenComplete { _ in bound.value.close(promise: nil) }
    }
}
