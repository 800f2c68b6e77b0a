import Foundation

/// The engine's rules as one value: the session's state that the rules read and change, and, for
/// each input, the actions the runner (``ChatSession``) performs — store these events, save this
/// sequence, ask for this retransmit, start this timer, report this problem.
///
/// Pure: no `async`, no I/O, no clock reads. A fact it needs from the store is asked for by
/// returning ``Step/needs(_:)``; the runner reads it, adds the answer to the input's ``Facts``
/// and gives the same input again. Nothing is changed before a step asks, so asking again is
/// safe.
///
/// It holds the whole state of a session's engine — per conversation (``ConversationState``), the
/// connection (``ConnectionStateMachine``), the request lanes, the outbox, the deadlines, the
/// cursor, the credentials and the statistics — and takes every input through one entry,
/// ``handle(_:facts:at:using:)`` (`SessionStateMachine+Inputs.swift`), which returns the
/// ``Effect``s the runner performs. The rules themselves are steps that return ``Action``s: for
/// what arrives (sequenced events, gaps, heads, a server that numbers them afresh, snapshots,
/// window fills, the cursor) here and in `+Windows`, for what goes out (sends and their answers,
/// typing, marking read, polling, an app request's answer, a lost link) in `+Outbound`. They
/// compose pure values of their own (``OutboxStateMachine``, ``SnapshotApplication``,
/// ``ReadMarkerStateMachine``, the trackers…).
struct SessionStateMachine: Sendable {
    /// What the rules depend on, fixed for the session: the configuration, and what the backend
    /// can do.
    struct Settings: Sendable {
        var descriptor: BackendDescriptor
        var configuration: SessionConfiguration
        /// The participant the session acts as, where the backend names it (``ChatBackend/user``).
        var user: ParticipantID?

        init(descriptor: BackendDescriptor, configuration: SessionConfiguration, user: ParticipantID? = nil) {
            self.descriptor = descriptor
            self.configuration = configuration
            self.user = user
        }

        /// What the event projection needs: who the user is, and whose unread count wins.
        var projection: EventProjection.Settings {
            EventProjection.Settings(user: user, backendCountsUnread: descriptor.capabilities.contains(.unreadCounts))
        }

        /// The backend numbers each conversation's events (``SyncModel/sequenced(batchLimit:)``).
        var isSequenced: Bool { descriptor.sync.isSequenced }
        /// Each link opens with a window (``SyncModel/windowed(pageSize:)``), and its live events
        /// wait for it.
        var waitsForWindows: Bool {
            if case .windowed = descriptor.sync { true } else { false }
        }
        /// A window's gap is filled with history pages: a windowed backend that pages history.
        var fillsWindows: Bool { waitsForWindows && descriptor.capabilities.contains(.historyPaging) }
        /// The backend pushes nothing and is polled (``SyncModel/polled``).
        var polls: Bool { descriptor.sync == .polled }
        /// The messages one page of a window's fill asks for: the backend's page, at most the
        /// configuration's.
        var windowPageSize: Int {
            guard case .windowed(let pageSize) = descriptor.sync else { return configuration.backfillPageSize }
            return max(1, min(pageSize, configuration.backfillPageSize))
        }
        /// How typing reaches the backend: the configuration's, else the backend's own.
        var typingPolicy: TypingPolicy { configuration.typingPolicy ?? descriptor.limits.typingPolicy }
        /// The most events one retransmit asks for (``SyncModel/sequenced(batchLimit:)``).
        var maxRetransmitBatch: Int {
            guard case .sequenced(let batchLimit) = descriptor.sync else { return 1 }
            return max(1, batchLimit)
        }
    }

