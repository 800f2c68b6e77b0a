public import Foundation
import Logging
public import Switchboard
import SwitchboardTransport

/// One offline appeals page (protocols/webim.md §12a): init on `GET /l/v/delta?event=init`, then
/// requests only — nothing is pushed. The server forgets a page 30 minutes after its last
/// request, so a request after longer re-initialises first, and one answered `reinit-required`
/// re-initialises and is tried once more.
///
/// The lock guards the page's credentials and the time of the last request; requests go one at a
/// time (the gate), as the SDK's action queue does.
final class WebimAppealsLink: BackendConnection {
    private let output = LinkOutput()
    var updates: BackendUpdates { output.updates }
    private let configuration: WebimAppealsConfiguration
    private let transport: HTTPTransport
    private let context: ConnectionContext
    private let gate = AsyncGate()

    private struct State {
        var credentials: Credentials
        var lastRequest: Duration?
        /// The newest of the visitor's messages the operator has read, per appeal, as last reported.
        var operatorRead: [ConversationID: MessageID] = [:]
    }

    private let state: Locked<State>

    /// How long the server keeps a page without a request.
    static let pageLifetime: Duration = .seconds(30 * 60)

    init(configuration: WebimAppealsConfiguration, transport: HTTPTransport, context: ConnectionContext) {
        self.configuration = configuration
        self.transport = transport
        self.context = context
        // What is kept for another user is not sent: that user's visitor is not this one's.
        var credentials = context.credentials
        if credentials["user-token"] != configuration.userToken {
            credentials["visitor"] = nil
            credentials["visit-session-id"] = nil
        }
        self.state = Locked(State(credentials: credentials))
    }

