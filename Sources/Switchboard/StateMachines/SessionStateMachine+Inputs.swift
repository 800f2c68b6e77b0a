import Foundation
import Logging

/// The machine's one entry: every input of a session — an app command, the link opening, an update,
/// a request's outcome, the clock reaching a deadline, the link ending — goes through
/// ``handle(_:facts:at:using:)``, which returns the ``Effect``s the runner performs. The inputs are
/// values, so they can be listed, logged and replayed; the flows that take several turns keep their
/// state here (the request lanes, history waiters, the outbox), not in the runner.
extension SessionStateMachine {
    /// When an input is handled: the runner reads its clock once per input.
    struct Moment: Sendable {
        /// The monotonic instant, for deadlines.
        var now: Duration
        /// The wall time, for what is stored and announced.
        var date: Date
    }

    /// What a deadline is for; one per kind and conversation.
    enum Timer: Sendable, Hashable {
        case hold(ConversationID)
        case outboxRetry(ConversationID)
        case typing(ConversationID)
        case reconnect
        case linkStable(Int)
        /// The next timed poll of a backend that pushes nothing.
        case poll
        /// The end of the wait for a windowed link's first snapshot.
        case window

        /// It lives on the link, and goes with it.
        var livesOnLink: Bool {
            switch self {
            case .hold, .outboxRetry, .typing, .poll, .window: true
            case .reconnect, .linkStable: false
            }
        }
    }

    /// What a request in a lane is for, so its outcome reaches the right rule.
    enum LaneWork: Sendable {
        case send(OutboxEntry)
        case retransmit(ConversationID, ClosedRange<Int64>)
        /// A history page below a recent window (``WindowBackfillStateMachine``).
        case backfill(HistoryQuery)
        /// Typing sent; the app's call that sent it, if one waits for the server's answer.
        case typing(ConversationID, isTyping: Bool, draft: String?, Reply<TypingOutcome>? = nil)
        /// A read marker sent; the app's call that set it, if one waits for the server's answer.
        case markRead(ConversationID, ChatEvent.ReadMarker, Reply<Void>? = nil)
        /// The engine's own poll of a backend that pushes nothing.
        case poll
        /// An app request; its caller waits for the answer, applied as `applying` says.
        case app(BackendRequest, AppCommand.Applying, Reply<BackendResponse>)
        /// The app's new conversation; its caller waits for it to be stored.
        case start(ConversationDraft, Reply<ConversationID>)
        /// A history page the app asked for; its callers wait in the conversation's state.
        case history(HistoryQuery)

        var request: BackendRequest {
            switch self {
            case .send(let entry): .send(entry.message)
            case .retransmit(let conversation, let range): .retransmit(conversation, range)
            case .backfill(let query): .history(query)
            case .typing(let conversation, let isTyping, let draft, _): .typing(conversation, isTyping: isTyping, draft: draft)
            case .markRead(let conversation, let marker, _): .markRead(conversation, upTo: marker)
            case .poll: .poll(forced: false)
            case .app(let request, _, _): request
            case .start(let draft, _): .startConversation(draft)
            case .history(let query): .history(query)
            }
        }
    }

    /// One input of the session.
    enum Input: Sendable {
        /// The stored state is loaded: a link may open.
        case started
        case command(AppCommand)
        case linkOpened(Int)
        case update(Int, BackendUpdate)
        /// The link's updates ended or threw: the link is failing.
        case linkFailed(Int, SwitchboardError)
        /// The link's scope has ended, and every request it carried has reported.
        case linkClosed(Int, SwitchboardError?)
        case requestFinished(Int, ticket: Int, Result<BackendResponse, SwitchboardError>)
        /// Link `id` did not take the request handed to it (its scope had stopped taking work, as
        /// it goes): the request stays in its lane until the link has gone.
        case requestNotTaken(Int, ticket: Int)
        /// The clock reached a deadline (perhaps one since cancelled: what is due fires). `sleeper`
        /// names the runner's sleeper that saw it, so the runner drops one it has superseded.
        case tick(sleeper: Int)
        /// The task running the loop was cancelled.
        case cancelled
        /// The loop has ended: what never got an answer fails.
        case ended
        /// An input's writes could not be stored: what it announced did not happen.
        case commitFailed(SwitchboardError)

