import Foundation
@testable import Switchboard
import SwitchboardTestKit
import Testing

/// The server of the window tests, scripted on a ``TestBackend``: one conversation without
/// sequences that, like CXone's thread recovery, answers every link with the newest `window`
/// messages, pushes new ones on the open link, and pages history by time. History requests are
/// answered as they come, except those the test holds (``holdHistoryRequest(_:)``), which wait
/// for it.
///
/// `bounded`: like a Matrix `limited` sync, a window says where the messages it skipped start
/// (``ConversationSnapshot/skippedAfter``: the last message the app was sent), history pages
/// stop there, and every window comes with a cursor (`n` and the number of messages).
///
/// The lock guards the messages, the open link and the counts.
private final class WindowedServer: Sendable {
    struct State {
        var messages: [Message] = []
        /// The link the server pushes on; `nil` once it dropped it.
        var live: TestBackend.Link?
        /// How many of the messages the app was sent (in a window or live).
        var sent = 0
        var historyRequests = 0
        /// The history requests (1-based) that wait for the test.
        var held: Set<Int> = []
        /// The next link pushes the newest message before its window, as a server that pushes
        /// while it recovers the window does.
        var pushesBeforeWindow = false
    }

    static let conversation = ConversationID("c")
    static let start = Date(timeIntervalSince1970: 1_700_000_000)
    let window: Int
    let bounded: Bool
    let backend = TestBackend(name: "windowed", capabilities: [.historyPaging], sync: .windowed(pageSize: 50))
    let state = Locked(State())

    init(window: Int, bounded: Bool = false) {
        self.window = window
        self.bounded = bounded
        backend.onConnect { [self] link in
            let (pushed, first) = state.withLock { state in
                state.live = link
                defer { state.pushesBeforeWindow = false }
                let pushed = state.pushesBeforeWindow ? state.messages.last : nil
                return (pushed, windowUpdate(&state))
            }
            if let pushed { link.yield(.event(BackendEvent(.messageAdded(pushed, position: .newest), conversation: Self.conversation))) }
            link.yield(first)
        }
        backend.answerAutomatically { [self] pending in
            guard case .history(let query) = pending.request else { return .failure(SwitchboardError(.unsupported, "windowed: \(pending.request.name)")) }
            let held = state.withLock { state in
                state.historyRequests += 1
                return state.held.contains(state.historyRequests)
            }
            if held { return nil }
            return page(query).map { .history($0) }
        }
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

    /// The page of the server's messages `query` asks for (by time).
    func page(_ query: HistoryQuery) -> Result<HistoryPage, SwitchboardError> {
        guard case .time? = query.before else { return .failure(SwitchboardError(.invalidArgument, "windowed pages by time")) }
        return TestBackend.historyPage(of: state.withLock(\.messages), answering: query)
    }

    /// Answers a held history request with its page.
    func answer(_ pending: TestBackend.PendingRequest) {
        guard case .history(let query) = pending.request else {
            Issue.record("expected a history request, got \(pending.request.name)")
            return
        }
        switch page(query) {
        case .success(let page): pending.answer(.history(page))
        case .failure(let error): pending.fail(error)
        }
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

    /// Sends the newest window on the open link again (a `limited` sync).
    func sendWindow() {
        let (update, live) = state.withLock { state in (windowUpdate(&state), state.live) }
        live?.yield(update)
    }

    /// Ends the open link, as a dropped socket does.
    func dropLink() {
        let live = state.withLock { state in
            defer { state.live = nil }
            return state.live
        }
        live?.fail(SwitchboardError(.connectionLost, "dropped"))
    }

    /// The history request with this number (from 1) waits for the test
    /// (``TestBackend/nextRequest(timeout:)``) instead of being answered.
    func holdHistoryRequest(_ number: Int) {
        state.withLock { _ = $0.held.insert(number) }
    }

    /// The next link pushes the newest message before its window.
    func pushNewestBeforeNextWindow() {
        state.withLock { $0.pushesBeforeWindow = true }
    }

    /// How many history requests reached the server, answered or not.
    var historyRequests: Int { backend.requests.filter { $0.name == "history" }.count }
}

@Suite(.timeLimit(.minutes(1)))
struct WindowBackfillTests {
    /// Message `index` of conversation "c", sent at second `index`.
    static func message(_ index: Int) -> Message {
        Message(serverID: MessageID("m\(index)"), conversationID: "c", text: "m\(index)", time: Date(timeIntervalSince1970: Double(index)))
    }

    static func names(_ range: ClosedRange<Int>) -> [String] { range.map { "m\($0)" } }

    /// The session over `backend`, with 4 messages per backfill page.
    func session(_ backend: TestBackend, store: InMemoryChatStore) -> ChatSession {
        var configuration = SessionConfiguration.fastForTests
        configuration.backfillPageSize = 4
        return ChatSession(backend: backend, store: store, configuration: configuration, random: SeededRandomNumberGenerator(seed: 5), logger: .quiet)
    }

    /// Runs `body` with a session connected to a server holding m1…m5 (a window of 3), once the
    /// first window (m3…m5) is stored; `stored` reads the conversation's stored texts. Then
    /// expects nothing left on the backend.
    private func withFirstWindowStored(
        bounded: Bool = false,
        store: InMemoryChatStore = InMemoryChatStore(),
        _ body: (WindowedServer, ChatSession, EventRecorder, _ stored: @escaping @Sendable () async throws -> [String]) async throws -> Void
    ) async throws {
        let server = WindowedServer(window: 3, bounded: bounded)
        server.add(Self.names(1...5))
        let session = session(server.backend, store: store)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the first window") { event in
                if case .messageAdded(let message, _) = event.kind { return message.text == "m5" }
                return false
            }
            try await body(server, session, recorder) { try await stored(store, session: session) }
        }
        expectNothingLeft(server.backend)
    }

