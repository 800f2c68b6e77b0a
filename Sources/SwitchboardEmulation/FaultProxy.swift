import AsyncHTTPClient
public import Foundation
public import Logging
import NIOCore
import NIOHTTP1
import NIOFoundationCompat
import NIOPosix
import Switchboard

/// A loopback HTTP proxy that any adapter's tests put between a client and a real server they did
/// not write (Synapse, a vendor sandbox) to inject the faults an emulator would: a dropped link,
/// a request refused or cut, an answer lost, replaced or repeated.
///
/// ```swift
/// try await FaultProxy.withRunning(upstream: "http://127.0.0.1:8008") { proxy, url in
///     // point the client at `url`
///     proxy.inject(.answer(status: 500, body: #"{"errcode":"M_UNKNOWN"}"#), where: { $0.path.contains("/send/") })
///     proxy.disconnectAll()
/// }
/// ```
///
/// Rules are matched in the order they were injected; each applies to a number of requests and is
/// then spent. A rule given a label counts each request it applied to under that label in
/// ``Statistics/applied``, and so does ``disconnectAll(label:)`` for each request it cut: how a
/// test tells a fault that took effect from one that was only injected. The proxy speaks HTTP/1.1 to the client and forwards with AsyncHTTPClient, so a
/// long-poll held by the server is held by the proxy too.
///
/// The lock guards the rules, the open connections and the counters.
public final class FaultProxy: Sendable {
    /// A request as the proxy sees it.
    public struct Request: Sendable {
        public var method: String
        /// The path with its query, as sent.
        public var uri: String
        /// The path without the query.
        public var path: String { String(uri.prefix { $0 != "?" }) }
    }

    /// What to do with a matching request.
    public enum Action: Sendable {
        /// Answer at once with this status and body; the server never sees the request.
        case answer(status: Int, body: String)
        /// Close the connection without forwarding: the request never reached the server.
        case cut
        /// Forward, then close the connection instead of answering: the server did it, the
        /// client never hears (a lost reply).
        case loseAnswer
        /// Forward, and answer 200 with this body instead of the server's.
        case replaceAnswer(String)
        /// Forward, and answer 200 with what `rewrite` makes of the request and the server's
        /// answer (a broken copy of it, say, that keeps the client's cursor where it was).
        case rewriteAnswer(@Sendable (Request, Data) -> Data)
        /// Answer with the previous answer to a request this rule matched (a repeated delivery);
        /// forwarded as usual until there is one.
        case repeatAnswer
        /// Hold the request this long before forwarding it.
        case delay(Duration)
    }

    /// What the proxy did, for a test's printed figures.
    public struct Statistics: Sendable, Hashable {
        public var forwarded = 0
        /// Requests a rule applied to.
        public var faults = 0
        /// Calls of ``FaultProxy/disconnectAll(label:)``.
        public var disconnects = 0
        /// Requests in flight that a disconnect cut.
        public var requestsCut = 0
        /// By label: the requests each labelled rule applied to, and the requests in flight each
        /// labelled disconnect cut.
        public var applied: [String: Int] = [:]
    }

    private struct Rule {
        var action: Action
        var remaining: Int
        var label: String?
        var matches: @Sendable (Request) -> Bool
        /// For the actions on the server's answer: which of the server's answers
        /// count (a long-poll's empty answer may not).
        var answerMatches: @Sendable (Data) -> Bool
        var lastAnswer: Data?
    }

    private struct State {
        var rules: [Int: Rule] = [:]
        var nextRule = 0
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// The connections whose request the proxy holds and has not begun to answer: closing
        /// one of them fails the request.
        var busy: Set<ObjectIdentifier> = []
        var statistics = Statistics()
    }

    private let state = Locked(State())
    private let upstream: String
    private let client: HTTPClient
    private let logger: Logger

