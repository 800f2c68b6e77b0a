import Foundation
import Logging

// The loop's half of each input: gives it to the machine, reads what the machine asks for, and
// performs the effects it returns.
extension ChatSession {
    /// Runs one input of ``SessionStateMachine`` and performs the effects it returns, in order. A
    /// follow-up (`then`) is handled where it stands, before the effects after it, by a stack of
    /// what is left rather than by recursion: a task keeps its async frames at their deepest, and
    /// a chain of follow-ups (a request that goes into its lane, each timer due) made an idle
    /// session 17 KB larger.
    func run(_ input: SessionStateMachine.Input) async {
        var left: [ArraySlice<SessionStateMachine.Effect>] = [await turn(input)[...]]
        while var effects = left.popLast() {
            while let effect = effects.popFirst() {
                guard let next = await perform(effect) else { continue }
                left.append(effects)
                left.append(await turn(next)[...])
                break
            }
        }
    }

    /// One turn of the machine: reads each fact it asks for (a failed read is a fact too), gives
    /// it the input again, and returns the effects it decides on.
    private func turn(_ input: SessionStateMachine.Input) async -> [SessionStateMachine.Effect] {
        // A traced send failed for good: its span says why once the outbox entry's removal is stored.
        if case .sendFailed(let entry, let reason) = input { sendTraces.failing(entry.clientID, reason: reason) }
        var facts = SessionStateMachine.Facts()
        let moment = SessionStateMachine.Moment(now: clock.now, date: clock.date)
        while true {
            switch machine.handle(input, facts: facts, at: moment, using: &random) {
            case .needs(let read):
                do {
                    facts.answers[read] = try await answer(read)
                } catch {
                    let failure = error as? SwitchboardError ?? SwitchboardError(.storageFailure, "could not read the store", underlying: error)
                    facts.answers[read] = .failed(failure)
                    // A send failing for good has left the outbox in memory; without its message
                    // the removal cannot be written with it, so the transaction fails and the
                    // outbox is loaded again from the store, which still holds the entry.
                    if case .sendFailed = input, openTransaction != nil, openTransaction!.failure == nil { openTransaction!.failure = failure }
                }
            case .perform(let effects):
                return effects
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
            let stored = try await flushed().fetchMessages(in: conversation, before: above, limit: 1).last
            return .message(stored?.sequence == sequence ? stored : nil)
        case .storedMessage(let id, let conversation):
            return .message(try await readMessages(serverIDs: [id], clientIDs: [], in: conversation).first)
        case .oldestConfirmedMessage(let conversation):
            return .message(try await flushed().fetchOldestConfirmedMessage(in: conversation))
        case .newestMessages(let conversation):
            return .messages(try await flushed().fetchMessages(in: conversation, before: nil, limit: EventProjection.readDerivationWindow))
        case .messages(let ids, let conversation):
            return .messages(try await readMessages(serverIDs: ids, clientIDs: [], in: conversation))
        case .sentMessage(let clientID, let conversation):
            return .message(try await readMessages(serverIDs: [], clientIDs: [clientID], in: conversation).first)
        case .sentMessages(let clientIDs, let conversation):
            return .messages(try await readMessages(serverIDs: [], clientIDs: clientIDs, in: conversation))
        case .allMessages(let conversation):
            return .messages(try await flushed().fetchMessages(in: conversation, before: nil, limit: .max))
        case .allConversations:
            return .conversations(try await flushed().fetchConversations())
        }
    }

    /// Performs one effect the machine decided on.
    ///
    /// - Returns: the follow-up to handle before the effects after this one (`then`), which
    ///   ``run(_:)`` takes in turn.
    private func perform(_ effect: SessionStateMachine.Effect) async -> SessionStateMachine.Input? {
        switch effect {
        case .deliver(let events):
            await deliver(events)
        case .write(let writes):
            do {
                try await write(writes)
            } catch {
                report(SwitchboardError(.storageFailure, "could not write to the store", underlying: error))
            }
        case .publish(let kind, let conversation, let sequence, let time):
            publish(kind, conversation: conversation, sequence: sequence, time: time)
        case .report(let problem, let conversation):
            report(problem, conversation: conversation)
        case .answer(let answer):
            if openTransaction != nil { openTransaction!.answers.append(answer) } else { answer.complete(nil) }
        case .log(let level, let message, let error):
            logger.log(level: level, "\(message)", metadata: error.map { ["error": "\($0)"] })
        case .request(let link, let ticket, let request):
            if !hand(request, ticket: ticket, to: link) { await run(.requestNotTaken(link, ticket: ticket)) }
        case .startLink(let id):
            startLink(id)
        case .finishJobs(let id):
            if link?.id == id { link?.jobs.finish() }
        case .abortConnect(let id):
            if link?.id == id { abortLink = id }
        case .reloadSyncState:
            do {
                machine.load(sequences: try await store.fetchSequences(), credentials: try await store.fetchCredentials(), cursor: try await store.fetchCursor())
                machine.reloadOutbox(try await store.fetchOutbox())
                // A failure noted for a removal that was not stored means nothing now: the entry is
                // queued again, and its next outcome is its own.
                sendTraces.failing.removeAll()
            } catch {
                // Without them the next link cannot know where to start: the session ends, and
                // the next one loads them as it starts.
                report(SwitchboardError(.storageFailure, "could not read the stored sequences, credentials, cursor and outbox again after a failed write", underlying: error))
                await run(.command(.lifecycle(.close, Reply { _ in })))
            }
        case .then(let input):
            return input
        case .afterCommit(let input):
            if openTransaction != nil { openTransaction!.afterCommit.append(input) } else { await inOneTransaction { await run(input) } }
        }
        return nil
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
            for conversation in Set(events.compactMap(\.conversationID)) where machine.conversations[conversation].isStored {
                rows.existing.insert(conversation)
                if rows.conversations[conversation] == nil, let info = machine.conversations[conversation].info { rows.conversations[conversation] = info }
            }
            var output = EventProjection.Output()
            let projection = machine.settings.projection
            // One read for the run; if it fails, each event reads what it needs below.
            try? await read(EventProjection.reads(for: events, in: rows), into: &rows)
            for event in events {
                while case .needs(let reads) = EventProjection.project(event, rows: &rows, into: &output, now: clock.date, settings: projection) {
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
                        // The event cannot be placed: the transaction fails whole, so nothing of
                        // it is stored — the sequence or cursor it would move above all — and the
                        // next link fetches the events again. (Storing the others would move the
                        // cursor past this one, and it would be lost: seen when a session was
                        // stopped mid-traffic and its reads were cancelled.)
                        if openTransaction != nil, openTransaction!.failure == nil { openTransaction!.failure = error }
                        transactionRows = rows
                        return
                    }
                }
            }
            transactionRows = rows
            await perform(&output)
        }
    }

    /// Keeps what a projection wrote with the transaction, then lets the machine announce it
    /// (``SessionStateMachine/Input/projected(_:)``); `output` starts over.
    private func perform(_ output: inout EventProjection.Output) async {
        let done = output
        output = EventProjection.Output()
        // What the run has said of its conversations' history holds for the rest of the run.
        output.historyUntil = done.historyUntil
        do {
            try await write(done.writes, projected: true)
        } catch {
            report(SwitchboardError(.storageFailure, "could not store an event", underlying: error), conversation: done.publications.first?.conversation)
            for (problem, conversation) in done.problems { report(problem, conversation: conversation) }
            return
        }
        await run(.projected(done))
    }
}