    func stored(_ store: InMemoryChatStore, session: ChatSession) async throws -> [String] {
        await store.fetchMessages(in: WindowedServer.conversation, before: nil, limit: .max, scope: session.scope).map(\.text)
    }

    /// Takes the history request the server holds and drops the link under it, as a socket that
    /// dies while the page is on its way; `skipping` arrive on the server unannounced first (a
    /// later window shows them).
    private func dropLinkUnderHeldPage(of server: WindowedServer, skipping: [String] = []) async throws {
        let page = try await server.backend.nextRequest()
        server.add(skipping, push: false)
        server.dropLink()
        page.fail(SwitchboardError(.connectionLost, "dropped during a history request"))
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
        try await withFirstWindowStored { server, session, recorder, stored in
            // Fifteen messages while the link is down, and one that arrives live while the gap is
            // being filled: it waits, so the conversation is stored in order.
            server.add(Self.names(6...20), push: false)
            server.holdHistoryRequest(1)
            server.dropLink()
            let firstPage = try await server.backend.nextRequest()
            server.add(["m21"])
            server.answer(firstPage)
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

    /// The engine holds what a windowed link pushes until its window: the message pushed first
    /// would otherwise be stored before the window and make it look stored already, and the gap
    /// below the window would go unseen.
    @Test func aMessagePushedBeforeTheWindowWaitsForItAndTheGapBelowIsStillFilled() async throws {
        try await withFirstWindowStored { server, session, recorder, stored in
            server.add(Self.names(6...12), push: false)
            server.pushNewestBeforeNextWindow()
            server.dropLink()
            try await recorder.waitUntil("the gap is closed") { try await stored().count >= 10 }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...12), events: recorder.events)
            print(
                "pushed before the window: m12 pushed first, window m10…m12, gap m6…m9; pages \(statistics.backfillRequests), "
                    + "gaps \(statistics.gapsDetected), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
            )
            #expect(texts == Self.names(3...12))
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.gapsDetected == 1)
        }
    }

    @Test func aLinkLostHalfwayFillsTheGapOnTheNextLinkWithNothingTwice() async throws {
        try await withFirstWindowStored { server, session, recorder, stored in
            server.add(Self.names(6...20), push: false)
            server.holdHistoryRequest(2)
            server.dropLink()
            try await dropLinkUnderHeldPage(of: server)
            try await recorder.waitUntil("the gap is closed") {
                try await stored().last == "m20"
            }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...20), events: recorder.events)
            print(
                "window gap with the link lost on page 2: pages asked \(server.historyRequests), connects \(statistics.connects), " +
                    "lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
            )
            #expect(texts == Self.names(3...20))
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.connects == 3)
            #expect(server.historyRequests == 5, "page 1, the dropped page 2, then pages 2…4 on the next link, below the oldest fetched")
        }
    }

    @Test func aGapBelowTheNextLinksWindowIsFilledAfterTheOpenOne() async throws {
        try await withFirstWindowStored { server, session, recorder, stored in
            // m6…m20 while the link is down; on page 2 the link drops again and m21…m30 come while
            // it is down: the next link's window (m28…m30) has a gap of its own below it.
            server.add(Self.names(6...20), push: false)
            server.holdHistoryRequest(2)
            server.dropLink()
            try await dropLinkUnderHeldPage(of: server, skipping: Self.names(21...30))
            try await recorder.waitUntil("both gaps are closed") { try await stored().count == 28 }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...30), events: recorder.events)
            print(
                "window gaps, a second below the next link's window while the first is filled: 25 messages missed, " +
                    "gaps \(statistics.gapsDetected), pages \(server.historyRequests), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
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
        try await withFirstWindowStored(bounded: true, store: store) { server, session, recorder, stored in
            let scope = session.scope
            server.add(Self.names(6...20), push: false)
            server.holdHistoryRequest(1)
            server.dropLink()
            // While the first page is on its way: m21…m30 come unannounced, and the open link
            // sends a new window (m28…m30) that skipped them.
            let firstPage = try await server.backend.nextRequest()
            let cursorDuringFill = await store.fetchCursor(scope: scope)
            server.add(Self.names(21...30), push: false)
            server.sendWindow()
            server.answer(firstPage)
            try await recorder.waitUntil("both gaps are closed") { try await stored().count == 28 }
            let texts = try await stored()
            let statistics = await session.statistics
            let (lost, duplicated, outOfOrder) = figures(texts, expected: Self.names(3...30), events: recorder.events)
            let storedCursor = await store.fetchCursor(scope: scope)
            print(
                "window gaps, bounded, a second during the fill: 25 messages missed, gaps \(statistics.gapsDetected), " +
                    "pages \(server.historyRequests), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder); " +
                    "cursor stored during the fill \(cursorDuringFill.map { "\($0)" } ?? "none"), after \(storedCursor.map { "\($0)" } ?? "none")"
            )
            #expect(texts == Self.names(3...30))
            #expect(lost == 0 && duplicated == 0 && outOfOrder == 0)
            #expect(statistics.gapsDetected == 2)
            #expect(server.historyRequests == 5, "m14…17, m10…13, m6…9; then m24…27, m21…23")
            #expect(cursorDuringFill == .token("n5"), "the first link's cursor, before both gaps")
            #expect(storedCursor == .token("n30"))
        }
    }

    @Test func aWindowThatReachesTheStoreNeedsNoPages() async throws {
        try await withFirstWindowStored { server, session, recorder, stored in
            server.add(Self.names(6...7), push: false)
            server.dropLink()
            try await recorder.waitUntil("the window is stored") { try await stored().last == "m7" }
            #expect(try await stored() == Self.names(3...7))
            #expect(server.historyRequests == 0)
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

    /// A link lost half-way: the next link asks for the page after the last one fetched (the
    /// backend's token), not from the window again.
    @Test func aFillGoesOnWhereItGotToOnTheNextLink() {
        let window = (20...21).map { BackendEvent(.messageAdded(Self.message($0), position: .newest), conversation: "c") }
        var fill = WindowBackfillStateMachine(conversation: "c", window: window, pageLimit: 3, maxPages: 3)
        _ = fill.linkAvailable()
        guard case .request(let second)? = fill.pageArrived(HistoryPage(messages: (17...19).map(Self.message), hasMore: true, nextAnchor: .token("below-17")), stored: []) else {
            Issue.record("the first page asks for the next")
            return
        }
        #expect(second.before == .token("below-17"))
        fill.linkLost()
        guard case .request(let again)? = fill.linkAvailable() else {
            Issue.record("the next link asks again")
            return
        }
        #expect(again.before == .token("below-17"), "the next link goes on from the token: \(String(describing: again.before))")
    }

    /// Pages that do not come newest first (a backend that pages from its top again on the next
    /// link, after one that jumped ahead) still store the gap oldest first, each message once.
    @Test func pagesThatComeOutOfOrderAreStillStoredOldestFirst() {
        let window = (20...21).map { BackendEvent(.messageAdded(Self.message($0), position: .newest), conversation: "c") }
        var fill = WindowBackfillStateMachine(conversation: "c", window: window, pageLimit: 3, maxPages: 5)
        _ = fill.linkAvailable()
        _ = fill.pageArrived(HistoryPage(messages: (14...16).map(Self.message), hasMore: true), stored: [])
        fill.linkLost()
        _ = fill.linkAvailable()
        _ = fill.pageArrived(HistoryPage(messages: (17...19).map(Self.message), hasMore: true), stored: [])
        guard case .deliver(let events, let unfilled)? = fill.pageArrived(HistoryPage(messages: (11...13).map(Self.message), hasMore: true), stored: [Self.message(13)]) else {
            Issue.record("a stored message below the window closes the gap")
            return
        }
        let order = events.compactMap { event -> String? in
            if case .messageAdded(let message, _) = event.kind { return message.text }
            return nil
        }
        #expect(unfilled == nil)
        #expect(order == (14...21).map { "m\($0)" }, "once each, oldest first: \(order)")
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
