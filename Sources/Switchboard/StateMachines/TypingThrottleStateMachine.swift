/// Throttles the user's typing notifications to what a backend allows (``TypingPolicy``).
///
/// Inputs are the user's keystrokes (``userTyping(draft:now:)``), an explicit stop, and the
/// firing of the one timer it asks for. Time is the owner's monotonic clock reading, passed in,
/// so the machine is pure.
///
/// An explicit stop sends "stopped" without a draft (the user cleared or sent it); an automatic
/// stop after silence sends "stopped" with the last draft, which stays: a backend that keeps
/// drafts (Webim's `del-message-draft=0`) keeps it.
struct TypingThrottleStateMachine: Sendable, Hashable {
    enum Action: Sendable, Hashable {
        case send(isTyping: Bool, draft: String?)
        /// Call ``timerFired(now:)`` at this instant (replaces any earlier request).
        case scheduleTimer(at: Duration)
    }

    let policy: TypingPolicy
    private var isTyping = false
    private var lastSentAt: Duration?
    private var lastKeystrokeAt: Duration?
    /// The draft of the latest keystroke, kept through an automatic stop.
    private var lastDraft: String?
    private var pendingDraft: String??
    private var timerAt: Duration?

    init(policy: TypingPolicy) {
        self.policy = policy
    }

    mutating func userTyping(draft: String?, now: Duration) -> [Action] {
        lastKeystrokeAt = now
        lastDraft = draft
        switch policy {
        case .coalesce(let interval, let autoStop):
            if let last = lastSentAt, now - last < interval {
                pendingDraft = .some(draft)
                return schedule(at: min(last + interval, now + autoStop))
            }
            return [.send(isTyping: true, draft: draft)] + sent(now: now) + schedule(at: now + min(interval, autoStop))
        case .minimumInterval(let interval):
            if let last = lastSentAt, now - last < interval { return [] }
            lastSentAt = now
            return [.send(isTyping: true, draft: draft)]
        case .startEnd(let autoStop):
            if isTyping { return schedule(at: now + autoStop) }
            isTyping = true
            lastSentAt = now
            return [.send(isTyping: true, draft: draft)] + schedule(at: now + autoStop)
        }
    }

    mutating func userStopped(now: Duration) -> [Action] {
        stop(now: now, keeping: nil)
    }

    /// Sends "stopped" (with `draft`, the draft that stays, for an automatic stop).
    private mutating func stop(now: Duration, keeping draft: String?) -> [Action] {
        pendingDraft = nil
        timerAt = nil
        switch policy {
        case .minimumInterval:
            return []
        case .coalesce, .startEnd:
            guard isTyping else { return [] }
            isTyping = false
            lastSentAt = now
            return [.send(isTyping: false, draft: draft)]
        }
    }

    mutating func timerFired(now: Duration) -> [Action] {
        // A timer for `timerAt` is always outstanding when it is set, so an early firing is a stale
        // timer and asks for nothing.
        guard let due = timerAt, now >= due else { return [] }
        timerAt = nil
        switch policy {
        case .minimumInterval:
            return []
        case .coalesce(let interval, let autoStop):
            let idle = now - (lastKeystrokeAt ?? now)
            if idle >= autoStop {
                return stop(now: now, keeping: lastDraft)
            }
            if let draft = pendingDraft {
                pendingDraft = nil
                return [.send(isTyping: true, draft: draft)] + sent(now: now)
                    + schedule(at: now + min(interval, autoStop - idle))
            }
            return schedule(at: (lastKeystrokeAt ?? now) + autoStop)
        case .startEnd(let autoStop):
            let idle = now - (lastKeystrokeAt ?? now)
            if idle >= autoStop { return stop(now: now, keeping: lastDraft) }
            return schedule(at: (lastKeystrokeAt ?? now) + autoStop)
        }
    }

    private mutating func sent(now: Duration) -> [Action] {
        isTyping = true
        lastSentAt = now
        return []
    }

    private mutating func schedule(at instant: Duration) -> [Action] {
        if let existing = timerAt, existing <= instant { return [] }
        timerAt = instant
        return [.scheduleTimer(at: instant)]
    }
}
