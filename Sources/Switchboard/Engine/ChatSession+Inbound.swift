import Foundation
import Logging

// What the engine does with what arrives: updates from the link, retransmit results, the link
// coming and going. All of it runs on the loop.
extension ChatSession {
    func apply(_ update: BackendUpdate) async {
        switch update {
        case .snapshot(let snapshot):
            await applySnapshot(snapshot)
        case .event(let event):
            await applyEvent(event)
        case .conversationHead(let conversation, let lastSequence):
            await observeHead(of: conversation, lastSequence: lastSequence)
        case .credentials(let new):
            credentials.values.merge(new.values) { _, new in new }
            await persist(.saveCredentials(credentials))
        case .cursor(let new):
            await perform(machine.cursorArrived(new))
        case .problem(let error):
            report(error)
        }
    }

    /// A link is up: resume the outbox and send the read markers set while offline.
    func linkEstablished() async {
        await expireOutbox()
        await perform(machine.outbox { $0.connected() })
        await perform(machine.linkOpened())
        // A backend that pushes nothing is asked for what changed while the session was away.
        await pollNow()
    }

    /// Fails the sends that waited longer than the configured expiry.
    func expireOutbox() async {
        guard let expiry = configuration.outboxExpiry else { return }
        let deadline = clock.date.addingTimeInterval(-expiry.seconds)
        await perform(machine.outbox { $0.expire(createdBefore: deadline) })
    }

    /// The link is gone and everything it carried has reported: requests still in its lanes
    /// never got an answer (app requests fail), and the machine says what that means
    /// (``SessionStateMachine/linkDropped(interrupted:inFlightSends:)``).
    func linkDropped(interrupted: Bool) async {
        let inFlightSends = lanes.inFlightWork.compactMap { work -> ClientMessageID? in
            if case .send(let entry) = work { return entry.clientID }
            return nil
        }
        for request in lanes.removeAll() {
            requestAbandoned(request.work, error: SwitchboardError(.connectionLost, "the link closed before \(request.work.request.name) was answered"))
        }
        await perform(machine.linkDropped(interrupted: interrupted, inFlightSends: inFlightSends))
    }

    // MARK: Helpers

    private func applySnapshot(_ snapshot: BackendSnapshot) async {
        var stored = SnapshotDiff.Stored(conversations: [:], messages: [:])
        var storedOldest: [ConversationID: Message] = [:]
        do {
            if snapshot.isComplete {
                // A complete list removes what it does not name: every stored conversation counts.
                for conversation in try await flushed().fetchConversations(scope: scope) {
                    stored.conversations[conversation.id] = conversation
                }
            } else {
                for item in snapshot.conversations {
                    let id = item.conversation.id
                    stored.conversations[id] = try await readConversation(id)
                }
            }
            for item in snapshot.conversations {
                let id = item.conversation.id
                var messages: [MessageID: Message] = [:]
                let serverIDs = item.messages.compactMap(\.serverID)
                if !serverIDs.isEmpty {
                    for old in try await readMessages(serverIDs: serverIDs, clientIDs: [], in: id) {
                        if let serverID = old.serverID, old.conversationID == id { messages[serverID] = old }
                    }
                }
                if item.messagesAreComplete {
                    for old in try await flushed().fetchMessages(in: id, before: nil, limit: .max, scope: scope) {
                        if let serverID = old.serverID { messages[serverID] = old }
                    }
                }
                stored.messages[id] = messages
            }
            for id in machine.windowsToPlace(snapshot, stored: stored) {
                storedOldest[id] = try await flushed().fetchOldestConfirmedMessage(in: id, scope: scope)
            }
        } catch {
            report(SwitchboardError(.storageFailure, "could not read the store for a snapshot", underlying: error))
            return
        }
        await perform(machine.snapshot(snapshot, stored: stored, storedOldest: storedOldest, isLinkOpen: isLinkOpen))
    }

    /// The fill of `conversation` closed: the windows that waited for it are placed in turn, each
    /// filled when it has a gap of its own or else stored with what came after it. When no fill
    /// is open any more, the cursor they kept back is stored.
    private func placeQueuedWindows(in conversation: ConversationID) async {
        while machine.hasQueuedWindowToPlace(in: conversation) {
            let isLinkOpen = isLinkOpen
            await run { $0.placeQueuedWindow(in: conversation, isLinkOpen: isLinkOpen, facts: $1) }
        }
        await perform(machine.cursorToStore())
    }

    /// A page below a window arrived (or failed).
    func pageFinished(_ conversation: ConversationID, result: Result<BackendResponse, SwitchboardError>) async {
        let isLinkOpen = isLinkOpen
        await run { $0.pageFinished(in: conversation, result: result, isLinkOpen: isLinkOpen, facts: $1) }
    }

    private func applyEvent(_ event: BackendEvent) async {
        await run { $0.event(event, facts: $1) }
    }

    private func observeHead(of conversation: ConversationID, lastSequence: Int64) async {
        await run { $0.head(of: conversation, lastSequence: lastSequence, facts: $1) }
    }

