import Foundation

/// What in-order events do to the stored conversations and messages: a pure function of the
/// events and the stored rows they touch.
///
/// The engine reads the rows a run of events needs (``reads(for:in:)``) in one go, then projects
/// the events one by one (``project(_:rows:into:now:)``): each returns the store writes, the
/// events to publish, the sends the server echoed and the problems, and keeps `rows` up to date
/// with its own writes, so the next event of the run sees them without a read. A row that only
/// an earlier event can tell is needed (the newest messages a read marker turns `.read`) is asked
/// for by returning the reads instead of projecting; the engine stores what was projected so
/// far, reads, and projects the same event again.
///
/// No I/O, no clock: the engine performs what the output says (writes in one `apply`, events
/// published after that is stored).
enum EventProjection {
    /// How far back a read marker turns the customer's sent messages `.read`, and how far back
    /// the user's own marker from another device recounts the unread messages.
    static let readDerivationWindow = 200

    /// What the projection needs to know of the session.
    struct Settings: Sendable {
        /// The participant the session acts as, where the backend names it (``ChatBackend/user``).
        var user: ParticipantID?
        /// The backend reports the user's unread count itself, and a conversation it reports
        /// brings its count (``BackendCapabilities/unreadCounts``); between reports the engine
        /// counts.
        var backendCountsUnread = false

        init(user: ParticipantID? = nil, backendCountsUnread: Bool = false) {
            self.user = user
            self.backendCountsUnread = backendCountsUnread
        }

        /// Whether the user sent `message` (from this app or another device).
        func isOwn(_ message: Message) -> Bool {
            message.senderRole == .customer || (user != nil && message.sender == user)
        }

        /// Whether `message`, new, is one the user has to read: someone else's, not a notice.
        func isUnread(_ message: Message) -> Bool {
            !isOwn(message) && message.senderRole != .system && message.kind != .system && !message.isDeleted
        }
    }

    /// The stored rows ``reads(for:in:)`` asked for, and the projection's writes since.
    struct Rows: Sendable {
        /// Conversations read (`nil`: the store has none) or written.
        var conversations: [ConversationID: ConversationInfo?] = [:]
        /// Conversations known to be stored whose value was not read: a message needs only that.
        var existing: Set<ConversationID> = []
        /// Messages by server id, per conversation (`nil`: the store has none).
        var byServerID: [ConversationID: [MessageID: Message?]] = [:]
        /// Messages by client id, in any conversation (`nil`: the store has none).
        var byClientID: [ClientMessageID: Message?] = [:]
        /// The ``EventProjection/readDerivationWindow`` newest messages of a conversation.
        var newest: [ConversationID: [Message]] = [:]

        init(existing: Set<ConversationID> = []) {
            self.existing = existing
        }

        /// Whether the store holds `conversation`, when that is known.
        func isStored(_ conversation: ConversationID) -> Bool? {
            if existing.contains(conversation) { return true }
            return conversations[conversation].map { $0 != nil }
        }

        /// Adds what the store answered for `reads`: a key it did not answer is absent.
        mutating func add(_ reads: Reads, conversations found: [ConversationID: ConversationInfo], messages: [Message], newest: [ConversationID: [Message]]) {
            for id in reads.conversations { conversations[id] = .some(found[id]) }
            var foundByServerID: [ConversationID: [MessageID: Message]] = [:]
            var foundByClientID: [ClientMessageID: Message] = [:]
            for message in messages {
                if let id = message.serverID { foundByServerID[message.conversationID, default: [:]][id] = message }
                if let id = message.clientID { foundByClientID[id] = message }
            }
            for (conversation, keys) in reads.messages {
                for id in keys.serverIDs { byServerID[conversation, default: [:]][id] = .some(foundByServerID[conversation]?[id]) }
                for id in keys.clientIDs { byClientID[id] = .some(foundByClientID[id]) }
            }
            for (id, messages) in newest { self.newest[id] = messages }
        }

        /// Puts a write made outside the projection in the rows.
        mutating func apply(_ write: StoreWrite) {
            switch write {
            case .saveConversation(let info): saved(info)
            case .removeConversation(let id): removed(id)
            case .saveMessages(let messages): for message in messages { saved(message) }
            case .removeMessage(let id, let conversation): removed(serverID: id, in: conversation)
            case .removeAllMessages(let conversation): removedMessages(in: conversation)
            default: break
            }
        }

