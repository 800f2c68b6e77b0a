import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import PostgresNIO
@_spi(TestKit) import Switchboard
import SwitchboardPostgres

/// The gateway's API for other programs, under `/v1` (``GatewayOpenAPI`` describes it): the
/// fleet's sessions and where they run, a session's conversations with their unread counts, a
/// conversation's stored history by pages, sends (idempotent by the caller's client id) and read
/// markers, and a WebSocket stream of the normalized events that resumes from an event id.
///
/// Any gateway of a fleet answers for any session: it reads the shared store, leaves sends and
/// read markers for the session's process in the database (``GatewayCommands``), and streams the
/// events every process's bridge wrote (`PostgresEventLog`). Every route needs
/// `Authorization: Bearer <token>`; the token is compared in constant time and never logged.
struct GatewayAPI: Sendable {
    let token: String
    let store: PostgresChatStore
    /// The sessions of the fleet's file, by key.
    let sessions: [String: GatewaySession]
    let ownership: PostgresSessionOwnership
    let commands: GatewayCommands
    let directory: GatewayDirectory
    let log: PostgresEventLog
    /// Signalled when events reach the log (the bridge's `onStored`).
    let stored: AsyncSignal
    /// How often an event stream looks at the log without being told: rows held back behind a
    /// transaction that was still running when it was last told.
    let streamPollInterval: Duration
    let logger: Logger

    /// The largest request body the API reads.
    static let maxBody = 64 * 1024
    /// The most events one read of the log gives a stream.
    static let streamBatch = 500
    /// The longest client id a send takes.
    static let maxClientID = 200

    // MARK: Routes

    func register(on router: Router<BasicWebSocketRequestContext>) {
        router.get("/openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: GatewayOpenAPI.document)))
        }
        let v1 = router.group("/v1").add(middleware: BearerAuthentication(bearer: BearerToken(token: token))).add(middleware: SwitchboardErrors())
        v1.get("/sessions") { _, _ in try await self.listSessions() }
        v1.get("/sessions/:backend/:account/conversations") { _, context in
            try await self.listConversations(self.key(context))
        }
        v1.get("/sessions/:backend/:account/conversations/:conversation/messages") { request, context in
            try await self.history(self.key(context), Self.conversation(context), query: request.uri.queryParameters)
        }
        v1.post("/sessions/:backend/:account/conversations/:conversation/messages") { request, context in
            try await self.send(self.key(context), Self.conversation(context), body: Self.body(request))
        }
        v1.get("/sessions/:backend/:account/messages/:clientId") { _, context in
            try await self.sentMessage(self.key(context), ClientMessageID(Self.parameter("clientId", context)))
        }
        v1.post("/sessions/:backend/:account/conversations/:conversation/read") { request, context in
            try await self.markRead(self.key(context), Self.conversation(context), body: Self.body(request))
        }
        v1.get("/events") { request, _ -> Response in
            // A plain GET (an upgrade goes to the WebSocket router).
            _ = try self.streamQuery(request.uri.queryParameters)
            throw APIError(.badRequest, "invalidArgument", "/v1/events is a WebSocket: ask for an upgrade")
        }
    }

    /// The stream, on the WebSocket router. Every upgrade is taken — an HTTP refusal of an
    /// upgrade reaches a client as a bare `400`, and a browser's WebSocket sees no status at all —
    /// and a socket without the token or with bad parameters is closed at once with a close code
    /// that says why: `4401` (no or a wrong token), `4400` (a bad parameter), `4404` (no such
    /// session), the reason in the close frame.
    func registerWebSocket(on router: Router<BasicWebSocketRequestContext>) {
        router.ws("/v1/events") { inbound, outbound, context in
            let query: StreamQuery
            do {
                guard BearerToken(token: token).allows(context.request) else {
                    throw APIError(.unauthorized, "authenticationFailed", "this API needs Authorization: Bearer and the gateway's token")
                }
                query = try streamQuery(context.request.uri.queryParameters)
            } catch let error as APIError {
                // A close frame's reason is at most 123 bytes.
                let reason = String(decoding: Array("\(error.code): \(error.message)".utf8.prefix(123)), as: UTF8.self)
                try? await outbound.close(.unknown(4000 + UInt16(error.status.code)), reason: reason)
                return
            } catch {
                return
            }
            await withTaskGroup(of: Void.self) { group in
                // The client closing (or the connection ending) ends the stream.
                group.addTask { _ = try? await inbound.reduce(0) { count, _ in count + 1 } }
                group.addTask {
                    do {
                        try await self.stream(query, to: outbound)
                    } catch where !Task.isCancelled {
                        logger.info("an event stream ended", metadata: ["error": "\(SwitchboardError.classify(error).message)"])
                    } catch {}
                }
                await group.next()
                group.cancelAll()
            }
        }
    }