    /// Runs one input of ``SessionStateMachine``: reads each fact it asks for (a failed read is
    /// a fact too), gives it the input again, and performs the actions it returns.
    ///
    /// - Returns: the first read that failed, if any.
    @discardableResult
    func run(_ input: (inout SessionStateMachine, SessionStateMachine.Facts) -> SessionStateMachine.Step) async -> SwitchboardError? {
        var facts = SessionStateMachine.Facts()
        while true {
            switch input(&machine, facts) {
            case .needs(let read):
                do {
                    facts.answers[read] = try await answer(read)
                } catch {
                    facts.answers[read] = .failed(error as? SwitchboardError ?? SwitchboardError(.storageFailure, "could not read the store", underlying: error))
                }
            case .perform(let actions):
                await perform(actions)
                return facts.firstFailure
            }
        }
    }

    /// Reads what the machine asked for, as the open transaction sees the store.
    private func answer(_ read: SessionStateMachine.Read) async throws -> SessionStateMachine.Facts.Answer {
        switch read {
        case .conversation(let id):
            return .conversation(try await readConversation(id))
        case .message(atSequence: let sequence, let conversation):
            let above = MessageOrderKey(isPending: false, sequence: sequence + 1, time: .distantPast, tieBreaker: "")
            let stored = try await flushed().fetchMessages(in: conversation, before: above, limit: 1, scope: scope).last
            return .message(stored?.sequence == sequence ? stored : nil)
        case .storedMessage(let id, let conversation):
            return .message(try await readMessages(serverIDs: [id], clientIDs: [], in: conversation).first)
        case .oldestConfirmedMessage(let conversation):
            return .message(try await flushed().fetchOldestConfirmedMessage(in: conversation, scope: scope))
        case .newestMessage(let conversation):
            return .message(try await flushed().fetchMessages(in: conversation, before: nil, limit: 1, scope: scope).last)
        case .messages(let ids, let conversation):
            return .messages(try await readMessages(serverIDs: ids, clientIDs: [], in: conversation))
        case .sentMessage(let clientID, let conversation):
            return .message(try await readMessages(serverIDs: [], clientIDs: [clientID], in: conversation).first)
        }
    }

    /// Performs what ``SessionStateMachine`` asks, in order.
    func perform(_ actions: [SessionStateMachine.Action]) async {
        for action in actions {
            switch action {
            case .deliver(let events):
                await deliver(events)
            case .saveSequence(let sequence, let conversation):
                // A conversation removed by the events just stored keeps no sequence.
                guard conversations.isKept(conversation) else { continue }
                await persist(.saveSequence(sequence, for: conversation))
            case .retransmit(let range, let conversation):
                // Without a link the tracker asks again on the next one.
                if !enqueue(.retransmit(conversation, range), lane: conversation) { machine.retransmitNotSent(range, in: conversation) }
            case .startHoldTimer(let conversation):
                setTimer(.hold(conversation), after: configuration.holdTimeout)
            case .report(let problem, let conversation):
                report(problem, conversation: conversation)
            case .clearHistory(let conversation):
                await clearHistory(of: conversation)
            case .saveCursor(let cursor):
                await persist(.saveCursor(cursor))
            case .requestPage(let query, let conversation):
                // Without a link the fill asks again when the next one is up.
                if !enqueue(.backfill(query), lane: conversation) { machine.backfillNotSent(in: conversation) }
            case .placeQueuedWindows(let conversation):
                await placeQueuedWindows(in: conversation)
            case .observeHead(let conversation, let head):
                await observeHead(of: conversation, lastSequence: head)
            case .sendReadMarker(let marker, let conversation):
                enqueue(.markRead(conversation, marker), lane: conversation)
            case .send(let entry):
                // The outbox sends only while connected; if the link is going, the next one resends.
                enqueue(.send(entry), lane: entry.conversationID)
            case .saveOutboxEntry(let entry):
                await persist(.saveOutboxEntry(entry))
            case .removeOutboxEntry(let clientID):
                await persist(.removeOutboxEntry(clientID))
            case .failSend(let entry, let reason):
                await markFailed(entry, reason: reason)
            case .startRetryTimer(let conversation, let delay):
                setTimer(.outboxRetry(conversation), after: delay)
            case .sendTyping(let isTyping, let draft, let conversation):
                // Typing is best effort: offline it is dropped.
                enqueue(.typing(conversation, isTyping: isTyping, draft: draft), lane: conversation)
            case .startTypingTimer(let conversation, let instant):
                setTimer(.typing(conversation), at: instant)
            case .updateConversation(let info):
                await persist(.saveConversation(info))
                publish(.conversationUpdated(info), conversation: info.id)
            case .poll:
                cancelTimer(.poll)
                enqueue(.poll, lane: nil)
            case .startPollTimer(let delay):
                setTimer(.poll, after: delay)
            case .cancelLinkTimers:
                cancelTimers { event in
                    switch event {
                    case .hold, .outboxRetry, .typing, .poll: true
                    case .reconnect, .linkStable: false
                    }
                }
            }
        }
    }

