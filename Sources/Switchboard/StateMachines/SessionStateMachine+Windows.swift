/// The rules for snapshots and the windows they bring: which events are stored at once, which
/// windows are filled first, and the fills' pages (backends without sequences).
extension SessionStateMachine {
    /// An update of a windowed link whose window has not come yet: an event, a cursor or a head
    /// waits for it; the first snapshot is the window, applied, then followed by what waited, in
    /// the order it came (``WindowHold``).
    mutating func beforeWindow(_ update: BackendUpdate, facts: Facts, at moment: Moment) -> Turn {
        switch update {
        case .event, .cursor, .conversationHead:
            window?.held.append(update)
            return .perform([])
        case .snapshot:
            let turn = apply(update, facts: facts, at: moment)
            guard case .perform(let effects) = turn else { return turn }
            return .perform(effects + releaseWindow())
        case .credentials, .problem, .user:
            return apply(update, facts: facts, at: moment)
        }
    }

    private var snapshotApplication: SnapshotApplication {
        SnapshotApplication(pageLimit: settings.windowPageSize, maxPages: settings.configuration.maxBackfillPages, fillsWindows: settings.fillsWindows)
    }

    /// The conversations of `snapshot` whose oldest confirmed stored message is needed to tell
    /// whether their window leaves a gap.
    func windowsToPlace(_ snapshot: BackendSnapshot, stored: SnapshotDiff.Stored) -> [ConversationID] {
        snapshotApplication.windowsToPlace(snapshot, stored: stored, states: conversations)
    }

    /// A snapshot arrived, compared with `stored` (and `storedOldest`, for the conversations
    /// ``windowsToPlace(_:stored:)`` named): store what it changed, open a fill below each window
    /// with a gap (asking for its first page when a link is open), observe the heads, move the
    /// cursor.
    mutating func snapshot(_ snapshot: BackendSnapshot, stored: SnapshotDiff.Stored, storedOldest: [ConversationID: Message], isLinkOpen: Bool) -> [Action] {
        let plan = snapshotApplication.apply(snapshot, stored: stored, storedOldest: storedOldest, to: &conversations)
        statistics.gapsDetected += plan.newFills.count
        var actions: [Action] = [.deliver(plan.deliver)]
        if isLinkOpen {
            for conversation in plan.newFills { actions += backfill(conversations[conversation].windowFill!.linkAvailable(), in: conversation) }
        }
        actions += plan.heads.map { .observeHead($0.0, $0.1) }
        if let cursor = snapshot.cursor { actions += cursorArrived(cursor) }
        return actions
    }

    /// A link is up: the read markers set while offline are sent, and the open fills ask for
    /// their next page.
    mutating func linkOpened() -> [Action] {
        var actions: [Action] = conversations.ids(where: { $0.readMarker.pending != nil }).map { .sendReadMarker(conversations[$0].readMarker.pending!, $0) }
        for conversation in conversations.ids(where: { $0.windowFill != nil }) {
            actions += backfill(conversations[conversation].windowFill!.linkAvailable(), in: conversation)
        }
        return actions
    }

    /// A page below a window answered (or failed).
    mutating func pageFinished(
        in conversation: ConversationID,
        result: Result<BackendResponse, SwitchboardError>,
        isLinkOpen: Bool,
        facts: Facts = Facts()
    ) -> Step {
        guard conversations[conversation].windowFill != nil else { return .perform([]) }
        switch result {
        case .success(.history(let page)):
            let ids = page.messages.compactMap(\.serverID)
            let read = Read.messages(ids, in: conversation)
            if let failure = facts.failure(of: read) {
                // The page cannot be placed: the fill stops and stores what it holds, with a problem.
                return .perform(pageUnusable(SwitchboardError(.storageFailure, "could not read the store for a history page", underlying: failure), in: conversation))
            }
            guard let stored = ids.isEmpty ? [] : facts.messages(read) else { return .needs(read) }
            return .perform(backfill(conversations[conversation].windowFill!.pageArrived(page, stored: stored.filter { $0.serverID != nil }), in: conversation))
        case .success(let response):
            return .perform(pageUnusable(SwitchboardError(.protocolViolation, "history answered with \(response)"), in: conversation))
        case .failure(let error) where !isLinkOpen || error.code == .cancelled:
            // The link went: the next link asks again.
            conversations[conversation].windowFill!.linkLost()
            return .perform([])
        case .failure(let error):
            return .perform(pageUnusable(error, in: conversation))
        }
    }