    // MARK: Sessions and conversations

    private func listSessions() async throws -> Response {
        let keys = sessions.keys.sorted()
        let holders = try await ownership.holders(of: keys, client: store.client)
        return Self.json(
            .ok,
            .object([
                "sessions": .array(
                    keys.map { key in
                        GatewayJSON.object([
                            "key": .string(key), "backend": .string(sessions[key]!.backend), "account": .string(sessions[key]!.account),
                            "process": holders[key].map(JSONValue.string) ?? .null,
                        ])
                    }
                )
            ])
        )
    }

    private func listConversations(_ key: String) async throws -> Response {
        guard let scope = try await directory.scope(of: key) else {
            // Never run yet: nothing stored.
            return Self.json(.ok, .object(["conversations": .array([]), "unreadTotal": .int(0)]))
        }
        let conversations = try await store.fetchConversations(scope: scope)
        return Self.json(
            .ok,
            .object([
                "conversations": .array(conversations.map(GatewayJSON.conversation)),
                "unreadTotal": .int(Int64(conversations.reduce(0) { $0 + $1.unreadCount })),
            ])
        )
    }

    private func history(_ key: String, _ conversation: ConversationID, query: Parameters) async throws -> Response {
        let scope = try await storedConversation(key, conversation)
        let limit = try Self.integer(query["limit"], name: "limit", default: 50, range: 1...500)
        var before: MessageOrderKey?
        if let cursor = query["before"] {
            guard let key = GatewayJSON.orderKey(cursor: String(cursor)) else {
                throw APIError(.badRequest, "invalidArgument", "before is not a cursor this API gave")
            }
            before = key
        }
        let messages = try await store.fetchMessages(in: conversation, before: before, limit: limit, scope: scope)
        let next = messages.count == limit ? messages.first.map { JSONValue.string(GatewayJSON.cursor($0.orderKey)) } : nil
        return Self.json(.ok, .object(["messages": .array(messages.map(GatewayJSON.message)), "before": next ?? .null]))
    }

    /// The session's scope when it has stored `conversation`; `404` otherwise.
    private func storedConversation(_ key: String, _ conversation: ConversationID) async throws -> StoreScope {
        guard let scope = try await directory.scope(of: key), try await store.fetchConversation(conversation, scope: scope) != nil else {
            throw APIError(.notFound, "conversationNotFound", "\(key) has no conversation \(conversation.rawValue)")
        }
        return scope
    }

    // MARK: Sends and read markers

    private func send(_ key: String, _ conversation: ConversationID, body: JSONValue) async throws -> Response {
        guard let clientID = body["clientId"]?.stringValue, !clientID.isEmpty, clientID.count <= Self.maxClientID else {
            throw APIError(.badRequest, "invalidArgument", "clientId is a string of 1 to \(Self.maxClientID) characters the caller chooses, unique in the session")
        }
        guard let text = body["text"]?.stringValue else { throw APIError(.badRequest, "invalidArgument", "text is a string") }
        let scope = try await storedConversation(key, conversation)
        let id = ClientMessageID(clientID)
        if let stored = try await store.fetchMessage(clientID: id, scope: scope) {
            guard stored.conversationID == conversation else {
                throw APIError(.conflict, "invalidArgument", "the client id \(clientID) was used in conversation \(stored.conversationID.rawValue)")
            }
            return Self.json(.ok, .object(["message": GatewayJSON.message(stored)]))
        }
        var request: [String: JSONValue] = ["text": .string(text)]
        if let payload = body["payload"]?.nonNull { request["payload"] = payload }
        switch try await commands.enqueue(session: key, kind: .send, conversation: conversation, clientID: id, body: .object(request)) {
        case .queued, .alreadyQueued:
            return Self.json(.accepted, .object(["clientId": .string(clientID), "state": .string("queued")]))
        case .refused(let reason):
            return Self.json(.unprocessableContent, .object(["clientId": .string(clientID), "state": .string("refused"), "error": .string(reason)]))
        case .conflict(let other):
            throw APIError(.conflict, "invalidArgument", "the client id \(clientID) was used in conversation \(other.rawValue)")
        }
    }