    private var base: String { configuration.baseURL }
    private var headers: [(String, String)] {
        [("User-Agent", "Switchboard Webim adapter (offline appeals)")] + configuration.requestHeaders.map { ($0.key, $0.value) }
    }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        defer { output.finish() }
        try await gate.withGate { try await initialize() }
        return try await body(self)
    }

    // MARK: Init

    /// `GET /l/v/delta?event=init`: `server-not-ready` is tried again after 1 s and 2 s, as the
    /// SDK does. A visitor other than the stored one drops the stored appeals.
    private func initialize() async throws {
        var delays: [Duration] = [.seconds(1), .seconds(2)]
        while true {
            let stored = state.withLock { $0.credentials }
            var query: [(String, String)] = [
                ("event", "init"), ("since", "0"), ("location", configuration.location), ("title", configuration.pageTitle),
                ("platform", "ios"), ("ts", String(Int64(context.clock.date.timeIntervalSince1970))), ("push-token", configuration.userToken),
            ]
            if let session = stored["visit-session-id"] { query.append(("visit-session-id", session)) }
            if configuration.visitorFieldsJSON == nil, let visitor = stored["visitor"] { query.append(("visitor", visitor)) }
            if let fields = configuration.visitorFieldsJSON { query.append(("visitor-ext", fields)) }
            let response = try await transport.get("\(base)/l/v/delta", query: query, headers: headers, timeout: configuration.requestTimeout)
            try WebimLink.checkStatus(response.status, during: "init")
            guard let json = try? JSONValue(parsing: response.body), json.objectValue != nil else {
                throw SwitchboardError(.fatal, "init: the answer is not JSON", vendorCode: "wrong-init")
            }
            if let error = json["error"]?.stringValue {
                if error == "server-not-ready", !delays.isEmpty {
                    try await context.clock.sleep(for: delays.removeFirst())
                    continue
                }
                throw WebimMapping.error(error, during: "init").fatalUnlessReinit
            }
            guard let fullUpdate = json["fullUpdate"]?.nonNull, let visitorID = fullUpdate["visitor"]?["id"]?.stringValue else {
                throw SwitchboardError(.protocolViolation, "init: no fullUpdate with a visitor")
            }
            var fresh = WebimMapping.credentials(fromFullUpdate: fullUpdate)
            fresh["user-token"] = configuration.userToken
            if let previous = stored["visitor-id"], previous != visitorID {
                // Another user: the appeals kept for the previous one go, and history starts over.
                fresh["appeals-since"] = "0"
                output.yield(.snapshot(BackendSnapshot(conversations: [], isComplete: true)))
            }
            state.withLock { state in
                state.credentials.values.merge(fresh.values) { _, new in new }
                state.lastRequest = context.clock.now
            }
            output.yield(.credentials(fresh))
            return
        }
    }

    // MARK: Requests

    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        guard let first = draft.firstMessage else {
            throw SwitchboardError(.invalidArgument, "a Webim appeal is made by its first message (ConversationDraft.firstMessage)")
        }
        var fields = try await messageFields(first, clientID: draft.clientID.map(WebimMapping.wireID) ?? WebimLink.newClientSideID())
        if let department = draft.customFields["department-key"] { fields.append(("department-key", department)) }
        if let subject = draft.title { fields.append(("subject", subject)) }
        let json = try await action("chat.offline_message", fields)
        return try WebimAppealsBackend.readNewAppeal(json, context: mappingContext)
    }

    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        var fields = try await messageFields(outgoing.content, clientID: WebimMapping.wireID(outgoing.clientID))
        fields.append(("chat-id", outgoing.conversationID.rawValue))
        let json = try await action("chat.offline_message", fields)
        return WebimAppealsBackend.readAppealMessage(json, in: outgoing.conversationID, context: mappingContext)
    }

    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        try await action("chat.read_by_visitor", [("chat-id", conversation.rawValue)], notFoundIsDone: true)
    }

    func archiveConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        try await deleteAppeal(conversation)
    }

    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        try await deleteAppeal(conversation)
    }

    /// The visitor cannot close an appeal, only delete it: both remove it from the list, before
    /// the caller hears back.
    private func deleteAppeal(_ conversation: ConversationID) async throws -> ClosedConversation {
        try await action("chat.delete", [("chat-id", conversation.rawValue)], notFoundIsDone: true)
        return .removed
    }

    /// `GET /l/v/history?visitor-id&since`: what changed since the stored `lastChangeTs`, or
    /// everything (`since=0`) when forced — then appeals the server no longer lists are dropped.
    func poll(forced: Bool) async throws -> [BackendUpdate] {
        let json: JSONValue
        do {
            json = try await history(forced: forced)
        } catch let error as SwitchboardError where error.code == .protocolViolation {
            // An answer that is not one: reported, and the next poll asks again from the same time.
            return [.problem(error)]
        }
        let answer = WebimAppealsBackend.readHistory(json, complete: forced, context: mappingContext)
        var updates = answer.updates
        // The operator's reading, as a read marker when it moved.
        for read in answer.operatorRead {
            let moved = state.withLock { state in
                defer { state.operatorRead[read.appeal] = read.message }
                return state.operatorRead[read.appeal] != read.message
            }
            if moved { updates.append(.event(BackendEvent(.readMarker(read.reader, .message(read.message)), conversation: read.appeal))) }
        }
        if let since = answer.since {
            var cursor = Credentials()
            cursor["appeals-since"] = since
            state.withLock { $0.credentials["appeals-since"] = since }
            updates.append(.credentials(cursor))
        }
        return updates
    }

    private func history(forced: Bool) async throws -> JSONValue {
        try await request("history") { credentials in
            guard let visitor = credentials["visitor-id"] else {
                throw SwitchboardError(.conversationNotFound, "history is available after the first message")
            }
            let since = forced ? "0" : credentials["appeals-since"] ?? "0"
            return try await self.transport.get(
                "\(self.base)/l/v/history",
                query: [("visitor-id", visitor), ("since", since), ("page-id", credentials["page-id"] ?? "")],
                headers: self.headers, timeout: self.configuration.requestTimeout
            )
        }
    }

    /// The text, or the uploaded files, of a message, as `chat.offline_message` fields.
    private func messageFields(_ content: MessageDraft, clientID: String) async throws -> [(String, String)] {
        var fields = [("client-message-id", clientID), ("visitor-fields", "{}")]
        if content.attachments.isEmpty {
            guard !content.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw SwitchboardError(.invalidArgument, "an appeal message needs text or a file")
            }
            fields.append(("text", content.text))
        } else {
            var descriptors: [JSONValue] = []
            for attachment in content.attachments { descriptors.append(try await upload(attachment)) }
            fields.append(("file-descs", JSONValue.array(descriptors).jsonString))
        }
        return fields
    }

    /// `POST /l/v/upload` with `chat-mode=offline`; returns the file's descriptor.
    private func upload(_ attachment: Message.Attachment) async throws -> JSONValue {
        let data = try attachment.contents()
        let file = HTTPTransport.FilePart(
            field: "webim_upload_file", filename: attachment.name, contentType: attachment.mimeType ?? "application/octet-stream", data: data
        )
        let json = try await request("upload") { credentials in
            try await self.transport.postMultipart(
                "\(self.base)/l/v/upload",
                fields: [("chat-mode", "offline"), ("page-id", credentials["page-id"] ?? ""), ("visit-session-id", credentials["visitor-id"] ?? "")],
                file: file, headers: self.headers, timeout: self.configuration.requestTimeout
            )
        }
        return try WebimAppealsBackend.readUpload(json)
    }

    /// `POST /l/v/action`; `notFoundIsDone` treats `chat-not-found` as success (read, delete).
    @discardableResult
    private func action(_ name: String, _ fields: [(String, String)], notFoundIsDone: Bool = false) async throws -> JSONValue {
        do {
            return try await request(name) { credentials in
                try await self.transport.postForm(
                    "\(self.base)/l/v/action",
                    fields: [("action", name)] + fields + [("page-id", credentials["page-id"] ?? "")],
                    headers: self.headers, timeout: self.configuration.requestTimeout
                )
            }
        } catch let error as SwitchboardError where notFoundIsDone && error.vendorCode == "chat-not-found" {
            return [:]
        }
    }

    /// One request, one at a time: re-initialises first when the page has expired, and once more
    /// when the server answers `reinit-required`. Returns the answer's JSON object.
    private func request(_ name: String, _ send: @Sendable (Credentials) async throws -> HTTPTransport.Response) async throws -> JSONValue {
        try await gate.withGate {
            let expired = state.withLock { state in state.lastRequest.map { context.clock.now - $0 > Self.pageLifetime } ?? true }
            if expired { try await initialize() }
            for attempt in 0..<2 {
                let credentials = state.withLock { $0.credentials }
                let response: HTTPTransport.Response
                do {
                    response = try await send(credentials)
                    state.withLock { $0.lastRequest = context.clock.now }
                    try WebimLink.checkStatus(response.status, during: name)
                } catch {
                    // The server went away mid-request: the link is lost, and the engine reconnects.
                    let lost = SwitchboardError.classify(error)
                    if [.connectionLost, .timedOut, .serverError].contains(lost.code) { output.end(lost) }
                    throw lost
                }
                do {
                    return try WebimAppealsBackend.readAnswer(response.body, during: name)
                } catch let error as SwitchboardError where error.vendorCode == "reinit-required" && attempt == 0 {
                    try await initialize()
                    continue
                } catch let error as SwitchboardError where error.isFatal {
                    output.end(error)
                    throw error
                }
            }
            throw SwitchboardError(.connectionLost, "\(name): reinit-required twice", vendorCode: "reinit-required")
        }
    }

    /// A file's stable address signed for the page now (``WebimRequests/downloadURL(for:thumbnail:)``).
    func signedDownloadURL(_ url: URL) throws -> URL {
        try WebimMapping.signed(url, context: mappingContext)
    }

    private var mappingContext: WebimMapping.Context {
        WebimAppealsBackend.context(baseURL: base, credentials: state.withLock { $0.credentials }, now: context.clock.date)
    }
}

