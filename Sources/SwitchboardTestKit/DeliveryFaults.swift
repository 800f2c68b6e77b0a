/// Faults armed on one client's event delivery: what happens to the next sequenced events on
/// their way to it. Every emulator keeps one per connected client and passes each sequenced
/// event through it; the counters are how many events each fault still affects.
public struct DeliveryFaults<Frame: Sendable>: Sendable {
    public var drop = 0
    public var duplicate = 0
    /// Swaps the next events pairwise.
    public var reorder = 0
    /// Holds the next events until ``release()``.
    public var delay = 0
    private var reorderHeld: Frame?
    private var delayed: [Frame] = []

    public init() {}

    /// What to send now in place of `frame`, and the fault that took effect on it, if one did:
    /// ``EmulatorFault/Kind/dropEvents`` (not sent), ``EmulatorFault/Kind/delayEvents`` (held
    /// until ``release()``), ``EmulatorFault/Kind/duplicateEvents`` (sent twice), or
    /// ``EmulatorFault/Kind/reorderEvents`` when `frame` goes out before the one held for it. The
    /// first of a reordered pair, held, has none yet: it takes effect when the second passes.
    /// The emulator adds the fault to its ``AppliedFaults``.
    public mutating func pass(_ frame: Frame) -> (deliver: [Frame], applied: EmulatorFault.Kind?) {
        if drop > 0 {
            drop -= 1
            return ([], .dropEvents)
        }
        if delay > 0 {
            delay -= 1
            delayed.append(frame)
            return ([], .delayEvents)
        }
        if reorder > 0 {
            reorder -= 1
            if let held = reorderHeld {
                reorderHeld = nil
                return ([frame, held], .reorderEvents)
            }
            reorderHeld = frame
            return ([], nil)
        }
        if duplicate > 0 {
            duplicate -= 1
            return ([frame, frame], .duplicateEvents)
        }
        return ([frame], nil)
    }

    /// Everything held back, to send now; disarms delay and reorder.
    public mutating func release() -> [Frame] {
        defer {
            delayed = []
            reorderHeld = nil
            delay = 0
            reorder = 0
        }
        return delayed + (reorderHeld.map { [$0] } ?? [])
    }
}
