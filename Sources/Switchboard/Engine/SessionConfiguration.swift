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

    public init(
        reconnectBackoff: BackoffPolicy = BackoffPolicy(),
        outboxBackoff: BackoffPolicy = BackoffPolicy(initial: .seconds(1), maximum: .seconds(30)),
        holdTimeout: Duration = .seconds(2),
        typingPolicy: TypingPolicy? = nil,
        outboxExpiry: Duration? = .seconds(12 * 3600)
    ) {
        self.reconnectBackoff = reconnectBackoff
        self.outboxBackoff = outboxBackoff
        self.holdTimeout = holdTimeout
        self.typingPolicy = typingPolicy
        self.outboxExpiry = outboxExpiry
    }
}

/// Counters of what the engine did; tests and the demo print them as proof.
public struct SessionStatistics: Sendable, Hashable, Codable {
    public var connects = 0
    public var connectionFailures = 0
    public var eventsPublished = 0
    public var duplicatesDropped = 0
    public var gapsDetected = 0
    public var retransmitRequests = 0
    public var retransmittedEvents = 0
    public var heldBack = 0
    public var messagesSent = 0
    public var sendRetries = 0
    public var sendFailures = 0
    public var problems = 0

    public init() {}
}

/// A random number generator behind an existential, so the session can hold any injected one.
struct AnyRandomNumberGenerator: RandomNumberGenerator {
    var base: any RandomNumberGenerator & Sendable
    mutating func next() -> UInt64 { base.next() }
}