    /// What the runner does, in order.
    enum Action: Sendable {
        /// Store these in-order events and announce them (``EventProjection``).
        case deliver([BackendEvent])
        /// Store where the conversation's events resume.
        case saveSequence(Int64, ConversationID)
        /// Ask for these events again; without a link, say so (``retransmitNotSent(_:in:)``).
        case retransmit(ClosedRange<Int64>, ConversationID)
        /// Wake the conversation's tracker after the hold timeout (``holdTimerFired(in:)``).
        case startHoldTimer(ConversationID)
        case report(SwitchboardError, ConversationID?)
        /// The server forgot the conversation's events: clear its stored history, keeping the
        /// app's pending sends, and announce that.
        case clearHistory(ConversationID)
        case saveCursor(SyncCursor)
        /// Ask for a page below a window; without a link, say so (``backfillNotSent(in:)``).
        case requestPage(HistoryQuery, ConversationID)
        /// The conversation's fill closed: place the windows that waited for it in turn
        /// (``placeQueuedWindow(in:isLinkOpen:facts:)``), then store the
        /// cursor if it may be (``cursorToStore()``).
        case placeQueuedWindows(ConversationID)
        /// The backend says where the conversation's events are up to
        /// (``head(of:lastSequence:facts:)``).
        case observeHead(ConversationID, Int64)
        /// Send the app's read marker.
        case sendReadMarker(ChatEvent.ReadMarker, ConversationID)
        /// Send this message (it stays in the outbox until answered).
        case send(OutboxEntry)
        case saveOutboxEntry(OutboxEntry)
        /// The send is done: its outbox entry goes.
        case removeOutboxEntry(ClientMessageID)
        /// The send failed for good: its message is marked failed with `reason` and its outbox
        /// entry goes, in one transaction.
        case failSend(OutboxEntry, reason: String)
        /// Call ``outbox(_:)`` with `retryTimerFired` for the conversation after `delay`.
        case startRetryTimer(ConversationID, after: Duration)
        /// Tell the backend the user is typing (best effort: dropped offline).
        case sendTyping(Bool, draft: String?, ConversationID)
        /// Call ``typingTimerFired(in:now:)`` at this instant.
        case startTypingTimer(ConversationID, at: Duration)
        /// Store the conversation as it now is, and announce it (`conversationUpdated`).
        case updateConversation(ConversationInfo)
        /// Ask the backend for its changes (the poll timer is cancelled: this is the poll).
        case poll
        /// Call ``pollDue(isLinkOpen:)`` after `delay`.
        case startPollTimer(after: Duration)
        /// Cancel the timers that lived on the link: hold, outbox retry, typing, poll.
        case cancelLinkTimers
    }

    /// A fact from the store that a step needs.
    enum Read: Sendable, Hashable {
        /// The stored conversation, if any.
        case conversation(ConversationID)
        /// The stored message at this sequence, if any.
        case message(atSequence: Int64, in: ConversationID)
        /// The stored message with this server id, if any.
        case storedMessage(MessageID, in: ConversationID)
        /// The oldest message of the conversation the server confirmed, if any.
        case oldestConfirmedMessage(in: ConversationID)
        /// The newest stored messages of the conversation (``EventProjection/readDerivationWindow``
        /// of them), oldest first.
        case newestMessages(in: ConversationID)
        /// The stored messages with these server ids.
        case messages([MessageID], in: ConversationID)
        /// The stored copy of the app's message with this client id, if any.
        case sentMessage(ClientMessageID, in: ConversationID)
        /// The stored copies of the app's messages with these client ids.
        case sentMessages([ClientMessageID], in: ConversationID)
        /// Every stored message of the conversation.
        case allMessages(in: ConversationID)
        /// Every stored conversation.
        case allConversations
    }

    /// What the store answered to the reads of one input so far. A read that failed reads as
    /// absent; a step that must know tells by ``failure(of:)``.
    struct Facts: Sendable {
        enum Answer: Sendable {
            case conversation(ConversationInfo?)
            case message(Message?)
            case messages([Message])
            case conversations([ConversationInfo])
            case failed(SwitchboardError)
        }

        var answers: [Read: Answer] = [:]

        /// The answer to `read`: `nil` until asked, `.some(nil)` for none (or a failed read).
        func conversation(_ read: Read) -> ConversationInfo?? {
            switch answers[read] {
            case .conversation(let info)?: .some(info)
            case .failed?: .some(nil)
            default: nil
            }
        }

        func message(_ read: Read) -> Message?? {
            switch answers[read] {
            case .message(let message)?: .some(message)
            case .failed?: .some(nil)
            default: nil
            }
        }

        func messages(_ read: Read) -> [Message]? {
            switch answers[read] {
            case .messages(let messages)?: messages
            case .failed?: []
            default: nil
            }
        }

        func conversations(_ read: Read) -> [ConversationInfo]? {
            switch answers[read] {
            case .conversations(let conversations)?: conversations
            case .failed?: []
            default: nil
            }
        }

        func failure(of read: Read) -> SwitchboardError? {
            if case .failed(let error)? = answers[read] { return error }
            return nil
        }

        /// The first failed read, if any.
        var firstFailure: SwitchboardError? {
            answers.values.lazy.compactMap { if case .failed(let error) = $0 { error } else { nil } }.first
        }
    }

    enum Step: Sendable {
        case needs(Read)
        case perform([Action])
        /// The app's command is refused with this error; nothing changed.
        case refuse(SwitchboardError)
    }

    typealias Tracker = SequenceTrackerStateMachine<BackendEvent>

