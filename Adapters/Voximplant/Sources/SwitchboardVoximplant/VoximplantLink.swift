import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// One logged-in WebSocket: correlates requests with responses, turns events into updates,
/// keeps the link alive, and maps `BackendRequest`s onto protocol requests.
///
/// The lock guards the id counter and the time of the last inbound frame; `replies` holds the
/// requests waiting for their responses.
final class VoximplantLink: BackendConnection {
    private let output: LinkOutput
    var updates: BackendUpdates { output.updates }
    private let socket: TextWebSocket
    private let configuration: VoximplantConfiguration
    private let clock: SessionClock
    private let logger: Logger

    private struct State {
        var nextID = 1
        var lastInbound: Duration = .zero
        /// Messages removed from each conversation, as this user's sessions have seen the
        /// removals: a history page older than a removal (the log is immutable: its
        /// `sendMessage` event still holds the message) leaves them out. Kept with the session's
        /// credentials, the newest ``maxTombstones`` per conversation.
        var removed: [ConversationID: [MessageID]] = [:]
        /// Messages edited later than a page may reach, as their edits left them (text and
        /// payload), kept the same way: an older page shows the edit, not the first text.
        var edited: [ConversationID: [MessageID: Message]] = [:]
        /// Until login has yielded the snapshot: the events that came meanwhile, yielded after it.
        /// The snapshot's conversations (their `lastSequence`) were read by replies that came
        /// before these events on the socket; yielded first, an event would reach the engine
        /// before a snapshot older than it, whose `lastSequence` below what was just delivered
        /// reads as a server that forgot its events (seen in the failover run under load).
        var heldUntilSnapshot: [BackendUpdate]? = []
    }

    private let state: Locked<State>
    /// Removals kept per conversation.
    static let maxTombstones = 1000
    static let tombstonePrefix = "removed:"
    static let editPrefix = "edited:"
    /// Edits kept per conversation.
    static let maxEdits = 200
    private let replies = PendingReplies<JSONValue>()
    private let reader: VoximplantFrameReader

    init(socket: TextWebSocket, configuration: VoximplantConfiguration, clock: SessionClock, logger: Logger, credentials: Credentials = Credentials()) {
        var initial = State()
        for (key, value) in credentials.values where key.hasPrefix(Self.tombstonePrefix) && !value.isEmpty {
            let ids = (try? JSONValue(parsing: value))?.arrayValue?.compactMap(\.stringValue).map(MessageID.init) ?? []
            initial.removed[ConversationID(String(key.dropFirst(Self.tombstonePrefix.count)))] = ids
        }
        for (key, value) in credentials.values where key.hasPrefix(Self.editPrefix) && !value.isEmpty {
            guard let data = value.data(using: .utf8), let edits = try? JSONDecoder().decode([String: Message].self, from: data) else { continue }
            initial.edited[ConversationID(String(key.dropFirst(Self.editPrefix.count)))] = Dictionary(uniqueKeysWithValues: edits.map { (MessageID($0.key), $0.value) })
        }
        self.state = Locked(initial)
        let replies = self.replies
        self.output = LinkOutput { replies.close($0) }
        self.socket = socket
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.reader = VoximplantFrameReader(user: configuration.user)
    }

