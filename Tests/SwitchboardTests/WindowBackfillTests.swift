import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

/// A backend without sequences that, like CXone's thread recovery, answers every connection with
/// the newest `window` messages of its one conversation, pushes new ones live, and pages history
/// by time.
///
/// `bounded`: like a Matrix `limited` sync, a window says where the messages it skipped start
/// (``ConversationSnapshot/skippedAfter``: the last message the app was sent), history pages
/// stop there, and every window comes with a cursor (`n` and the number of messages).
final class WindowedBackend: ChatBackend, Sendable {
    struct State {
        var messages: [Message] = []
        var live: AsyncThrowingStream<BackendUpdate, any Error>.Continuation?
        /// How many of the messages the app was sent (in a window or live).
        var sent = 0
        var historyRequests = 0
        /// The history requests (1-based) on which the link drops instead of answering.
        var dropOnHistoryRequest: Set<Int> = []
        /// Messages that arrive (live) when the given history request comes in.
        var arriveOnHistoryRequest: [Int: [String]] = [:]
        /// Messages that arrive unannounced when the given history request comes in, before it
        /// is answered or dropped (the server skips them: a later window shows them).
        var skipOnHistoryRequest: [Int: [String]] = [:]
        /// The history requests on which the open link sends a new window (a `limited` sync).
        var windowOnHistoryRequest: Set<Int> = []
        /// Runs when the given history request comes in.
        var onHistoryRequest: [Int: @Sendable () async -> Void] = [:]
    }

    static let conversation = ConversationID("c")
    static let start = Date(timeIntervalSince1970: 1_700_000_000)
    let window: Int
    let bounded: Bool
    let state = Locked(State())

    var descriptor: BackendDescriptor { BackendDescriptor(name: "windowed", capabilities: [.historyPaging]) }

    init(window: Int, bounded: Bool = false) {
        self.window = window
        self.bounded = bounded
    }

    /// The newest window as a snapshot, from the last message the app was sent on.
    private func windowUpdate(_ state: inout State) -> BackendUpdate {
        let recent = Array(state.messages.suffix(window))
        let skipped = bounded && state.sent > 0 && state.sent < state.messages.count - recent.count
        let item = ConversationSnapshot(
            conversation: ConversationInfo(id: Self.conversation, kind: .thread, state: .active), messages: recent,
            skippedAfter: skipped ? .time(state.messages[state.sent - 1].time) : nil
        )
        state.sent = state.messages.count
        return .snapshot(BackendSnapshot(conversations: [item], isComplete: false, cursor: bounded ? .token("n\(state.sent)") : nil))
    }