        // Follow-ups the machine asks for (``Effect/then(_:)``, ``Effect/afterCommit(_:)``).

        /// A timer that was due fires (one at a time: what one does is performed before the next).
        case timerFired(Timer)
        /// A request the rules decided on goes into its lane, in the order the effects before it
        /// were performed (a send an echo let go before the page a snapshot asked for).
        indirect case enqueue(LaneWork, lane: ConversationID?)
        /// A request's outcome, for what asked for it. (Boxed, as the follow-ups in ``Effect`` are:
        /// the inline size of an input is that of its largest case, and every input and effect is
        /// copied through the loop's frames.)
        indirect case answered(LaneWork, Result<BackendResponse, SwitchboardError>)
        /// An update that came in an answer (a poll's) rather than on the link.
        case answeredUpdate(BackendUpdate)
        case head(ConversationID, Int64)
        case placeQueuedWindows(ConversationID)
        /// The runner stored what ``EventProjection`` wrote: announce it and end the echoed sends.
        case projected(EventProjection.Output)
        case storeSequence(Int64, ConversationID)
        case sendFailed(OutboxEntry, reason: String)
        case clearHistory(ConversationID)
        /// The app's message and its outbox entry are stored: the outbox takes it.
        case queueSend(OutboxEntry)
    }

    /// What the runner does, in order. (The sub-steps' ``Action``s are what the rules decide;
    /// these are what performing them takes.)
    enum Effect: Sendable {
        /// Store these in-order events and announce them: ``EventProjection`` with the rows it
        /// reads, then ``Input/projected(_:)``.
        case deliver([BackendEvent])
        case write([StoreWrite])
        /// Announce this (once the input's writes are stored, unless it is a control event).
        case publish(ChatEvent.Kind, ConversationID?, sequence: Int64? = nil, time: Date? = nil)
        case report(SwitchboardError, ConversationID?)
        /// Answer an app command once the input's writes are stored.
        case answer(Answer)
        case log(Logger.Level, String, SwitchboardError?)
        /// Hand this request to link `link`.
        case request(link: Int, ticket: Int, BackendRequest)
        /// Start link `id` (``ConnectionStateMachine/Action/startLink(_:)``).
        case startLink(Int)
        case finishJobs(Int)
        case abortConnect(Int)
        /// Load the stored sequences, credentials, cursor and outbox again
        /// (``SessionStateMachine/load(sequences:credentials:cursor:)``,
        /// ``SessionStateMachine/reloadOutbox(_:)``): a transaction that moved them in memory was
        /// not stored.
        case reloadSyncState
        /// Handle this input next, in the same transaction.
        indirect case then(Input)
        /// Handle this input once this one's writes are stored (not at all if they fail).
        indirect case afterCommit(Input)
    }

    /// What ``handle(_:facts:at:using:)`` says: a read first, or the effects.
    enum Turn: Sendable {
        case needs(Read)
        case perform([Effect])
    }

    /// The answer to an app command, given once the input's writes are stored; if they could not
    /// be, the caller gets that failure instead.
    struct Answer: Sendable {
        let complete: @Sendable (_ storeFailure: SwitchboardError?) -> Void
    }

    // MARK: The entry

