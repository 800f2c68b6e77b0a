public import Logging
import Switchboard
import Foundation
import HTTPTypes
import NIOWebSocket
import WSClient

/// A text WebSocket, valid inside ``WebSocketTransport/withTextWebSocket(url:configuration:logger:_:)``.
public struct TextWebSocket: Sendable {
    /// Text messages from the peer, in order. Finishes when the peer closes the socket; throws a
    /// ``SwitchboardError`` when the link fails or the peer sends what the transport refuses
    /// (a binary message, a message over the size limit). Single consumer.
    public let messages: AsyncThrowingStream<String, any Error>
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
        self.messages = messages
        self.write = send
        self.end = close
    }

    init(messages: AsyncThrowingStream<String, any Error>, outbound: WebSocketOutboundWriter) {
        self.init(
            messages: messages,
            send: { text in try await outbound.writeTextMessage(text) },
            close: { try? await outbound.close(.normalClosure, reason: nil) }
        )
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

/// WebSocket client links for adapters: over the network on swift-websocket's `WSClient`
/// (URLSession's WebSocket does not work on Linux), or to a socket model in the same process
/// (``init(connect:)``), so adapter tests run without sockets and on a test clock.
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

        public init(maxMessageSize: Int = 1 << 20, headers: [String: String] = [:], allowsPlainText: Bool = false) {
            self.maxMessageSize = maxMessageSize
            self.headers = headers
            self.allowsPlainText = allowsPlainText
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
            return try await Self.withNetworkSocket(url: url, configuration: configuration, logger: logger, body)
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

    private static func withNetworkSocket<Result: Sendable>(
        url: String,
        configuration: Configuration,
        logger: Logger,
        _ body: @Sendable (TextWebSocket) async throws -> Result
    ) async throws -> Result {
        try PlainTextPolicy.check(url, allowed: configuration.allowsPlainText)
        var clientConfiguration = WebSocketClientConfiguration()
        clientConfiguration.maxFrameSize = configuration.maxMessageSize
        for (name, value) in configuration.headers {
            if let field = HTTPField.Name(name) { clientConfiguration.additionalHeaders[field] = value }
        }
        // The client's handler may outlive a failed connection inside WSClient, so it must not
        // capture `body`: it hands the open socket out here, and waits until `body` is done.
        let (opened, openedContinuation) = AsyncStream.makeStream(of: TextWebSocket.self)
        let (done, doneContinuation) = AsyncStream.makeStream(of: Never.self)
        let client = clientConfiguration
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { openedContinuation.finish() }
                do {
                    _ = try await WebSocketClient.connect(url: url, configuration: client, logger: logger) { inbound, outbound, _ in
                        let (messages, continuation) = AsyncThrowingStream.makeStream(of: String.self)
                        let socket = TextWebSocket(messages: messages, outbound: outbound)
                        await withTaskGroup(of: Void.self) { reader in
                            reader.addTask {
                                do {
                                    for try await message in inbound.messages(maxSize: configuration.maxMessageSize) {
                                        switch message {
                                        case .text(let text):
                                            continuation.yield(text)
                                        case .binary:
                                            continuation.finish(throwing: SwitchboardError(.protocolViolation, "the peer sent a binary message"))
                                            return
                                        }
                                    }
                                    continuation.finish()
                                } catch {
                                    continuation.finish(throwing: Self.classify(error, limit: configuration.maxMessageSize))
                                }
                            }
                            openedContinuation.yield(socket)
                            // Until `body` is done (or the link's scope is cancelled).
                            for await _ in done {}
                            reader.cancelAll()
                            await socket.close()
                        }
                    }
                } catch {
                    throw Self.classify(error, limit: configuration.maxMessageSize, url: url)
                }
            }
            var sockets = opened.makeAsyncIterator()
            guard let socket = await sockets.next() else {
                // No socket: the connection failed (its error), or closed during the handshake.
                try await group.waitForAll()
                throw SwitchboardError(.connectionLost, "the WebSocket to \(url) closed during the handshake")
            }
            let result: Swift.Result<Result, any Error>
            do {
                result = .success(try await body(socket))
            } catch {
                result = .failure(error)
            }
            doneContinuation.finish()
            // How the connection ends after `body` does not change what `body` returned.
            while !group.isEmpty { _ = try? await group.next() }
            return try result.get()
        }
    }

    static func classify(_ error: any Error, limit: Int, url: String? = nil) -> SwitchboardError {
        if let error = error as? SwitchboardError { return error }
        if error is CancellationError { return SwitchboardError(.cancelled, "cancelled", underlying: error) }
        if let url, let tls = HTTPTransport.tlsFailure(error, url: url) {
            return SwitchboardError(.connectionLost, tls, underlying: error)
        }
        if let error = error as? WebSocketClientError {
            let place = url.map { " at \($0)" } ?? ""
            switch error {
            case .webSocketUpgradeFailed:
                return SwitchboardError(.connectionLost, "the server\(place) answered but would not open a WebSocket there (is the path right?)", underlying: error)
            case .invalidURL:
                return SwitchboardError(.invalidArgument, "not a WebSocket URL\(place)", underlying: error)
            case .serverSentMessageTooLarge:
                return SwitchboardError(.payloadTooLarge, "a message was over \(limit) bytes", underlying: error)
            default:
                return SwitchboardError(.connectionLost, "WebSocket failure\(place): \(error)", underlying: error)
            }
        }
        if "\(error)".localizedCaseInsensitiveContains("too large") || "\(error)".contains("messageTooLarge") {
            return SwitchboardError(.payloadTooLarge, "a message was over \(limit) bytes", underlying: error)
        }
        return SwitchboardError(.connectionLost, "WebSocket failure: \(HTTPTransport.failureReason(error))", underlying: error)
    }
}
