public import Logging
import Switchboard
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// A text WebSocket, valid inside ``WebSocketTransport/withTextWebSocket(url:configuration:logger:_:)``.
public struct TextWebSocket: Sendable {
    /// Text messages from the peer, in order. Finishes when the peer closes the socket; throws a
    /// ``SwitchboardError`` when the link fails or the peer sends what the transport refuses
    /// (a binary message, a message over the size limit). Single consumer.
    public let messages: Messages
    private let write: @Sendable (String) async throws -> Void
    private let end: @Sendable () async -> Void

    /// A socket whose messages come from `messages`, whose sends go to `send` (which throws when
    /// the socket is gone) and whose `close` runs `close`: what an in-process transport hands a
    /// link (see ``WebSocketTransport/init(connect:)``).
    public init(
        messages: AsyncThrowingStream<String, any Error>,
        send: @escaping @Sendable (String) async throws -> Void,
        close: @escaping @Sendable () async -> Void
    ) {
        self.init(messages: Messages(messages), send: send, close: close)
    }

    init(
        messages: Messages,
        send: @escaping @Sendable (String) async throws -> Void,
        close: @escaping @Sendable () async -> Void
    ) {
        self.messages = messages
        self.write = send
        self.end = close
    }

    /// Sends one text message.
    ///
    /// - Throws: ``SwitchboardError`` with ``SwitchboardError/Code/connectionLost`` when the
    ///   socket is gone.
    public func send(_ text: String) async throws {
        do {
            try await write(text)
        } catch let error as SwitchboardError {
            throw error
        } catch {
            throw SwitchboardError(.connectionLost, "the WebSocket is closed", underlying: error)
        }
    }

    /// Starts a normal close; ``messages`` finishes once the peer answers.
    public func close() async {
        await end()
    }
}

extension TextWebSocket {
    /// The peer's text messages: read straight from the network socket's channel by whoever
    /// iterates them (no task in between), or from an in-process socket's stream. A network
    /// socket's messages are iterated once: a second iterator is a programming error.
    public struct Messages: AsyncSequence, Sendable {
        public typealias Element = String

        private enum Source: Sendable {
            case stream(AsyncThrowingStream<String, any Error>)
            case frames(NIOAsyncChannelInboundStream<String>, limit: Int)
        }

        private let source: Source

        init(_ stream: AsyncThrowingStream<String, any Error>) {
            source = .stream(stream)
        }

        init(_ frames: NIOAsyncChannelInboundStream<String>, limit: Int) {
            source = .frames(frames, limit: limit)
        }

        public func makeAsyncIterator() -> AsyncIterator {
            switch source {
            case .stream(let stream): AsyncIterator(.stream(stream.makeAsyncIterator()))
            case .frames(let frames, let limit): AsyncIterator(.frames(frames.makeAsyncIterator(), limit: limit))
            }
        }

        public struct AsyncIterator: AsyncIteratorProtocol {
            fileprivate enum Base {
                case stream(AsyncThrowingStream<String, any Error>.AsyncIterator)
                case frames(NIOAsyncChannelInboundStream<String>.AsyncIterator, limit: Int)
                case finished
            }

            private var base: Base

            fileprivate init(_ base: Base) {
                self.base = base
            }

            /// `@concurrent`, as the iterators it reads are: reading them is no isolation hop.
            @concurrent public mutating func next() async throws -> String? {
                switch base {
                case .stream(var iterator):
                    defer { base = .stream(iterator) }
                    return try await iterator.next()
                case .frames(var frames, let limit):
                    do {
                        if let text = try await Self.nextText(&frames, limit: limit) {
                            base = .frames(frames, limit: limit)
                            return text
                        }
                        base = .finished
                        return nil
                    } catch {
                        base = .finished
                        throw error
                    }
                case .finished:
                    return nil
                }
            }

            /// Out of line: the link's read loop is a long-lived task, which keeps the deepest
            /// frame its stack has held (Docs/Benchmarks.md). A cancelled wait ends the messages,
            /// as an `AsyncThrowingStream`'s does.
            @inline(never)
            @concurrent private static func nextText(
                _ frames: inout NIOAsyncChannelInboundStream<String>.AsyncIterator,
                limit: Int
            ) async throws -> String? {
                do {
                    return try await frames.next()
                } catch is CancellationError {
                    return nil
                } catch {
                    throw WebSocketTransport.classify(error, limit: limit)
                }
            }
        }
    }
}

/// WebSocket client links for adapters: over the network on SwiftNIO's channel handlers, with no
/// task of the socket's own (URLSession's WebSocket does not work on Linux), or to a socket model
/// in the same process (``init(connect:)``), so adapter tests run without sockets and on a test
/// clock.
public struct WebSocketTransport: Sendable {
    /// A socket opened in the same process: the link's side of it, and the work that carries the
    /// peer's messages, which runs for as long as the link uses the socket.
    public struct InProcessSocket: Sendable {
        public var socket: TextWebSocket
        /// Carries the peer's messages to ``TextWebSocket/messages`` until the socket closes;
        /// cancelled when the link is done with the socket.
        public var run: @Sendable () async -> Void