    /// Logs in, announces the user's conversations, runs `body`, and keeps reading and
    /// heart-beating while it runs.
    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        let heartbeat = Heartbeat(interval: configuration.heartbeatInterval, pongTimeout: configuration.pongTimeout, onlyWhenSilent: true)
        return try await output.whileRunning([
            { await self.readLoop() },
            {
                await heartbeat.run(clock: self.clock, lastHeard: { self.state.withLock { $0.lastInbound } }, ping: { try await self.ping() }, ending: self.output)
            },
        ]) {
            try await login()
            return try await body(self)
        }
    }

    // MARK: Inbound

    private func readLoop() async {
        do {
            for try await text in socket.messages {
                state.withLock { $0.lastInbound = clock.now }
                await route(text)
            }
            end(SwitchboardError(.connectionLost, "the server closed the WebSocket"))
        } catch {
            end(SwitchboardError.classify(error))
        }
    }

    private func route(_ text: String) async {
        switch reader.read(text) {
        case .event(let event):
            switch event.kind {
            case .messageRemoved, .messageUpdated: rememberRemovalsAndEdits([event])
            default: break
            }
            yieldInOrder(.event(event))
        case .reply(let id, let result, let event):
            if let event { yieldInOrder(.event(event)) }
            replies.resolve(id, with: result)
        case .error(let id, let code, let description):
            if let id, replies.fail(id, { name in VoximplantMapping.error(code: code, description: description, request: name) }) {
                return
            } else if code == 3 {
                end(SwitchboardError(.fatal, "the server revoked the session: \(description)", vendorCode: "3"))
            } else {
                output.yield(.problem(VoximplantMapping.error(code: code, description: description, request: "server")))
            }
        case .pong:
            break
        case .ping(let id):
            // A failed pong is a failing socket, which the read loop sees next.
            try? await socket.send(VoximplantWire.encode(VoximplantWire.Pong(id: id)))
        case .ignored(let type):
            logger.debug("ignored a frame of unknown type", metadata: ["type": "\(type)"])
        case .malformed(let error):
            output.yield(.problem(error))
        }
    }

    /// Yields an event in the socket's order: held while login assembles the snapshot.
    private func yieldInOrder(_ update: BackendUpdate) {
        let yielded = state.withLock { state -> Bool in
            guard state.heldUntilSnapshot != nil else { return false }
            state.heldUntilSnapshot!.append(update)
            return true
        }
        if !yielded { output.yield(update) }
    }

    /// The link is gone: every waiting request fails, and the update stream ends.
    private func end(_ error: SwitchboardError) {
        output.end(error)
    }

    /// One ping of the heartbeat, after `heartbeatInterval` of silence; any frame answers it.
    private func ping() async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return "ping-\(state.nextID)"
        }
        try await socket.send(VoximplantWire.encode(VoximplantWire.Ping(id: id)))
    }

    // MARK: Requests

    /// Sends one request and waits for its response, at most `requestTimeout`.
    func request(_ name: String, _ params: JSONValue) async throws -> JSONValue {
        try output.checkOpen()
        let id: String = state.withLock { state in
            defer { state.nextID += 1 }
            return String(state.nextID)
        }
        let text = VoximplantWire.encode(VoximplantWire.Request(id: id, name: name, params: params))
        // §1: the server would refuse it unread, and its error could not name the request.
        guard text.utf8.count <= VoximplantConfiguration.maxClientFrameBytes else {
            throw SwitchboardError(.payloadTooLarge, "\(name): a frame of \(text.utf8.count) bytes is over the protocol's 64 KiB")
        }
        let timeout = configuration.requestTimeout
        return try await replies.request(
            id,
            label: name,
            timeout: timeout,
            clock: clock,
            timedOut: { SwitchboardError(.timedOut, "\(name) got no answer within \(timeout)", vendorCode: "10002") },
            send: { try await socket.send(text) }
        )
    }

    private func login() async throws {
        let result = try await request("login", ["user": .string(configuration.user), "token": .string(configuration.token)])
        let ids = result["user"]?["conversationList"]?.arrayValue?.compactMap(\.stringValue) ?? []
        var conversations: [ConversationSnapshot] = []
        var start = 0
        while start < ids.count {
            let chunk = Array(ids[start..<min(ids.count, start + 30)])
            let fetched = try await request("getConversations", ["conversations": .array(chunk.map(JSONValue.string))])
            for item in fetched["conversations"]?.arrayValue ?? [] {
                let wire = try VoximplantWire.decode(VoximplantWire.Conversation.self, from: item)
                conversations.append(ConversationSnapshot(conversation: VoximplantMapping.conversation(wire)))
            }
            start += 30
        }
        // The snapshot, then what came after its replies, under the lock: nothing from the read
        // loop comes between.
        state.withLock { state in
            output.yield(.snapshot(BackendSnapshot(conversations: conversations, isComplete: true)))
            for update in state.heldUntilSnapshot ?? [] { output.yield(update) }
            state.heldUntilSnapshot = nil
        }
    }

    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        let payload = try VoximplantMapping.wirePayload(outgoing.content.payload)
        return try await message(
            "sendMessage",
            ["conversation": .string(outgoing.conversationID.rawValue), "text": .string(outgoing.content.text),
             "payload": payload, "clientMessageId": .string(outgoing.clientID.rawValue)],
            keepSequence: true
        )
    }

    func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        var params: [String: JSONValue] = ["conversation": .string(conversation.rawValue), "message": .string(message.rawValue), "text": .string(text)]
        if let payload { params["payload"] = try VoximplantMapping.wirePayload(payload) }
        return try await self.message("editMessage", .object(params), keepSequence: false)
    }

    func delete(_ message: MessageID, in conversation: ConversationID) async throws {
        _ = try await request("removeMessage", ["conversation": .string(conversation.rawValue), "message": .string(message.rawValue)])
    }

    func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws {
        // The protocol has no "stopped typing"; the far side lets it expire.
        guard isTyping else { return }
        _ = try await request("typing", ["conversation": .string(conversation.rawValue)])
    }

    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        guard case .sequence(let sequence) = marker else {
            throw SwitchboardError(.invalidArgument, "Voximplant marks read by sequence only")
        }
        _ = try await request("read", ["conversation": .string(conversation.rawValue), "seq": .int(sequence)])
    }

    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        // A direct conversation is one whether the draft says so by its kind or by its flag.
        let isDirect = draft.kind == .direct || draft.flags.contains(.direct)
        var params: [String: JSONValue] = [
            "participants": .array(draft.participants.map(VoximplantMapping.wireParticipant)),
            "direct": .bool(isDirect), "uber": .bool(draft.flags.contains(.uber)),
            "publicJoin": .bool(draft.flags.contains(.publicJoin)),
        ]
        if let title = draft.title { params["title"] = .string(title) }
        if let customData = draft.customData { params["customData"] = try Self.checkedCustomData(customData) }
        return ConversationSnapshot(conversation: try await conversation("createConversation", .object(params)))
    }

    /// `customData` within the protocol's 5 KB (§1.14), checked before anything is sent; the
    /// server would answer error 0.
    static func checkedCustomData(_ customData: JSONValue) throws -> JSONValue {
        let size = customData.jsonData().count
        guard size <= VoximplantConfiguration.maxCustomDataBytes else {
            throw SwitchboardError(.payloadTooLarge, "customData of \(size) bytes is over Voximplant's \(VoximplantConfiguration.maxCustomDataBytes)")
        }
        return customData
    }

    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        _ = try await request("leaveConversation", ["conversation": .string(conversation.rawValue)])
        return .done
    }

    func updateConversation(_ conversation: ConversationID, _ changes: ConversationChanges) async throws -> ConversationInfo? {
        var params: [String: JSONValue] = ["conversation": .string(conversation.rawValue)]
        // Cleared as the protocol clears them: an empty title, an empty map (§1.7).
        if changes.clearing.contains(.title) { params["title"] = "" }
        if changes.clearing.contains(.customData) { params["customData"] = [:] }
        if let title = changes.title { params["title"] = .string(title) }
        if let isPublic = changes.isPublicJoin { params["publicJoin"] = .bool(isPublic) }
        if let customData = changes.customData { params["customData"] = try Self.checkedCustomData(customData) }
        return try await self.conversation("editConversation", .object(params))
    }

    // A user listed twice in one call counts once, as the SDK says (the first entry wins).
    func addParticipants(_ participants: [Participant], to conversation: ConversationID) async throws -> ConversationInfo? {
        try await self.conversation("addParticipants", ["conversation": .string(conversation.rawValue), "participants": .array(Self.once(participants).map(VoximplantMapping.wireParticipant))])
    }

    func updateParticipants(_ participants: [Participant], in conversation: ConversationID) async throws -> ConversationInfo? {
        try await self.conversation("editParticipants", ["conversation": .string(conversation.rawValue), "participants": .array(Self.once(participants).map(VoximplantMapping.wireParticipant))])
    }

    func removeParticipants(_ participants: [ParticipantID], from conversation: ConversationID) async throws -> ConversationInfo? {
        var seen = Set<ParticipantID>()
        return try await self.conversation("removeParticipants", ["conversation": .string(conversation.rawValue), "participants": .array(participants.filter { seen.insert($0).inserted }.map { .string($0.rawValue) })])
    }

    func retransmit(_ range: ClosedRange<Int64>, in conversation: ConversationID) async throws -> Retransmission {
        let events = try await retransmit(conversation, ["eventsFrom": .int(range.lowerBound), "eventsTo": .int(range.upperBound)])
        rememberRemovalsAndEdits(events.events)
        // The reply lists every event of the range it covers that this user may see (§6):
        // complete when it covers the whole range asked for.
        return Retransmission(events.events, isComplete: events.from <= range.lowerBound && events.to >= range.upperBound)
    }

    /// `joinConversation`: the conversation as of the join, applied before the caller hears back,
    /// makes it known; the join's logged event itself comes through the stream, in sequence.
    func join(_ conversation: ConversationID) async throws -> [BackendUpdate] {
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: try await request("joinConversation", ["conversation": .string(conversation.rawValue)]))
        guard let snapshot = event.conversationSnapshot else { throw SwitchboardError(.protocolViolation, "joinConversation result without a conversation") }
        let info = VoximplantMapping.conversation(snapshot)
        return [.event(BackendEvent(.conversationAdded(info), conversation: info.id))]
    }

    /// An app's own retransmit (`retransmitEvents` with the bounds it gave): typed events, as the
    /// engine's gap fill gets them.
    func retransmitEvents(in conversation: ConversationID, bounds: [String: JSONValue]) async throws -> [BackendEvent] {
        try await retransmit(conversation, bounds).events
    }

    /// Each participant once, the first entry of a user winning.
    static func once(_ participants: [Participant]) -> [Participant] {
        var seen = Set<ParticipantID>()
        return participants.filter { seen.insert($0.id).inserted }
    }

    private func message(_ name: String, _ params: JSONValue, keepSequence: Bool) async throws -> Message {
        let result = try await self.request(name, params)
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: result)
        guard let message = event.message else { throw SwitchboardError(.protocolViolation, "\(name) result without a message") }
        return VoximplantMapping.message(message, keepSequence: keepSequence, edited: name == "editMessage")
    }

    private func conversation(_ name: String, _ params: JSONValue) async throws -> ConversationInfo {
        let result: JSONValue
        do {
            result = try await self.request(name, params)
        } catch let error as SwitchboardError where error.vendorCode == "0" && params["customData"] != nil {
            // Error 0 is the server's answer to a customData over its limit.
            throw SwitchboardError(.payloadTooLarge, "\(name): the server refused the customData (\(error.message))", underlying: error, vendorCode: "0")
        }
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: result)
        guard let snapshot = event.conversationSnapshot else { throw SwitchboardError(.protocolViolation, "\(name) result without a conversation") }
        return VoximplantMapping.conversation(snapshot)
    }

    private func retransmit(_ conversation: ConversationID, _ bounds: [String: JSONValue]) async throws -> (events: [BackendEvent], from: Int64, to: Int64) {
        var params = bounds
        params["conversation"] = .string(conversation.rawValue)
        let result = try await self.request("retransmitEvents", .object(params))
        let events = try (result["events"]?.arrayValue ?? []).map {
            VoximplantMapping.event(try VoximplantWire.decode(VoximplantWire.Event.self, from: $0), me: configuration.user)
        }
        return (events, result["from"]?.intValue ?? 0, result["to"]?.intValue ?? 0)
    }

    /// History is the log read backwards: the messages sent in up to 100 events before the
    /// anchor, with edits and removals in the same range applied.
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        let before: Int64
        switch query.before {
        case .sequence(let sequence)?: before = sequence
        case .token(let token)?:
            guard let sequence = Int64(token) else { throw SwitchboardError(.invalidArgument, "bad history token \(token)") }
            before = sequence
        case nil:
            let conversation = try await self.request("getConversation", ["conversation": .string(query.conversationID.rawValue)])
            before = (conversation["conversation"]?["lastSequence"]?.intValue ?? 0) + 1
        case .time?:
            throw SwitchboardError(.invalidArgument, "Voximplant pages history by sequence, not by time")
        }
        guard before > 1 else { return HistoryPage(messages: [], hasMore: false) }
        let count = Int64(max(1, min(query.limit, 100)))
        let page = try await retransmit(query.conversationID, ["eventsTo": .int(before - 1), "count": .int(count)])
        rememberRemovalsAndEdits(page.events)
        let removed = Set(state.withLock { $0.removed[query.conversationID] ?? [] })
        var messages: [MessageID: Message] = [:]
        var order: [MessageID] = []
        for event in page.events {
            switch event.kind {
            case .messageAdded(let message, _):
                if let id = message.serverID, messages[id] == nil { order.append(id) }
                if let id = message.serverID { messages[id] = message }
            case .messageUpdated(let message):
                if let id = message.serverID, var known = messages[id] {
                    known.text = message.text
                    known.payload = message.payload
                    known.isEdited = true
                    messages[id] = known
                }
            case .messageRemoved(let id):
                messages[id] = nil
            default:
                break
            }
        }
        // A message edited later in the log (past this page) shows its edit.
        for (id, edit) in state.withLock({ $0.edited[query.conversationID] ?? [:] }) where messages[id] != nil {
            messages[id]!.text = edit.text
            messages[id]!.payload = edit.payload
            messages[id]!.isEdited = true
        }
        return HistoryPage(
            // A message removed later in the log (past this page) stays removed.
            messages: order.filter { !removed.contains($0) }.compactMap { messages[$0] },
            hasMore: page.from > 1,
            nextAnchor: .sequence(page.from)
        )
    }

    /// Keeps the removals and edits among `events` (`State.removed`, `State.edited`), and hands the changed lists to the
    /// session's credentials.
    private func rememberRemovalsAndEdits(_ events: [BackendEvent]) {
        var removals: [ConversationID: [MessageID]] = [:]
        var edits: [ConversationID: [MessageID: Message]] = [:]
        state.withLock { state in
            for event in events {
                guard let conversation = event.conversationID else { continue }
                switch event.kind {
                case .messageRemoved(let id):
                    var list = state.removed[conversation] ?? []
                    guard !list.contains(id) else { continue }
                    list.append(id)
                    if list.count > Self.maxTombstones { list.removeFirst(list.count - Self.maxTombstones) }
                    state.removed[conversation] = list
                    removals[conversation] = list
                case .messageUpdated(let message):
                    guard let id = message.serverID else { continue }
                    var kept = state.edited[conversation] ?? [:]
                    // The newest edit wins (an older page's edit event is older than a kept one).
                    if let previous = kept[id], previous.time > message.time { continue }
                    kept[id] = message
                    if kept.count > Self.maxEdits, let oldest = kept.min(by: { $0.value.time < $1.value.time })?.key { kept[oldest] = nil }
                    state.edited[conversation] = kept
                    edits[conversation] = kept
                default:
                    continue
                }
            }
        }
        guard !removals.isEmpty || !edits.isEmpty else { return }
        var credentials = Credentials()
        for (conversation, list) in removals {
            credentials[Self.tombstonePrefix + conversation.rawValue] = JSONValue.array(list.map { .string($0.rawValue) }).jsonString
        }
        for (conversation, kept) in edits {
            let encoded = try? JSONEncoder().encode(Dictionary(uniqueKeysWithValues: kept.map { ($0.key.rawValue, $0.value) }))
            if let encoded, let text = String(data: encoded, encoding: .utf8) { credentials[Self.editPrefix + conversation.rawValue] = text }
        }
        output.yield(.credentials(credentials))
    }
}