    /// Handles one input. Asks for a read (``Turn/needs(_:)``) before changing anything, so the
    /// runner gives the same input again with the answer added to `facts`.
    mutating func handle(_ input: Input, facts: Facts = Facts(), at moment: Moment, using random: inout some RandomNumberGenerator) -> Turn {
        switch input {
        case .started:
            return .perform(effects(of: connection.ready(), at: moment))
        case .command(let command):
            return self.command(command, facts: facts, at: moment, using: &random)
        case .linkOpened(let id):
            let effects = effects(of: connection.linkOpened(id), at: moment)
            if settings.waitsForWindows, connection.link?.id == id {
                window = WindowHold(link: id)
                deadlines[.window] = moment.now + settings.configuration.windowTimeout
            }
            return .perform(effects)
        case .update(let id, let update):
            guard connection.link?.id == id else { return .perform([]) }
            connection.updateArrived(id)
            guard window?.link == id else { return apply(update, facts: facts, at: moment) }
            return beforeWindow(update, facts: facts, at: moment)
        case .linkFailed(let id, let error):
            return .perform(effects(of: connection.linkFailed(id, error), at: moment))
        case .linkClosed(let id, let thrown):
            return .perform(effects(of: connection.linkClosed(id, thrown: thrown, using: &random), at: moment))
        case .requestFinished(let id, let ticket, let result):
            return .perform(requestFinished(ticket, result: result, link: id, at: moment))
        case .requestNotTaken(let id, _):
            return .perform(effects(of: connection.requestNotTaken(id), at: moment))
        case .tick:
            // Every timer due fires, earliest first, each once the one before it is performed.
            let due = deadlines.filter { $0.value <= moment.now }.sorted { $0.value < $1.value }.map(\.key)
            for timer in due { deadlines[timer] = nil }
            return .perform(due.map { .then(.timerFired($0)) })
        case .timerFired(let timer):
            return .perform(fired(timer, at: moment))
        case .enqueue(let work, let lane):
            return .perform(enqueued(work, lane: lane))
        case .cancelled:
            return .perform(effects(of: connection.cancelled(), at: moment))
        case .ended:
            let abandoned = lanes.removeAll().flatMap { abandon($0.work, SwitchboardError(.sessionClosed, "the session has ended")) }
            return .perform(abandoned + effects(of: connection.loopEnded(), at: moment))
        case .commitFailed(let error):
            // What the input would have stored is not there: nothing is known to be stored. The
            // trackers, the cursor, the credentials and the outbox moved past what the store
            // has, so they are loaded again from the store, and the link goes: the next one
            // fetches the events again from where the store says (left as they were, the next
            // event would store a later sequence and the failed ones would be lost for good) and
            // sends what the store still has queued.
            conversations.forEach { state in
                state.isStored = false
                state.info = nil
            }
            var effects: [Effect] = [.report(error, nil), .reloadSyncState]
            if let link = connection.link?.id { effects += self.effects(of: connection.linkFailed(link, error), at: moment) }
            return .perform(effects)
        case .answered(let work, let result):
            return answered(work, result: result, facts: facts, at: moment, using: &random)
        case .answeredUpdate(let update):
            return apply(update, facts: facts, at: moment)
        case .head(let conversation, let lastSequence):
            return resolved(head(of: conversation, lastSequence: lastSequence, facts: facts), at: moment)
        case .placeQueuedWindows(let conversation):
            // The windows that waited for the conversation's fill are placed in turn; once none can
            // be, the cursor they kept back is stored.
            guard hasQueuedWindowToPlace(in: conversation) else { return .perform(effects(of: cursorToStore(), at: moment)) }
            let step = placeQueuedWindow(in: conversation, isLinkOpen: connection.isLinkOpen, facts: facts)
            guard case .perform(let actions) = step else { return resolved(step, at: moment) }
            return .perform(effects(of: actions, at: moment) + [.then(.placeQueuedWindows(conversation))])
        case .projected(let output):
            return .perform(projected(output, at: moment))
        case .storeSequence(let sequence, let conversation):
            // A conversation removed by the events just stored keeps no sequence.
            return .perform(conversations.isKept(conversation) ? [.write([.saveSequence(sequence, for: conversation)])] : [])
        case .sendFailed(let entry, let reason):
            return sendFailed(entry, reason: reason, facts: facts)
        case .clearHistory(let conversation):
            return clearHistory(of: conversation, facts: facts)
        case .queueSend(let entry):
            return .perform(effects(of: outbox { $0.enqueue(entry) }, at: moment))
        }
    }

    // MARK: Updates

