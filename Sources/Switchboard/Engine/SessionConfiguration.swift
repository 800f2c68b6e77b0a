/// How a session behaves; every field has a sensible default.
public struct SessionConfiguration: Sendable, Hashable {
    /// Reconnect delays.
    public var reconnectBackoff: BackoffPolicy
    /// Delays between resends of one outbox message after transient failures.
    public var outboxBackoff: BackoffPolicy
    /// How long out-of-order events wait for a gap to fill before the missing range is asked
    /// for again.
    public var holdTimeout: Duration
    /// Overrides the backend's typing policy.
    public var typingPolicy: TypingPolicy?
    /// How long a send may wait in the outbox (offline, or retrying) before it fails with reason
    /// `expired` instead of landing hours late out of context; `nil` waits for ever. Stream
    /// Chat's offline queue drops after 12 h, the default here; the app sees the failure.
    public var outboxExpiry: Duration?
    /// How many times the link may die while one send is on the wire before that send fails
    /// (a message the server drops the socket on would otherwise block its conversation and
    /// storm the server).
    public var maxLinkLossesPerSend: Int
    /// Requests in flight at once across conversations; within a conversation they go one at a
    /// time, in order.
    public var maxConcurrentRequests: Int
    /// Inbound updates the engine buffers before the link's reader waits (flow control).
    public var inboundWindow: Int
    /// How many inbound updates that arrived together the engine stores in one transaction.
    public var maxUpdatesPerTransaction: Int
    /// How long a link must stay up (after its first update) for the reconnect backoff to start
    /// afresh; a request carried through also proves it. A link that dies sooner keeps backing off.
    public var stableLinkDuration: Duration
    /// How many of its newest events a conversation first seen is caught up with by
    /// retransmit; older ones are history, paged on demand.
    public var newConversationCatchUp: Int
    /// Retransmits asked for at once per conversation.
    public var maxRetransmitsInFlight: Int
    /// Out-of-order events held back per conversation; past that they are asked for again later.
    public var maxHeldEvents: Int
    /// How far past the delivered sequence an event may be before it is refused as a problem.
    public var maxSequenceJump: Int64
    /// For backends without sequences: how many history pages the engine fetches to close the
    /// gap below a conversation's recent window after a reconnect (see
    /// `WindowBackfillStateMachine`), and how many messages it asks for per page. A gap
    /// deeper than that is reported as a problem; older messages then come by history paging.
    public var maxBackfillPages: Int
    public var backfillPageSize: Int
    /// For backends that push nothing (``SyncModel/polled``): how often the engine asks for
    /// changes while a link is up (it asks once when a link opens, and when the app calls
    /// ``Session/refresh(forced:)``).
    public var pollInterval: Duration
    /// For backends whose links open with a window (``SyncModel/windowed(pageSize:)``): how long
    /// the engine holds a link's live events waiting for its first snapshot. A link that sends
    /// none in this time has its events applied as they came, with a warning in the log.
    public var windowTimeout: Duration

