import DequeModule
import Foundation
@_spi(TestKit) public import Switchboard

/// The server side of ``InMemoryBackend``: conversations with an immutable, gap-free event log
/// per conversation (sequences from 1), participants with permissions, messages de-duplicated
/// by client id, read markers, history and retransmit — plus an agent robot and fault
/// injection for tests.
///
/// Every connected client of every participant gets a conversation's events; the caller of a
/// request gets the result as the reply. Its log of what it accepted and delivered is the
/// truth tests compare a client's store with.
///
/// The lock guards all server state; frames are handed to client sinks under it, so every
/// client sees each conversation's events in log order unless a fault says otherwise.
public final class InMemoryServer: Sendable {
    public struct Configuration: Sendable, Hashable {
        public var maxRetransmitBatch: Int
        public var maxTextLength: Int

        public init(maxRetransmitBatch: Int = 100, maxTextLength: Int = 5000) {
            self.maxRetransmitBatch = maxRetransmitBatch
            self.maxTextLength = maxTextLength
        }
    }

    struct Client {
        var user: ParticipantID
        var sink: InMemoryClientSink
        var faults = DeliveryFaults<String>()
    }

    struct StoredConversation {
        var info: ConversationInfo
        var log: [BackendEvent] = []
        var messages: [MessageID: Message] = [:]
        var byClientID: [ClientMessageID: MessageID] = [:]
    }

