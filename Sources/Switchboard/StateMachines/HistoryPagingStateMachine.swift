/// History paging in one conversation: where the next page starts, whether there is one, and the
/// app's calls waiting for the page on its way (a second call joins the first instead of asking
/// for the same page).
///
/// Pure and generic over the waiter, so tests use plain values; the engine's are replies.
struct HistoryPagingStateMachine<Waiter: Sendable>: Sendable {
    /// Where the next page starts, as the backend said with the last one.
    private(set) var anchor: HistoryQuery.Anchor?
    /// The backend said there is no older history.
    private(set) var isExhausted = false
    private(set) var waiters: [Waiter] = []

    enum Next: Sendable, Hashable {
        /// A page is on its way: wait for it (``join(_:)``).
        case join
        /// Nothing more to ask (exhausted, or no link): answer at once.
        case answerNow
        /// The page below the oldest confirmed stored message: read it, then ask again.
        case readOldestStored
        /// Ask for this page (and ``join(_:)`` once it is queued).
        case ask(HistoryQuery)
    }

    /// What an app call for a page of `limit` does. `oldestStored` is the oldest confirmed stored
    /// message once read (`.some(nil)`: the store has none).
    func next(in conversation: ConversationID, limit: Int, isLinkOpen: Bool, oldestStored: Message?? = .none) -> Next {
        if !waiters.isEmpty { return .join }
        guard !isExhausted, isLinkOpen else { return .answerNow }
        // The backend's own anchor from the last page wins; the store is read only without one.
        if let anchor { return .ask(HistoryQuery(conversationID: conversation, before: anchor, limit: limit)) }
        guard let oldestStored else { return .readOldestStored }
        let anchor = oldestStored.map { oldest in oldest.sequence.map { HistoryQuery.Anchor.sequence($0) } ?? .time(oldest.time) }
        return .ask(HistoryQuery(conversationID: conversation, before: anchor, limit: limit))
    }

    /// `waiter` waits for the page on its way.
    mutating func join(_ waiter: Waiter) {
        waiters.append(waiter)
    }

    /// The page arrived: where the next one starts, and the waiters to answer once it is stored.
    mutating func pageArrived(_ page: HistoryPage) -> [Waiter] {
        if let next = page.nextAnchor { anchor = next }
        if !page.hasMore { isExhausted = true }
        return endWaiting()
    }

    /// The page failed (or its link went): the waiters to fail.
    mutating func pageFailed() -> [Waiter] {
        endWaiting()
    }

    private mutating func endWaiting() -> [Waiter] {
        defer { waiters = [] }
        return waiters
    }
}