    mutating func apply(_ update: BackendUpdate, facts: Facts, at moment: Moment) -> Turn {
        switch update {
        case .snapshot(let snapshot):
            return resolved(snapshotArrived(snapshot, facts: facts), at: moment)
        case .event(let event):
            return resolved(self.event(event, facts: facts), at: moment)
        case .conversationHead(let conversation, let lastSequence):
            return resolved(head(of: conversation, lastSequence: lastSequence, facts: facts), at: moment)
        case .credentials(let new):
            credentials.values.merge(new.values) { _, new in new }
            return .perform([.write([.saveCredentials(credentials)])])
        case .cursor(let new):
            return .perform(effects(of: cursorArrived(new), at: moment))
        case .problem(let error):
            return .perform([.report(error, nil)])
        case .user(let user):
            settings.user = user
            return .perform([])
        }
    }

    /// A snapshot: compared with the stored conversations and messages it names (every stored
    /// conversation, for a complete list), then ``snapshot(_:stored:storedOldest:isLinkOpen:)``.
    mutating func snapshotArrived(_ snapshot: BackendSnapshot, facts: Facts = Facts()) -> Step {
        var stored = SnapshotDiff.Stored(conversations: [:], messages: [:])
        if snapshot.isComplete {
            // A complete list removes what it does not name: every stored conversation counts.
            guard let all = facts.conversations(.allConversations) else { return .needs(.allConversations) }
            for conversation in all { stored.conversations[conversation.id] = conversation }
        } else {
            for item in snapshot.conversations {
                let read = Read.conversation(item.conversation.id)
                guard let info = facts.conversation(read) else { return .needs(read) }
                stored.conversations[item.conversation.id] = info
            }
        }
        for item in snapshot.conversations {
            let id = item.conversation.id
            var messages: [MessageID: Message] = [:]
            let serverIDs = item.messages.compactMap(\.serverID)
            if !serverIDs.isEmpty {
                let read = Read.messages(serverIDs, in: id)
                guard let found = facts.messages(read) else { return .needs(read) }
                for old in found where old.conversationID == id {
                    if let serverID = old.serverID { messages[serverID] = old }
                }
            }
            if item.messagesAreComplete {
                let read = Read.allMessages(in: id)
                guard let all = facts.messages(read) else { return .needs(read) }
                for old in all {
                    if let serverID = old.serverID { messages[serverID] = old }
                }
            }
            stored.messages[id] = messages
        }
        var storedOldest: [ConversationID: Message] = [:]
        for id in windowsToPlace(snapshot, stored: stored) {
            let read = Read.oldestConfirmedMessage(in: id)
            guard let oldest = facts.message(read) else { return .needs(read) }
            storedOldest[id] = oldest
        }
        if let failure = facts.firstFailure {
            return .perform([.report(SwitchboardError(.storageFailure, "could not read the store for a snapshot", underlying: failure), nil)])
        }
        return .perform(self.snapshot(snapshot, stored: stored, storedOldest: storedOldest, isLinkOpen: connection.isLinkOpen))
    }

    /// What ``EventProjection`` wrote is stored: the conversations it stored or removed are known,
    /// its events announced, the sends that came back end.
    mutating func projected(_ output: EventProjection.Output, at moment: Moment) -> [Effect] {
        statistics.duplicatesDropped += output.duplicates
        // New messages from the server: this session's own sends come back as updates, and
        // history pages are not news.
        for publication in output.publications {
            if case .messageAdded(_, let position) = publication.kind, position != .history { statistics.messagesReceived += 1 }
        }
        for (conversation, isStored) in output.stored {
            if isStored { conversations[conversation].isStored = true } else { conversations.remove(conversation) }
        }
        // The value this session last wrote of each conversation: what the next message moves.
        // One known stored only now, and not written, is read when next needed.
        for (conversation, isStored) in output.stored where isStored && !output.conversationWrites.keys.contains(conversation) {
            conversations[conversation].info = nil
        }
        for index in output.conversationWrites.values {
            if case .saveConversation(let info) = output.writes[index], conversations.isKept(info.id) { conversations[info.id].info = info }
        }
        var effects: [Effect] = output.publications.map { .publish($0.kind, $0.conversation, sequence: $0.sequence, time: $0.time) }
        effects += typingEnded(by: output.publications)
        for clientID in output.echoed { effects += self.effects(of: outbox { $0.echoed(clientID) }, at: moment) }
        return effects + output.problems.map { .report($0.0, $0.1) }
    }