    /// What the machine was built with, and the user once a link names them (``BackendUpdate/user(_:)``).
    var settings: Settings
    /// What the engine keeps per conversation.
    var conversations = ConversationStates()
    var statistics = SessionStatistics()
    /// The account-wide cursor as the backend last gave it (stored only while no fill is open).
    var cursor: SyncCursor?
    /// The sends waiting for the server, FIFO per conversation.
    var outbox: OutboxStateMachine
    /// A poll is queued or in flight (backends that push nothing).
    var isPollQueued = false
    /// What the app wants, the link, and reconnecting (``ConnectionStateMachine``).
    var connection: ConnectionStateMachine
    /// The requests on the link, in their conversations' lanes.
    var lanes: RequestLanesStateMachine<LaneWork>
    /// The deadlines set: the runner's one timer is armed for the earliest (``nextDeadline``) and
    /// the clock reaching it is ``Input/tick``.
    var deadlines: [Timer: Duration] = [:]
    /// What the backend gave the session to resume with (tokens, visitor ids).
    var credentials = Credentials()
    /// A windowed backend's open link whose window has not come yet, and the live updates it
    /// sent meanwhile (``SyncModel/windowed(pageSize:)``).
    var window: WindowHold?

    /// Until a windowed link's first snapshot arrives, what it pushes waits: a message pushed
    /// while the server recovers the window must not land before the window that shows what was
    /// missed, or the window looks stored already and the gap below it goes unseen.
    struct WindowHold: Sendable {
        var link: Int
        /// Events, cursors and heads, in wire order.
        var held: [BackendUpdate] = []
    }

    init(settings: Settings) {
        self.settings = settings
        let configuration = settings.configuration
        self.outbox = OutboxStateMachine(backoff: configuration.outboxBackoff, maxLinkLosses: configuration.maxLinkLossesPerSend)
        self.connection = ConnectionStateMachine(backoff: configuration.reconnectBackoff, stableLinkDuration: configuration.stableLinkDuration)
        self.lanes = RequestLanesStateMachine(concurrency: configuration.maxConcurrentRequests)
    }

    /// The state loaded from the store: where each conversation's events resume, the credentials
    /// and the cursor — as the session starts (the outbox follows:
    /// ``restoreOutbox(_:withMessage:pending:)``), and again after a transaction that had moved
    /// them in memory failed (``Effect/reloadSyncState``). Each conversation's tracker starts
    /// over from what is stored at the next link.
    mutating func load(sequences: [ConversationID: Int64], credentials: Credentials, cursor: SyncCursor?) {
        conversations.forEach { state in
            state.tracker = nil
            state.storedSequence = nil
        }
        for (conversation, sequence) in sequences { conversations[conversation].storedSequence = sequence }
        self.credentials = credentials
        self.cursor = cursor
    }

    /// The outbox as stored, again, after a transaction failed: a send's answer had taken its
    /// entry off the queue in memory (or a retry had counted an attempt) before the write that
    /// records it, and the store still has the entry. The link goes with the failed write, so the
    /// entries go out again on the next one (under their client ids: the server recognizes a
    /// resend), and none stays in the store that the engine has forgotten.
    mutating func reloadOutbox(_ entries: [OutboxEntry]) {
        outbox.reload(entries)
    }

    // MARK: Events

    /// An event from the link: ordered by its conversation's tracker (sequenced backends), held
    /// while its conversation's gap is filled, or stored as it comes.
    ///
    /// A new message at a sequence already delivered is checked against the stored one there.
    mutating func event(_ event: BackendEvent, facts: Facts = Facts()) -> Step {
        var actions: [Action] = []
        if settings.isSequenced, let sequence = event.sequence, let conversation = event.conversationID {
            if let delivered = conversations[conversation].tracker?.delivered, sequence <= delivered, case .messageAdded(let message, _) = event.kind,
                let id = message.serverID
            {
                let read = Read.message(atSequence: sequence, in: conversation)
                guard let storedAtSequence = facts.message(read) else { return .needs(read) }
                if let stored = storedAtSequence, stored.sequence == sequence, let storedID = stored.serverID, storedID != id {
                    actions += resynchronize(conversation, head: sequence, because: "event #\(sequence) came with message \(id.rawValue), not the one stored at #\(sequence)")
                }
            }
            var tracker = conversations[conversation].tracker ?? newTracker(for: conversation, baseline: catchUpBaseline(sequence - 1))
            let before = tracker.heldCount
            let outcome = tracker.receive(sequence: sequence, event: event)
            if tracker.heldCount > before { statistics.heldBack += 1 }
            conversations[conversation].tracker = tracker
            actions += handle(outcome, in: conversation)
        } else if let conversation = event.conversationID, conversations[conversation].windowFill != nil, WindowBackfillStateMachine.holds(event) {
            conversations[conversation].holdDuringFill(event)
        } else {
            actions.append(.deliver([event]))
        }
        if let cursor = event.cursor { actions += cursorArrived(cursor) }
        return .perform(actions)
    }

