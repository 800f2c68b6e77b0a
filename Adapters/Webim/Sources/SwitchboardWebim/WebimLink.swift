import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// One Webim page: init, then the delta long-poll in the link's scope, and actions one at a time.
///
/// The lock guards the page's credentials, the revision, what is known of the current chat and the
/// account config.
final class WebimLink: BackendConnection {
    private let output = LinkOutput()
    var updates: BackendUpdates { output.updates }
    let configuration: WebimConfiguration
    let transport: HTTPTransport
    private let context: ConnectionContext
    let actions = AsyncGate()
    /// One history-since sync at a time (the delta loop's and the 60 s poll's).
    private let historySync = AsyncGate()

    struct State {
        var credentials: Credentials
        var revision = "0"
        /// What is known of the current chat, from the answers read so far.
        var reader: WebimDeltaReader
        var maxUploadBytes = 10 * 1024 * 1024
        var allowedFileTypes: Set<String> = []
        var uploadAllowed = true
        /// Delta answers read so far (changed or not).
        var deltaAnswers = 0
        /// Uploads whose answer was lost, by client-side id: how many delta answers had been read
        /// then. The server may have made the message; its echo comes by the delta.
        var lostUploads: [String: Int] = [:]
    }

    let state: Locked<State>
    /// Signalled after each delta answer is read.
    let deltaRead = AsyncSignal()

    init(configuration: WebimConfiguration, transport: HTTPTransport, context: ConnectionContext, changedLocation: WebimBackend.ChangedLocation) {
        self.configuration = configuration
        self.transport = transport
        self.context = context
        self.changedLocation = changedLocation
        var credentials = context.credentials
        if credentials["device-id"] == nil { credentials["device-id"] = UUID().uuidString }
        self.state = Locked(State(credentials: credentials, reader: WebimDeltaReader(baseURL: configuration.baseURL)))
    }

    var base: String { configuration.baseURL }

    /// The location in use: a change (``WebimRequests/changeLocation(_:)``) is kept by the backend,
    /// so it survives the re-init it causes; the next backend (a later launch) starts at the
    /// configured location again (a change used to be stored with the credentials and won for
    /// good, with no way back).
    private var location: String { changedLocation.location ?? configuration.location }
    private let changedLocation: WebimBackend.ChangedLocation