    /// Who the app was told is typing, and the "stopped" it is owed when the conversation closes or
    /// the typist leaves it (the backend says nothing more of someone who left).
    mutating func typingEnded(by publications: [EventProjection.Publication]) -> [Effect] {
        var effects: [Effect] = []
        for publication in publications {
            guard let conversation = publication.conversation else { continue }
            var gone: Set<ParticipantID> = []
            switch publication.kind {
            case .typing(let who, let isTyping, _):
                if isTyping { conversations[conversation].othersTyping.insert(who) } else { conversations[conversation].othersTyping.remove(who) }
            case .conversationStateChanged(let state, _) where state.isClosed:
                gone = conversations[conversation].othersTyping
            case .participantsRemoved(let ids):
                gone = conversations[conversation].othersTyping.intersection(ids)
            case .agentChanged(let agent):
                gone = conversations[conversation].othersTyping.filter { $0 != agent?.id }
            default:
                continue
            }
            conversations[conversation].othersTyping.subtract(gone)
            for who in gone.sorted(by: { $0.rawValue < $1.rawValue }) {
                effects.append(.publish(.typing(who, isTyping: false, draft: nil), conversation, time: publication.time))
            }
        }
        return effects
    }

    /// The server forgot `conversation`'s events: the store's old history goes, the app's pending
    /// sends stay (they go to the new one), and the app hears `historyCleared`.
    mutating func clearHistory(of conversation: ConversationID, facts: Facts) -> Turn {
        let pendingIDs = outbox.entries.filter { $0.message.conversationID == conversation }.map(\.message.clientID)
        let stored = Read.conversation(conversation)
        guard let info = facts.conversation(stored) else { return .needs(stored) }
        var pending: [Message] = []
        if !pendingIDs.isEmpty {
            let read = Read.sentMessages(pendingIDs, in: conversation)
            guard let found = facts.messages(read) else { return .needs(read) }
            if let failure = facts.failure(of: read) {
                return .perform([.report(SwitchboardError(.storageFailure, "could not clear the forgotten history of \(conversation)", underlying: failure), conversation)])
            }
            pending = found.filter { $0.conversationID == conversation && $0.deliveryState == .pending }
        }
        // What the old numbering said of the conversation means nothing in the new one: its last
        // sequence and message, and the read markers of its participants. What came is counted
        // afresh as it is caught up.
        var writes: [StoreWrite] = [.removeAllMessages(in: conversation)] + (pending.isEmpty ? [] : [.saveMessages(pending)])
        if var info {
            info.lastSequence = nil
            info.lastMessage = nil
            info.unreadCount = 0
            for index in info.participants.indices { info.participants[index].lastReadSequence = nil }
            conversations[conversation].info = info
            writes.append(.saveConversation(info))
        }
        return .perform(
            [.write(writes), .publish(.historyCleared, conversation)] + pending.map { .publish(.messageAdded($0, position: .newest), conversation) }
        )
    }

    /// A send failed for good: its message is marked failed with the reason and its outbox entry
    /// goes, together.
    func sendFailed(_ entry: OutboxEntry, reason: String, facts: Facts) -> Turn {
        let read = Read.sentMessage(entry.clientID, in: entry.conversationID)
        guard let stored = facts.message(read) else { return .needs(read) }
        if let failure = facts.failure(of: read) {
            return .perform([.report(SwitchboardError(.storageFailure, "could not write to the store", underlying: failure), nil)])
        }
        guard var message = stored else { return .perform([.write([.removeOutboxEntry(entry.clientID)])]) }
        message.deliveryState = .failed(reason)
        return .perform([.write([.removeOutboxEntry(entry.clientID), .saveMessages([message])]), .publish(.messageUpdated(message), entry.conversationID)])
    }