    /// A page could not be had or placed: the fill stops and stores what it holds, with a problem.
    mutating func pageUnusable(_ error: SwitchboardError, in conversation: ConversationID) -> [Action] {
        guard conversations[conversation].windowFill != nil else { return [] }
        return backfill(conversations[conversation].windowFill!.pageFailed(error), in: conversation)
    }

    /// A page request could not be queued (no link): the fill asks again when the next one is up.
    mutating func backfillNotSent(in conversation: ConversationID) {
        conversations[conversation].windowFill?.linkLost()
    }

    /// The window waiting first for `conversation`'s fill, once none is open: filled when it has a
    /// gap of its own, else stored with the events that came after it.
    ///
    /// A read that fails is reported, and the window stored as it is (a gap below it stays open).
    mutating func placeQueuedWindow(in conversation: ConversationID, isLinkOpen: Bool, facts: Facts = Facts()) -> Step {
        guard conversations[conversation].windowFill == nil, let next = conversations[conversation].queuedWindows.first else { return .perform([]) }
        var oldestIsStored = false
        if next.window.skippedAfter == nil, let oldest = next.window.messages.min(by: { $0.orderKey < $1.orderKey })?.serverID {
            let read = Read.storedMessage(oldest, in: conversation)
            guard let stored = facts.message(read) else { return .needs(read) }
            oldestIsStored = stored != nil
        }
        var gap = false
        if facts.firstFailure == nil, SnapshotApplication.mayLeaveGap(next.window, isStored: { _ in oldestIsStored }) {
            let read = Read.oldestConfirmedMessage(in: conversation)
            guard let storedOldest = facts.message(read) else { return .needs(read) }
            gap = SnapshotApplication.hasGap(below: next.window, storedOldest: storedOldest)
        }
        conversations[conversation].queuedWindows.removeFirst()
        var actions: [Action] = []
        if let failure = facts.firstFailure {
            actions.append(.report(SwitchboardError(.storageFailure, "could not read the store for a window; a gap below it stays open", underlying: failure), conversation))
        }
        guard gap else { return .perform(actions + [.deliver(next.events)]) }
        statistics.gapsDetected += 1
        conversations[conversation].windowFill = WindowBackfillStateMachine(
            conversation: conversation, window: next.events, lowerBound: next.window.skippedAfter,
            pageLimit: settings.windowPageSize, maxPages: settings.configuration.maxBackfillPages
        )
        guard isLinkOpen else { return .perform(actions) }
        return .perform(actions + backfill(conversations[conversation].windowFill!.linkAvailable(), in: conversation))
    }

    /// Whether `conversation` has a window waiting that can be placed now (no fill open).
    func hasQueuedWindowToPlace(in conversation: ConversationID) -> Bool {
        conversations[conversation].windowFill == nil && !conversations[conversation].queuedWindows.isEmpty
    }

    /// What a fill asks: the next page, or storing everything it held (then the windows that
    /// waited for it).
    private mutating func backfill(_ action: WindowBackfillStateMachine.Action?, in conversation: ConversationID) -> [Action] {
        switch action {
        case .request(let query)?:
            statistics.backfillRequests += 1
            return [.requestPage(query, conversation)]
        case .deliver(let events, let unfilled)?:
            conversations[conversation].windowFill = nil
            var actions: [Action] = []
            if let unfilled { actions.append(.report(SwitchboardError(.protocolViolation, "a gap below the recent messages stays open: \(unfilled)"), conversation)) }
            return actions + [.deliver(events), .placeQueuedWindows(conversation)]
        case nil:
            return []
        }
    }
}