        fileprivate mutating func saved(_ message: Message) {
            if let id = message.serverID { byServerID[message.conversationID, default: [:]][id] = message }
            if let id = message.clientID { byClientID[id] = message }
            newest[message.conversationID] = nil
        }

        fileprivate mutating func removed(serverID: MessageID, in conversation: ConversationID) {
            if let clientID = byServerID[conversation]?[serverID]??.clientID { byClientID[clientID] = .some(nil) }
            byServerID[conversation, default: [:]][serverID] = .some(nil)
            newest[conversation] = nil
        }

        fileprivate mutating func removedMessages(in conversation: ConversationID) {
            if let known = byServerID[conversation] {
                byServerID[conversation] = known.mapValues { _ in nil }
            }
            for (id, message) in byClientID where message?.conversationID == conversation { byClientID[id] = .some(nil) }
            newest[conversation] = []
        }

        fileprivate mutating func saved(_ info: ConversationInfo) {
            conversations[info.id] = info
        }

        fileprivate mutating func removed(_ conversation: ConversationID) {
            conversations[conversation] = .some(nil)
            existing.remove(conversation)
            removedMessages(in: conversation)
        }
    }

    /// Rows to read before projecting.
    struct Reads: Sendable, Hashable {
        struct Keys: Sendable, Hashable {
            var serverIDs: Set<MessageID> = []
            var clientIDs: Set<ClientMessageID> = []
        }

        /// Conversations whose value is needed.
        var conversations: Set<ConversationID> = []
        /// Messages by key, per conversation (client ids are looked up in any conversation).
        var messages: [ConversationID: Keys] = [:]
        /// Conversations whose newest ``EventProjection/readDerivationWindow`` messages are needed.
        var newest: Set<ConversationID> = []

        var isEmpty: Bool { conversations.isEmpty && messages.isEmpty && newest.isEmpty }
    }

    /// An event to publish once the writes before it are stored.
    struct Publication: Sendable, Hashable {
        var kind: ChatEvent.Kind
        var conversation: ConversationID?
        var sequence: Int64?
        var time: Date?
    }

    /// What projecting events produced, in order.
    struct Output: Sendable {
        var writes: [StoreWrite] = []
        var publications: [Publication] = []
        /// Client ids of the app's sends that came back from the server (their outbox entries end).
        var echoed: [ClientMessageID] = []
        /// Conversations the store was found or made to hold (`true`) or that were removed (`false`), in order.
        var stored: [(ConversationID, Bool)] = []
        /// Events that changed nothing.
        var duplicates = 0
        /// Conversations this run added, with the activity the backend reported for them then (or
        /// reported with a count of their own): the messages up to it that come with them are
        /// their history, or counted already, not news.
        var historyUntil: [ConversationID: Date] = [:]
        /// Where each conversation's write is in ``writes`` (one per conversation and run).
        var conversationWrites: [ConversationID: Int] = [:]
        var problems: [(SwitchboardError, ConversationID?)] = []

        fileprivate mutating func publish(_ kind: ChatEvent.Kind, _ conversation: ConversationID?, of event: BackendEvent) {
            publications.append(Publication(kind: kind, conversation: conversation, sequence: event.sequence, time: event.time))
        }

        /// Publishes the adapter's event as it came.
        fileprivate mutating func publish(_ event: BackendEvent, in conversation: ConversationID?) {
            publish(event.kind.published, conversation, of: event)
        }
    }

    /// What `projected` says about the run `events`: projected in full, or a read is needed first.
    enum Step: Sendable, Equatable {
        case projected
        case needs(Reads)
    }

    // MARK: Reads