    private init(upstream: String, client: HTTPClient, logger: Logger) {
        self.upstream = upstream.hasSuffix("/") ? String(upstream.dropLast()) : upstream
        self.client = client
        self.logger = logger
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Applies `action` to the next `count` requests that `matches` selects (and, for the actions
    /// that look at the server's answer, whose answer `answerMatches` selects). With a `label`,
    /// each request it applies to is counted under it in ``Statistics/applied``.
    public func inject(
        _ action: Action,
        count: Int = 1,
        label: String? = nil,
        answerMatches: @escaping @Sendable (Data) -> Bool = { _ in true },
        where matches: @escaping @Sendable (Request) -> Bool = { _ in true }
    ) {
        state.withLock { state in
            state.rules[state.nextRule] = Rule(action: action, remaining: count, label: label, matches: matches, answerMatches: answerMatches)
            state.nextRule += 1
        }
    }

    /// Closes every open client connection: requests in flight, long-polls included, end with a
    /// broken connection. With a `label`, the requests it cut are counted under it in
    /// ``Statistics/applied``.
    ///
    /// - Returns: how many requests were in flight and cut (an idle kept-alive connection closes
    ///   without the client noticing).
    @discardableResult
    public func disconnectAll(label: String? = nil) -> Int {
        let (channels, cut) = state.withLock { state in
            let cut = state.busy.intersection(state.connections.keys).count
            state.statistics.disconnects += 1
            state.statistics.requestsCut += cut
            if let label, cut > 0 { state.statistics.applied[label, default: 0] += cut }
            // Forgotten now: a request cut here may wait on the server a while longer, and is
            // not cut again by the next disconnect.
            defer {
                state.connections.removeAll()
                state.busy.removeAll()
            }
            return (Array(state.connections.values), cut)
        }
        for channel in channels { channel.close(promise: nil) }
        return cut
    }

    /// Closes the connections whose request is in flight (held by the proxy, not yet answered),
    /// and no idle one: each cut fails its request. With a `label`, they are counted under it in
    /// ``Statistics/applied``. (Closing an idle kept-alive connection breaks a client only if it
    /// reuses the connection before it sees it closed: sometimes, and unseen by the proxy.)
    ///
    /// - Returns: how many requests were cut.
    @discardableResult
    public func cutRequestsInFlight(label: String? = nil) -> Int {
        let channels = state.withLock { state in
            let cut = state.busy.filter { state.connections[$0] != nil }
            state.statistics.requestsCut += cut.count
            if let label, !cut.isEmpty { state.statistics.applied[label, default: 0] += cut.count }
            defer {
                for id in cut { state.connections[id] = nil }
                state.busy.subtract(cut)
            }
            return cut.compactMap { state.connections[$0] }
        }
        for channel in channels { channel.close(promise: nil) }
        return channels.count
    }

    /// Runs a proxy to `upstream` on 127.0.0.1 (a free port) around `body`, which gets the proxy
    /// and its base URL.
    public static func withRunning<T: Sendable>(
        upstream: String,
        logger: Logger = Logger(label: "switchboard.fault-proxy"),
        _ body: @Sendable (FaultProxy, String) async throws -> T
    ) async throws -> T {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1024
        configuration.decompression = .disabled
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let proxy = FaultProxy(upstream: upstream, client: client, logger: logger)
        do {
            let result = try await proxy.serve(body)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    private func serve<T: Sendable>(_ body: @Sendable (FaultProxy, String) async throws -> T) async throws -> T {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    return try (ClosedOnDrop.self as any ProxyConnectionWrapping.Type).wrap(channel)
                }
            }
        guard let port = server.channel.localAddress?.port else { throw EmulatorHostError(description: "the fault proxy has no port") }
        let (drained, drainedContinuation) = AsyncStream.makeStream(of: Never.self)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { drainedContinuation.finish() }
                try await withThrowingDiscardingTaskGroup { connections in
                    try await server.executeThenClose { inbound in
                        for try await connection in inbound {
                            connections.addTask { await self.handle(connection) }
                        }
                        // Every connection accepted is in a handler now.
                        drainedContinuation.finish()
                    }
                }
            }
            defer {
                group.cancelAll()
                server.channel.close(promise: nil)
                disconnectAll()
            }
            let result: Swift.Result<T, any Error>
            do {
                result = .success(try await body(self, "http://127.0.0.1:\(port)"))
            } catch {
                result = .failure(error)
            }
            // Stop accepting, and let the loop hand out what it had accepted before the rest is
            // cancelled: a connection dropped unhandled traps in SwiftNIO (swift-nio#2637).
            try? await server.channel.close()
            for await _ in drained {}
            return try result.get()
        }
    }

    // MARK: One connection

