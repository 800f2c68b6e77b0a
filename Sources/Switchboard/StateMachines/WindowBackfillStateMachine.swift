import Foundation

/// The gap below a recent window, for backends without sequences.
///
/// A backend without sequences says what it missed while away by sending a conversation's recent
/// messages again (CXone's thread recovery: the newest page; a Matrix `limited` timeline). When
/// the oldest of them is not in the store while older messages are, the messages between were
/// never seen, and the window alone cannot say how many there are. The engine pages back through
/// history from the window until a page reaches a message the store has (or the server has no
/// more), and meanwhile holds the window's message events and the live ones of the conversation:
/// everything is stored together, oldest first, once the gap is closed. Nothing held is stored
/// before that, so a link lost half-way loses nothing: the fill goes on from where it got to on
/// the next link.
struct WindowBackfillStateMachine: Sendable {
    enum Action: Sendable {
        /// Ask the backend for this older page.
        case request(HistoryQuery)
        /// The gap is closed (or can be closed no further): store these, in this order.
        /// `unfilled` says why the fill stopped short, when it did.
        case deliver([BackendEvent], unfilled: String?)
    }

    let conversation: ConversationID
    let pageLimit: Int
    let maxPages: Int
    /// Pages fetched so far, newest first.
    private var pages: [[Message]] = []
    /// The message events waiting for the gap, in arrival order.
    private var held: [BackendEvent] = []
    /// A page request is out.
    private(set) var isRequesting = false
    private var nextAnchor: HistoryQuery.Anchor?
    private var consecutiveFailures = 0
    /// The oldest message of the first window: the gap is below it. A stored message below it
    /// was stored before the gap opened; one above it may have come live since.
    let floor: MessageOrderKey?
    /// Where the backend says the gap starts (``ConversationSnapshot/skippedAfter``): pages stop
    /// there, and everything they hold is the gap.
    let lowerBound: HistoryQuery.Anchor?

    /// Starts a fill below `window` (the snapshot's message events, which it holds), down to
    /// `lowerBound` when the backend knows where the gap starts.
    init(
        conversation: ConversationID,
        window: [BackendEvent],
        lowerBound: HistoryQuery.Anchor? = nil,
        pageLimit: Int,
        maxPages: Int
    ) {
        self.conversation = conversation
        self.pageLimit = max(1, pageLimit)
        self.maxPages = max(1, maxPages)
        self.held = window
        self.lowerBound = lowerBound
        self.floor = Self.messages(in: window).map(\.orderKey).min()
    }

    /// Whether the event waits for the fill: the conversation's message events do.
    static func holds(_ event: BackendEvent) -> Bool {
        switch event.kind {
        case .messageAdded, .messageUpdated, .messageRemoved: true
        default: false
        }
    }

    mutating func hold(_ event: BackendEvent) {
        held.append(event)
    }

    /// The message events waiting for the gap, in arrival order.
    var heldEvents: [BackendEvent] { held }

    /// The next page to ask for, when none is out (after the start, or on a new link).
    mutating func linkAvailable() -> Action? {
        guard !isRequesting else { return nil }
        isRequesting = true
        return .request(HistoryQuery(conversationID: conversation, before: nextAnchor ?? oldestAnchor, after: lowerBound, limit: pageLimit))
    }

    /// The link went away with the page request unanswered: it is asked again on the next link,
    /// from where the fill had got to: a backend's page token is sent on the next link as it is
    /// (the adapter guide asks adapters to make their tokens whole on any link). Paging again
    /// from the oldest message held re-fetched the gap from the top on every link of a backend
    /// that answers a time anchor from its newest page, until the page limit cut it short.
    mutating func linkLost() {
        isRequesting = false
    }

    /// A page arrived; `stored` are those of its messages the store already has. The gap is
    /// closed when one of them is older than the window.
    mutating func pageArrived(_ page: HistoryPage, stored: [Message]) -> Action? {
        isRequesting = false
        consecutiveFailures = 0
        pages.append(page.messages)
        if lowerBound != nil {
            // The backend bounds the pages by the gap: all they hold is the gap, the app's own
            // sends in it included (stored already, they are dropped as duplicates).
            if !page.hasMore || page.messages.isEmpty { return deliverAll(unfilled: nil) }
            if pages.count >= maxPages {
                return deliverAll(unfilled: "the gap reaches back more than \(maxPages) pages; older messages come through history paging")
            }
            nextAnchor = page.nextAnchor ?? Self.anchor(before: page.messages)
            return linkAvailable()
        }
        // The newest stored message below the window is where the gap starts; what is older is
        // history, left to history paging.
        let start = stored.map(\.orderKey).filter { key in floor.map { key < $0 } ?? true }.max()
        if start != nil || !page.hasMore || page.messages.isEmpty {
            return deliverAll(unfilled: nil, after: start)
        }
        if pages.count >= maxPages {
            return deliverAll(unfilled: "the gap reaches back more than \(maxPages) pages; older messages come through history paging")
        }
        nextAnchor = page.nextAnchor ?? Self.anchor(before: page.messages)
        return linkAvailable()
    }

    /// A page request failed on an open link: asked again up to twice, then the fill gives up and
    /// delivers what it has.
    mutating func pageFailed(_ error: SwitchboardError) -> Action? {
        isRequesting = false
        consecutiveFailures += 1
        if error.isTransient && consecutiveFailures < 3 { return linkAvailable() }
        return deliverAll(unfilled: "history paging failed: \(error)")
    }

    private func deliverAll(unfilled: String?, after start: MessageOrderKey? = nil) -> Action {
        var events: [BackendEvent] = []
        var seen = Set<MessageID>()
        // Every fetched message oldest first, whatever order the pages came in (a backend may
        // page a range twice); a message two pages share goes once.
        let fetched = pages.joined().sorted { $0.orderKey < $1.orderKey }
        for message in fetched where start.map({ message.orderKey > $0 }) ?? true {
            if let id = message.serverID, !seen.insert(id).inserted { continue }
            events.append(BackendEvent(.messageAdded(message, position: .newest), conversation: conversation, time: message.time))
        }
        return .deliver(events + held, unfilled: unfilled)
    }

    /// Before the oldest message the fill has (fetched or held).
    private var oldestAnchor: HistoryQuery.Anchor? {
        let fetched = pages.last ?? []
        return Self.anchor(before: fetched.isEmpty ? Self.messages(in: held) : fetched)
    }

    private static func messages(in events: [BackendEvent]) -> [Message] {
        events.compactMap { event in
            if case .messageAdded(let message, _) = event.kind { return message }
            return nil
        }
    }

    private static func anchor(before messages: [Message]) -> HistoryQuery.Anchor? {
        guard let oldest = messages.min(by: { $0.orderKey < $1.orderKey }) else { return nil }
        return oldest.sequence.map { .sequence($0) } ?? .time(oldest.time)
    }
}