    /// The rows `events` need that `rows` does not hold: one read for a whole run of events.
    static func reads(for events: some Sequence<BackendEvent>, in rows: Rows) -> Reads {
        var reads = Reads()
        for event in events {
            let conversation = event.conversationID
            switch event.kind {
            case .messageAdded(let message, let position):
                // A new message moves its conversation's activity and unread count: the
                // conversation's value is needed, not only that it is stored.
                let conversation = conversation ?? message.conversationID
                if position == .newest ? rows.conversations[conversation] == nil : rows.isStored(conversation) == nil {
                    reads.conversations.insert(conversation)
                }
                if let id = message.serverID, rows.byServerID[conversation]?[id] == nil {
                    reads.messages[conversation, default: Reads.Keys()].serverIDs.insert(id)
                }
                if let id = message.clientID, rows.byClientID[id] == nil {
                    reads.messages[conversation, default: Reads.Keys()].clientIDs.insert(id)
                }
            case .messageUpdated(let message):
                let conversation = conversation ?? message.conversationID
                if rows.isStored(conversation) == nil { reads.conversations.insert(conversation) }
                if let id = message.serverID, rows.byServerID[conversation]?[id] == nil {
                    reads.messages[conversation, default: Reads.Keys()].serverIDs.insert(id)
                }
                if let id = message.clientID, rows.byClientID[id] == nil {
                    reads.messages[conversation, default: Reads.Keys()].clientIDs.insert(id)
                }
                // A deletion may lower its unread count.
                if message.isDeleted, rows.conversations[conversation] == nil { reads.conversations.insert(conversation) }
            case .messageRemoved(let id):
                if let conversation, rows.byServerID[conversation]?[id] == nil {
                    reads.messages[conversation, default: Reads.Keys()].serverIDs.insert(id)
                }
                // Its unread count, which the removal may lower.
                if let conversation, rows.conversations[conversation] == nil { reads.conversations.insert(conversation) }
            case .conversationAdded(let info), .conversationUpdated(let info):
                if rows.conversations[info.id] == nil { reads.conversations.insert(info.id) }
            case .conversationStateChanged, .agentChanged, .participantsAdded, .participantsUpdated, .participantsRemoved:
                if let conversation, rows.conversations[conversation] == nil { reads.conversations.insert(conversation) }
            case .readMarker(_, let marker):
                guard let conversation else { break }
                if rows.conversations[conversation] == nil { reads.conversations.insert(conversation) }
                if case .message(let id) = marker, rows.byServerID[conversation]?[id] == nil {
                    reads.messages[conversation, default: Reads.Keys()].serverIDs.insert(id)
                }
            default:
                break
            }
        }
        return reads
    }

    /// The part of `reads` that `rows` does not hold.
    static func reads(missingFrom rows: Rows, of reads: Reads) -> Reads {
        var missing = Reads()
        missing.conversations = reads.conversations.filter { rows.conversations[$0] == nil }
        for (conversation, keys) in reads.messages {
            let serverIDs = keys.serverIDs.filter { rows.byServerID[conversation]?[$0] == nil }
            let clientIDs = keys.clientIDs.filter { rows.byClientID[$0] == nil }
            if !serverIDs.isEmpty || !clientIDs.isEmpty { missing.messages[conversation] = Reads.Keys(serverIDs: serverIDs, clientIDs: clientIDs) }
        }
        missing.newest = reads.newest.filter { rows.newest[$0] == nil }
        return missing
    }

    // MARK: Projection

    /// Projects one in-order event onto `rows`, adding what it does to `output`; or, when it needs
    /// a row `rows` does not hold, changes nothing and names the reads.
    static func project(_ event: BackendEvent, rows: inout Rows, into output: inout Output, now: Date, settings: Settings = Settings()) -> Step {
        let missing = reads(for: CollectionOfOne(event), in: rows)
        if !missing.isEmpty { return .needs(missing) }
        let conversation = event.conversationID
        guard conversation != nil || !event.kind.needsConversation else {
            output.problems.append((SwitchboardError(.protocolViolation, "\(event.kind.category) event without a conversation"), nil))
            return .projected
        }
        switch event.kind {
        case .messageAdded(var message, let position):
            if let conversation { message.conversationID = conversation }
            projectMessage(message, position: position, of: event, rows: &rows, into: &output, now: now, settings: settings)
        case .messageUpdated(var message):
            if let conversation { message.conversationID = conversation }
            if message.isDeleted, let id = message.serverID, let stored = rows.byServerID[message.conversationID]?[id] ?? nil, !stored.isDeleted,
                let reads = lowerUnread(for: stored, in: message.conversationID, rows: &rows, into: &output, settings: settings)
            {
                return .needs(reads)
            }
            projectMessage(message, position: nil, of: event, rows: &rows, into: &output, now: now, settings: settings)
        case .messageRemoved(let id):
            guard let removed = rows.byServerID[conversation!]?[id] ?? nil else { return .projected }
            if let reads = lowerUnread(for: removed, in: conversation!, rows: &rows, into: &output, settings: settings) { return .needs(reads) }
            output.writes.append(.removeMessage(id, in: conversation!))
            rows.removed(serverID: id, in: conversation!)
            output.publish(event, in: conversation)
        case .historyCleared:
            output.writes.append(.removeAllMessages(in: conversation!))
            rows.removedMessages(in: conversation!)
            output.publish(event, in: conversation)
        case .conversationAdded(let info), .conversationUpdated(let info):
            projectConversation(info, of: event, rows: &rows, into: &output, settings: settings)
        case .conversationRemoved:
            output.writes.append(.removeConversation(conversation!))
            output.conversationWrites[conversation!] = nil
            rows.removed(conversation!)
            output.stored.append((conversation!, false))
            output.publish(event, in: conversation)
        case .conversationStateChanged(let state, _):
            var info = known(conversation!, of: event, rows: &rows, into: &output, now: now)
            let previous = info.state
            guard previous != state else { return .projected }
            info.state = state
            save(info, rows: &rows, into: &output)
            output.publish(.conversationStateChanged(state, previous: previous), conversation, of: event)
        case .agentChanged(let agent):
            var info = known(conversation!, of: event, rows: &rows, into: &output, now: now)
            info.assignedAgent = agent
            save(info.withAssignedAgentAsParticipant(), rows: &rows, into: &output)
            output.publish(event, in: conversation)
        case .participantsAdded(let participants), .participantsUpdated(let participants):
            var info = known(conversation!, of: event, rows: &rows, into: &output, now: now)
            for participant in participants {
                if let index = info.participants.firstIndex(where: { $0.id == participant.id }) {
                    info.participants[index] = participant
                } else {
                    info.participants.append(participant)
                }
            }
            save(info, rows: &rows, into: &output)
            output.publish(event, in: conversation)
        case .participantsRemoved(let ids):
            var info = known(conversation!, of: event, rows: &rows, into: &output, now: now)
            info.participants.removeAll { ids.contains($0.id) }
            save(info, rows: &rows, into: &output)
            output.publish(event, in: conversation)
        case .readMarker(let participant, let marker):
            return projectReadMarker(marker, of: participant, in: conversation!, event: event, rows: &rows, into: &output, settings: settings)
        default:
            output.publish(event, in: conversation)
        }
        return .projected
    }