// The appeals link's reading of the server's answers, apart from the connection: the link reads
// every answer through these, and the fuzz target `FuzzWebim` drives the same functions on any
// bytes (`readHistoryAnswer`, and through the `TestKit` SPI the action and upload answers).
extension WebimAppealsBackend {
    /// What an offline `history` answer says (protocols/webim.md §12a).
    public struct HistoryAnswer: Sendable {
        /// The appeals listed, as one snapshot (complete when it was a forced re-read), then each
        /// loose message, with a problem for each part that could not be read.
        public var updates: [BackendUpdate]
        /// For each appeal listed whose operator has read any of the visitor's messages, in answer
        /// order: the newest of them, and the operator (`operator-<id>`, or `operator` when the
        /// chat names none).
        public var operatorRead: [(appeal: ConversationID, reader: ParticipantID, message: MessageID)]
        /// `lastChangeTs`: where the next poll asks from; `nil` when the answer has none.
        public var since: String?
    }

    /// Reads an offline `history` answer as the link does: the body as every answer
    /// (`readAnswer(_:during:)`), then what it lists (`readHistory(_:complete:context:)`).
    /// `complete`: a forced re-read, whose list is every appeal the server has.
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not a JSON object,
    ///   the vendor's error when it is `{"error": …}`.
    public static func readHistoryAnswer(
        _ body: Data, complete: Bool, baseURL: String, credentials: Credentials, now: Date
    ) throws -> HistoryAnswer {
        let json = try readAnswer(body, during: "history")
        return readHistory(json, complete: complete, context: context(baseURL: baseURL, credentials: credentials, now: now))
    }

