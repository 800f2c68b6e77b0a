import Switchboard
import SwitchboardTestKit

extension StoreAudit {
    /// Whether `chat`'s store has converged on `emulator`'s log of its conversation: the server
    /// holds at least `expected` messages, the audit is clean and every row is confirmed. What the
    /// soak and the load run wait for: they expect every send delivered, so a run in which a send
    /// failed for good does not converge, though the audit allows its row.
    static func converged(_ chat: any Conversation, on emulator: any EmulatorControl, expected: Int, sent: [String]) async throws -> Bool {
        let truth = try await emulator.serverMessages(in: chat.id)
        guard truth.count >= expected else { return false }
        let stored = try await chat.storedMessages(before: nil, limit: .max)
        return compare(server: truth, stored: stored, sent: sent).isClean
            && stored.allSatisfy { $0.serverID != nil && $0.deliveryState != .pending }
    }
}