        public init(socket: TextWebSocket, run: @escaping @Sendable () async -> Void) {
            self.socket = socket
            self.run = run
        }
    }

    /// Opens an in-process socket to a URL, or throws as a refused handshake would.
    public typealias Connect = @Sendable (_ url: String, _ configuration: Configuration) async throws -> InProcessSocket

    private let connect: Connect?

    /// Real sockets.
    public static let network = WebSocketTransport(connector: nil)

    /// A transport whose sockets `connect` opens in the same process.
    public init(connect: @escaping Connect) {
        self.connect = connect
    }

    private init(connector: Connect?) {
        self.connect = connector
    }

    public struct Configuration: Sendable {
        /// The largest message accepted from the peer; larger ones fail the link with
        /// ``SwitchboardError/Code/payloadTooLarge``.
        public var maxMessageSize: Int
        public var headers: [String: String]
        /// Whether plain `ws://` to a host that is not loopback is allowed (``PlainTextPolicy``).
        public var allowsPlainText: Bool
        /// How long opening a network socket may take: the TCP connect, the TLS handshake and the
        /// HTTP upgrade together. Past it the open fails with ``SwitchboardError/Code/timedOut``.
        public var connectTimeout: Duration
        /// How long a network socket's close waits for the peer's answer before the connection is
        /// cut (``TextWebSocket/close()``, and the end of ``withTextWebSocket(url:configuration:logger:_:)``).
        public var closeTimeout: Duration

        public init(
            maxMessageSize: Int = 1 << 20,
            headers: [String: String] = [:],
            allowsPlainText: Bool = false,
            connectTimeout: Duration = .seconds(10),
            closeTimeout: Duration = .seconds(5)
        ) {
            self.maxMessageSize = maxMessageSize
            self.headers = headers
            self.allowsPlainText = allowsPlainText
            self.connectTimeout = connectTimeout
            self.closeTimeout = closeTimeout
        }
    }

    /// Connects to `url`, runs `body` with the socket, and closes it when `body` returns.
    ///
    /// The socket's reader runs inside this scope; nothing outlives it.
    ///
    /// - Throws: ``SwitchboardError`` with ``SwitchboardError/Code/connectionLost`` when the
    ///   socket cannot be opened or closes before `body` finishes, what `body` throws, or
    ///   `CancellationError`.
    public func withTextWebSocket<Result: Sendable>(
        url: String,
        configuration: Configuration = Configuration(),
        logger: Logger,
        _ body: @Sendable (TextWebSocket) async throws -> Result
    ) async throws -> Result {
        guard let connect else {
            return try await NetworkWebSocket.withSocket(url: url, configuration: configuration, logger: logger, body)
        }
        let opened = try await connect(url, configuration)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await opened.run() }
            defer { group.cancelAll() }
            let result: Swift.Result<Result, any Error>
            do {
                result = .success(try await body(opened.socket))
            } catch {
                result = .failure(error)
            }
            await opened.socket.close()
            return try result.get()
        }
    }

    static func classify(_ error: any Error, limit: Int, url: String? = nil) -> SwitchboardError {
        if let error = error as? SwitchboardError { return error }
        if error is CancellationError { return SwitchboardError(.cancelled, "cancelled", underlying: error) }
        // The client's own failures first: a time-out's description would read as a TLS failure.
        let place = url.map { " at \($0)" } ?? ""
        switch error {
        case NetworkWebSocket.Failure.notUpgraded:
            return SwitchboardError(.connectionLost, "the server\(place) answered but would not open a WebSocket there (is the path right?)", underlying: error)
        case NetworkWebSocket.Failure.openTimedOut:
            return SwitchboardError(.timedOut, "no WebSocket open\(place) in time (the TCP, TLS and upgrade handshakes)", underlying: error)
        case NetworkWebSocket.Failure.binaryMessage, NetworkWebSocket.Failure.notUTF8:
            return SwitchboardError(.protocolViolation, "\(error)", underlying: error)
        case ChannelError.connectTimeout:
            return SwitchboardError(.timedOut, "no connection\(place) in time", underlying: error)
        case let error as NIOHTTPClientUpgradeError:
            return SwitchboardError(.connectionLost, "the server\(place) answered the WebSocket upgrade wrongly (\(error))", underlying: error)
        default:
            break
        }
        if let url, let tls = HTTPTransport.tlsFailure(error, url: url) {
            return SwitchboardError(.connectionLost, tls, underlying: error)
        }
        switch error {
        case NIOWebSocketError.invalidFrameLength, NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge:
            return SwitchboardError(.payloadTooLarge, "a message was over \(limit) bytes", underlying: error)
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error:
            return SwitchboardError(.protocolViolation, "the peer broke the WebSocket protocol (\(error))", underlying: error)
        default:
            return SwitchboardError(.connectionLost, "WebSocket failure: \(HTTPTransport.failureReason(error))", underlying: error)
        }
    }
}