    private func sentMessage(_ key: String, _ clientID: ClientMessageID) async throws -> Response {
        // The request first, the message second: a request run meanwhile has stored its message
        // before its row went.
        let request = try await commands.state(session: key, clientID: clientID)
        if let scope = try await directory.scope(of: key), let stored = try await store.fetchMessage(clientID: clientID, scope: scope) {
            return Self.json(.ok, .object(["message": GatewayJSON.message(stored)]))
        }
        switch request {
        case (_, nil)?:
            return Self.json(.accepted, .object(["clientId": .string(clientID.rawValue), "state": .string("queued")]))
        case (_, let error?)?:
            return Self.json(.ok, .object(["clientId": .string(clientID.rawValue), "state": .string("refused"), "error": .string(error)]))
        case nil:
            throw APIError(.notFound, "messageNotFound", "\(key) has no message with the client id \(clientID.rawValue)")
        }
    }

    private func markRead(_ key: String, _ conversation: ConversationID, body: JSONValue) async throws -> Response {
        _ = try await storedConversation(key, conversation)
        var request: [String: JSONValue] = [:]
        if let upTo = body["upTo"]?.nonNull {
            guard let id = upTo.stringValue, !id.isEmpty else { throw APIError(.badRequest, "invalidArgument", "upTo is a message's server id") }
            request["upTo"] = .string(id)
        }
        _ = try await commands.enqueue(session: key, kind: .read, conversation: conversation, clientID: nil, body: .object(request))
        return Self.json(.accepted, .object(["state": .string("queued")]))
    }

    // MARK: The event stream

    struct StreamQuery: Sendable {
        var session: String?
        var conversation: ConversationID?
        var after: PostgresEventLog.Position?
    }

    func streamQuery(_ query: Parameters) throws -> StreamQuery {
        var stream = StreamQuery()
        if let session = query["session"].map(String.init) {
            guard sessions[session] != nil else { throw APIError(.notFound, "invalidArgument", "no session \(session) in this fleet") }
            stream.session = session
        }
        stream.conversation = query["conversation"].map { ConversationID(String($0)) }
        if let after = query["after"] {
            guard let position = PostgresEventLog.Position(String(after)) else {
                throw APIError(.badRequest, "invalidArgument", "after is the id of an event this stream sent")
            }
            stream.after = position
        }
        return stream
    }

    /// How long an idle stream goes without a frame: then a `position` frame says where the log
    /// is, so a client of a quiet session resumes from there (and a proxy sees traffic).
    static let positionInterval: Duration = .seconds(10)

    /// Writes the log's events from the query's position on until cancelled: first a `ready`
    /// frame with the position it starts from, then each event with its id, a `position` frame
    /// when idle, and a `resync` frame whenever events after the stream's position were pruned
    /// before it read them (the client re-reads state; the stream goes on).
    func stream(_ query: StreamQuery, to outbound: WebSocketOutboundWriter) async throws {
        func write(_ frame: JSONValue) async throws {
            try await outbound.write(.text(String(decoding: frame.jsonData(), as: UTF8.self)))
        }
        var position = if let after = query.after { after } else { try await log.now() }
        try await write(.object(["type": .string("ready"), "id": .string(position.description)]))
        let clock = ContinuousClock()
        var lastFrame = clock.now
        var announced = position
        while !Task.isCancelled {
            let generation = stored.generation
            let page = try await log.read(after: position, session: query.session, conversation: query.conversation, limit: Self.streamBatch)
            if !page.keptEverything {
                try await write(
                    .object([
                        "type": .string("resync"), "id": .string(position.description),
                        "reason": .string("events after \(position) were pruned before this stream read them: read the state again"),
                    ])
                )
                lastFrame = clock.now
            }
            for entry in page.entries {
                try await write(GatewayJSON.event(entry.event, id: entry.position.description))
                lastFrame = clock.now
            }
            if let last = page.entries.last { announced = last.position }
            position = page.end
            if page.isFull { continue }
            if clock.now - lastFrame >= Self.positionInterval, position != announced {
                try await write(.object(["type": .string("position"), "id": .string(position.description)]))
                lastFrame = clock.now
                announced = position
            }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await stored.wait(since: generation) }
                group.addTask { try? await Task.sleep(for: streamPollInterval) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    // MARK: Requests and responses

    private func key(_ context: some RequestContext) throws -> String {
        let key = "\(try Self.parameter("backend", context))/\(try Self.parameter("account", context))"
        guard sessions[key] != nil else { throw APIError(.notFound, "invalidArgument", "no session \(key) in this fleet") }
        return key
    }

    private static func conversation(_ context: some RequestContext) throws -> ConversationID {
        ConversationID(try parameter("conversation", context))
    }

    private static func parameter(_ name: String, _ context: some RequestContext) throws -> String {
        guard let raw = context.parameters.get(name), let value = raw.removingPercentEncoding, !value.isEmpty else {
            throw APIError(.badRequest, "invalidArgument", "the path has no \(name)")
        }
        return value
    }

    private static func integer(_ raw: Substring?, name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let raw else { return value }
        guard let number = Int(raw), range.contains(number) else {
            throw APIError(.badRequest, "invalidArgument", "\(name) is a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// The request's JSON object (an empty body is `{}`).
    private static func body(_ request: Request) async throws -> JSONValue {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBody)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError(.contentTooLarge, "payloadTooLarge", "a request body is at most \(maxBody) bytes")
        }
        if buffer.readableBytes == 0 { return .object([:]) }
        guard let value = try? JSONValue(parsing: Data(buffer.readableBytesView)), value.objectValue != nil else {
            throw APIError(.badRequest, "invalidArgument", "the body is not a JSON object")
        }
        return value
    }

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: value.jsonData())))
    }
}

