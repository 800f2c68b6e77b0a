import Foundation

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

    /// The stored outbox at load, with what a crash could have left half done put right (a store
    /// whose writes were not yet transactions, or written by hand): a pending message with no
    /// entry gets one (it is sent, with its client id, so the server drops it if it has it
    /// already); an entry with no message gets its pending message back.
    ///
    /// - Parameters:
    ///   - entries: the stored outbox, oldest first.
    ///   - withMessage: the client ids of those entries whose message the store holds.
    ///   - pending: the stored messages waiting for the server (no server id, `pending`).
    /// - Returns: the writes that repair the store.
    mutating func restoreOutbox(_ entries: [OutboxEntry], withMessage: Set<ClientMessageID>, pending: [Message]) -> [StoreWrite] {
        var entries = entries
        let queued = Set(entries.map(\.clientID))
        var repairs: [StoreWrite] = entries.filter { !withMessage.contains($0.clientID) }.map { .saveMessages([$0.pendingMessage]) }
        for message in pending {
            guard let clientID = message.clientID, !queued.contains(clientID) else { continue }
            let draft = MessageDraft(text: message.text, kind: message.kind, attachments: message.attachments, payload: message.payload, quote: message.quote)
            let entry = OutboxEntry(
                message: OutgoingMessage(clientID: clientID, conversationID: message.conversationID, content: draft),
                createdAt: message.time
            )
            entries.append(entry)
            repairs.append(.saveOutboxEntry(entry))
        }
        outbox.restore(entries)
        return repairs
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

    // MARK: Read markers and started conversations

    /// The app marks read up to `marker` (without one, up to the newest message from others the
    /// server has: the user's own, pending or failed, are no place to mark), sent unless the newest
    /// marker set reads as far already, and the conversation's unread count becomes what came from
    /// others after it (0 for the newest). A marker
    /// behind the newest one set is sent where the backend moves markers back, and refused where it
    /// does not. A read that failed changes nothing (the runner throws it to the app).
    mutating func markRead(_ marker: ChatEvent.ReadMarker?, in conversation: ConversationID, facts: Facts = Facts()) -> Step {
        // The newest messages: where "up to the newest" is, and what stays unread after the marker.
        let newestRead = Read.newestMessages(in: conversation)
        guard let newest = facts.messages(newestRead) else { return .needs(newestRead) }
        let projection = settings.projection
        let resolved: ChatEvent.ReadMarker
        if let marker {
            resolved = marker
        } else {
            guard let last = newest.last(where: { $0.serverID != nil && !projection.isOwn($0) }) else { return .perform([]) }
            resolved = ReadMarkerStateMachine.marker(upTo: last)
        }
        var times: [MessageID: Date] = [:]
        for id in conversations[conversation].readMarker.messagesToPlace(resolved) {
            let read = Read.storedMessage(id, in: conversation)
            guard let message = facts.message(read) else { return .needs(read) }
            times[id] = message?.time
        }
        let read = Read.conversation(conversation)
        guard let info = facts.conversation(read) else { return .needs(read) }
        guard facts.firstFailure == nil else { return .perform([]) }
        let decision = conversations[conversation].readMarker.mark(
            resolved, times: times, isExplicit: marker != nil, mayMoveBack: settings.descriptor.limits.readMarkersMayMoveBack
        )
        let sending: ChatEvent.ReadMarker
        switch decision {
        case .send(let marker): sending = marker
        case .alreadyRead: return .perform([])
        case .refused(let error): return .refuse(error)
        }
        var actions: [Action] = []
        // A marker older than the newest messages reads none of them.
        let unread = EventProjection.unread(in: newest, after: sending, settings: projection) ?? EventProjection.unread(in: newest, settings: projection)
        if var info, info.unreadCount != unread {
            info.unreadCount = unread
            actions.append(.updateConversation(info))
        }
        return .perform(actions + [.sendReadMarker(sending, conversation)])
    }

    /// The server took the app's read marker, or refused it (reported unless the next link sends
    /// it again).
    mutating func readMarkerAnswered(_ marker: ChatEvent.ReadMarker, in conversation: ConversationID, result: Result<BackendResponse, SwitchboardError>) -> [Action] {
        switch result {
        case .success:
            conversations[conversation].readMarker.taken(marker)
            return []
        case .failure(let error):
            return conversations[conversation].readMarker.failed(error).map { [.report($0, conversation)] } ?? []
        }
    }

    /// The backend made the app's new conversation: it (and the messages it began with) is
    /// stored; no complete list read before it removes it.
    mutating func conversationStarted(_ started: ConversationSnapshot) -> [Action] {
        let id = started.conversation.id
        conversations[id].startedLocally = true
        return [
            .deliver(
                [BackendEvent(.conversationAdded(started.conversation), conversation: id)]
                    + started.messages.map { BackendEvent(.messageAdded($0, position: .newest), conversation: id, time: $0.time) }
            )
        ]
    }

    // MARK: Polling and app requests

    /// A poll is due (a link opened, the poll timer fired, the app asked): a backend that pushes
    /// nothing is asked for its changes, unless a poll is queued already.
    mutating func pollDue(isLinkOpen: Bool) -> [Action] {
        guard settings.polls, !isPollQueued, isLinkOpen else { return [] }
        isPollQueued = true
        statistics.polls += 1
        return [.poll]
    }

    /// The poll answered (or failed): the next one is due a poll interval from now.
    mutating func pollFinished(isLinkOpen: Bool) -> [Action] {
        isPollQueued = false
        return isLinkOpen ? [.startPollTimer(after: settings.configuration.pollInterval)] : []
    }

    /// The poll never got an answer (its link went): the next link polls when it opens.
    mutating func pollAbandoned() {
        isPollQueued = false
    }

    /// An app request answered: what it changed is stored as `applying` says — the message or
    /// conversation the server answered with, or, when it answered only "done", the app's changes
    /// applied to the stored conversation.
    mutating func appRequestAnswered(_ response: BackendResponse, as applying: AppCommand.Applying, facts: Facts = Facts()) -> Step {
        func answered(in conversation: ConversationID) -> [Action] {
            switch response {
            case .message(let message): [.deliver([BackendEvent(.messageUpdated(message), conversation: conversation)])]
            case .conversation(let info): [.deliver([BackendEvent(.conversationUpdated(info), conversation: conversation)])]
            default: []
            }
        }
        switch applying {
        case .nothing:
            return .perform([])
        case .response(let conversation):
            return .perform(answered(in: conversation))
        case .customFields(let fields, let conversation):
            guard case .done = response else { return .perform(answered(in: conversation)) }
            let read = Read.conversation(conversation)
            guard let stored = facts.conversation(read) else { return .needs(read) }
            guard var info = stored else { return .perform([]) }
            var data = info.customData?.objectValue ?? [:]
            var kept = data["customFields"]?.objectValue ?? [:]
            kept.merge(fields.mapValues(JSONValue.string)) { _, new in new }
            data["customFields"] = .object(kept)
            info.customData = .object(data)
            return .perform([.deliver([BackendEvent(.conversationUpdated(info), conversation: conversation)])])
        case .changes(let changes, let conversation):
            guard case .done = response else { return .perform(answered(in: conversation)) }
            let read = Read.conversation(conversation)
            guard let stored = facts.conversation(read) else { return .needs(read) }
            guard var info = stored else { return .perform([]) }
            if changes.clearing.contains(.title) { info.title = nil }
            if changes.clearing.contains(.customData) { info.customData = nil }
            if let title = changes.title { info.title = title }
            if let isPublicJoin = changes.isPublicJoin {
                if isPublicJoin { info.flags.insert(.publicJoin) } else { info.flags.remove(.publicJoin) }
            }
            if let customData = changes.customData { info.customData = customData }
            return .perform([.deliver([BackendEvent(.conversationUpdated(info), conversation: conversation)])])
        }
    }
}