    /// The backend says where a conversation's events are up to. A conversation the store knows
    /// but has no sequence for starts there: older events are history, paged on demand. One never
    /// seen catches up its newest events (``SessionConfiguration/newConversationCatchUp``). A head
    /// below what was delivered is a server that forgot.
    mutating func head(of conversation: ConversationID, lastSequence: Int64, facts: Facts = Facts()) -> Step {
        guard settings.isSequenced else { return .perform([]) }
        var actions: [Action] = []
        var tracker: Tracker
        if let existing = conversations[conversation].tracker {
            tracker = existing
        } else {
            let read = Read.conversation(conversation)
            guard let isStored = conversations[conversation].isStored ? true : facts.conversation(read).map({ $0 != nil }) else {
                return .needs(read)
            }
            tracker = newTracker(for: conversation, baseline: isStored ? lastSequence : catchUpBaseline(lastSequence))
        }
        if conversations[conversation].storedSequence == nil {
            // Where this link starts is stored at once, not with the first event delivered: a
            // session that ends before any event came (its sends applied but unanswered, then the
            // process killed) must resume from here, not take what came meanwhile for history
            // (the gateway failover test lost those messages).
            conversations[conversation].storedSequence = tracker.delivered
            actions.append(.saveSequence(tracker.delivered, conversation))
        }
        if lastSequence < tracker.delivered {
            actions += resynchronize(conversation, head: lastSequence, because: "its newest event is #\(lastSequence), below the #\(tracker.delivered) delivered")
            tracker = conversations[conversation].tracker!
        }
        let outcome = tracker.headObserved(lastSequence)
        conversations[conversation].tracker = tracker
        actions += handle(outcome, in: conversation)
        return .perform(actions)
    }

    /// A retransmit of `range` answered (or failed).
    mutating func retransmitFinished(_ range: ClosedRange<Int64>, in conversation: ConversationID, result: Result<BackendResponse, SwitchboardError>) -> [Action] {
        guard var tracker = conversations[conversation].tracker else { return [] }
        var actions: [Action] = []
        var outcome = Tracker.Outcome()
        switch result {
        case .success(.retransmitted(let events, isComplete: false)):
            outcome = receive(events, in: range, complete: false, tracker: &tracker)
        case .success(.retransmitted(let events, isComplete: true)):
            outcome = receive(events, in: range, complete: true, tracker: &tracker)
        case .success(let response):
            actions.append(.report(SwitchboardError(.protocolViolation, "retransmit answered with \(response)"), conversation))
            outcome = tracker.retransmitFailed(range)
        case .failure(let error):
            if error.code != .cancelled {
                actions.append(.report(SwitchboardError(error.code, "retransmit \(range) failed", underlying: error), conversation))
            }
            outcome = tracker.retransmitFailed(range)
        }
        conversations[conversation].tracker = tracker
        return actions + handle(outcome, in: conversation)
    }

    /// A retransmit could not be queued (no link): the tracker asks again on the next one.
    mutating func retransmitNotSent(_ range: ClosedRange<Int64>, in conversation: ConversationID) {
        _ = conversations[conversation].tracker?.retransmitFailed(range)
    }

    /// The hold timer of a conversation fired: what its tracker held for a gap goes on.
    mutating func holdTimerFired(in conversation: ConversationID) -> [Action] {
        guard let outcome = conversations[conversation].tracker?.holdTimerFired() else { return [] }
        return handle(outcome, in: conversation)
    }

    /// The link is gone and everything it carried has reported. The sends it had on the wire
    /// (`inFlightSends`) count a link loss when it failed (a send that keeps killing the link
    /// fails), the trackers and fills re-plan on the next link, typing starts afresh, and the
    /// timers that lived on the link go.
    mutating func linkDropped(interrupted: Bool, inFlightSends: [ClientMessageID]) -> [Action] {
        if interrupted { statistics.sendAttemptsFailed += inFlightSends.count }
        let interrupting = interrupted ? Set(inFlightSends) : []
        let actions = outbox { $0.disconnected(interrupting: interrupting) }
        conversations.forEach { state in
            state.tracker?.connectionLost()
            state.windowFill?.linkLost()
            state.typing = nil
        }
        return actions + [.cancelLinkTimers]
    }

    // MARK: The cursor

