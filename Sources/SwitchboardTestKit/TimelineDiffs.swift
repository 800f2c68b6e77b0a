public import Switchboard

extension Array where Element == Message {
    /// Applies a timeline's diffs in order, as a list UI does: the list a test builds from the
    /// diffs alone can be compared with `Timeline.items`.
    public mutating func apply(_ diffs: [TimelineDiff]) {
        for diff in diffs {
            switch diff {
            case .insert(let message, let index): insert(message, at: index)
            case .update(let message, let index): self[index] = message
            case .remove(let index): remove(at: index)
            case .reset(let messages): self = messages
            }
        }
    }
}

/// Where an adapter's tests meet its emulator: on a socket on real time (the conformance suite,
/// once per adapter), or in the same process on the emulator's virtual clock (every scenario;
/// `HostedEmulator.inProcess()` in `SwitchboardEmulation`).
public enum EmulatorNetwork: Sendable {
    case sockets
    case inProcess
}
