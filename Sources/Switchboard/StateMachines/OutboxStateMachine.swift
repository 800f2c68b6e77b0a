import DequeModule
public import Foundation

/// One send waiting in the outbox. Stored before anything goes on the wire, so it survives a
/// lost link and a restart of the process (with a durable store).
public struct OutboxEntry: Sendable, Hashable, Codable {
    public var message: OutgoingMessage
    public var createdAt: Date
    /// Attempts that failed transiently so far.
    public var attempts: Int
    /// Attempts during which the link died before the server answered: a send that keeps
    /// killing the link (the server drops the socket on it) fails after
    /// ``SessionConfiguration/maxLinkLossesPerSend`` of them instead of blocking its conversation.
    public var linkLosses: Int

    public init(message: OutgoingMessage, createdAt: Date, attempts: Int = 0, linkLosses: Int = 0) {
        self.message = message
        self.createdAt = createdAt
        self.attempts = attempts
        self.linkLosses = linkLosses
    }

    private enum CodingKeys: String, CodingKey {
        case message, createdAt, attempts, linkLosses
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.message = try container.decode(OutgoingMessage.self, forKey: .message)
        self.createdAt = try container.decode(Date.self, forKey: .createdAt)
        self.attempts = try container.decodeIfPresent(Int.self, forKey: .attempts) ?? 0
        // Entries stored before this field existed have none.
        self.linkLosses = try container.decodeIfPresent(Int.self, forKey: .linkLosses) ?? 0
    }

    public var clientID: ClientMessageID { message.clientID }
    public var conversationID: ConversationID { message.conversationID }

    /// The message as it is shown while it waits: pending, at the time the send was made.
    public var pendingMessage: Message {
        let content = message.content
        return Message(
            clientID: clientID, conversationID: conversationID, kind: content.kind, text: content.text,
            // The bytes of a file sent from memory stay with the entry, not in the message.
            attachments: content.attachments.map(\.withoutData),
            payload: content.payload, time: createdAt, quote: content.quote,
            deliveryState: .pending
        )
    }
}

/// The outbox's rules: FIFO per conversation, one send in flight per conversation, sent only
/// while connected, retried with the same client id after transient failures (with backoff),
/// failed for good on a permanent rejection, done when the server confirms it (by reply or by
/// echo, whichever comes first).
struct OutboxStateMachine: Sendable {
    enum Action: Sendable, Hashable {
        /// Perform the send.
        case send(OutboxEntry)
        /// The server has it: drop the entry from the store.
        case complete(OutboxEntry)
        /// Refused for good: drop the entry, mark the message failed with the reason.
        case fail(OutboxEntry, reason: String)
        /// Persist the entry's new attempt count.
        case persist(OutboxEntry)
        /// Call ``retryTimerFired(_:)`` for the conversation after the delay.
        case scheduleRetry(ConversationID, after: Duration)

    }

    let backoff: BackoffPolicy
    /// How many times the link may die under one send before the send fails.
    let maxLinkLosses: Int
    private var queues: [ConversationID: Deque<OutboxEntry>] = [:]
    private var order: [ConversationID] = []
    private var inFlight: Set<ConversationID> = []
    private var waitingForRetry: Set<ConversationID> = []
    /// Sends that have counted a link loss on the current link: a link counts once per send,
    /// however often the send's own requests fail on it (a Webim action is a request of its own,
    /// retried within the link).
    private var lossCountedOnThisLink: Set<ClientMessageID> = []
    private(set) var isConnected = false

    init(backoff: BackoffPolicy = BackoffPolicy(), maxLinkLosses: Int = 5) {
        self.backoff = backoff
        self.maxLinkLosses = max(1, maxLinkLosses)
    }

    /// Every entry still waiting, FIFO per conversation.
    var entries: [OutboxEntry] { order.flatMap { queues[$0].map(Array.init) ?? [] } }
    var isEmpty: Bool { queues.values.allSatisfy(\.isEmpty) }

    /// Puts back entries loaded from the store after a restart, oldest first.
    mutating func restore(_ entries: [OutboxEntry]) {
        for entry in entries.sorted(by: { $0.createdAt < $1.createdAt }) {
            append(entry)
        }
    }

    /// Replaces every queued entry with `entries`, what the store holds after a write that had
    /// moved the queue in memory failed (``SessionStateMachine/reloadOutbox(_:)``). A send on the
    /// wire stays at the head of its conversation, as ``pump(_:)`` and ``confirm(_:)`` expect, until
    /// the link's results are in (``disconnected(interrupting:)``); a conversation waiting for a
    /// retry keeps waiting for its timer.
    mutating func reload(_ entries: [OutboxEntry]) {
        let onTheWire = Set(order.compactMap { conversation in inFlight.contains(conversation) ? queues[conversation]?.first?.clientID : nil })
        queues.removeAll()
        order.removeAll()
        for entry in entries where onTheWire.contains(entry.clientID) { append(entry) }
        restore(entries)
    }

    mutating func enqueue(_ entry: OutboxEntry) -> [Action] {
        append(entry)
        return pump(entry.conversationID)
    }

    mutating func connected() -> [Action] {
        isConnected = true
        waitingForRetry.removeAll()
        lossCountedOnThisLink.removeAll()
        return order.flatMap { pump($0) }
    }