    // MARK: App commands

    mutating func command(_ command: AppCommand, facts: Facts, at moment: Moment, using random: inout some RandomNumberGenerator) -> Turn {
        if case .lifecycle(let change, let reply) = command {
            do {
                let decided: [ConnectionStateMachine.Action]
                switch change {
                case .resume: decided = try connection.resume()
                case .pause: decided = try connection.pause()
                case .close: decided = connection.close()
                }
                return .perform(effects(of: decided, at: moment) + [.answer(reply.answering(()))])
            } catch {
                return .perform([.answer(reply.failing(error))])
            }
        }
        do {
            try connection.lifecycle.checkOpen()
        } catch {
            return .perform([.answer(command.reply.failing(error))])
        }
        switch command {
        case .lifecycle:
            preconditionFailure("handled above")
        case .send(let draft, let conversation, let clientID, _, let reply):
            return send(draft, in: conversation, clientID: clientID, reply: reply, facts: facts, at: moment, using: &random)
        case .typing(let isTyping, let draft, let conversation, let reply):
            let (outcome, actions) = typing(isTyping, draft: draft, in: conversation, now: moment.now)
            var effects = effects(of: actions, at: moment)
            // Sent on an open link: the caller hears the server's answer (its error, typed).
            if outcome == .sent, connection.isLinkOpen,
                let index = effects.firstIndex(where: { if case .then(.enqueue(.typing, _)) = $0 { true } else { false } }),
                case .then(.enqueue(.typing(let conversation, let isTyping, let draft, _), let lane)) = effects[index]
            {
                effects[index] = .then(.enqueue(.typing(conversation, isTyping: isTyping, draft: draft, reply), lane: lane))
                return .perform(effects)
            }
            return .perform(effects + [.answer(reply.answering(outcome))])
        case .markRead(let marker, let conversation, let reply):
            let step = markRead(marker, in: conversation, facts: facts)
            if case .refuse(let error) = step { return .perform([.answer(reply.failing(error))]) }
            guard case .perform(let actions) = step else { return resolved(step, at: moment) }
            // A read that failed changes nothing, and the caller hears it.
            if let failure = facts.firstFailure { return .perform(effects(of: actions, at: moment) + [.answer(reply.failing(failure))]) }
            var effects = effects(of: actions, at: moment)
            // Sent on an open link: the caller hears the server's answer (its error, typed);
            // offline the marker waits for the next link and the caller hears at once.
            if connection.isLinkOpen,
                let index = effects.firstIndex(where: { if case .then(.enqueue(.markRead, _)) = $0 { true } else { false } }),
                case .then(.enqueue(.markRead(let conversation, let marker, _), let lane)) = effects[index]
            {
                effects[index] = .then(.enqueue(.markRead(conversation, marker, reply), lane: lane))
                return .perform(effects)
            }
            return .perform(effects + [.answer(reply.answering(()))])
        case .history(let conversation, let limit, let reply):
            return history(in: conversation, limit: limit, reply: reply, facts: facts)
        case .startConversation(let draft, let reply):
            var effects: [Effect] = []
            guard enqueue(.start(draft, reply), lane: nil, into: &effects) else {
                return .perform([.answer(reply.failing(SwitchboardError(.notConnected, "startConversation needs a connection")))])
            }
            return .perform(effects)
        case .request(let request, let applying, let reply):
            var effects: [Effect] = []
            guard enqueue(.app(request, applying, reply), lane: request.conversationID, into: &effects) else {
                return .perform([.answer(reply.failing(SwitchboardError(.notConnected, "\(request.name) needs a connection")))])
            }
            return .perform(effects)
        }
    }