    /// Lowers the conversation's unread count when `gone` (removed, or deleted in place) was one
    /// of the unread: those are the newest messages from others. Returns the read to make first
    /// when the newest window is not at hand; nothing changes until then.
    private static func lowerUnread(
        for gone: Message,
        in conversation: ConversationID,
        rows: inout Rows,
        into output: inout Output,
        settings: Settings
    ) -> Reads? {
        guard var info = rows.conversations[conversation] ?? nil, info.unreadCount > 0, !settings.backendCountsUnread, settings.isUnread(gone),
            let id = gone.serverID
        else { return nil }
        guard let newest = rows.newest[conversation] else {
            var reads = Reads()
            reads.newest = [conversation]
            return reads
        }
        if newest.filter({ settings.isUnread($0) && $0.serverID != nil }).suffix(info.unreadCount).contains(where: { $0.serverID == id }) {
            info.unreadCount -= 1
            save(info, rows: &rows, into: &output)
        }
        return nil
    }

    private static func projectMessage(
        _ message: Message,
        position: ChatEvent.MessagePosition?,
        of event: BackendEvent,
        rows: inout Rows,
        into output: inout Output,
        now: Date,
        settings: Settings
    ) {
        let conversation = message.conversationID
        if !rows.existing.contains(conversation) || position == .newest { _ = known(conversation, of: event, rows: &rows, into: &output, now: now) }
        let byServerID = message.serverID.flatMap { rows.byServerID[conversation]?[$0] ?? nil }
        let byClientID = message.clientID.flatMap { rows.byClientID[$0] ?? nil }
        // A history page is older information than whatever the store holds: it only fills in.
        if position == .history, byServerID != nil {
            output.duplicates += 1
            return
        }
        switch MessageReconciler.reconcile(message, byServerID: byServerID, byClientID: byClientID) {
        case .insert(let message):
            output.writes.append(.saveMessages([message]))
            rows.saved(message)
            let kind: ChatEvent.Kind = position.map { .messageAdded(message, position: $0) } ?? .messageUpdated(message)
            // A new message moves its conversation (a newer copy of one never seen too, without
            // counting); a page of history does not.
            if position != .history { arrived(message, in: conversation, counts: position == .newest, rows: &rows, into: &output, settings: settings) }
            output.publish(kind, conversation, of: event)
        case .update(_, let merged):
            output.writes.append(.saveMessages([merged]))
            rows.saved(merged)
            if position != .history { arrived(merged, in: conversation, counts: false, rows: &rows, into: &output, settings: settings) }
            output.publish(.messageUpdated(merged), conversation, of: event)
        case .duplicate:
            output.duplicates += 1
        }
        if let clientID = message.clientID, message.serverID != nil { output.echoed.append(clientID) }
    }

