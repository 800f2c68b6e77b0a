import Foundation

// The loop's deadlines and the one sleeper that waits for the earliest.
extension ChatSession {
    // MARK: Timers

    /// What a timer is for; one deadline per kind and conversation.
    enum TimerEvent: Sendable, Hashable {
        case hold(ConversationID)
        case outboxRetry(ConversationID)
        case typing(ConversationID)
        case reconnect
        case linkStable(Int)
        /// The next timed poll of a backend that pushes nothing.
        case poll
    }

    /// The deadlines the loop keeps, and the one sleeper that waits for the earliest.
    struct TimerSchedule {
        var deadlines: [TimerEvent: Duration] = [:]
        var armedDeadline: Duration?
        var generation = 0
        var count: Int { deadlines.count }
    }

    func setTimer(_ event: TimerEvent, after delay: Duration) {
        setTimer(event, at: clock.now + max(.zero, delay))
    }

    func setTimer(_ event: TimerEvent, at deadline: Duration) {
        timers.deadlines[event] = deadline
        armTimer()
    }

    func cancelTimer(_ event: TimerEvent) {
        timers.deadlines[event] = nil
    }

    func cancelTimers(where matches: (TimerEvent) -> Bool) {
        for event in timers.deadlines.keys where matches(event) { timers.deadlines[event] = nil }
    }

    /// Starts a sleeper for the earliest deadline unless one already waits for it or earlier.
    private func armTimer() {
        guard let earliest = timers.deadlines.values.min() else { return }
        if let armed = timers.armedDeadline, armed <= earliest { return }
        if timers.armedDeadline != nil { timerWake.signal() }
        timers.generation += 1
        timers.armedDeadline = earliest
        spawns.append(.sleeper(generation: timers.generation, deadline: earliest, wakeGeneration: timerWake.generation))
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

    func timerTick(_ generation: Int) async {
        guard generation == timers.generation else { return }
        timers.armedDeadline = nil
        let now = clock.now
        let due = timers.deadlines.filter { $0.value <= now }.sorted { $0.value < $1.value }
        for (event, _) in due {
            timers.deadlines[event] = nil
        }
        for (event, _) in due {
            await timerFired(event)
        }
        armTimer()
    }

    private func timerFired(_ event: TimerEvent) async {
        switch event {
        case .reconnect:
            await perform(connection.reconnectTimerFired())
        case .linkStable(let id):
            connection.stableTimerFired(id)
        case .hold(let conversation):
            await perform(machine.holdTimerFired(in: conversation))
        case .outboxRetry(let conversation):
            statisticsValue.sendRetries += 1
            await expireOutbox()
            await perform(machine.outbox { $0.retryTimerFired(conversation) })
        case .typing(let conversation):
            await perform(machine.typingTimerFired(in: conversation, now: clock.now))
        case .poll:
            await pollNow()
        }
    }
}