    /// Reads a `chat.offline_message` answer as the link does: without an appeal, the new appeal
    /// (`.startedConversation`); in one, the message as the server stored it (`.message`, or
    /// `.done` when the answer has none).
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not a JSON object or
    ///   a new appeal's answer has no chat, the vendor's error when it is `{"error": …}`.
    @_spi(TestKit) public static func readOfflineMessageAnswer(
        _ body: Data, appeal: ConversationID?, baseURL: String, credentials: Credentials, now: Date
    ) throws -> BackendResponse {
        let json = try readAnswer(body, during: "chat.offline_message")
        let context = context(baseURL: baseURL, credentials: credentials, now: now)
        guard let appeal else { return .startedConversation(try readNewAppeal(json, context: context)) }
        return readAppealMessage(json, in: appeal, context: context).map(BackendResponse.message) ?? .done
    }

    /// Reads an `upload` answer (`chat-mode=offline`) as the link does: the file's descriptor.
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not a JSON object or
    ///   has no descriptor with a `guid`, the vendor's error when it is `{"error": …}`.
    @_spi(TestKit) public static func readUploadAnswer(_ body: Data) throws -> JSONValue {
        try readUpload(readAnswer(body, during: "upload"))
    }

    /// Every answer of the appeals' server: its JSON object.
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not a JSON object;
    ///   the vendor's error (`WebimMapping.error(_:during:)`) when it is `{"error": …}`.
    static func readAnswer(_ body: Data, during name: String) throws -> JSONValue {
        guard let json = try? JSONValue(parsing: body), json.objectValue != nil else {
            throw SwitchboardError(.protocolViolation, "\(name): the answer is not a JSON object (\(body.count) bytes)")
        }
        if let error = json["error"]?.stringValue { throw WebimMapping.error(error, during: name) }
        return json
    }

    /// A `history` answer's object: the appeals and loose messages, the operator's reading per
    /// appeal, and `lastChangeTs`.
    static func readHistory(_ json: JSONValue, complete: Bool, context: WebimMapping.Context) -> HistoryAnswer {
        var read: [(appeal: ConversationID, reader: ParticipantID, message: MessageID)] = []
        for chat in json["chats"]?.arrayValue ?? [] {
            guard let id = WebimAppealsMapping.conversationID(chat["id"]), let message = WebimAppealsMapping.operatorRead(chat) else { continue }
            read.append((id, ParticipantID(chat["operator"]?["id"]?.intValue.map { "operator-\($0)" } ?? "operator"), message))
        }
        let since = json["lastChangeTs"]?.nonNull.flatMap { WebimDeltaReader.revision($0) }
        return HistoryAnswer(updates: WebimAppealsMapping.changes(json, complete: complete, context: context), operatorRead: read, since: since)
    }

    /// A `chat.offline_message` answer's object without an appeal: the new appeal. See
    /// `readOfflineMessageAnswer(_:appeal:baseURL:credentials:now:)`.
    static func readNewAppeal(_ json: JSONValue, context: WebimMapping.Context) throws -> ConversationSnapshot {
        guard let chat = json["data"]?.nonNull, let snapshot = WebimAppealsMapping.appeal(chat, context: context) else {
            throw SwitchboardError(.protocolViolation, "chat.offline_message: no chat in the answer")
        }
        return snapshot
    }

    /// A `chat.offline_message` answer's object in an appeal: the message as the server stored
    /// it, or `nil` when the answer has none.
    static func readAppealMessage(_ json: JSONValue, in appeal: ConversationID, context: WebimMapping.Context) -> Message? {
        guard let data = json["data"]?.nonNull else { return nil }
        return WebimAppealsMapping.message(data, in: appeal, context: context)
    }

    /// An `upload` answer's object: the file's descriptor.
    static func readUpload(_ json: JSONValue) throws -> JSONValue {
        guard let descriptor = json["data"]?.nonNull, descriptor["guid"]?.stringValue != nil else {
            throw SwitchboardError(.protocolViolation, "upload: no file descriptor in the answer")
        }
        return descriptor
    }