    /// The app's message: stored with its outbox entry (and its conversation, when the backend
    /// never announced it), announced pending, and handed to the outbox once stored — a crash
    /// between the two would leave a pending message nothing resends. On a backend that takes
    /// fewer files per message than the draft has, the draft's parts (``MessageDraft/parts(attachmentsPerMessage:)``)
    /// are stored in the same transaction; the reply is the first.
    mutating func send(
        _ draft: MessageDraft,
        in conversation: ConversationID,
        clientID: ClientMessageID?,
        reply: Reply<Message>,
        facts: Facts,
        at moment: Moment,
        using random: inout some RandomNumberGenerator
    ) -> Turn {
        var effects: [Effect] = []
        if let clientID {
            // The caller's id: a repeat is answered with what the store holds, and queues nothing.
            let read = Read.sentMessage(clientID, in: conversation)
            guard let stored = facts.message(read) else { return .needs(read) }
            if let failure = facts.failure(of: read) { return .perform([.answer(reply.failing(failure))]) }
            if let stored {
                // A store may find the id in another conversation of the scope.
                guard stored.conversationID == conversation else {
                    return .perform([.answer(reply.failing(SwitchboardError(.invalidArgument, "the client id \(clientID) is a message of conversation \(stored.conversationID)")))])
                }
                return .perform([.answer(reply.answering(stored))])
            }
        }
        if !conversations[conversation].isStored {
            let read = Read.conversation(conversation)
            guard let stored = facts.conversation(read) else { return .needs(read) }
            if let failure = facts.failure(of: read) { return .perform([.answer(reply.failing(failure))]) }
            if stored == nil {
                let info = ConversationInfo(id: conversation, createdAt: moment.date)
                effects += [.write([.saveConversation(info)]), .publish(.conversationAdded(info), conversation, time: moment.date)]
            }
            conversations[conversation].isStored = true
            conversations[conversation].info = stored ?? ConversationInfo(id: conversation, createdAt: moment.date)
        }
        // A draft over the backend's files per message goes as several messages (its text first,
        // then its files), each with its own client id and outbox entry, stored together.
        // A millisecond apart, so the parts keep their order while pending or failed.
        let entries = draft.parts(attachmentsPerMessage: settings.descriptor.limits.attachmentsPerMessage).enumerated().map { index, part in
            let id = clientID.map { index == 0 ? $0 : ClientMessageID("\($0.rawValue)/\(index + 1)") } ?? ClientMessageID.random(using: &random)
            return OutboxEntry(
                message: OutgoingMessage(clientID: id, conversationID: conversation, content: part),
                createdAt: moment.date.addingTimeInterval(Double(index) / 1000)
            )
        }
        let messages = entries.map(\.pendingMessage)
        effects.append(.write([.saveMessages(messages)] + entries.map { .saveOutboxEntry($0) }))
        effects += messages.map { .publish(.messageAdded($0, position: .newest), conversation, time: moment.date) }
        effects.append(.answer(reply.answering(messages[0])))
        effects += entries.map { .afterCommit(.queueSend($0)) }
        return .perform(effects)
    }

    /// The app asked for the next history page: asked of the backend, or, when a page is on its
    /// way already, waited for. Answered at once when there is nothing more to ask.
    mutating func history(in conversation: ConversationID, limit: Int, reply: Reply<Void>, facts: Facts) -> Turn {
        let isLinkOpen = connection.isLinkOpen
        var next = conversations[conversation].history.next(in: conversation, limit: limit, isLinkOpen: isLinkOpen)
        if next == .readOldestStored {
            let read = Read.oldestConfirmedMessage(in: conversation)
            guard let oldest = facts.message(read) else { return .needs(read) }
            if let failure = facts.failure(of: read) { return .perform([.answer(reply.failing(failure))]) }
            next = conversations[conversation].history.next(in: conversation, limit: limit, isLinkOpen: isLinkOpen, oldestStored: .some(oldest))
        }
        var effects: [Effect] = []
        switch next {
        case .ask(let query):
            guard enqueue(.history(query), lane: conversation, into: &effects) else { return .perform([.answer(reply.answering(()))]) }
        case .join:
            break
        case .answerNow, .readOldestStored:
            return .perform([.answer(reply.answering(()))])
        }
        conversations[conversation].history.join(reply)
        return .perform(effects)
    }

