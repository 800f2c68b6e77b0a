/// Keeps one conversation's event stream gap-free, duplicate-free and in order.
///
/// Events carry a per-conversation sequence starting at 1. The tracker delivers them strictly
/// in order: an event past a gap is held back and the missing range is asked for with
/// retransmits of at most `batchLimit` events each. Duplicates (already delivered or already
/// held) are dropped. ``headObserved(_:)`` plans catch-up from what was delivered to the
/// conversation's newest sequence, which the owner calls on every (re)connect.
///
/// Everything it keeps is bounded, so hostile or broken input cannot freeze or flood a session:
/// - planning walks runs of missing sequences, not single sequences, so a huge gap costs no
///   more than a small one;
/// - at most `maxInFlight` retransmits are asked for at once; the rest are planned as those
///   complete;
/// - at most `maxHeld` events are held back; an event past that is dropped and asked for again
///   later (its sequence is remembered as the head);
/// - an event more than `maxJump` past what was delivered is refused (``Outcome/refused``), and
///   the owner reports it as a problem.
///
/// Waiting is bounded: the owner runs a hold timer whenever ``Outcome/startHoldTimer`` says
/// so, and ``holdTimerFired()`` re-requests whatever is still missing and not in flight (a
/// failed or incomplete retransmit leaves its range to the timer). Only a retransmit the
/// adapter marks complete proves that a sequence missing from it does not exist (an "uber"
/// conversation hid it), so the tracker steps over it instead of waiting for ever.
///
/// It is a pure value: no I/O, no clock. `Event` is whatever the owner delivers.
@_spi(Benchmarks) public struct SequenceTrackerStateMachine<Event: Sendable>: Sendable {
    /// What the owner must do after an input.
    @_spi(Benchmarks) public struct Outcome: Sendable {
        /// Events now deliverable, in sequence order.
        @_spi(Benchmarks) public var deliver: [(sequence: Int64, event: Event)] = []
        /// Ranges to ask the backend for, each within the batch limit.
        @_spi(Benchmarks) public var retransmit: [ClosedRange<Int64>] = []
        /// Start the hold timer (it was not running and something is held or missing).
        @_spi(Benchmarks) public var startHoldTimer = false
        /// How many inputs were dropped as duplicates.
        @_spi(Benchmarks) public var duplicates = 0
        /// Events not held because the held-back buffer was full (asked for again later).
        @_spi(Benchmarks) public var overflowed = 0
        /// The sequence of an event refused as an absurd jump, if one was.
        @_spi(Benchmarks) public var refused: Int64?

        @_spi(Benchmarks) public init() {}
    }

    @_spi(Benchmarks) public let batchLimit: Int
    @_spi(Benchmarks) public let maxInFlight: Int
    @_spi(Benchmarks) public let maxHeld: Int
    @_spi(Benchmarks) public let maxJump: Int64
    /// Every sequence up to here was delivered (or proved absent).
    @_spi(Benchmarks) public private(set) var delivered: Int64
    /// The newest sequence known to exist.
    @_spi(Benchmarks) public private(set) var head: Int64
    private var held: [Int64: Event] = [:]
    private var requested: [ClosedRange<Int64>] = []
    private var absent: Set<Int64> = []
    /// Some missing sequence up to the head may be unrequested (the in-flight bound was hit, a
    /// request failed or came back incomplete, the link was lost): the next input plans in full.
    /// Otherwise everything missing up to the head is requested, and an event past the head
    /// adds only the run between the two.
    private var needsFullPlan = false
    @_spi(Benchmarks) public private(set) var isHoldTimerRunning = false

    /// - Parameters:
    ///   - delivered: the sequence delivered so far (the stored cursor; 0 for nothing).
    ///   - batchLimit: the backend's most events per retransmit.
    ///   - maxInFlight: the most retransmits asked for at once.
    ///   - maxHeld: the most events held back waiting for a gap.
    ///   - maxJump: how far past the delivered sequence an event may be.
    @_spi(Benchmarks) public init(
        delivered: Int64,
        batchLimit: Int,
        maxInFlight: Int = 10,
        maxHeld: Int = 1000,
        maxJump: Int64 = 1_000_000
    ) {
        precondition(batchLimit > 0, "the retransmit batch limit must be positive")
        self.delivered = delivered
        self.head = delivered
        self.batchLimit = batchLimit
        self.maxInFlight = max(1, maxInFlight)
        self.maxHeld = max(1, maxHeld)
        self.maxJump = max(1, maxJump)
    }

    /// Events held back waiting for a gap to fill.
    @_spi(Benchmarks) public var heldCount: Int { held.count }
    /// Whether anything up to ``head`` is still missing.
    @_spi(Benchmarks) public var hasGap: Bool { head > delivered }
    /// Ranges asked for and not answered yet.
    @_spi(Benchmarks) public var pendingRetransmits: [ClosedRange<Int64>] { requested }