    /// What the mapping needs: the server, and the page's credentials as of `now`.
    static func context(baseURL: String, credentials: Credentials, now: Date) -> WebimMapping.Context {
        WebimMapping.Context(
            baseURL: baseURL, pageID: credentials["page-id"], authToken: credentials["auth-token"],
            visitorID: credentials["visitor-id"].map(ParticipantID.init), now: now
        )
    }
}

/// The 2.3 offline JSON (protocols/webim.md §12a) to the normalized model.
enum WebimAppealsMapping {
    /// An appeal's id as the conversation's: the chat's `id`, a number or a string.
    static func conversationID(_ value: JSONValue?) -> ConversationID? {
        switch value {
        case .int(let number)?: return ConversationID(String(number))
        case .string(let text)? where !text.isEmpty: return ConversationID(text)
        default: return nil
        }
    }

    /// One chat object as a conversation with its messages.
    static func appeal(_ chat: JSONValue, context: WebimMapping.Context) -> ConversationSnapshot? {
        guard let id = conversationID(chat["id"]) else { return nil }
        let messages = (chat["messages"]?.arrayValue ?? []).compactMap { message($0, in: id, context: context) }
        var info = WebimMapping.conversationInfo(chat, context: context)
        info.id = id
        info.title = chat["subject"]?.stringValue
        // Unread: the others' messages since `unreadByVisitorSinceTs` (present and not null).
        if let since = chat["unreadByVisitorSinceTs"]?.doubleValue {
            info.unreadCount = messages.filter { $0.senderRole != .customer && $0.time.timeIntervalSince1970 >= since - 0.000_001 }.count
        } else {
            info.unreadCount = 0
        }
        var data = info.customData?.objectValue ?? [:]
        for key in ["offline", "departmentKey", "unreadByOperatorSinceTs", "clientSideId"] {
            if let value = chat[key]?.nonNull { data[key] = value }
        }
        info.customData = data.isEmpty ? nil : .object(data)
        info.createdAt = messages.first?.time
        return ConversationSnapshot(conversation: info, messages: messages)
    }

    /// The newest of the visitor's messages the operator has read: all of them when
    /// `unreadByOperatorSinceTs` is null, else those before it; `nil` when none is read.
    static func operatorRead(_ chat: JSONValue) -> MessageID? {
        let unreadSince = chat["unreadByOperatorSinceTs"]?.doubleValue
        let visitors = (chat["messages"]?.arrayValue ?? []).filter { ["visitor", "file_visitor"].contains($0["kind"]?.stringValue) }
        let read = visitors.last { message in
            guard let since = unreadSince else { return true }
            // The message's time as the rest of the adapter reads it: `ts_m`, else `ts` (a message
            // with only `ts_m` never counted as read).
            return (WebimMapping.seconds(of: message) ?? .infinity) < since - 0.000_001
        }
        return read?["id"]?.stringValue.map(MessageID.init)
    }

    static func message(_ json: JSONValue, in conversation: ConversationID, context: WebimMapping.Context) -> Message? {
        guard var message = WebimMapping.message(json, context: context) else { return nil }
        message.conversationID = conversation
        return message
    }

    /// A history answer: the chats listed (new or changed) as one snapshot — complete when it was
    /// a forced re-read — then each loose message in the chat its `chatId` names.
    static func changes(_ json: JSONValue, complete: Bool, context: WebimMapping.Context) -> [BackendUpdate] {
        var updates: [BackendUpdate] = []
        for key in ["chats", "messages"] where json[key]?.nonNull != nil && json[key]?.arrayValue == nil {
            updates.append(.problem(SwitchboardError(.protocolViolation, "history: \(key) is not a list")))
        }
        let chats = json["chats"]?.arrayValue ?? []
        let snapshots = chats.compactMap { appeal($0, context: context) }
        if snapshots.count < chats.count {
            updates.append(.problem(SwitchboardError(.protocolViolation, "history: \(chats.count - snapshots.count) chats without an id")))
        }
        if complete || !snapshots.isEmpty {
            updates.append(.snapshot(BackendSnapshot(conversations: snapshots, isComplete: complete)))
        }
        for item in json["messages"]?.arrayValue ?? [] {
            guard let chat = conversationID(item["chatId"]), let message = message(item, in: chat, context: context) else {
                updates.append(.problem(SwitchboardError(.protocolViolation, "history: a message without its chat, id, text or time")))
                continue
            }
            updates.append(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: chat, time: message.time)))
        }
        return updates
    }
}