    /// Adds messages on the server; `push` sends them on the open link, as a live server does.
    func add(_ texts: [String], push: Bool = true) {
        let (live, added) = state.withLock { state in
            let added = texts.enumerated().map { offset, text in
                Message(
                    serverID: MessageID(text), conversationID: Self.conversation, text: text,
                    time: Self.start.addingTimeInterval(Double(state.messages.count + offset))
                )
            }
            state.messages += added
            if push, state.live != nil { state.sent = state.messages.count }
            return (push ? state.live : nil, added)
        }
        for message in added {
            live?.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: Self.conversation)))
        }
    }

    /// Ends the open link, as a dropped socket does.
    func dropLink() {
        let live = state.withLock { state in
            defer { state.live = nil }
            return state.live
        }
        live?.finish(throwing: SwitchboardError(.connectionLost, "dropped"))
    }

    var historyRequests: Int { state.withLock(\.historyRequests) }

    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (updates, live) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        let first = state.withLock { state in
            state.live = live
            return windowUpdate(&state)
        }
        live.yield(first)
        return try await body(Connection(backend: self, updates: updates))
    }

    struct Connection: BackendConnection {
        let backend: WindowedBackend
        let updates: AsyncThrowingStream<BackendUpdate, any Error>

        func perform(_ request: BackendRequest) async throws -> BackendResponse {
            guard case .history(let query) = request else { throw SwitchboardError(.unsupported, "windowed: \(request.name)") }
            let (number, drop, arriving, skipped, newWindow, hook) = backend.state.withLock { state in
                state.historyRequests += 1
                let number = state.historyRequests
                return (
                    number, state.dropOnHistoryRequest.contains(number), state.arriveOnHistoryRequest[number] ?? [],
                    state.skipOnHistoryRequest[number] ?? [], state.windowOnHistoryRequest.contains(number), state.onHistoryRequest[number]
                )
            }
            await hook?()
            backend.add(skipped, push: false)
            if newWindow {
                let (update, live) = backend.state.withLock { state in (backend.windowUpdate(&state), state.live) }
                live?.yield(update)
            }
            if drop {
                backend.dropLink()
                throw SwitchboardError(.connectionLost, "dropped during history request \(number)")
            }
            backend.add(arriving)
            guard case .time(let before)? = query.before else { throw SwitchboardError(.invalidArgument, "windowed pages by time") }
            var lowerBound = Date.distantPast
            if case .time(let after)? = query.after { lowerBound = after }
            let older = backend.state.withLock { $0.messages.filter { $0.time < before && $0.time > lowerBound } }
            return .history(HistoryPage(messages: Array(older.suffix(query.limit)), hasMore: older.count > query.limit))
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct WindowBackfillTests {
    static func names(_ range: ClosedRange<Int>) -> [String] { range.map { "m\($0)" } }

    /// The session over `backend`, with 4 messages per backfill page.
    func session(_ backend: WindowedBackend, store: InMemoryChatStore) -> ChatSession {
        var configuration = SessionConfiguration.fastForTests
        configuration.backfillPageSize = 4
        return ChatSession(backend: backend, store: store, configuration: configuration, random: SeededRandomNumberGenerator(seed: 5), logger: .quiet)
    }

    /// Runs `body` with a session connected to a server holding m1…m5 (a window of 3), once the
    /// first window (m3…m5) is stored; `stored` reads the conversation's stored texts.
    func withFirstWindowStored(
        bounded: Bool = false,
        store: InMemoryChatStore = InMemoryChatStore(),
        _ body: (WindowedBackend, ChatSession, EventRecorder, _ stored: @escaping @Sendable () async throws -> [String]) async throws -> Void
    ) async throws {
        let backend = WindowedBackend(window: 3, bounded: bounded)
        backend.add(Self.names(1...5))
        let session = session(backend, store: store)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the first window") { event in
                if case .messageAdded(let message, _) = event.kind { return message.text == "m5" }
                return false
            }
            try await body(backend, session, recorder) { try await stored(store, session: session) }
        }
    }

    func stored(_ store: InMemoryChatStore, session: ChatSession) async throws -> [String] {
        await store.fetchMessages(in: WindowedBackend.conversation, before: nil, limit: .max, scope: session.scope).map(\.text)
    }

    /// The figures of a run: what the store holds against what the server has from `first` on.
    func figures(_ stored: [String], expected: [String], events: [ChatEvent]) -> (lost: Int, duplicated: Int, outOfOrder: Int) {
        let added = events.compactMap { event -> String? in
            if case .messageAdded(let message, _) = event.kind { return message.text }
            return nil
        }
        let lost = Set(expected).subtracting(stored).count
        let duplicated = stored.count - Set(stored).count + added.count - Set(added).count
        let outOfOrder = zip(stored, expected).filter { $0 != $1 }.count + zip(added, added.sorted { Int($0.dropFirst())! < Int($1.dropFirst())! }).filter { $0 != $1 }.count
        return (lost, duplicated, outOfOrder)
    }

    @Test func aGapBelowTheRecentWindowIsPagedBackAndStoredInOrder() async throws {
        try await withFirstWindowStored { backend, session, recorder, stored in
            // Fifteen messages while the link is down, and one that arrives live while the gap is
            // being filled: it waits, so the conversation is stored in order.
            backend.add(Self.names(6...20), push: false)
            backend.state.withLock { $0.arriveOnHistoryRequest[1] = ["m21"] }
            backend.dropLink()
            try await recorder.waitUntil("the gap is closed") {
                try await stored().last == "m21"
            }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...21), events: recorder.events)
            print(
                "window gap: 15 messages missed, 1 live during the fill; pages \(statistics.backfillRequests), " +
                    "gaps \(statistics.gapsDetected), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
            )
            #expect(texts == Self.names(3...21), "the gap from the stored m5 on (m2 is history), the window, the live one")
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.backfillRequests == 4, "m14…17, m10…13, m6…9, m2…5")
            #expect(statistics.gapsDetected == 1)
        }
    }

    @Test func aLinkLostHalfwayFillsTheGapOnTheNextLinkWithNothingTwice() async throws {
        try await withFirstWindowStored { backend, session, recorder, stored in
            backend.add(Self.names(6...20), push: false)
            backend.state.withLock { $0.dropOnHistoryRequest = [2] }
            backend.dropLink()
            try await recorder.waitUntil("the gap is closed") {
                try await stored().last == "m20"
            }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...20), events: recorder.events)
            print(
                "window gap with the link lost on page 2: pages asked \(backend.historyRequests), connects \(statistics.connects), " +
                    "lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
            )
            #expect(texts == Self.names(3...20))
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.connects == 3)
            #expect(backend.historyRequests == 5, "page 1, the dropped page 2, then pages 2…4 on the next link, below the oldest fetched")
        }
    }

    @Test func aGapBelowTheNextLinksWindowIsFilledAfterTheOpenOne() async throws {
        try await withFirstWindowStored { backend, session, recorder, stored in
            // m6…m20 while the link is down; on page 2 the link drops again and m21…m30 come while
            // it is down: the next link's window (m28…m30) has a gap of its own below it.
            backend.add(Self.names(6...20), push: false)
            backend.state.withLock { state in
                state.dropOnHistoryRequest = [2]
                state.skipOnHistoryRequest[2] = Self.names(21...30)
            }
            backend.dropLink()
            try await recorder.waitUntil("both gaps are closed") { try await stored().count == 28 }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...30), events: recorder.events)
            print(
                "window gaps, a second below the next link's window while the first is filled: 25 messages missed, " +
                    "gaps \(statistics.gapsDetected), pages \(backend.historyRequests), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
            )
            #expect(texts == Self.names(3...30))
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.gapsDetected == 2)
        }
    }

    @Test func aSecondBoundedGapDuringTheFillIsFilledAndTheCursorWaitsForBoth() async throws {
        // Matrix: a second `limited` sync while the first gap is paged. Its gap (m21…m27) is not
        // the one being filled; and the stored cursor stays before the gaps until both are closed,
        // so a process that dies meanwhile syncs them again.
        let store = InMemoryChatStore()
        let cursorDuringFill = Locked<SyncCursor?>(nil)
        try await withFirstWindowStored(bounded: true, store: store) { backend, session, recorder, stored in
            let scope = session.scope
            backend.add(Self.names(6...20), push: false)
            backend.state.withLock { state in
                state.skipOnHistoryRequest[1] = Self.names(21...30)
                state.windowOnHistoryRequest = [1]
                state.onHistoryRequest[1] = {
                    let cursor = await store.fetchCursor(scope: scope)
                    cursorDuringFill.withLock { $0 = cursor }
                }
            }
            backend.dropLink()
            try await recorder.waitUntil("both gaps are closed") { try await stored().count == 28 }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...30), events: recorder.events)
            let storedCursor = await store.fetchCursor(scope: scope)
            print(
                "window gaps, bounded, a second during the fill: 25 messages missed, gaps \(statistics.gapsDetected), " +
                    "pages \(backend.historyRequests), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder); " +
                    "cursor stored during the fill \(cursorDuringFill.withLock { $0 }.map { "\($0)" } ?? "none"), after \(storedCursor.map { "\($0)" } ?? "none")"
            )
            #expect(texts == Self.names(3...30))
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.gapsDetected == 2)
            #expect(backend.historyRequests == 5, "m14…17, m10…13, m6…9; then m24…27, m21…23")
            #expect(cursorDuringFill.withLock { $0 } == .token("n5"), "the first link's cursor, before both gaps")
            #expect(storedCursor == .token("n30"))
        }
    }

    @Test func aWindowThatReachesTheStoreNeedsNoPages() async throws {
        try await withFirstWindowStored { backend, session, recorder, stored in
            backend.add(Self.names(6...7), push: false)
            backend.dropLink()
            try await recorder.waitUntil("the window is stored") { try await stored().last == "m7" }
            #expect(try await stored() == Self.names(3...7))
            #expect(backend.historyRequests == 0)
        }
    }

    @Test func storedMessagesNewerThanTheWindowDoNotCloseTheGap() {
        // A live message can reach the store before the window that shows the gap; a page that
        // holds it is still inside the gap.
        func message(_ index: Int) -> Message {
            Message(serverID: MessageID("m\(index)"), conversationID: "c", text: "m\(index)", time: Date(timeIntervalSince1970: Double(index)))
        }
        let window = (18...20).map { BackendEvent(.messageAdded(message($0), position: .newest), conversation: "c") }
        var fill = WindowBackfillStateMachine(conversation: "c", window: window, pageLimit: 4, maxPages: 10)
        guard case .request(let first)? = fill.linkAvailable() else {
            Issue.record("a fill starts with a page request")
            return
        }
        #expect(first.before == .time(Date(timeIntervalSince1970: 18)))
        let inside = HistoryPage(messages: (14...17).map(message), hasMore: true)
        guard case .request? = fill.pageArrived(inside, stored: [message(19)]) else {
            Issue.record("a stored message above the window does not close the gap")
            return
        }
        let reaching = HistoryPage(messages: (10...13).map(message), hasMore: true)
        guard case .deliver(let events, let unfilled)? = fill.pageArrived(reaching, stored: [message(13)]) else {
            Issue.record("a stored message below the window closes the gap")
            return
        }
        #expect(unfilled == nil)
        #expect(events.count == 7, "14…17 fetched (13 is stored, 10…12 are history), 18…20 held")
    }

    @Test func aGapDeeperThanTheLimitIsDeliveredAndReported() {
        func message(_ index: Int) -> Message {
            Message(serverID: MessageID("m\(index)"), conversationID: "c", text: "m\(index)", time: Date(timeIntervalSince1970: Double(index)))
        }
        let window = [BackendEvent(.messageAdded(message(100), position: .newest), conversation: "c")]
        var fill = WindowBackfillStateMachine(conversation: "c", window: window, pageLimit: 2, maxPages: 2)
        _ = fill.linkAvailable()
        guard case .request? = fill.pageArrived(HistoryPage(messages: [message(98), message(99)], hasMore: true), stored: []) else {
            Issue.record("the first page asks for the next")
            return
        }
        guard case .deliver(let events, let unfilled)? = fill.pageArrived(HistoryPage(messages: [message(96), message(97)], hasMore: true), stored: []) else {
            Issue.record("the limit ends the fill")
            return
        }
        #expect(events.count == 5)
        #expect(unfilled?.contains("more than 2 pages") == true)
    }

    @Test func aGapTheBackendBoundsIsFilledWholeThoughTheAppsOwnSendsInItAreStored() {
        // Matrix: a `limited` timeline skipped what came after the sync's `since`. The app's own
        // sends in the gap are stored already (their answers confirmed them); they must not stop
        // the fill above the agent's messages between them.
        func message(_ index: Int, mine: Bool = false) -> Message {
            Message(serverID: MessageID("m\(index)"), clientID: mine ? ClientMessageID("c\(index)") : nil, conversationID: "c", text: "m\(index)", time: Date(timeIntervalSince1970: Double(index)))
        }
        let window = (18...20).map { BackendEvent(.messageAdded(message($0), position: .newest), conversation: "c") }
        var fill = WindowBackfillStateMachine(conversation: "c", window: window, lowerBound: .token("s10"), pageLimit: 4, maxPages: 10)
        guard case .request(let first)? = fill.linkAvailable() else {
            Issue.record("a fill starts with a page request")
            return
        }
        #expect(first.after == .token("s10"), "the page is bounded by the gap's start")
        let full = HistoryPage(messages: (14...17).map { message($0, mine: $0 == 15) }, hasMore: true, nextAnchor: .token("p1"))
        guard case .request(let second)? = fill.pageArrived(full, stored: [message(15, mine: true)]) else {
            Issue.record("an own send in the gap does not close it")
            return
        }
        #expect(second.before == .token("p1") && second.after == .token("s10"))
        let last = HistoryPage(messages: (11...13).map { message($0, mine: $0 == 12) }, hasMore: false)
        guard case .deliver(let events, let unfilled)? = fill.pageArrived(last, stored: [message(12, mine: true)]) else {
            Issue.record("the bounded page that reaches the start closes the gap")
            return
        }
        #expect(unfilled == nil)
        let texts = events.compactMap { event -> String? in
            if case .messageAdded(let message, _) = event.kind { return message.text }
            return nil
        }
        #expect(texts == (11...20).map { "m\($0)" }, "everything in the gap, in order; the stored sends are dropped as duplicates when applied")
        print("window backfill, bounded: a gap of 7 with 2 own sends in it, 2 pages, 10 messages delivered in order, 0 left out")
    }
}