    /// A send failed for good: its message is marked failed with the reason and its outbox entry
    /// goes, in one transaction.
    private func markFailed(_ entry: OutboxEntry, reason: String) async {
        await inOneTransaction {
            do {
                var writes: [StoreWrite] = [.removeOutboxEntry(entry.clientID)]
                var message = try await readMessages(serverIDs: [], clientIDs: [entry.clientID], in: entry.conversationID).first
                message?.deliveryState = .failed(reason)
                if let message { writes.append(.saveMessages([message])) }
                try await write(writes)
                if let message { publish(.messageUpdated(message), conversation: entry.conversationID) }
            } catch {
                report(SwitchboardError(.storageFailure, "could not write to the store", underlying: error))
            }
        }
    }

    /// The server forgot `conversation`'s events: the store's old history goes, the app's pending
    /// sends stay (they go to the new one), and the app hears `historyCleared`.
    private func clearHistory(of conversation: ConversationID) async {
        let pendingIDs = outbox.entries.filter { $0.message.conversationID == conversation }.map(\.message.clientID)
        do {
            let pending = try await readMessages(serverIDs: [], clientIDs: pendingIDs, in: conversation)
                .filter { $0.conversationID == conversation && $0.deliveryState == .pending }
            try await write([.removeAllMessages(in: conversation)] + (pending.isEmpty ? [] : [.saveMessages(pending)]))
            publish(.historyCleared, conversation: conversation, sequence: nil, time: nil)
            for message in pending { publish(.messageAdded(message, position: .newest), conversation: conversation, sequence: nil, time: nil) }
        } catch {
            report(SwitchboardError(.storageFailure, "could not clear the forgotten history of \(conversation)", underlying: error), conversation: conversation)
        }
    }

    /// Applies a run of in-order events to the store and publishes what changed, in one
    /// transaction: the rows they touch that the transaction does not hold are read in one go,
    /// ``EventProjection`` says what to write and announce, and the writes are kept with the
    /// transaction's, announced once it is stored.
    func deliver(_ events: some Collection<BackendEvent>) async {
        guard !events.isEmpty else { return }
        await inOneTransaction {
            // The transaction's rows are taken while the projection works on them (no copy) and
            // put back before anything else may read them.
            var rows = takeTransactionRows()
            rows.existing.formUnion(events.compactMap(\.conversationID).filter { conversations[$0].isStored })
            var output = EventProjection.Output()
            // One read for the run; if it fails, each event reads what it needs below.
            try? await read(EventProjection.reads(for: events, in: rows), into: &rows)
            for event in events {
                while case .needs(let reads) = EventProjection.project(event, rows: &rows, into: &output, now: clock.date) {
                    transactionRows = rows
                    await perform(&output)
                    rows = takeTransactionRows()
                    do {
                        try await read(reads, into: &rows)
                    } catch where reads.conversations.isEmpty && reads.messages.isEmpty {
                        // Only the newest messages a read marker would turn read: the marker is
                        // stored and announced without that.
                        report(SwitchboardError(.storageFailure, "could not read the messages a read marker reads", underlying: error), conversation: event.conversationID)
                        for conversation in reads.newest { rows.newest[conversation] = [] }
                    } catch {
                        // This event cannot be placed; the others still are.
                        report(SwitchboardError(.storageFailure, "could not read the store for an event", underlying: error), conversation: event.conversationID)
                        break
                    }
                }
            }
            transactionRows = rows
            await perform(&output)
        }
    }

    /// Keeps what a projection wrote with the transaction, then announces it, ends the outbox
    /// entries of the echoed sends, and reports its problems; `output` starts over.
    private func perform(_ output: inout EventProjection.Output) async {
        let done = output
        output = EventProjection.Output()
        statisticsValue.duplicatesDropped += done.duplicates
        do {
            try await write(done.writes, projected: true)
        } catch {
            report(SwitchboardError(.storageFailure, "could not store an event", underlying: error), conversation: done.publications.first?.conversation)
            for (problem, conversation) in done.problems { report(problem, conversation: conversation) }
            return
        }
        for (conversation, isStored) in done.stored {
            if isStored { conversations[conversation].isStored = true } else { conversations.remove(conversation) }
        }
        for publication in done.publications {
            publish(publication.kind, conversation: publication.conversation, sequence: publication.sequence, time: publication.time)
        }
        for clientID in done.echoed { await perform(machine.outbox { $0.echoed(clientID) }) }
        for (problem, conversation) in done.problems { report(problem, conversation: conversation) }
    }

    /// Makes sure the store holds `id`: a new minimal conversation (published as added) when the
    /// app names one the backend never announced.
    func ensureConversation(_ id: ConversationID, time: Date) async throws {
        guard !conversations[id].isStored else { return }
        if try await readConversation(id) == nil {
            let info = ConversationInfo(id: id, createdAt: time)
            try await write([.saveConversation(info)])
            publish(.conversationAdded(info), conversation: id, time: time)
        }
        conversations[id].isStored = true
    }
}

/// A window that came while its conversation's fill was open, and the message events after it.
struct QueuedWindow: Sendable {
    let window: ConversationSnapshot
    var events: [BackendEvent] = []
}