    public init(
        reconnectBackoff: BackoffPolicy = BackoffPolicy(),
        outboxBackoff: BackoffPolicy = BackoffPolicy(initial: .seconds(1), maximum: .seconds(30)),
        holdTimeout: Duration = .seconds(2),
        typingPolicy: TypingPolicy? = nil,
        outboxExpiry: Duration? = .seconds(12 * 3600),
        maxLinkLossesPerSend: Int = 5,
        maxConcurrentRequests: Int = 8,
        inboundWindow: Int = 256,
        maxUpdatesPerTransaction: Int = 64,
        stableLinkDuration: Duration = .seconds(10),
        newConversationCatchUp: Int = 100,
        maxRetransmitsInFlight: Int = 10,
        maxHeldEvents: Int = 1000,
        maxSequenceJump: Int64 = 1_000_000,
        maxBackfillPages: Int = 500,
        backfillPageSize: Int = 50,
        pollInterval: Duration = .seconds(30),
        windowTimeout: Duration = .seconds(30)
    ) {
        self.reconnectBackoff = reconnectBackoff
        self.outboxBackoff = outboxBackoff
        self.holdTimeout = holdTimeout
        self.typingPolicy = typingPolicy
        self.outboxExpiry = outboxExpiry
        self.maxLinkLossesPerSend = max(1, maxLinkLossesPerSend)
        self.maxConcurrentRequests = max(1, maxConcurrentRequests)
        self.inboundWindow = max(1, inboundWindow)
        self.maxUpdatesPerTransaction = max(1, maxUpdatesPerTransaction)
        self.stableLinkDuration = stableLinkDuration
        self.newConversationCatchUp = max(0, newConversationCatchUp)
        self.maxRetransmitsInFlight = max(1, maxRetransmitsInFlight)
        self.maxHeldEvents = max(1, maxHeldEvents)
        self.maxSequenceJump = max(1, maxSequenceJump)
        self.maxBackfillPages = max(1, maxBackfillPages)
        self.backfillPageSize = max(1, backfillPageSize)
        self.pollInterval = max(.milliseconds(1), pollInterval)
        self.windowTimeout = max(.milliseconds(1), windowTimeout)
    }
}

/// Counters of what the engine did; tests and the demo print them as proof.
public struct SessionStatistics: Sendable, Hashable, Codable {
    public var connects = 0
    public var connectionFailures = 0
    public var eventsPublished = 0
    public var duplicatesDropped = 0
    /// Conversations started over because the server had forgotten their events (its numbering
    /// moved back: a restart without its data).
    public var resynchronizations = 0
    public var gapsDetected = 0
    public var retransmitRequests = 0
    /// History pages asked for to close the gap below a recent window (backends without
    /// sequences).
    public var backfillRequests = 0
    /// Polls of a backend that pushes nothing (timed, on connect, and the app's refreshes).
    public var polls = 0
    public var retransmittedEvents = 0
    public var heldBack = 0
    /// Out-of-order events not held because the buffer was full (asked for again).
    public var heldOverflow = 0
    public var messagesSent = 0
    /// New messages from the server as they arrive: others' messages, and the user's own from
    /// another device; not history pages, and not this session's sends, which come back as
    /// updates. Counted when handled, before their transaction is stored.
    public var messagesReceived = 0
    public var sendRetries = 0
    /// Send attempts that got no confirmation: refused, failed, or cut off by a lost link.
    public var sendAttemptsFailed = 0
    public var sendFailures = 0
    public var problems = 0
    /// Outbox entries and pending messages put right at load (see ``ChatSession``).
    public var repairedAtLoad = 0
    /// Store transactions the loop made (each input's writes are one, or more where a read had to
    /// see them first), and the inbound updates they held: updates that arrive together are stored
    /// together.
    public var storeTransactions = 0
    public var batchedUpdates = 0

    // Gauges: what the engine holds now, and the most it held. A long-lived session keeps
    // these bounded; the long-life test asserts it.
    /// Child tasks alive now: the link, the reader of a stream the link made itself, requests in
    /// flight, the timer sleeper.
    public var liveTasks = 0
    public var peakLiveTasks = 0
    /// Inputs waiting for the loop now.
    public var bufferedInputs = 0
    public var peakBufferedInputs = 0
    /// Updates a link handed in past ``SessionConfiguration/inboundWindow``, held back in order
    /// until the loop has taken enough (a flood's backlog; it is not bounded), and the most held.
    public var heldUpdates = 0
    public var peakHeldUpdates = 0
    /// Requests queued or in flight in the lanes.
    public var requestsQueued = 0
    /// Out-of-order events held back, across conversations.
    public var heldEvents = 0
    /// Timer deadlines the loop keeps.
    public var timersPending = 0

    public init() {}
}

/// A random number generator behind an existential, so the session can hold any injected one.
struct AnyRandomNumberGenerator: RandomNumberGenerator {
    var base: any RandomNumberGenerator & Sendable
    mutating func next() -> UInt64 { base.next() }
}