    // MARK: From the rules' actions to effects

    mutating func resolved(_ step: Step, at moment: Moment) -> Turn {
        switch step {
        case .needs(let read): .needs(read)
        case .perform(let actions): .perform(effects(of: actions, at: moment))
        case .refuse(let error): .perform([.report(error, nil)])
        }
    }

    /// What performing the rules' actions takes: timers become deadlines, saves become writes, and
    /// requests (into their lanes, when their turn comes) and the rest become follow-up inputs.
    mutating func effects(of actions: [Action], at moment: Moment) -> [Effect] {
        var effects: [Effect] = []
        for action in actions {
            switch action {
            case .deliver(let events):
                effects.append(.deliver(events))
            case .saveSequence(let sequence, let conversation):
                // Decided once the events before it are stored (they may remove the conversation).
                effects.append(.then(.storeSequence(sequence, conversation)))
            case .retransmit(let range, let conversation):
                effects.append(.then(.enqueue(.retransmit(conversation, range), lane: conversation)))
            case .startHoldTimer(let conversation):
                deadlines[.hold(conversation)] = moment.now + settings.configuration.holdTimeout
            case .report(let problem, let conversation):
                effects.append(.report(problem, conversation))
            case .clearHistory(let conversation):
                effects.append(.then(.clearHistory(conversation)))
            case .saveCursor(let cursor):
                effects.append(.write([.saveCursor(cursor)]))
            case .requestPage(let query, let conversation):
                effects.append(.then(.enqueue(.backfill(query), lane: conversation)))
            case .placeQueuedWindows(let conversation):
                effects.append(.then(.placeQueuedWindows(conversation)))
            case .observeHead(let conversation, let head):
                effects.append(.then(.head(conversation, head)))
            case .sendReadMarker(let marker, let conversation):
                effects.append(.then(.enqueue(.markRead(conversation, marker), lane: conversation)))
            case .send(let entry):
                // The outbox sends only while connected; if the link is going, the next one resends.
                effects.append(.then(.enqueue(.send(entry), lane: entry.conversationID)))
            case .saveOutboxEntry(let entry):
                effects.append(.write([.saveOutboxEntry(entry)]))
            case .removeOutboxEntry(let clientID):
                effects.append(.write([.removeOutboxEntry(clientID)]))
            case .failSend(let entry, let reason):
                effects.append(.then(.sendFailed(entry, reason: reason)))
            case .startRetryTimer(let conversation, let delay):
                deadlines[.outboxRetry(conversation)] = moment.now + delay
            case .sendTyping(let isTyping, let draft, let conversation):
                // Typing is best effort: offline it is dropped.
                effects.append(.then(.enqueue(.typing(conversation, isTyping: isTyping, draft: draft), lane: conversation)))
            case .startTypingTimer(let conversation, let instant):
                deadlines[.typing(conversation)] = instant
            case .updateConversation(let info):
                conversations[info.id].info = info
                effects += [.write([.saveConversation(info)]), .publish(.conversationUpdated(info), info.id)]
            case .poll:
                deadlines[.poll] = nil
                effects.append(.then(.enqueue(.poll, lane: nil)))
            case .startPollTimer(let delay):
                deadlines[.poll] = moment.now + delay
            case .cancelLinkTimers:
                for timer in deadlines.keys where timer.livesOnLink { deadlines[timer] = nil }
            }
        }
        return effects
    }
}

extension Reply {
    /// Answers with `result` once the input's writes are stored.
    func answering(_ result: Result<Value, SwitchboardError>) -> SessionStateMachine.Answer {
        SessionStateMachine.Answer { storeFailure in
            if let storeFailure { fail(storeFailure) } else { complete(result) }
        }
    }

    func answering(_ value: Value) -> SessionStateMachine.Answer {
        answering(.success(value))
    }

}

extension FailableReply {
    func failing(_ error: any Error) -> SessionStateMachine.Answer {
        SessionStateMachine.Answer { _ in fail(error) }
    }
}