/// An API answer other than success: its status and a JSON error body.
struct APIError: HTTPResponseError {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = GatewayAPI.json(status, .object(["error": .object(["code": .string(code), "message": .string(message)])]))
        response.headers.append(contentsOf: headers)
        return response
    }
}

/// The API's token: `Authorization: Bearer <token>`, compared in constant time.
struct BearerToken: Sendable {
    let token: String

    func allows(_ request: Request) -> Bool {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return false }
        let given = Array(header.dropFirst("Bearer ".count).utf8)
        let expected = Array(token.utf8)
        // Every byte is compared whatever differs first: the time says nothing of the token.
        var difference = given.count ^ expected.count
        for index in expected.indices { difference |= Int(expected[index] ^ (index < given.count ? given[index] : 0)) }
        return difference == 0
    }
}

/// Refuses every request of the routes it guards without the token.
struct BearerAuthentication<Context: RequestContext>: RouterMiddleware {
    let bearer: BearerToken

    func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        guard bearer.allows(request) else {
            throw APIError(.unauthorized, "authenticationFailed", "this API needs Authorization: Bearer and the gateway's token", headers: [.wwwAuthenticate: "Bearer"])
        }
        return try await next(request, context)
    }
}

/// A `SwitchboardError` out of a handler as the API's JSON error: `503` when the database failed
/// (try again), `500` otherwise.
struct SwitchboardErrors<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as SwitchboardError {
            throw APIError(error.code == .storageFailure ? .serviceUnavailable : .internalServerError, error.code.description, error.message)
        }
    }
}

/// The fleet's sessions as the processes that ran them recorded them: each session's store user
/// (so any process reads its rows) and the process that took it last.
struct GatewayDirectory: Sendable {
    let store: PostgresChatStore
    let logger: Logger

    var table: String { "\(store.schema).gateway_session" }

    /// A process took the session: its scope's user and the process's name.
    func record(_ key: String, scope: StoreScope, process: String) async throws {
        try await store.migrate()
        do {
            try await store.client.run(
                """
                INSERT INTO \(unescaped: table) (key, backend, account, user_id, process) VALUES (\(key), \(scope.backend.rawValue), \(scope.account), \(scope.user ?? ""), \(process))
                ON CONFLICT (key) DO UPDATE SET backend = excluded.backend, account = excluded.account, user_id = excluded.user_id, process = excluded.process, since = now()
                """,
                logger: logger
            )
        } catch {
            throw PostgresChatStore.classify(error, what: "recording a session")
        }
    }

    /// The store scope of the session `key`; `nil` when no process has run it yet.
    func scope(of key: String) async throws -> StoreScope? {
        try await store.migrate()
        do {
            let rows = try await store.client.query("SELECT backend, account, user_id FROM \(unescaped: table) WHERE key = \(key)", logger: logger)
            for try await (backend, account, user) in rows.decode((String, String, String).self) {
                return StoreScope(backend: BackendName(backend), account: account, user: user)
            }
            return nil
        } catch {
            throw PostgresChatStore.classify(error, what: "reading a session")
        }
    }
}