    private func handle(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let id = ObjectIdentifier(connection.channel)
        state.withLock { $0.connections[id] = connection.channel }
        defer {
            state.withLock { state in
                state.connections.removeValue(forKey: id)
                state.busy.remove(id)
            }
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                var body = ByteBuffer()
                for try await part in inbound {
                    switch part {
                    case .head(let received):
                        head = received
                        body.clear()
                    case .body(var chunk):
                        body.writeBuffer(&chunk)
                    case .end:
                        guard let request = head else { continue }
                        // In flight until the answer starts (`write`).
                        state.withLock { _ = $0.busy.insert(id) }
                        guard try await respond(to: request, body: body, outbound: outbound, channel: connection.channel) else { return }
                        head = nil
                    }
                }
            }
        } catch {
            logger.trace("fault proxy: a connection ended", metadata: ["error": "\(type(of: error))"])
        }
    }

    /// Answers one request; `false` when the connection is to be closed.
    private func respond(
        to head: HTTPRequestHead,
        body: ByteBuffer,
        outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>,
        channel: any Channel
    ) async throws -> Bool {
        let request = Request(method: head.method.rawValue, uri: head.uri)
        // Actions decided before forwarding.
        let before = takeRule(for: request) { action in
            switch action {
            case .answer, .cut, .delay: return true
            case .repeatAnswer: return true
            default: return false
            }
        }
        switch before?.action {
        case .answer(let status, let text)?:
            try await write(status: status, body: ByteBuffer(string: text), contentType: "application/json", outbound: outbound, channel: channel)
            return true
        case .cut?:
            return false
        case .delay(let duration)?:
            try await Task.sleep(for: duration)
        case .repeatAnswer?:
            if let previous = before?.lastAnswer {
                try await write(status: 200, body: ByteBuffer(data: previous), contentType: "application/json", outbound: outbound, channel: channel)
                return true
            }
        default:
            break
        }

        var forwarded = HTTPClientRequest(url: upstream + head.uri)
        forwarded.method = head.method
        for (name, value) in head.headers where !["host", "connection", "content-length", "transfer-encoding"].contains(name.lowercased()) {
            forwarded.headers.add(name: name, value: value)
        }
        if body.readableBytes > 0 || head.method == .POST || head.method == .PUT { forwarded.body = .bytes(body) }
        state.withLock { $0.statistics.forwarded += 1 }
        let response = try await client.execute(forwarded, timeout: .hours(1))
        let answer = try await response.body.collect(upTo: 64 << 20)
        let answerData = Data(buffer: answer)

        // Actions decided on the server's answer.
        let after = takeRule(for: request, answer: answerData) { action in
            switch action {
            case .loseAnswer, .replaceAnswer, .rewriteAnswer: return true
            default: return false
            }
        }
        rememberAnswer(answerData, for: request)
        switch after?.action {
        case .loseAnswer?:
            return false
        case .replaceAnswer(let text)?:
            try await write(status: 200, body: ByteBuffer(string: text), contentType: "application/json", outbound: outbound, channel: channel)
            return true
        case .rewriteAnswer(let rewrite)?:
            try await write(status: 200, body: ByteBuffer(data: rewrite(request, answerData)), contentType: "application/json", outbound: outbound, channel: channel)
            return true
        default:
            try await write(status: Int(response.status.code), body: answer, contentType: response.headers.first(name: "content-type"), outbound: outbound, channel: channel)
            return true
        }
    }

    /// The first live rule for `request` whose action `kind` selects, spent once.
    private func takeRule(for request: Request, answer: Data? = nil, kind: (Action) -> Bool) -> Rule? {
        state.withLock { state in
            for key in state.rules.keys.sorted() {
                guard let rule = state.rules[key], kind(rule.action), rule.matches(request) else { continue }
                if let answer, !rule.answerMatches(answer) { continue }
                if case .repeatAnswer = rule.action, rule.lastAnswer == nil { continue }
                state.rules[key]!.remaining -= 1
                if state.rules[key]!.remaining <= 0 { state.rules[key] = nil }
                state.statistics.faults += 1
                if let label = rule.label { state.statistics.applied[label, default: 0] += 1 }
                return rule
            }
            return nil
        }
    }

    /// Keeps the answer for the repeat rules that match the request.
    private func rememberAnswer(_ answer: Data, for request: Request) {
        state.withLock { state in
            for key in state.rules.keys {
                guard let rule = state.rules[key], case .repeatAnswer = rule.action, rule.matches(request), rule.answerMatches(answer) else { continue }
                state.rules[key]!.lastAnswer = answer
            }
        }
    }

    /// Answers on `channel`, whose request is no longer in flight from here on: once the first
    /// bytes are out, a cut may or may not fail the request, so it is not counted as one.
    private func write(
        status: Int,
        body: ByteBuffer,
        contentType: String?,
        outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>,
        channel: any Channel
    ) async throws {
        state.withLock { _ = $0.busy.remove(ObjectIdentifier(channel)) }
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: String(body.readableBytes))
        if let contentType { headers.add(name: "content-type", value: contentType) }
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)))
        try await outbound.write(.body(.byteBuffer(body)))
        try await outbound.write(.end(nil))
    }
}

/// How the proxy wraps an accepted connection.
private protocol ProxyConnectionWrapping {
    static func wrap(_ channel: any Channel) throws -> NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
}

/// A connection that is closed, not trapped on, if the accept loop never hands it out.
///
/// SwiftNIO traps when an accepted `NIOAsyncChannel` is dropped unfinished ("Deinited
/// NIOAsyncWriter without calling finish()"). The proxy closes its listener and drains its accept
/// loop before it stops, but a connection accepted in the ticks between the listener's close and
/// the removal of its handlers is still dropped (swift-nio#2813). Only the initializer that tears
/// a connection down on deinit, deprecated for that, closes it instead; it is called from here,
/// through a protocol, so that the deprecation is said once.
private enum ClosedOnDrop: ProxyConnectionWrapping {
    @available(*, deprecated, message: "teardown on deinit, for swift-nio#2813")
    static func wrap(_ channel: any Channel) throws -> NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart> {
        try NIOAsyncChannel(synchronouslyWrapping: channel)
    }
}
