import Foundation

// The one sleeper that waits for the machine's earliest deadline.
extension ChatSession {
    /// Starts a sleeper for the machine's earliest deadline unless one already waits for it or
    /// earlier. A sleeper whose deadline was cancelled still ticks: the machine fires what is due,
    /// which may be nothing.
    func armTimer() {
        guard let earliest = machine.nextDeadline else { return }
        if let armed = armedDeadline, armed <= earliest { return }
        if armedDeadline != nil { timerWake.signal() }
        sleeperGeneration += 1
        armedDeadline = earliest
        spawns.append(.sleeper(generation: sleeperGeneration, deadline: earliest, wakeGeneration: timerWake.generation))
    }

    /// Whether a tick comes from the sleeper armed last; if so, none is armed any more.
    func isCurrent(sleeper generation: Int) -> Bool {
        guard generation == sleeperGeneration else { return false }
        armedDeadline = nil
        return true
    }

    nonisolated func sleep(until deadline: Duration, unlessWokenSince wakeGeneration: Int) async {
        let delay = deadline - clock.now
        guard delay > .zero else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await self.clock.sleep(for: delay) }
            group.addTask { await self.timerWake.wait(since: wakeGeneration) }
            await group.next()
            group.cancelAll()
        }
    }
}
