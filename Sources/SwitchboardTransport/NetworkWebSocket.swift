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
        /// The `Origin` header, as swift-websocket's client sent it: the URL's scheme and host.
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
            origin = "\(tls ? "wss" : "ws")://\(named)"
        }
    }

    enum Failure: Error, CustomStringConvertible {
        /// The server answered the upgrade request with something other than a WebSocket.
        case notUpgraded
        /// No open WebSocket within the configuration's connect timeout.
        case openTimedOut
        /// The peer sent a binary message (answered with close code 1003).
        case binaryMessage
        /// The peer sent a text message that is not UTF-8 (answered with close code 1007).
        case notUTF8

        var description: String {
            switch self {
            case .notUpgraded: "the server did not upgrade the connection"
            case .openTimedOut: "no open WebSocket in time"
            case .binaryMessage: "the peer sent a binary message"
            case .notUTF8: "the peer sent a text message that is not UTF-8"
            }
        }
    }

    /// A socket's inbound messages as the reader takes them (decoded on the event loop), its
    /// outbound frames.
    typealias SocketChannel = NIOAsyncChannel<String, WebSocketFrame>

    private enum Upgrade: Sendable {
        case webSocket(SocketChannel)
        case notUpgraded
    }

    /// One client TLS context per process: building one reads the system's trust roots.
    private static let tlsContext = Result { try NIOSSLContext(configuration: .makeClientConfiguration()) }

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
        let channel: SocketChannel
        let closeSent = Locked(false)
        do {
            channel = try await open(target, configuration: configuration, closeSent: closeSent)
        } catch {
            throw WebSocketTransport.classify(error, limit: configuration.maxMessageSize, url: url)
        }
        logger.debug("WebSocket open", metadata: ["switchboard.websocket.host": "\(target.hostHeader)"])
        let closeTimeout = TimeAmount(configuration.closeTimeout)
        return try await channel.executeThenClose { inbound, outbound in
            let raw = channel.channel
            let socket = TextWebSocket(
                messages: TextWebSocket.Messages(inbound, limit: configuration.maxMessageSize),
                send: { text in try await outbound.write(Frames.text(text, allocator: raw.allocator)) },
                close: { await startClose(raw, outbound: outbound, closeSent: closeSent, within: closeTimeout) }
            )
            let result: Swift.Result<Result, any Error>
            do {
                result = .success(try await body(socket))
            } catch {
                result = .failure(error)
            }
            // How the connection ends does not change what `body` returned.
            await endClose(raw, closeSent: closeSent, within: closeTimeout)
            return try result.get()
        }
    }

    /// A close asked for while the socket is in use: the close frame, and a cut if the peer has
    /// not answered (the control handler ends the connection when it does) within `limit`. The
    /// cut is set first: a write waits while the peer reads nothing.
    private static func startClose(
        _ channel: any Channel,
        outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>,
        closeSent: Locked<Bool>,
        within limit: TimeAmount
    ) async {
        guard channel.isActive, claim(closeSent) else { return }
        cut(channel, after: limit)
        try? await outbound.write(Frames.close(.normalClosure, allocator: channel.allocator))
    }

    /// The socket's scope ends: a close frame if none went out, then the peer's answer (or a cut
    /// after `limit`), read by the control handler now that the reader is gone. The frame is not
    /// written through the writer, which waits while the peer reads nothing.
    private static func endClose(_ channel: any Channel, closeSent: Locked<Bool>, within limit: TimeAmount) async {
        guard channel.isActive else { return }
        if claim(closeSent) {
            channel.writeAndFlush(Frames.close(.normalClosure, allocator: channel.allocator), promise: nil)
        }
        cut(channel, after: limit)
        channel.eventLoop.execute {
            (try? channel.pipeline.syncOperations.handler(type: WebSocketControlHandler.self))?.drainUntilClosed()
        }
        try? await channel.closeFuture.get()
    }

    /// Closes `channel` after `limit` unless it closed before.
    private static func cut(_ channel: any Channel, after limit: TimeAmount) {
        let cut = channel.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in cut.cancel() }
    }

    /// Whether this caller is the one to send the close frame: true once.
    static func claim(_ closeSent: Locked<Bool>) -> Bool {
        closeSent.withLock { sent in
            defer { sent = true }
            return !sent
        }
    }

    /// What an open's cancellation closes: the channel being connected, once it exists.
    private struct Connecting {
        var channel: (any Channel)?
        var cancelled = false
    }

    /// Connects, shakes hands (TLS, then the HTTP upgrade) and returns the open socket's channel,
    /// all within `configuration.connectTimeout`; a cancelled open closes what it connected.
    private static func open(
        _ target: Target,
        configuration: WebSocketTransport.Configuration,
        closeSent: Locked<Bool>
    ) async throws -> SocketChannel {
        let tls = target.tls ? try tlsContext.get() : nil
        let timeout = TimeAmount(configuration.connectTimeout)
        let started = NIODeadline.now()
        let connecting = Locked(Connecting())
        do {
            return try await withTaskCancellationHandler {
                let (channel, upgrade) = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connectTimeout(timeout)
                    .connect(host: target.host, port: target.port) { channel -> EventLoopFuture<(any Channel, EventLoopFuture<Upgrade>)> in
                        if connecting.withLock({ $0.channel = channel; return $0.cancelled }) {
                            return channel.eventLoop.makeFailedFuture(CancellationError())
                        }
                        return channel.eventLoop.makeCompletedFuture {
                            if let tls {
                                try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: target.host))
                            }
                            let upgrade = try configureUpgrade(channel, target: target, configuration: configuration, closeSent: closeSent)
                            return (channel, upgrade)
                        }
                    }
                return try await shakeHands(channel, upgrade, deadline: started + timeout)
            } onCancel: {
                connecting.withLock { connecting in
                    connecting.cancelled = true
                    return connecting.channel
                }?.close(promise: nil)
            }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }

    /// Waits for the upgrade until `deadline`; a channel that does not end up a WebSocket is
    /// closed.
    private static func shakeHands(
        _ channel: any Channel,
        _ upgrade: EventLoopFuture<Upgrade>,
        deadline: NIODeadline
    ) async throws -> SocketChannel {
        let timedOut = Locked(false)
        let cut = channel.eventLoop.scheduleTask(deadline: deadline) {
            timedOut.withLock { $0 = true }
            channel.close(promise: nil)
        }
        defer { cut.cancel() }
        let result: Upgrade
        do {
            result = try await upgrade.get()
        } catch {
            // A refused upgrade (a wrong accept key, no `Upgrade` header, not HTTP) leaves the
            // connection open.
            channel.close(promise: nil)
            throw timedOut.withLock({ $0 }) ? Failure.openTimedOut : error
        }
        switch result {
        case .webSocket(let socket):
            guard timedOut.withLock({ $0 }) else { return socket }
            // Opened as the time ran out, and closed by it: finished, then refused.
            try? await socket.executeThenClose { _, _ in }
            throw Failure.openTimedOut
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
                // Fragments of at least a byte, at most 4,096 of them: the message limit counts
                // bytes, and empty fragments would cost memory without adding any.
                try handlers.addHandler(NIOWebSocketFrameAggregator(
                    minNonFinalFragmentSize: 1, maxAccumulatedFrameCount: 4096, maxAccumulatedFrameSize: limit
                ))
                try handlers.addHandler(WebSocketControlHandler(closeSent: closeSent))
                return Upgrade.webSocket(try SocketChannel(wrappingChannelSynchronously: channel))
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

/// The socket's protocol on the event loop: decodes each text message for the reader (a binary
/// message, or text that is not UTF-8, fails the reader and closes with 1003 or 1007), answers
/// pings, echoes the peer's close and ends the connection after the close handshake. A frame the
/// decoder or the aggregator refuses reaches the reader as its error, then the connection is
/// closed with the code that says why (1009 for a message over the limit, 1002 otherwise).
/// Whoever sends a close frame claims `closeSent` first (shared with the socket's `close` and its
/// scope's end), so that one is sent. Once the reader is gone the handler reads on its own until
/// the peer's close (``drainUntilClosed()``).
final class WebSocketControlHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = String
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let sent: Locked<Bool>
    private var context: ChannelHandlerContext?
    private var draining = false

    init(closeSent: Locked<Bool>) {
        self.sent = closeSent
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// The reader is gone (its reads stopped with it): read what comes until the connection
    /// ends, dropping messages, so the peer's answer to the close is seen.
    func drainUntilClosed() {
        draining = true
        context?.read()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
        if draining { context.read() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            guard !draining else { return }
            guard let text = String(validating: frame.unmaskedData.readableBytesView, as: UTF8.self) else {
                fail(context, NetworkWebSocket.Failure.notUTF8, code: .dataInconsistentWithMessage)
                return
            }
            context.fireChannelRead(wrapInboundOut(text))
        case .binary:
            guard !draining else { return }
            fail(context, NetworkWebSocket.Failure.binaryMessage, code: .unacceptableData)
        case .ping:
            guard !sent.withLock({ $0 }) else { return }
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            guard NetworkWebSocket.claim(sent) else {
                context.close(promise: nil)
                return
            }
            // Echo the peer's code (RFC 6455 §5.5.1), then end: the peer has said it sends no more.
            var payload = frame.unmaskedData
            close(context, code: Self.echoable(payload.readWebSocketErrorCode()))
        default:
            break
        }
    }

    /// A code that may be sent back: 1005, 1006 and 1015 name what happened locally and are never
    /// sent (RFC 6455 §7.4.1), nor is a code under 1000.
    static func echoable(_ code: WebSocketErrorCode?) -> WebSocketErrorCode {
        guard let code else { return .normalClosure }
        if case .unknown(let raw) = code, raw < 1000 || [1005, 1006, 1015].contains(raw) { return .normalClosure }
        return code
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
        fail(context, error, code: code)
    }

    /// The reader gets `error` first, then the connection closes with `code`. The close is
    /// claimed before the reader hears of the error: its scope, ending on it, must not send a
    /// close of its own that this one's cut would drop.
    private func fail(_ context: ChannelHandlerContext, _ error: any Error, code: WebSocketErrorCode) {
        let mine = NetworkWebSocket.claim(sent)
        context.fireErrorCaught(error)
        guard mine else {
            context.close(promise: nil)
            return
        }
        close(context, code: code)
    }

    /// Writes a close frame with `code`, then ends the connection.
    private func close(_ context: ChannelHandlerContext, code: WebSocketErrorCode) {
        let frame = NetworkWebSocket.Frames.close(code, allocator: context.channel.allocator)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in bound.value.close(promise: nil) }
    }
}
