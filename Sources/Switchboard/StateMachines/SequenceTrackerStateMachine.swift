/// Keeps one conversation's event stream gap-free, duplicate-free and in order.
///
/// Events carry a per-conversation sequence starting at 1. The tracker delivers them strictly
/// in order: an event past a gap is held back and the missing range is asked for with
/// retransmits of at most `batchLimit` events each. Duplicates (already delivered or already
/// held) are dropped. ``headObserved(_:)`` plans catch-up from what was delivered to the
/// conversation's newest sequence, which the engine calls on every (re)connect.
///
/// Waiting is bounded: the owner runs a hold timer whenever ``Outcome/startHoldTimer`` says
/// so, and ``holdTimerFired()`` re-requests whatever is still missing and not in flight (a
/// failed retransmit leaves its range to the timer). A completed retransmit
/// that did not contain some sequence in its range proves the server has no event there (for
/// example an "uber" conversation hid it), so the tracker steps over it instead of waiting for
/// ever.
///
/// It is a pure value: no I/O, no clock. `Event` is whatever the owner delivers.
public struct SequenceTrackerStateMachine<Event: Sendable>: Sendable {
    /// What the owner must do after an input.
    public struct Outcome: Sendable {
        /// Events now deliverable, in sequence order.
        public var deliver: [(sequence: Int64, event: Event)] = []
        /// Ranges to ask the backend for, each within the batch limit.
        public var retransmit: [ClosedRange<Int64>] = []
        /// Start the hold timer (it was not running and something is held or missing).
        public var startHoldTimer = false
        /// How many inputs were dropped as duplicates.
        public var duplicates = 0

        public init() {}
    }

    public let batchLimit: Int
    /// Every sequence up to here was delivered (or proved absent).
    public private(set) var delivered: Int64
    /// The newest sequence known to exist.
    public private(set) var head: Int64
    private var held: [Int64: Event] = [:]
    private var requested: [ClosedRange<Int64>] = []
    private var absent: Set<Int64> = []
    public private(set) var isHoldTimerRunning = false

    /// - Parameters:
    ///   - delivered: the sequence delivered so far (the stored cursor; 0 for nothing).
    ///   - batchLimit: the backend's most events per retransmit.
    public init(delivered: Int64, batchLimit: Int) {
        precondition(batchLimit > 0, "the retransmit batch limit must be positive")
        self.delivered = delivered
        self.head = delivered
        self.batchLimit = batchLimit
    }

    /// Events held back waiting for a gap to fill.
    public var heldCount: Int { held.count }
    /// Whether anything up to ``head`` is still missing.
    public var hasGap: Bool { head > delivered }
    /// Ranges asked for and not answered yet.
    public var pendingRetransmits: [ClosedRange<Int64>] { requested }

    public mutating func receive(sequence: Int64, event: Event) -> Outcome {
        var outcome = Outcome()
        if sequence <= delivered || held[sequence] != nil {
            outcome.duplicates = 1
            return outcome
        }
        held[sequence] = event
        absent.remove(sequence)
        head = max(head, sequence)
        drain(into: &outcome)
        plan(into: &outcome)
        return outcome
    }

    /// The backend says the conversation's newest sequence is `lastSequence`.
    public mutating func headObserved(_ lastSequence: Int64) -> Outcome {
        var outcome = Outcome()
        head = max(head, lastSequence)
        plan(into: &outcome)
        return outcome
    }

    /// A retransmit of `range` finished. Feed its events through ``receive(sequence:event:)``
    /// first; any sequence of the range still missing afterwards is absent on the server.
    public mutating func retransmitCompleted(_ range: ClosedRange<Int64>) -> Outcome {
        var outcome = Outcome()
        requested.removeAll { $0 == range }
        for sequence in range where sequence > delivered && held[sequence] == nil {
            absent.insert(sequence)
        }
        drain(into: &outcome)
        plan(into: &outcome)
        return outcome
    }

    /// A retransmit of `range` failed; the hold timer will ask again.
    public mutating func retransmitFailed(_ range: ClosedRange<Int64>) -> Outcome {
        var outcome = Outcome()
        requested.removeAll { $0 == range }
        if hasGap && !isHoldTimerRunning {
            isHoldTimerRunning = true
            outcome.startHoldTimer = true
        }
        return outcome
    }

    /// The bounded wait ran out: ask again for everything still missing that is not asked for
    /// already. A request in flight always ends — answered, failed, or timed out by the adapter —
    /// and a lost link forgets them all (``connectionLost()``), so asking twice would only
    /// duplicate work.
    public mutating func holdTimerFired() -> Outcome {
        var outcome = Outcome()
        isHoldTimerRunning = false
        plan(into: &outcome)
        return outcome
    }

    /// Forget in-flight requests (the link they went out on is gone); the next
    /// ``headObserved(_:)`` or timer plans them again.
    public mutating func connectionLost() {
        requested.removeAll()
        isHoldTimerRunning = false
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
        absent = absent.filter { $0 > delivered }
    }

    /// Requests every missing run up to the head that is not asked for already, in chunks.
    private mutating func plan(into outcome: inout Outcome) {
        guard head > delivered else { return }
        var runStart: Int64?
        var sequence = delivered + 1
        func closeRun(at end: Int64, _ tracker: inout Self, _ outcome: inout Outcome) {
            guard let start = runStart else { return }
            var chunkStart = start
            while chunkStart <= end {
                let chunkEnd = min(end, chunkStart + Int64(tracker.batchLimit) - 1)
                let range = chunkStart...chunkEnd
                tracker.requested.append(range)
                outcome.retransmit.append(range)
                chunkStart = chunkEnd + 1
            }
            runStart = nil
        }
        while sequence <= head {
            if let covering = requested.first(where: { $0.contains(sequence) }) {
                closeRun(at: sequence - 1, &self, &outcome)
                sequence = covering.upperBound + 1
                continue
            }
            let isMissing = held[sequence] == nil && !absent.contains(sequence)
            if isMissing {
                if runStart == nil { runStart = sequence }
            } else {
                closeRun(at: sequence - 1, &self, &outcome)
            }
            sequence += 1
        }
        closeRun(at: head, &self, &outcome)
        if !isHoldTimerRunning && (hasGap || !requested.isEmpty) {
            isHoldTimerRunning = true
            outcome.startHoldTimer = true
        }
    }
}