    @_spi(Benchmarks) public mutating func receive(sequence: Int64, event: Event) -> Outcome {
        var outcome = Outcome()
        if sequence <= delivered || held[sequence] != nil {
            outcome.duplicates = 1
            return outcome
        }
        if sequence - delivered > maxJump {
            outcome.refused = sequence
            return outcome
        }
        let previousHead = head
        head = max(head, sequence)
        absent.remove(sequence)
        if sequence == delivered + 1 || held.count < maxHeld {
            held[sequence] = event
        } else {
            outcome.overflowed = 1
        }
        drain(into: &outcome)
        if needsFullPlan {
            plan(into: &outcome)
        } else if sequence > previousHead {
            // Everything missing up to the old head is asked for already: only the new run is
            // (this event too, when the held buffer had no room for it).
            let end = held[sequence] == nil ? sequence : sequence - 1
            let start = max(previousHead, delivered) + 1
            if start <= end { request(start...end, into: &outcome) }
            startHoldTimerIfNeeded(into: &outcome)
        }
        return outcome
    }

    /// The backend says the conversation's newest sequence is `lastSequence`.
    @_spi(Benchmarks) public mutating func headObserved(_ lastSequence: Int64) -> Outcome {
        var outcome = Outcome()
        if lastSequence - delivered > maxJump {
            outcome.refused = lastSequence
            return outcome
        }
        head = max(head, lastSequence)
        plan(into: &outcome)
        return outcome
    }

    /// A retransmit of `range` finished. Feed its events through ``receive(sequence:event:)``
    /// first. When the adapter says the reply is `complete`, any sequence of the range still
    /// missing is absent on the server; otherwise the rest is asked for again when the hold
    /// timer fires.
    @_spi(Benchmarks) public mutating func retransmitCompleted(_ range: ClosedRange<Int64>, complete: Bool = true) -> Outcome {
        var outcome = Outcome()
        requested.removeAll { $0 == range }
        guard complete else {
            needsFullPlan = true
            startHoldTimer(into: &outcome)
            return outcome
        }
        for sequence in range where sequence > delivered && held[sequence] == nil {
            absent.insert(sequence)
        }
        drain(into: &outcome)
        plan(into: &outcome)
        return outcome
    }

    /// A retransmit of `range` failed; the hold timer will ask again.
    @_spi(Benchmarks) public mutating func retransmitFailed(_ range: ClosedRange<Int64>) -> Outcome {
        var outcome = Outcome()
        requested.removeAll { $0 == range }
        needsFullPlan = true
        startHoldTimer(into: &outcome)
        return outcome
    }

    /// The bounded wait ran out: ask again for everything still missing that is not asked for
    /// already. A request in flight always ends — answered, failed, or timed out by the adapter —
    /// and a lost link forgets them all (``connectionLost()``), so asking twice would only
    /// duplicate work.
    @_spi(Benchmarks) public mutating func holdTimerFired() -> Outcome {
        var outcome = Outcome()
        isHoldTimerRunning = false
        plan(into: &outcome)
        return outcome
    }

    /// Forget in-flight requests (the link they went out on is gone); the next
    /// ``headObserved(_:)`` or timer plans them again.
    @_spi(Benchmarks) public mutating func connectionLost() {
        requested.removeAll()
        needsFullPlan = true
        isHoldTimerRunning = false
    }

    private mutating func startHoldTimer(into outcome: inout Outcome) {
        if hasGap && !isHoldTimerRunning {
            isHoldTimerRunning = true
            outcome.startHoldTimer = true
        }
    }

    private mutating func drain(into outcome: inout Outcome) {
        while true {
            let next = delivered + 1
            if let event = held.removeValue(forKey: next) {
                outcome.deliver.append((next, event))
                delivered = next
            } else if absent.remove(next) != nil {
                delivered = next
            } else {
                break
            }
        }
        if !absent.isEmpty { absent = absent.filter { $0 > delivered } }
    }

    /// Requests the missing runs up to the head that are not asked for already, in chunks of
    /// the batch limit, while fewer than `maxInFlight` are out. Walks the covered spans (held,
    /// absent, requested) in order, so its cost does not depend on the size of the gaps.
    private mutating func plan(into outcome: inout Outcome) {
        needsFullPlan = false
        guard head > delivered else { return }
        if requested.count < maxInFlight {
            var covered = requested
            covered.reserveCapacity(requested.count + held.count + absent.count)
            for sequence in held.keys { covered.append(sequence...sequence) }
            for sequence in absent { covered.append(sequence...sequence) }
            covered.sort { $0.lowerBound < $1.lowerBound }
            var next = delivered + 1
            for span in covered where span.upperBound >= next {
                guard next <= head, !needsFullPlan else { break }
                if span.lowerBound > next { request(next...min(span.lowerBound - 1, head), into: &outcome) }
                next = max(next, span.upperBound + 1)
            }
            if next <= head { request(next...head, into: &outcome) }
        } else {
            needsFullPlan = true
        }
        startHoldTimerIfNeeded(into: &outcome)
    }

    private mutating func startHoldTimerIfNeeded(into outcome: inout Outcome) {
        if !isHoldTimerRunning && (hasGap || !requested.isEmpty) {
            isHoldTimerRunning = true
            outcome.startHoldTimer = true
        }
    }

    /// Asks for `run` in chunks of the batch limit while fewer than `maxInFlight` are out; what
    /// does not fit is left to a full plan later.
    private mutating func request(_ run: ClosedRange<Int64>, into outcome: inout Outcome) {
        var start = run.lowerBound
        while start <= run.upperBound {
            guard requested.count < maxInFlight else {
                needsFullPlan = true
                return
            }
            let end = min(run.upperBound, start + Int64(batchLimit) - 1)
            requested.append(start...end)
            outcome.retransmit.append(start...end)
            start = end + 1
        }
    }
}
