/// The rules for what goes out: the outbox that carries sends (its own rules are
/// ``OutboxStateMachine``'s; here is what its decisions mean for the store and the statistics),
/// a send's answer, and typing under the backend's policy.
extension SessionStateMachine {
    /// Changes the outbox and says what its decisions mean: `machine.outbox { $0.connected() }`.
    mutating func outbox(_ change: (inout OutboxStateMachine) -> [OutboxStateMachine.Action]) -> [Action] {
        change(&outbox).map { action in
            switch action {
            case .send(let entry):
                return .send(entry)
            case .complete(let entry):
                statistics.messagesSent += 1
                return .removeOutboxEntry(entry.clientID)
            case .fail(let entry, let reason):
                statistics.sendFailures += 1
                return .failSend(entry, reason: reason)
            case .persist(let entry):
                return .saveOutboxEntry(entry)
            case .scheduleRetry(let conversation, let delay):
                return .startRetryTimer(conversation, after: delay)
            }
        }
    }

    /// A send answered (or failed). The server's copy of the message replaces the pending one; an
    /// answer without it ("done") means the server has it, so the stored pending copy is sent.
    ///
    /// - Parameter random: the retry backoff's jitter.
    mutating func sendFinished(
        _ entry: OutboxEntry,
        result: Result<BackendResponse, SwitchboardError>,
        facts: Facts = Facts(),
        using random: inout some RandomNumberGenerator
    ) -> Step {
        switch result {
        case .success(.message(var message)):
            message.clientID = message.clientID ?? entry.clientID
            message.conversationID = entry.conversationID
            return .perform([.deliver([BackendEvent(.messageUpdated(message), conversation: entry.conversationID)])] + outbox { $0.succeeded(entry.clientID) })
        case .success:
            let read = Read.sentMessage(entry.clientID, in: entry.conversationID)
            guard let stored = facts.message(read) else { return .needs(read) }
            var actions: [Action] = []
            if var stored, stored.deliveryState == .pending {
                stored.deliveryState = .sent
                actions.append(.deliver([BackendEvent(.messageUpdated(stored), conversation: entry.conversationID)]))
            }
            return .perform(actions + outbox { $0.succeeded(entry.clientID) })
        case .failure(let error):
            statistics.sendAttemptsFailed += 1
            return .perform(outbox { $0.failed(entry.clientID, error: error, using: &random) })
        }
    }

    // MARK: Typing

    /// The user typed, or stopped: the throttle decides what goes out.
    mutating func typing(_ isTyping: Bool, draft: String?, in conversation: ConversationID, now: Duration) -> (TypingOutcome, [Action]) {
        var throttle = conversations[conversation].typing ?? TypingThrottleStateMachine(policy: settings.typingPolicy)
        let decided = isTyping ? throttle.userTyping(draft: draft, now: now) : throttle.userStopped(now: now)
        conversations[conversation].typing = throttle
        let outcome: TypingOutcome
        if decided.contains(where: { if case .send = $0 { true } else { false } }) {
            outcome = .sent
        } else if case .minimumInterval = throttle.policy {
            outcome = .throttled
        } else {
            outcome = .coalesced
        }
        return (outcome, typingActions(decided, in: conversation))
    }

    /// The typing timer of a conversation fired: the coalesced update or the stop goes out.
    mutating func typingTimerFired(in conversation: ConversationID, now: Duration) -> [Action] {
        guard let decided = conversations[conversation].typing?.timerFired(now: now) else { return [] }
        return typingActions(decided, in: conversation)
    }

    private func typingActions(_ decided: [TypingThrottleStateMachine.Action], in conversation: ConversationID) -> [Action] {
        decided.map { action in
            switch action {
            case .send(let isTyping, let draft): .sendTyping(isTyping, draft: draft, conversation)
            case .scheduleTimer(let instant): .startTypingTimer(conversation, at: instant)
            }
        }
    }
}