    /// The link is gone and every result from it has been reported. A send still marked in
    /// flight never got a result (its job died with the link): it goes again, with the same
    /// client id, on the next link. The sends in `interrupting` were on the wire when the link
    /// failed: each counts a link loss (unless its own failure on this link counted one), and one at
    /// ``maxLinkLosses`` fails.
    @discardableResult
    mutating func disconnected(interrupting interrupted: Set<ClientMessageID> = []) -> [Action] {
        isConnected = false
        inFlight.removeAll()
        waitingForRetry.removeAll()
        var actions: [Action] = []
        for clientID in interrupted.sorted(by: { $0.rawValue < $1.rawValue }) where !lossCountedOnThisLink.contains(clientID) {
            actions += countLinkLoss(clientID)
        }
        lossCountedOnThisLink.removeAll()
        return actions
    }

    /// The server accepted the send.
    mutating func succeeded(_ clientID: ClientMessageID) -> [Action] {
        confirm(clientID)
    }

    /// The server's echo of a message arrived; if it is still queued, it is done.
    mutating func echoed(_ clientID: ClientMessageID) -> [Action] {
        confirm(clientID)
    }

    mutating func failed<G: RandomNumberGenerator>(
        _ clientID: ClientMessageID,
        error: SwitchboardError,
        using generator: inout G
    ) -> [Action] {
        guard let (conversation, index) = locate(clientID) else { return [] }
        inFlight.remove(conversation)
        var entry = queues[conversation]![index]
        if error.isConnectionLost, lossCountedOnThisLink.insert(clientID).inserted {
            // The link died under the send: a link loss. One too many fails the send.
            entry.linkLosses += 1
            if entry.linkLosses >= maxLinkLosses {
                queues[conversation]!.remove(at: index)
                return [.fail(entry, reason: Self.linkLossReason(entry))] + pump(conversation)
            }
        }
        if error.isTransient || error.isAuthenticationFailure {
            entry.attempts += 1
            queues[conversation]![index] = entry
            var actions: [Action] = [.persist(entry)]
            if isConnected {
                var delay = backoff.delay(forAttempt: entry.attempts - 1, using: &generator)
                if let retryAfter = error.retryAfter, retryAfter > delay { delay = retryAfter }
                waitingForRetry.insert(conversation)
                actions.append(.scheduleRetry(conversation, after: delay))
            }
            return actions
        }
        queues[conversation]!.remove(at: index)
        return [.fail(entry, reason: error.message)] + pump(conversation)
    }

    /// Fails every waiting send created before `deadline` (the session's expiry ago) with reason
    /// `expired`; a send in flight is left to its result.
    mutating func expire(createdBefore deadline: Date) -> [Action] {
        var actions: [Action] = []
        for conversation in order {
            guard let queue = queues[conversation] else { continue }
            let first = inFlight.contains(conversation) ? 1 : 0
            let expired = queue.dropFirst(first).filter { $0.createdAt < deadline }
            guard !expired.isEmpty else { continue }
            let ids = Set(expired.map(\.clientID))
            queues[conversation]!.removeAll { entry in ids.contains(entry.clientID) }
            actions += expired.map { .fail($0, reason: "expired") }
            if first == 0 { waitingForRetry.remove(conversation) }
        }
        return actions
    }

    mutating func retryTimerFired(_ conversation: ConversationID) -> [Action] {
        waitingForRetry.remove(conversation)
        return pump(conversation)
    }

    private static func linkLossReason(_ entry: OutboxEntry) -> String {
        "the connection closed \(entry.linkLosses) times while this message was being sent"
    }

    private mutating func countLinkLoss(_ clientID: ClientMessageID) -> [Action] {
        guard let (conversation, index) = locate(clientID) else { return [] }
        var entry = queues[conversation]![index]
        entry.linkLosses += 1
        if entry.linkLosses >= maxLinkLosses {
            queues[conversation]!.remove(at: index)
            return [.fail(entry, reason: Self.linkLossReason(entry))]
        }
        queues[conversation]![index] = entry
        return [.persist(entry)]
    }

    private mutating func append(_ entry: OutboxEntry) {
        if queues[entry.conversationID] == nil {
            queues[entry.conversationID] = []
            order.append(entry.conversationID)
        }
        if queues[entry.conversationID]!.contains(where: { $0.clientID == entry.clientID }) { return }
        queues[entry.conversationID]!.append(entry)
    }

    private mutating func confirm(_ clientID: ClientMessageID) -> [Action] {
        guard let (conversation, index) = locate(clientID) else { return [] }
        let entry = queues[conversation]!.remove(at: index)
        if index == 0 { inFlight.remove(conversation) }
        return [.complete(entry)] + pump(conversation)
    }

    private func locate(_ clientID: ClientMessageID) -> (ConversationID, Int)? {
        for (conversation, queue) in queues {
            if let index = queue.firstIndex(where: { $0.clientID == clientID }) { return (conversation, index) }
        }
        return nil
    }

    private mutating func pump(_ conversation: ConversationID) -> [Action] {
        guard isConnected, !inFlight.contains(conversation), !waitingForRetry.contains(conversation),
            let head = queues[conversation]?.first
        else { return [] }
        inFlight.insert(conversation)
        return [.send(head)]
    }
}