    /// A new message (or a newer copy of one) moves its conversation: its activity, its newest
    /// sequence and message (when it is the newest), and, when it is news from someone else, its
    /// unread count.
    private static func arrived(
        _ message: Message,
        in conversation: ConversationID,
        counts: Bool = true,
        rows: inout Rows,
        into output: inout Output,
        settings: Settings
    ) {
        guard var info = rows.conversations[conversation] ?? nil else { return }
        let old = info
        if let sequence = message.sequence, sequence > (info.lastSequence ?? .min) { info.lastSequence = sequence }
        if message.time >= (info.lastMessage?.time ?? .distantPast) {
            info.lastMessage = MessagePreview(message, isOwn: settings.isOwn(message))
            if message.time > (info.updatedAt ?? .distantPast) { info.updatedAt = message.time }
        }
        // A message older than the newest one from others already there is one the backend shows
        // again (a recovery of a thread known by its last message), not news.
        let newestFromOthers = old.lastMessage.flatMap { $0.isOwn ? nil : $0.time } ?? .distantPast
        if counts, message.time > (output.historyUntil[conversation] ?? .distantPast), message.time >= newestFromOthers, settings.isUnread(message),
            isAfterOwnMarker(message, in: info, settings: settings)
        {
            info.unreadCount += 1
        }
        guard info != old else { return }
        save(info, rows: &rows, into: &output)
    }

    /// Whether `message` comes after the user's own read marker, where the conversation keeps one
    /// (a sequenced backend's participants carry theirs): a conversation's catch-up below it is
    /// read already.
    private static func isAfterOwnMarker(_ message: Message, in info: ConversationInfo, settings: Settings) -> Bool {
        guard let user = settings.user, let sequence = message.sequence, let read = info.participant(user)?.lastReadSequence else { return true }
        return sequence > read
    }

    private static func projectConversation(_ info: ConversationInfo, of event: BackendEvent, rows: inout Rows, into output: inout Output, settings: Settings) {
        var info = info.withAssignedAgentAsParticipant()
        // A backend that counts reports a count that takes in the messages that come with it.
        if settings.backendCountsUnread { output.historyUntil[info.id] = .distantFuture }
        if let old = rows.conversations[info.id] ?? nil {
            // What the engine keeps from the messages stays unless the backend says more.
            if !settings.backendCountsUnread { info.unreadCount = old.unreadCount }
            if let oldSequence = old.lastSequence, oldSequence > (info.lastSequence ?? .min) { info.lastSequence = oldSequence }
            if let oldTime = old.updatedAt, oldTime > (info.updatedAt ?? .distantPast) { info.updatedAt = oldTime }
            if let oldLast = old.lastMessage, oldLast.time >= (info.lastMessage?.time ?? .distantPast) { info.lastMessage = oldLast }
            let changes = SnapshotDiff.conversationChanges(from: old, to: info)
            guard !changes.isEmpty else {
                output.duplicates += 1
                return
            }
            save(info, rows: &rows, into: &output)
            for change in changes { output.publish(change.kind.published, info.id, of: event) }
        } else {
            if let activity = info.updatedAt { output.historyUntil[info.id] = max(activity, output.historyUntil[info.id] ?? .distantPast) }
            // A backend that does not count reports no count: the engine's starts here.
            if !settings.backendCountsUnread { info.unreadCount = 0 }
            save(info, rows: &rows, into: &output)
            output.publish(.conversationAdded(info), info.id, of: event)
        }
    }