    /// A record of what happened, for tests.
    public struct Record: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            case typing(ParticipantID, isTyping: Bool)
            case readMarker(ParticipantID, Int64)
            case rating(ParticipantID, Int)
            case customFields(ParticipantID, [String: String])
        }

        public var conversation: ConversationID?
        public var kind: Kind
    }

    /// One request the server handled: who asked, what, and what it answered (the error too,
    /// injected or not).
    public struct HandledRequest: Sendable, Hashable {
        public var user: ParticipantID
        public var request: BackendRequest
        public var outcome: Result<BackendResponse, SwitchboardError>
    }

    struct State {
        var conversations: [ConversationID: StoredConversation] = [:]
        var order: [ConversationID] = []
        var clients: [Int: Client] = [:]
        var nextClient = 0
        var nextMessage = 0
        var nextConversation = 0
        var records: [Record] = []
        var handledRequests: [HandledRequest] = []
        var applied = AppliedFaults()
        var repliesLost = 0
        var deliveredFrames = 0
        var droppedEvents = 0
        var requestFaults: Deque<(name: String?, error: SwitchboardError)> = []
        var lostReplies: Deque<String?> = []
        var loginFaults: Deque<SwitchboardError> = []
        var acceptedSends = 0
        var duplicateSends = 0
        var requests = 0
    }

    public let configuration: Configuration
    let clock: SessionClock
    let state = Locked(State())
    /// Fires after every change a request or the robot makes.
    @_spi(TestKit) public let changes = AsyncSignal()

    public init(configuration: Configuration = Configuration(), clock: SessionClock = .continuous) {
        self.configuration = configuration
        self.clock = clock
    }

    // MARK: Setting up

    /// Creates a conversation with `participants`; its first event (sequence 1) announces it.
    @discardableResult
    public func createConversation(
        id: ConversationID? = nil,
        kind: ConversationInfo.Kind = .supportChat,
        title: String? = nil,
        participants: [Participant],
        state conversationState: ConversationInfo.State = .active
    ) -> ConversationInfo {
        state.withLock { state in
            let id = id ?? ConversationID("c\(state.nextConversation)")
            state.nextConversation += 1
            let info = ConversationInfo(
                id: id,
                kind: kind,
                title: title,
                state: conversationState,
                participants: participants,
                createdAt: clock.date,
                updatedAt: clock.date
            )
            state.conversations[id] = StoredConversation(info: info)
            state.order.append(id)
            append(.conversationAdded(info), to: id, state: &state)
            return state.conversations[id]!.info
        }
    }

    /// A robot acting as `id` with role agent.
    public func agent(_ id: ParticipantID, name: String? = nil) -> InMemoryAgent {
        InMemoryAgent(server: self, participant: Participant(id: id, role: .agent, displayName: name))
    }

    // MARK: The server's truth

    /// The conversation's messages in sequence order.
    public func messages(in conversation: ConversationID) -> [Message] {
        state.withLock { state in
            (state.conversations[conversation]?.messages.values).map { Array($0) }?
                .sorted { ($0.sequence ?? 0) < ($1.sequence ?? 0) } ?? []
        }
    }

    /// The conversation's messages as the server's log that ``StoreAudit`` compares a client's
    /// store with, `customer`'s own marked as theirs.
    public func log(of conversation: ConversationID, customer: ParticipantID) -> [ServerMessage] {
        messages(in: conversation).map {
            ServerMessage(
                serverID: $0.serverID!, clientID: $0.clientID, text: $0.text, fromCustomer: $0.sender == customer, sequence: $0.sequence
            )
        }
    }

    public func conversation(_ id: ConversationID) -> ConversationInfo? {
        state.withLock { $0.conversations[id]?.info }
    }

    public func eventLog(of conversation: ConversationID) -> [BackendEvent] {
        state.withLock { $0.conversations[conversation]?.log ?? [] }
    }

    public var records: [Record] { state.withLock { $0.records } }
    /// Every request the server handled, in the order it handled them: what a client's engine
    /// did, for tests that compare two runs.
    public var handledRequests: [HandledRequest] { state.withLock { $0.handledRequests } }
    public var connectedClients: Int { state.withLock { $0.clients.count } }
    /// Frames handed to clients, and sequenced events dropped by faults.
    public var deliveryCounts: (delivered: Int, dropped: Int) {
        state.withLock { ($0.deliveredFrames, $0.droppedEvents) }
    }
    /// The faults that took effect on a client's traffic (see ``AppliedFaults`` for the units).
    public var appliedFaults: AppliedFaults { state.withLock { $0.applied } }
    /// Replies lost by ``loseNextReply(named:)`` after the server applied the request.
    public var repliesLost: Int { state.withLock { $0.repliesLost } }
    /// Sends accepted, and resends recognised by client id and not stored again.
    public var sendCounts: (accepted: Int, duplicates: Int) {
        state.withLock { ($0.acceptedSends, $0.duplicateSends) }
    }

    // MARK: Faults

    public enum FaultTarget: Sendable, Hashable {
        case allClients
        case clientsOf(ParticipantID)
    }

    /// Drops every connection now; clients see the link fail. Each link cut counts as a
    /// ``EmulatorFault/Kind/disconnect`` that took effect.
    public func disconnectAll() {
        let sinks = state.withLock { state in
            defer { state.clients.removeAll() }
            state.applied[.disconnect] += state.clients.count
            return state.clients.values.map(\.sink)
        }
        for sink in sinks {
            sink.close(SwitchboardError(.connectionLost, "the in-memory server dropped the connection"))
        }
    }

    public func dropNext(_ count: Int, for target: FaultTarget = .allClients) {
        arm(target) { $0.drop += count }
    }

    public func duplicateNext(_ count: Int, for target: FaultTarget = .allClients) {
        arm(target) { $0.duplicate += count }
    }

    /// Swaps the next `count` events pairwise.
    public func reorderNext(_ count: Int, for target: FaultTarget = .allClients) {
        arm(target) { $0.reorder += count }
    }

    /// Holds the next `count` events until ``releaseDelayed()``.
    public func delayNext(_ count: Int, for target: FaultTarget = .allClients) {
        arm(target) { $0.delay += count }
    }

    /// Delivers every delayed and reorder-held event now.
    public func releaseDelayed() {
        state.withLock { state in
            for id in state.clients.keys {
                let frames = state.clients[id]!.faults.release()
                for frame in frames {
                    state.clients[id]!.sink.receive(frame)
                    state.deliveredFrames += 1
                }
            }
        }
    }

    /// Disarms every fault without delivering what they hold.
    public func clearFaults() {
        state.withLock { state in
            for id in state.clients.keys { state.clients[id]!.faults = DeliveryFaults() }
            state.requestFaults.removeAll()
            state.lostReplies.removeAll()
            state.loginFaults.removeAll()
        }
    }

    /// The next request (named `name`, or any) fails with `error`.
    public func failNextRequest(_ error: SwitchboardError, named name: String? = nil) {
        state.withLock { $0.requestFaults.append((name, error)) }
    }

    /// The next request (named `name`, or any) is applied, but its reply is lost: the client
    /// sees a timeout and must resend without creating a duplicate.
    public func loseNextReply(named name: String? = nil) {
        state.withLock { $0.lostReplies.append(name) }
    }

    public func rejectNextLogin(_ error: SwitchboardError) {
        state.withLock { $0.loginFaults.append(error) }
    }

    /// Pushes text that is not a frame to every client.
    public func sendMalformedFrame(_ text: String = "{\"event\": [unterminated") {
        send(text, as: .malformedFrame)
    }

    /// Pushes `text` as it is to every client (bad-input tables).
    public func sendRawFrame(_ text: String) {
        send(text, as: .rawFrame)
    }

    private func send(_ text: String, as kind: EmulatorFault.Kind) {
        state.withLock { state in
            for client in state.clients.values { client.sink.receive(text) }
            state.applied[kind] += state.clients.count
        }
    }

    /// Ends every client's session with `error` (a fatal frame). Frames that end a client go
    /// out after the lock is released: ending a client's stream detaches it.
    public func sendFatal(_ error: SwitchboardError) {
        let frame = InMemoryFrame.fatal(error).encoded()
        let sinks = state.withLock { state in
            defer { state.clients.removeAll() }
            state.applied[.fatal] += state.clients.count
            return state.clients.values.map(\.sink)
        }
        for sink in sinks { sink.receive(frame) }
    }

    private func arm(_ target: FaultTarget, _ change: (inout DeliveryFaults<String>) -> Void) {
        state.withLock { state in
            for (id, client) in state.clients {
                if case .clientsOf(let user) = target, client.user != user { continue }
                change(&state.clients[id]!.faults)
            }
        }
    }

    // MARK: Clients

    func attach(user: ParticipantID, sink: InMemoryClientSink) throws(SwitchboardError) -> Int {
        try state.withLock { state throws(SwitchboardError) in
            if let error = state.loginFaults.popFirst() {
                state.applied[.rejectLogin] += 1
                throw error
            }
            let id = state.nextClient
            state.nextClient += 1
            state.clients[id] = Client(user: user, sink: sink)
            let visible = state.order.compactMap { state.conversations[$0]?.info }
                .filter { $0.participant(user) != nil }
            sink.receive(InMemoryFrame.snapshot(conversations: visible).encoded())
            state.deliveredFrames += 1
            return id
        }
    }

    func detach(_ client: Int) {
        let sink = state.withLock { $0.clients.removeValue(forKey: client)?.sink }
        sink?.close(nil)
    }

    // MARK: Requests

    func handle(_ request: BackendRequest, from user: ParticipantID, client: Int?) throws(SwitchboardError) -> BackendResponse {
        defer { changes.signal() }
        return try state.withLock { state in
            let outcome = Result { () throws(SwitchboardError) -> BackendResponse in
                try handleCounted(request, from: user, client: client, state: &state)
            }
            state.handledRequests.append(HandledRequest(user: user, request: request, outcome: outcome))
            return outcome
        }.get()
    }

    private func handleCounted(
        _ request: BackendRequest,
        from user: ParticipantID,
        client: Int?,
        state: inout State
    ) throws(SwitchboardError) -> BackendResponse {
        state.requests += 1
        if let client, state.clients[client] == nil {
            throw SwitchboardError(.connectionLost, "the connection is closed")
        }
        if let index = state.requestFaults.firstIndex(where: { $0.name == nil || $0.name == request.name }) {
            let fault = state.requestFaults.remove(at: index)
            state.applied[.failRequest] += 1
            throw fault.error
        }
        let response = try handle(request, from: user, client: client, state: &state)
        if let index = state.lostReplies.firstIndex(where: { $0 == nil || $0 == request.name }) {
            state.lostReplies.remove(at: index)
            state.repliesLost += 1
            throw SwitchboardError(.timedOut, "the reply was lost after the server applied \(request.name)")
        }
        return response
    }

    private func handle(
        _ request: BackendRequest,
        from user: ParticipantID,
        client: Int?,
        state: inout State
    ) throws(SwitchboardError) -> BackendResponse {
        switch request {
        case .send(let outgoing):
            let id = outgoing.conversationID
            let member = try member(user, of: id, state: &state)
            guard member.permissions.canWrite else { throw SwitchboardError(.permissionDenied, "\(user) may not write", vendorCode: "12") }
            if let existing = state.conversations[id]!.byClientID[outgoing.clientID] {
                state.duplicateSends += 1
                return .message(state.conversations[id]!.messages[existing]!)
            }
            guard !state.conversations[id]!.info.state.isClosed else {
                throw SwitchboardError(.messageRejected, "the conversation is closed")
            }
            let content = outgoing.content
            guard content.text.count <= configuration.maxTextLength else {
                throw SwitchboardError(.payloadTooLarge, "text over \(configuration.maxTextLength) characters")
            }
            let message = newMessage(
                in: id,
                from: member,
                clientID: outgoing.clientID,
                kind: content.kind,
                text: content.text,
                attachments: content.attachments.map(\.withoutData),
                payload: content.payload,
                quote: content.quote,
                state: &state
            )
            state.acceptedSends += 1
            return .message(message)
        case .edit(let id, let messageID, let text, let payload):
            var message = try editable(messageID, in: id, by: user, all: \.canEditAll, own: \.canEditOwn, state: &state)
            message.text = text
            message.payload = payload ?? message.payload
            message.isEdited = true
            let event = append(.messageUpdated(message), to: id, state: &state)
            message.sequence = event.sequence
            state.conversations[id]!.messages[messageID] = message
            return .message(message)
        case .delete(let id, let messageID):
            _ = try editable(messageID, in: id, by: user, all: \.canRemoveAll, own: \.canRemoveOwn, state: &state)
            state.conversations[id]!.messages[messageID] = nil
            append(.messageRemoved(messageID), to: id, state: &state)
            return .done
        case .typing(let id, let isTyping, let draft):
            _ = try member(user, of: id, state: &state)
            state.records.append(Record(conversation: id, kind: .typing(user, isTyping: isTyping)))
            broadcast(.typing(user, isTyping: isTyping, draft: draft), in: id, excluding: user, state: &state)
            return .done
        case .markRead(let id, let marker):
            _ = try member(user, of: id, state: &state)
            let sequence: Int64
            switch marker {
            case .sequence(let value): sequence = value
            case .message(let messageID):
                sequence = state.conversations[id]!.messages[messageID]?.sequence ?? state.conversations[id]!.info.lastSequence ?? 0
            case .time: sequence = state.conversations[id]!.info.lastSequence ?? 0
            }
            if let index = state.conversations[id]!.info.participants.firstIndex(where: { $0.id == user }) {
                state.conversations[id]!.info.participants[index].lastReadSequence = sequence
            }
            state.records.append(Record(conversation: id, kind: .readMarker(user, sequence)))
            broadcast(.readMarker(user, .sequence(sequence)), in: id, excluding: nil, state: &state)
            return .done
        case .startConversation(let draft):
            var participants = draft.participants
            if !participants.contains(where: { $0.id == user }) {
                participants.insert(Participant(id: user, role: .customer, permissions: .owner), at: 0)
            }
            let id = ConversationID("c\(state.nextConversation)")
            state.nextConversation += 1
            let info = ConversationInfo(
                id: id,
                kind: draft.kind,
                title: draft.title,
                state: .queued,
                participants: participants,
                customData: draft.customData,
                flags: draft.flags,
                createdAt: clock.date,
                updatedAt: clock.date
            )
            state.conversations[id] = StoredConversation(info: info)
            state.order.append(id)
            append(.conversationAdded(info), to: id, state: &state)
            return .conversation(state.conversations[id]!.info)
        case .closeConversation(let id):
            let member = try member(user, of: id, state: &state)
            let newState: ConversationInfo.State = member.role == .agent ? .closedByAgent : .closedByCustomer
            setState(newState, of: id, state: &state)
            return .conversation(state.conversations[id]!.info)
        case .archiveConversation(let id):
            _ = try member(user, of: id, state: &state)
            setState(.archived, of: id, state: &state)
            return .conversation(state.conversations[id]!.info)
        case .updateConversation(let id, let changes):
            _ = try member(user, of: id, state: &state)
            var info = state.conversations[id]!.info
            if let title = changes.title { info.title = title }
            if let customData = changes.customData { info.customData = customData }
            if let isPublic = changes.isPublicJoin {
                if isPublic { info.flags.insert(.publicJoin) } else { info.flags.remove(.publicJoin) }
            }
            state.conversations[id]!.info = info
            append(.conversationUpdated(info), to: id, state: &state)
            return .conversation(state.conversations[id]!.info)
        case .rateAgent(let id, let agent, let rating, _):
            _ = try member(user, of: id, state: &state)
            guard (1...5).contains(rating) else { throw SwitchboardError(.invalidArgument, "rating \(rating) is not 1…5") }
            state.records.append(Record(conversation: id, kind: .rating(agent ?? user, rating)))
            return .done
        case .setCustomFields(let id, let fields):
            state.records.append(Record(conversation: id, kind: .customFields(user, fields)))
            return .done
        case .addParticipants(let id, let participants), .updateParticipants(let id, let participants):
            let member = try member(user, of: id, state: &state)
            guard member.permissions.canManageParticipants else {
                throw SwitchboardError(.permissionDenied, "\(user) may not manage participants", vendorCode: "19")
            }
            var info = state.conversations[id]!.info
            for participant in participants {
                if let index = info.participants.firstIndex(where: { $0.id == participant.id }) {
                    info.participants[index] = participant
                } else {
                    info.participants.append(participant)
                }
            }
            state.conversations[id]!.info = info
            let kind: BackendEvent.Kind
            if case .addParticipants = request { kind = .participantsAdded(participants) } else { kind = .participantsUpdated(participants) }
            append(kind, to: id, state: &state)
            return .conversation(state.conversations[id]!.info)
        case .removeParticipants(let id, let ids):
            let member = try member(user, of: id, state: &state)
            guard member.permissions.canManageParticipants else {
                throw SwitchboardError(.permissionDenied, "\(user) may not manage participants", vendorCode: "19")
            }
            append(.participantsRemoved(ids), to: id, state: &state)
            state.conversations[id]!.info.participants.removeAll { ids.contains($0.id) }
            return .conversation(state.conversations[id]!.info)
        case .history(let query):
            _ = try member(user, of: query.conversationID, state: &state)
            let all = state.conversations[query.conversationID]!.messages.values.sorted { ($0.sequence ?? 0) < ($1.sequence ?? 0) }
            let older: [Message]
            switch query.before {
            case nil: older = all
            case .sequence(let sequence): older = all.filter { ($0.sequence ?? 0) < sequence }
            case .time(let time): older = all.filter { $0.time < time }
            case .token(let token):
                guard let sequence = Int64(token) else { throw SwitchboardError(.invalidArgument, "bad history token") }
                older = all.filter { ($0.sequence ?? 0) < sequence }
            }
            let page = Array(older.suffix(max(0, query.limit)))
            return .history(
                HistoryPage(
                    messages: page,
                    hasMore: older.count > page.count,
                    nextAnchor: page.first?.sequence.map { .token(String($0)) }
                )
            )
        case .retransmit(let id, let range):
            _ = try member(user, of: id, state: &state)
            guard range.count <= configuration.maxRetransmitBatch else {
                throw SwitchboardError(
                    .invalidArgument,
                    "retransmit of \(range.count) events is over the limit of \(configuration.maxRetransmitBatch)",
                    vendorCode: "22"
                )
            }
            guard range.lowerBound >= 1 else { throw SwitchboardError(.invalidArgument, "sequences start at 1", vendorCode: "21") }
            let log = state.conversations[id]!.log
            return .retransmitted(log.filter { range.contains($0.sequence ?? 0) }, isComplete: true)
        case .vendor(let call):
            throw SwitchboardError(.unsupported, "the in-memory server has no vendor requests (\(call.name))")
        case .poll:
            throw SwitchboardError(.unsupported, "the in-memory server pushes its events; it has no poll")
        }
    }

    // MARK: Helpers (lock held)

    private func member(_ user: ParticipantID, of id: ConversationID, state: inout State) throws(SwitchboardError) -> Participant {
        guard let info = state.conversations[id]?.info else {
            throw SwitchboardError(.conversationNotFound, "no conversation \(id)", vendorCode: "8")
        }
        guard let member = info.participant(user) else {
            throw SwitchboardError(.permissionDenied, "\(user) is not in \(id)", vendorCode: "13")
        }
        return member
    }

    private func editable(
        _ messageID: MessageID,
        in id: ConversationID,
        by user: ParticipantID,
        all: KeyPath<Participant.Permissions, Bool>,
        own: KeyPath<Participant.Permissions, Bool>,
        state: inout State
    ) throws(SwitchboardError) -> Message {
        let member = try member(user, of: id, state: &state)
        guard let message = state.conversations[id]!.messages[messageID] else {
            throw SwitchboardError(.messageNotFound, "no message \(messageID)", vendorCode: "10")
        }
        let allowed = member.permissions[keyPath: all] || (message.sender == user && member.permissions[keyPath: own])
        guard allowed else { throw SwitchboardError(.permissionDenied, "\(user) may not change \(messageID)", vendorCode: "12") }
        return message
    }

    func newMessage(
        in id: ConversationID,
        from sender: Participant,
        clientID: ClientMessageID?,
        kind: Message.Kind,
        text: String,
        attachments: [Message.Attachment] = [],
        payload: JSONValue? = nil,
        quote: Message.Quote? = nil,
        state: inout State
    ) -> Message {
        let messageID = MessageID("m\(state.nextMessage)")
        state.nextMessage += 1
        var message = Message(
            serverID: messageID,
            clientID: clientID,
            conversationID: id,
            sequence: (state.conversations[id]!.info.lastSequence ?? 0) + 1,
            sender: sender.id,
            senderRole: sender.role,
            senderName: sender.displayName,
            kind: kind,
            text: text,
            attachments: attachments,
            payload: payload,
            time: clock.date,
            quote: quote,
            deliveryState: .sent
        )
        let event = append(.messageAdded(message, position: .newest), to: id, state: &state)
        message.sequence = event.sequence
        state.conversations[id]!.messages[messageID] = message
        if let clientID { state.conversations[id]!.byClientID[clientID] = messageID }
        return message
    }

    func setState(_ newState: ConversationInfo.State, of id: ConversationID, state: inout State) {
        let previous = state.conversations[id]!.info.state
        guard previous != newState else { return }
        state.conversations[id]!.info.state = newState
        append(.conversationStateChanged(newState, previous: previous), to: id, state: &state)
    }

    /// Appends a sequenced event to the conversation's log and sends it to the participants.
    @discardableResult
    func append(_ kind: BackendEvent.Kind, to id: ConversationID, state: inout State) -> BackendEvent {
        let recipients = Set(state.conversations[id]!.info.participants.map(\.id))
        let sequence = (state.conversations[id]!.info.lastSequence ?? 0) + 1
        let now = clock.date
        state.conversations[id]!.info.lastSequence = sequence
        state.conversations[id]!.info.updatedAt = now
        // A conversation event carries the conversation as of itself.
        var kind = kind
        switch kind {
        case .conversationAdded: kind = .conversationAdded(state.conversations[id]!.info)
        case .conversationUpdated: kind = .conversationUpdated(state.conversations[id]!.info)
        default: break
        }
        let event = BackendEvent(kind, conversation: id, sequence: sequence, time: now)
        state.conversations[id]!.log.append(event)
        let frame = InMemoryFrame.event(kind: kind.published, conversation: id, sequence: sequence, time: now).encoded()
        for (client, var entry) in state.clients where recipients.contains(entry.user) {
            deliverSequenced(frame, to: &entry, state: &state)
            state.clients[client] = entry
        }
        return event
    }

    /// Sends an unsequenced event (typing, read marker) to the participants.
    func broadcast(_ kind: BackendEvent.Kind, in id: ConversationID, excluding: ParticipantID?, state: inout State) {
        let recipients = Set(state.conversations[id]!.info.participants.map(\.id))
        let frame = InMemoryFrame.event(kind: kind.published, conversation: id, sequence: nil, time: clock.date).encoded()
        for client in state.clients.values where recipients.contains(client.user) && client.user != excluding {
            client.sink.receive(frame)
            state.deliveredFrames += 1
        }
    }

    private func deliverSequenced(_ frame: String, to client: inout Client, state: inout State) {
        let (frames, applied) = client.faults.pass(frame)
        if let applied { state.applied[applied] += 1 }
        if applied == .dropEvents { state.droppedEvents += 1 }
        for frame in frames { client.sink.receive(frame) }
        state.deliveredFrames += frames.count
    }
}

/// Where the server pushes one client's frames.
struct InMemoryClientSink: Sendable {
    var receive: @Sendable (String) -> Void
    var close: @Sendable (SwitchboardError?) -> Void
}