    /// The backend's account-wide cursor moved. While a gap is being filled the stored cursor
    /// stays before it: a process that dies with the gap open syncs it again, instead of
    /// resuming past messages it never stored. (The next link still starts from the new one: the
    /// open fill is kept across links.)
    mutating func cursorArrived(_ new: SyncCursor) -> [Action] {
        guard new != cursor else { return [] }
        cursor = new
        return cursorToStore()
    }

    /// The cursor to store now that it may be: once no fill is open.
    func cursorToStore() -> [Action] {
        guard let cursor, !conversations.contains(where: { $0.windowFill != nil }) else { return [] }
        return [.saveCursor(cursor)]
    }

    // MARK: Helpers

    /// The server has forgotten `conversation`'s events (it restarted without its data, or was
    /// restored from a backup) and numbers them afresh: its history is the truth from now on.
    /// Says so, clears what the store holds of the old history (the app's pending sends stay, and
    /// go to the new one), and starts over at `head` as for a conversation never seen, so what the
    /// server has now arrives instead of being taken for what was delivered.
    private mutating func resynchronize(_ conversation: ConversationID, head: Int64, because reason: String) -> [Action] {
        statistics.resynchronizations += 1
        // Markers of the old numbering mean nothing in the new one.
        conversations[conversation].readMarker.forget()
        let baseline = catchUpBaseline(head)
        conversations[conversation].storedSequence = baseline
        conversations[conversation].tracker = newTracker(for: conversation, baseline: baseline)
        let problem = SwitchboardError(
            .protocolViolation, "the server has forgotten the events of \(conversation) (\(reason)); resynchronizing it from the server"
        )
        return [.report(problem, conversation), .clearHistory(conversation), .saveSequence(baseline, conversation)]
    }

    /// What a tracker's outcome asks: deliver in order (and store where that got to), ask for
    /// retransmits, start the hold timer.
    private mutating func handle(_ outcome: Tracker.Outcome, in conversation: ConversationID) -> [Action] {
        statistics.duplicatesDropped += outcome.duplicates
        statistics.heldOverflow += outcome.overflowed
        var actions: [Action] = []
        if let refused = outcome.refused {
            let delivered = conversations[conversation].tracker?.delivered ?? 0
            actions.append(
                .report(SwitchboardError(.protocolViolation, "sequence \(refused) is more than \(settings.configuration.maxSequenceJump) past the \(delivered) delivered; ignored"), conversation)
            )
        }
        if !outcome.deliver.isEmpty {
            actions.append(.deliver(outcome.deliver.map(\.1)))
            if let delivered = conversations[conversation].tracker?.delivered {
                conversations[conversation].storedSequence = delivered
                actions.append(.saveSequence(delivered, conversation))
            }
        }
        if !outcome.retransmit.isEmpty { statistics.gapsDetected += 1 }
        for range in outcome.retransmit {
            statistics.retransmitRequests += 1
            actions.append(.retransmit(range, conversation))
        }
        if outcome.startHoldTimer { actions.append(.startHoldTimer(conversation)) }
        return actions
    }

    /// Feeds a retransmit's events of `range` to the tracker, then its completion.
    private mutating func receive(_ events: [BackendEvent], in range: ClosedRange<Int64>, complete: Bool, tracker: inout Tracker) -> Tracker.Outcome {
        statistics.retransmittedEvents += events.count
        var outcome = Tracker.Outcome()
        for event in events {
            guard let sequence = event.sequence, range.contains(sequence) else { continue }
            outcome.merge(tracker.receive(sequence: sequence, event: event))
        }
        outcome.merge(tracker.retransmitCompleted(range, complete: complete))
        return outcome
    }

    /// Where a conversation first seen at `head` starts: its newest events are caught up.
    private func catchUpBaseline(_ head: Int64) -> Int64 {
        max(0, head - Int64(settings.configuration.newConversationCatchUp))
    }

    private func newTracker(for conversation: ConversationID, baseline: Int64) -> Tracker {
        Tracker(
            delivered: conversations[conversation].storedSequence ?? baseline,
            batchLimit: settings.maxRetransmitBatch,
            maxInFlight: settings.configuration.maxRetransmitsInFlight,
            maxHeld: settings.configuration.maxHeldEvents,
            maxJump: settings.configuration.maxSequenceJump
        )
    }
}

extension SequenceTrackerStateMachine.Outcome {
    mutating func merge(_ other: Self) {
        deliver += other.deliver
        retransmit += other.retransmit
        startHoldTimer = startHoldTimer || other.startHoldTimer
        duplicates += other.duplicates
        overflowed += other.overflowed
        refused = refused ?? other.refused
    }
}
