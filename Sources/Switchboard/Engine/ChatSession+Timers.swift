import Foundation

// The one timer that waits for the machine's earliest deadline: an action scheduled on the clock
// (a ``SchedulingClock``: no task waits for it), or else a sleeper task.
extension ChatSession {
    /// Arms the timer for the machine's earliest deadline unless it is armed for it or earlier.
    /// A timer whose deadline was cancelled still ticks: the machine fires what is due, which may
    /// be nothing.
    func armTimer() {
        guard let earliest = machine.nextDeadline else { return }
        if let armed = armedDeadline, armed <= earliest { return }
        let wasArmed = armedDeadline != nil
        // The tick armed before never comes now (a later one of its generation is ignored).
        scheduledTick?.cancel()
        scheduledTick = nil
        sleeperGeneration += 1
        armedDeadline = earliest
        let generation = sleeperGeneration
        // A deadline already due ticks through a sleeper task that returns at once: a timer set
        // for now (a zero delay) that sets itself again then spins through the loop's
        // suspensions, never in one turn that keeps the thread from everything else.
        if clock.schedules, earliest > clock.now {
            let inbox = self.inbox
            scheduledTick = clock.schedule(at: earliest) { inbox.yield(.tick(sleeper: generation)) }
            return
        }
        if wasArmed { timerWake.signal() }
        spawns.append(.sleeper(generation: generation, deadline: earliest, wakeGeneration: timerWake.generation))
    }

    /// Whether a tick comes from the timer armed last; if so, none is armed any more.
    func isCurrent(sleeper generation: Int) -> Bool {
        guard generation == sleeperGeneration else { return false }
        armedDeadline = nil
        scheduledTick?.cancel()
        scheduledTick = nil
        return true
    }

    /// Cancels the scheduled tick as the loop ends.
    func disarmTimer() {
        scheduledTick?.cancel()
        scheduledTick = nil
        armedDeadline = nil
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