    /// A read marker is stored and announced; a read marker of a participant it names takes its
    /// place, and one from the other side of a support chat or thread turns the customer's
    /// messages up to it `.read` (peer conversations keep their markers as events only).
    private static func projectReadMarker(
        _ marker: ChatEvent.ReadMarker,
        of participant: ParticipantID,
        in conversation: ConversationID,
        event: BackendEvent,
        rows: inout Rows,
        into output: inout Output,
        settings: Settings
    ) -> Step {
        let info = rows.conversations[conversation] ?? nil
        // The user's own marker, set on another device (or echoed): what is unread is what came
        // after it from others.
        let isOwn = info.map { info in
            participant == settings.user || info.participant(participant)?.role == .customer
        } ?? false
        // An agent's marker reads the customer's messages; the customer's own reads none of them
        // (a thread may list only its agents, so the customer is known by `isOwn`, not the list).
        let derives =
            !isOwn
            && (info.map { info in
                (info.kind == .supportChat || info.kind == .thread)
                    && info.participants.first(where: { $0.id == participant })?.role != .customer
            } ?? false)
        let isWithinMarker = derives ? readTest(marker, orderKey: { rows.byServerID[conversation]?[$0]??.orderKey }) : nil
        if isOwn || isWithinMarker != nil, rows.newest[conversation] == nil {
            var reads = Reads()
            reads.newest = [conversation]
            return .needs(reads)
        }
        output.writes.append(.saveReadMarker(marker, of: participant, in: conversation))
        if var info {
            let old = info
            if case .sequence(let sequence) = marker, let index = info.participants.firstIndex(where: { $0.id == participant }) {
                info.participants[index].lastReadSequence = sequence
            }
            if isOwn, let newest = rows.newest[conversation], let count = unread(in: newest, after: marker, settings: settings) {
                info.unreadCount = count
            }
            if info != old { save(info, rows: &rows, into: &output) }
        }
        output.publish(event, in: conversation)
        guard let isWithinMarker, let newest = rows.newest[conversation] else { return .projected }
        let nowRead = newest.filter {
            $0.senderRole == .customer && $0.serverID != nil && ($0.deliveryState == .sent || $0.deliveryState == .delivered) && isWithinMarker($0)
        }.map { message -> Message in
            var message = message
            message.deliveryState = .read
            return message
        }
        guard !nowRead.isEmpty else { return .projected }
        output.writes.append(.saveMessages(nowRead))
        for message in nowRead {
            rows.saved(message)
            output.publications.append(Publication(kind: .messageUpdated(message), conversation: conversation, sequence: nil, time: event.time))
        }
        return .projected
    }

    /// How many of `newest` (oldest first) came from others after the user's `marker`; `nil` for
    /// a marker on an event `newest` does not hold (a Matrix receipt on a membership change, a
    /// message older than the window), which says nothing of what is unread.
    static func unread(in newest: [Message], after marker: ChatEvent.ReadMarker, settings: Settings) -> Int? {
        guard let isRead = readTest(marker, orderKey: { id in newest.first { $0.serverID == id }?.orderKey }) else { return nil }
        return unread(in: newest, settings: settings, isRead: isRead)
    }

    /// How many of `newest` came from others and are not `isRead`.
    static func unread(in newest: [Message], settings: Settings, isRead: (Message) -> Bool = { _ in false }) -> Int {
        newest.filter { settings.isUnread($0) && $0.serverID != nil && !isRead($0) }.count
    }

    /// Whether a message is at or before `marker`; `nil` for a marker on a message whose place
    /// `orderKey` does not know.
    private static func readTest(_ marker: ChatEvent.ReadMarker, orderKey: (MessageID) -> MessageOrderKey?) -> ((Message) -> Bool)? {
        switch marker {
        case .sequence(let sequence): return { ($0.sequence ?? .max) <= sequence }
        case .time(let date): return { $0.time <= date }
        case .message(let id):
            guard let key = orderKey(id) else { return nil }
            return { $0.orderKey <= key }
        }
    }

    /// The stored conversation, or a new minimal one (announced as added) when an event names a
    /// conversation the backend never announced.
    private static func known(_ id: ConversationID, of event: BackendEvent, rows: inout Rows, into output: inout Output, now: Date) -> ConversationInfo {
        if rows.existing.insert(id).inserted { output.stored.append((id, true)) }
        if let info = rows.conversations[id] ?? nil { return info }
        let info = ConversationInfo(id: id, createdAt: event.time ?? now)
        save(info, rows: &rows, into: &output)
        output.publications.append(Publication(kind: .conversationAdded(info), conversation: id, sequence: nil, time: event.time))
        return info
    }

    private static func save(_ info: ConversationInfo, rows: inout Rows, into output: inout Output) {
        // One write per conversation in a run, where it was first written, with its last value:
        // each message of a catch-up moves its conversation.
        if let index = output.conversationWrites[info.id] {
            output.writes[index] = .saveConversation(info)
        } else {
            output.conversationWrites[info.id] = output.writes.count
            output.writes.append(.saveConversation(info))
        }
        rows.saved(info)
    }
}

extension BackendEvent.Kind {
    /// Whether an event of this kind means nothing without a conversation.
    fileprivate var needsConversation: Bool {
        switch self {
        case .messageRemoved, .historyCleared, .conversationRemoved, .conversationStateChanged, .agentChanged, .participantsAdded,
            .participantsUpdated, .participantsRemoved, .readMarker:
            true
        default:
            false
        }
    }
}