    var headers: [(String, String)] {
        [("User-Agent", "Switchboard Webim adapter")] + configuration.requestHeaders.map { ($0.key, $0.value) }
    }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        // `/api/visitor/meta` precedes everything in SDK 4.0; its answer only overrides paths the
        // adapter does not use, and its failure is ignored, except a server that cannot be reached
        // at all (refused, TLS): that is the link's failure, said at once.
        do {
            _ = try await transport.get("\(base)/api/visitor/meta", headers: headers + [("x-webim-sdk-version", "4.0.0")], timeout: configuration.requestTimeout)
        } catch let error as SwitchboardError where error.code == .connectionLost || error.code == .cancelled {
            throw error
        } catch {}
        try await loadConfig()
        try await initialize()
        var loops: [@Sendable () async -> Void] = [{ await self.pollLoop() }, { await self.historyPollLoop() }]
        if let interval = configuration.onlineStatusPollInterval { loops.append { await self.onlineStatusLoop(every: interval) } }
        return try await output.whileRunning(loops) { try await body(self) }
    }

    // MARK: Init and the long-poll

    /// `GET /api/visitor/v1/configs/<location>`: upload limits. Its failure is ignored, as the SDK
    /// does, unless the network itself is down.
    private func loadConfig() async throws {
        guard let response = try? await transport.get(
            "\(base)/api/visitor/v1/configs/\(HTTPTransport.percentEncode(location))",
            query: [("jsonp", "false")],
            headers: headers + [("x-webim-sdk-version", "4.0.0")],
            timeout: configuration.requestTimeout
        ), response.status == 200, let config = try? WebimDeltaReader.readConfigAnswer(response.body)
        else { return }
        // The account's and the location's settings, for the app (rating, editing, quoting, the
        // contact fields the location asks for, …).
        if let settings = config.settings { output.yield(.event(BackendEvent(.settingsChanged(settings)))) }
        state.withLock { state in
            if let bytes = config.maxUploadBytes { state.maxUploadBytes = bytes }
            if let types = config.allowedFileTypes { state.allowedFileTypes = types }
            if let allowed = config.uploadAllowed { state.uploadAllowed = allowed }
        }
    }

    /// `GET /l/v/m/init`; a `reinit-required` answer is retried at once.
    private func initialize() async throws {
        for _ in 0..<3 {
            let stored = state.withLock { $0.credentials }
            var query: [(String, String)] = [
                ("device-id", stored["device-id"] ?? ""), ("event", "init"), ("location", location),
                ("platform", "ios"), ("respond-immediately", "1"), ("since", "0"), ("title", configuration.pageTitle),
            ]
            if let version = configuration.appVersion { query.append(("app-version", version)) }
            if let token = configuration.deviceToken, let system = configuration.pushSystem {
                query += [("push-token", token), ("push-service", system.rawValue)]
            }
            if let session = stored["visit-session-id"] { query.append(("visit-session-id", session)) }
            if configuration.visitorFieldsJSON == nil, let visitor = stored["visitor"] { query.append(("visitor", visitor)) }
            if let fields = configuration.visitorFieldsJSON { query.append(("visitor-ext", fields)) }
            if let token = configuration.providedAuthorizationToken { query.append(("provided_auth_token", token)) }
            let response = try await transport.get(
                "\(base)/l/v/m/init", query: query, headers: headers + [("x-webim-sdk-version", "4.0.0")],
                timeout: configuration.requestTimeout
            )
            try Self.checkStatus(response.status, during: "init")
            switch read(response.body) {
            case .malformed:
                throw SwitchboardError(.fatal, "init: the answer is not JSON", vendorCode: "wrong-init")
            case .error(let error):
                if error == "reinit-required" { continue }
                throw WebimMapping.error(error, during: "init")
            case .changed(let revision, let credentials?, let updates):
                state.withLock { $0.revision = revision }
                apply(credentials: credentials, updates: updates)
                output.yield(.cursor(.revision(revision)))
                return
            case .unchanged, .changed:
                throw SwitchboardError(.protocolViolation, "init: no revision or fullUpdate")
            }
        }
        throw SwitchboardError(.connectionLost, "init: reinit-required three times", vendorCode: "reinit-required")
    }

    /// The long-poll, in the link's scope: `{}` or no revision polls again; an error ends the link
    /// (`reinit-required` → the engine reconnects and re-inits; a fatal string → the session ends).
    private func pollLoop() async {
        while !Task.isCancelled {
            await syncHistoryIfAnnounced()
            let (since, page, token) = state.withLock { ($0.revision, $0.credentials["page-id"] ?? "", $0.credentials["auth-token"] ?? "") }
            let response: HTTPTransport.Response
            do {
                response = try await transport.get(
                    "\(base)/l/v/m/delta",
                    query: [("since", since), ("ts", String(Int64(context.clock.date.timeIntervalSince1970 * 1000))), ("page-id", page), ("auth-token", token)],
                    headers: headers,
                    timeout: configuration.pollTimeout
                )
                try Self.checkStatus(response.status, during: "delta")
            } catch let error as SwitchboardError where error.code == .timedOut {
                continue
            } catch {
                end(SwitchboardError.classify(error))
                return
            }
            switch read(response.body) {
            case .malformed(let error):
                output.yield(.problem(SwitchboardError(.protocolViolation, "delta: \(error.message)")))
            case .error(let error):
                end(WebimMapping.error(error, during: "delta").fatalUnlessReinit)
                return
            case .unchanged:
                break
            case .changed(let revision, let credentials, let updates):
                apply(credentials: credentials, updates: updates)
                state.withLock { $0.revision = revision }
                output.yield(.cursor(.revision(revision)))
            }
            state.withLock { $0.deltaAnswers += 1 }
            deltaRead.signal()
        }
    }

    /// `GET /l/v/m/get-online-status` every `interval`: a changed status is announced. A failed
    /// request is skipped; the delta loop notices a lost server.
    private func onlineStatusLoop(every interval: Duration) async {
        while !Task.isCancelled {
            do { try await context.clock.sleep(for: interval) } catch { return }
            let (page, token) = state.withLock { ($0.credentials["page-id"] ?? "", $0.credentials["auth-token"] ?? "") }
            guard let response = try? await transport.get(
                "\(base)/l/v/m/get-online-status",
                query: [("location", location), ("page-id", page), ("auth-token", token)],
                headers: headers,
                timeout: configuration.requestTimeout
            ), response.status == 200
            else { continue }
            if let changed = state.withLock({ $0.reader.readOnlineStatus(response.body) }) {
                output.yield(.event(BackendEvent(.availability(changed))))
            }
        }
    }

    /// The history-since poller (protocols/webim.md §6.1) of a server that announces no history
    /// revisions: a sync when the link opens, then every 60 s. A server that announces them is
    /// synced when it does (``syncHistoryIfAnnounced()``), so this one only sleeps.
    private func historyPollLoop() async {
        var first = true
        while !Task.isCancelled {
            if !first {
                do { try await context.clock.sleep(for: .seconds(60)) } catch { return }
            }
            first = false
            if !state.withLock({ $0.reader.announcesHistory }) { await syncHistory() }
        }
    }

    /// Before each long-poll: a sync when the server announced a history revision other than
    /// the stored one.
    private func syncHistoryIfAnnounced() async {
        let (announced, stored) = state.withLock { ($0.reader.announcedHistoryRevision, $0.credentials["history-revision"]) }
        guard let announced, announced != stored else { return }
        await syncHistory()
    }

    /// Fetches what changed since the stored history revision (everything, the first time),
    /// upserts it (messages marked `deleted` are removed) and keeps the new revision with the
    /// credentials; an answer with `hasMore` after the first is asked for again at once. Errors
    /// mean "no data", as in the SDK.
    private func syncHistory() async {
        await historySync.withGate {
            var pages = 0
            while !Task.isCancelled && pages < 1000 {
                pages += 1
                let (announced, stored, page, token) = state.withLock {
                    ($0.reader.announcedHistoryRevision, $0.credentials["history-revision"], $0.credentials["page-id"] ?? "", $0.credentials["auth-token"] ?? "")
                }
                var query = [("page-id", page), ("auth-token", token)]
                if let stored { query.insert(("since", stored), at: 0) }
                let now = context.clock.date
                guard let response = try? await transport.get("\(base)/l/v/m/history", query: query, headers: headers, timeout: configuration.requestTimeout),
                    response.status == 200,
                    let changes = try? state.withLock({ state in try state.reader.readHistoryChanges(response.body, credentials: state.credentials, now: now, isChangeList: stored != nil) })
                else {
                    state.withLock { $0.reader.announcedHistoryRevision = nil }
                    return
                }
                for update in changes.updates { output.yield(update) }
                var kept = Credentials()
                kept["history-revision"] = changes.revision ?? announced ?? stored
                state.withLock { state in
                    state.credentials["history-revision"] = kept["history-revision"]
                    if state.reader.announcedHistoryRevision == announced { state.reader.announcedHistoryRevision = nil }
                }
                output.yield(.credentials(kept))
                // More changes wait: ask again from the new revision (the first sync's `hasMore`
                // means older history, which paging reaches).
                guard changes.hasMore, stored != nil, kept["history-revision"] != stored else { return }
            }
        }
    }

    private func end(_ error: SwitchboardError) {
        output.end(error)
    }

    private var mappingContext: WebimMapping.Context {
        let now = context.clock.date
        return state.withLock { state in state.reader.context(state.credentials, now: now) }
    }

    /// Reads one `init` or `delta` answer with the link's reader.
    private func read(_ body: Data) -> WebimDeltaReader.Outcome {
        let now = context.clock.date
        return state.withLock { state in state.reader.read(body, credentials: state.credentials, now: now) }
    }

    /// The page's new credentials (a full update's) merged into the kept ones, then the updates.
    private func apply(credentials new: Credentials?, updates: [BackendUpdate]) {
        if var new {
            state.withLock { state in
                new["device-id"] = state.credentials["device-id"]
                state.credentials.values.merge(new.values) { _, fresh in fresh }
            }
            output.yield(.credentials(new))
        }
        for update in updates { output.yield(update) }
    }

    // MARK: Actions

    /// Each upload is a message of its own, so the engine queues a draft's text and files as
    /// separate messages (`BackendLimits.attachmentsPerMessage` is 1) and one part arrives here.
    /// What still comes with several — an outbox entry stored before that, a conversation's first
    /// message — goes part by part, the text first: the first part under the entry's client id,
    /// the others under it with `-2`, `-3`…; a part whose message the server already sent back
    /// (a resend after a lost answer) is not sent again.
    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        let wireID = WebimMapping.wireID(outgoing.clientID)
        for (index, part) in outgoing.content.parts(attachmentsPerMessage: 1).enumerated() {
            let clientSideID = index == 0 ? wireID : "\(wireID)-\(index + 1)"
            await waitForEchoOfLostUpload(clientSideID)
            if state.withLock({ $0.reader.clientSideIDs.values.contains(clientSideID) }) { continue }
            try await ensureChat()
            do {
                try await sendPart(part, clientSideID: clientSideID)
            } catch let error as SwitchboardError where error.vendorCode == "chat-required" {
                // The chat closed before its state reached us: start one and send once more.
                try await startChat(ConversationDraft(), force: false)
                try await sendPart(part, clientSideID: clientSideID)
            } catch {
                // An upload whose answer is lost: the server may have the file (its message comes
                // by the delta). A resend first waits to know (`waitForEchoOfLostUpload`).
                if !part.attachments.isEmpty, [.connectionLost, .timedOut, .serverError].contains(SwitchboardError.classify(error).code) {
                    state.withLock { $0.lostUploads[clientSideID] = $0.deltaAnswers }
                }
                throw error
            }
        }
        return nil
    }

    /// One message: a file by `upload`, text by `chat.message`.
    private func sendPart(_ content: MessageDraft, clientSideID: String) async throws {
        if let file = content.attachments.first {
            try await upload(file, clientSideID: clientSideID)
            return
        }
        var fields = [("message", content.text), ("client-side-id", clientSideID)]
        if let quoted = content.quote?.messageID {
            fields.append(("quote", #"{"ref":{"msgId":"\#(quoted.rawValue)","msgChannelSideId":null,"chatId":null}}"#))
        }
        if let payload = content.payload { fields.append(("data", payload.jsonString)) }
        if let hint = content.vendorOptions?["hint_question"] { fields.append(("hint_question", hint == "1" || hint == "true" ? "1" : "0")) }
        try await action("chat.message", fields)
    }

    func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        try await action("chat.message", [("message", text), ("client-side-id", try clientSideID(of: message))])
        return nil
    }

    func delete(_ message: MessageID, in conversation: ConversationID) async throws {
        try await action("chat.delete_message", [("client-side-id", try clientSideID(of: message))])
    }

    func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws {
        try await action("chat.visitor_typing", Self.typingFields(isTyping: isTyping, draft: draft))
    }

    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        if case .message(let id) = marker { try await action("chat.read_by_visitor", [("message_id", id.rawValue)]) } else {
            try await action("chat.read_by_visitor", [])
        }
    }

    /// The SDK's `startChat`: `chat.start` without `force-start`, and only when no chat is open
    /// (the last chat is closed, or the visit session is `offline-message`); a chat already open
    /// is the answer. `draft.firstMessage` then goes to the chat as the visitor's message under
    /// the draft's client id, so a retried start sends it once.
    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        if needsStart() { try await startChat(draft, force: false) }
        if let first = draft.firstMessage {
            let clientID = draft.clientID ?? ClientMessageID(UUID().uuidString.lowercased())
            _ = try await send(OutgoingMessage(clientID: clientID, conversationID: WebimBackend.conversationID, content: first))
        }
        return ConversationSnapshot(conversation: currentConversation(defaultState: "queue"))
    }

    /// The SDK's `forceStartChat`: `chat.start` with `force-start=1`, whatever the chat's state.
    func forceStartChat(departmentKey: String?) async throws {
        var draft = ConversationDraft()
        if let departmentKey { draft.customFields["department-key"] = departmentKey }
        try await startChat(draft, force: true)
    }

    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        guard configuration.sdkVersion == .v3_43 else {
            throw SwitchboardError(.unsupported, "Webim Mobile SDK 4.0 removed chat.close: the operator or the server closes a chat (WebimConfiguration.sdkVersion .v3_43 sends it)")
        }
        try await action("chat.close", [])
        return .done
    }

    func rateAgent(in conversation: ConversationID, agent: ParticipantID?, rating: Int, comment: String?) async throws {
        guard (1...5).contains(rating) else { throw SwitchboardError(.invalidArgument, "a rating is 1…5, not \(rating)") }
        var fields = [("rate", String(rating - 3))]
        let operatorID = agent.map { $0.rawValue.replacingOccurrences(of: "operator-", with: "") } ?? state.withLock { $0.reader.operatorID.map(String.init) }
        if let operatorID { fields.append(("operator_id", operatorID)) }
        if let comment { fields.append(("visitor_note", comment)) }
        try await action("chat.operator_rate_select", fields)
    }

    func setCustomFields(_ fields: [String: String], of conversation: ConversationID?) async throws {
        let json = JSONValue.object(fields.mapValues(JSONValue.string)).jsonString
        try await action("chat.set_prechat_fields", [("prechat-key-independent-fields", json)])
    }

    // MARK: Vendor calls (WebimRequests)

    /// ``WebimChangeLocation``: moves the page to another location.
    func changeLocation(to newLocation: String) throws -> JSONValue {
        guard !newLocation.isEmpty else {
            throw SwitchboardError(.invalidArgument, "change-location needs a location")
        }
        // As the SDK does: forget the page and init again at the new location.
        changedLocation.set(newLocation)
        end(SwitchboardError(.connectionLost, "location changed to \(newLocation); re-initialising", vendorCode: "reinit-required"))
        return ["location": .string(newLocation)]
    }

    /// ``WebimClearHistory``: `chat.clear_history`.
    ///
    /// - Returns: what the store applies before the caller hears back.
    func clearHistory() async throws -> [BackendUpdate] {
        // The server forgets the visitor's history; so does the store (the SDK's
        // `removedAllMessages`).
        try await action("chat.clear_history", [])
        return [.event(BackendEvent(.historyCleared, conversation: WebimMapping.conversation))]
    }

    /// ``WebimAction``: any action by its name, with its fields; the action's JSON answer.
    func rawAction(_ name: String, _ fields: [(String, String)]) async throws -> JSONValue {
        try await action(name, fields)
    }

    /// `POST /l/v/m/action`, one at a time in order.
    @discardableResult
    private func action(_ name: String, _ fields: [(String, String)]) async throws -> JSONValue {
        try await actions.withGate {
            try output.checkOpen()
            let (page, token) = state.withLock { ($0.credentials["page-id"] ?? "", $0.credentials["auth-token"] ?? "") }
            let response = try await transport.postForm(
                "\(base)/l/v/m/action",
                fields: [("action", name)] + fields + [("page-id", page), ("auth-token", token)],
                headers: headers,
                timeout: configuration.requestTimeout
            )
            try Self.checkStatus(response.status, during: name)
            switch WebimDeltaReader.readActionAnswer(response.body, during: name) {
            case .done(let json):
                return json
            case .error(let error):
                if error.vendorCode == "reinit-required" || error.isFatal { end(error.fatalUnlessReinit) }
                throw error
            case .malformed(let error), .refused(let error):
                throw error
            }
        }
    }

    private func ensureChat() async throws {
        if needsStart() { try await startChat(ConversationDraft(), force: false) }
    }

    /// Whether a start opens a chat, as the SDK decides: the last chat is closed (or unknown), or
    /// the visit session is `offline-message`.
    private func needsStart() -> Bool {
        let (current, visit) = state.withLock { ($0.reader.chatState, $0.reader.visitSessionState) }
        return current == nil || ["closed", "closed_by_visitor", "closed_by_operator"].contains(current) || WebimMapping.state(current).isUnknown
            || visit == "offline-message"
    }

    /// `chat.start`; `force-start=1` only for ``forceStartChat(departmentKey:)``, as the SDK (an
    /// unforced start goes through the account's department and first-question steps).
    private func startChat(_ draft: ConversationDraft, force: Bool) async throws {
        // A new id for each start, as the SDK (the draft's client id is its first message's).
        var fields = [("client-side-id", Self.newClientSideID()), ("force-online", "0")]
        if force { fields.append(("force-start", "1")) }
        if let department = draft.customFields["department-key"] { fields.append(("department-key", department)) }
        if let question = draft.customFields["first-question"] { fields.append(("first-question", question)) }
        let visitorFields = draft.customFields.filter { $0.key != "department-key" && $0.key != "first-question" }
        if !visitorFields.isEmpty { fields.append((configuration.sdkVersion == .v3_43 ? "custom_fields" : "visitor-fields", JSONValue.object(visitorFields.mapValues(JSONValue.string)).jsonString)) }
        try await action("chat.start", fields)
        state.withLock { if $0.reader.chatState == nil || WebimMapping.state($0.reader.chatState).isClosed { $0.reader.chatState = "queue" } }
    }

    private func currentConversation(defaultState: String) -> ConversationInfo {
        var info = WebimMapping.conversationInfo(nil, context: mappingContext)
        info.state = WebimMapping.state(state.withLock { $0.reader.chatState } ?? defaultState)
        return info
    }

    private func clientSideID(of message: MessageID) throws -> String {
        guard let id = state.withLock({ $0.reader.clientSideIDs[message.rawValue] }) else {
            throw SwitchboardError(.messageNotFound, "no client-side id known for \(message)")
        }
        return id
    }

    /// A file's stable address signed for the page now (``WebimRequests/downloadURL(for:thumbnail:)``).
    func signedDownloadURL(_ url: URL) throws -> URL {
        try WebimMapping.signed(url, context: mappingContext)
    }

    /// `GET /l/v/m/history?before-ts=<µs>`, oldest first.
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        let before: Int64
        switch query.before {
        case .time(let date)?: before = Int64(date.timeIntervalSince1970 * 1_000_000)
        case .token(let token)?: before = Int64(token) ?? Int64.max
        case nil: before = Int64(context.clock.date.timeIntervalSince1970 * 1_000_000) + 1
        case .sequence?: throw SwitchboardError(.invalidArgument, "Webim pages history by time")
        }
        let (page, token) = state.withLock { ($0.credentials["page-id"] ?? "", $0.credentials["auth-token"] ?? "") }
        let response = try await transport.get(
            "\(base)/l/v/m/history",
            query: [("before-ts", String(before)), ("page-id", page), ("auth-token", token)],
            headers: headers,
            timeout: configuration.requestTimeout
        )
        try Self.checkStatus(response.status, during: "history")
        let now = context.clock.date
        return try state.withLock { state in try state.reader.readHistoryPage(response.body, credentials: state.credentials, now: now) }
    }

    /// A fresh client-side id as the SDK makes them (32 lowercase hex digits).
    static func newClientSideID() -> String {
        WebimMapping.wireID(ClientMessageID(UUID().uuidString.lowercased()))
    }

    /// `chat.visitor_typing` as the SDK's composing handler sends it (protocols/webim.md §8.1):
    /// a draft → `typing=1, del-message-draft=0` with it; an empty draft → `typing=0,
    /// del-message-draft=1, message-draft=""`; stopped → `typing=0, del-message-draft=1`; the
    /// automatic stop after 5 s of silence keeps the draft: `typing=0, del-message-draft=0`.
    static func typingFields(isTyping: Bool, draft: String?) -> [(String, String)] {
        switch (isTyping, draft) {
        case (true, ""?): return [("typing", "0"), ("del-message-draft", "1"), ("message-draft", "")]
        case (true, let draft?): return [("typing", "1"), ("del-message-draft", "0"), ("message-draft", draft)]
        case (true, nil): return [("typing", "1"), ("del-message-draft", "0")]
        case (false, _?): return [("typing", "0"), ("del-message-draft", "0")]
        case (false, nil): return [("typing", "0"), ("del-message-draft", "1")]
        }
    }

    /// Statuses the SDK parses a body for; anything else is the server failing.
    static func checkStatus(_ status: Int, during request: String) throws {
        guard [200, 400, 402, 403, 404, 405, 413, 415, 500].contains(status) else {
            throw SwitchboardError(.serverError, "\(request): HTTP \(status)", vendorCode: String(status))
        }
    }
}

extension SwitchboardError {
    /// On the delta loop every error but `reinit-required` ends the session, as the SDK does.
    var fatalUnlessReinit: SwitchboardError {
        if vendorCode == "reinit-required" || code == .connectionLost || code == .authenticationFailed { return self }
        if code == .fatal { return self }
        return SwitchboardError(.fatal, message, underlying: self, vendorCode: vendorCode)
    }
}

extension ConversationInfo.State {
    var isUnknown: Bool {
        if case .unknown = self { return true }
        return false
    }
}
