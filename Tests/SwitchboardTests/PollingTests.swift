import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

/// A backend that pushes nothing, like Webim's offline appeals: its server holds conversations
/// with messages, and a poll returns what changed since the cursor kept in the credentials (or
/// everything, forced). The first message of a started conversation makes it.
final class PollingBackend: ChatBackend, Sendable {
    struct State {
        var conversations: [ConversationID: [Message]] = [:]
        var order: [ConversationID] = []
        var polls: [Bool] = []
        var clock = 0
    }

    static let start = Date(timeIntervalSince1970: 1_700_000_000)
    let state = Locked(State())

    var descriptor: BackendDescriptor { BackendDescriptor(name: "polled", capabilities: [.polling, .conversationLifecycle]) }

    /// A message from the agent, seen by the next poll.
    func agentWrites(_ text: String, in conversation: ConversationID) {
        state.withLock { state in
            state.clock += 1
            let message = Message(
                serverID: MessageID(text), conversationID: conversation, senderRole: .agent, text: text,
                time: Self.start.addingTimeInterval(Double(state.clock))
            )
            if state.conversations[conversation] == nil { state.order.append(conversation) }
            state.conversations[conversation, default: []].append(message)
        }
    }

    /// The polls so far: `true` for a forced one.
    var polls: [Bool] { state.withLock(\.polls) }

    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (updates, live) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        defer { live.finish() }
        return try await body(Connection(backend: self, updates: updates, since: Int(context.credentials["since"] ?? "0") ?? 0))
    }

    struct Connection: BackendConnection {
        let backend: PollingBackend
        let updates: AsyncThrowingStream<BackendUpdate, any Error>
        let since: Int

        func perform(_ request: BackendRequest) async throws -> BackendResponse {
            switch request {
            case .poll(let forced):
                return backend.state.withLock { state in
                    state.polls.append(forced)
                    let cutoff = forced ? Date.distantPast : PollingBackend.start.addingTimeInterval(Double(since))
                    let changed = state.order.compactMap { id -> ConversationSnapshot? in
                        let messages = state.conversations[id]!.filter { forced || $0.time > cutoff }
                        guard forced || !messages.isEmpty else { return nil }
                        return ConversationSnapshot(conversation: ConversationInfo(id: id, kind: .supportChat, state: .queued), messages: messages)
                    }
                    // Each connection starts from the stored cursor; a real backend moves it in
                    // its credentials, as this one does.
                    var cursor = Credentials()
                    cursor["since"] = String(state.clock)
                    return .updates([.snapshot(BackendSnapshot(conversations: changed, isComplete: forced)), .credentials(cursor)])
                }
            case .startConversation(let draft):
                let first = try #require(draft.firstMessage, "a polled conversation starts with a message")
                let id = ConversationID("appeal-\(backend.state.withLock { $0.order.count + 1 })")
                backend.agentWrites(first.text, in: id)
                let messages = backend.state.withLock { $0.conversations[id]! }
                return .startedConversation(
                    ConversationSnapshot(conversation: ConversationInfo(id: id, kind: .supportChat, state: .queued), messages: messages)
                )
            default:
                throw SwitchboardError(.unsupported, "polled: \(request.name)")
            }
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct PollingTests {
    func session(_ backend: PollingBackend, clock: TestClock) -> ChatSession {
        var configuration = SessionConfiguration.fastForTests
        configuration.pollInterval = .seconds(30)
        return ChatSession(backend: backend, configuration: configuration, clock: SessionClock(clock), random: SeededRandomNumberGenerator(seed: 9), logger: .quiet)
    }

    /// Runs a session over `backend` on a test clock, connected, for `body`.
    func connected(_ backend: PollingBackend, _ body: (ChatSession, EventRecorder) async throws -> Void) async throws {
        let session = session(backend, clock: TestClock())
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
            try await body(session, recorder)
        }
    }

    @Test func theEnginePollsOnConnectAndEveryIntervalAndStoresWhatItFinds() async throws {
        let backend = PollingBackend()
        backend.agentWrites("waiting for you", in: "a")
        let clock = TestClock()
        let session = session(backend, clock: clock)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the poll on connect") { $0.addedMessage?.text == "waiting for you" }
            backend.agentWrites("answer on a later poll", in: "a")
            #expect(await clock.waitForSleepers())
            clock.advance(by: .seconds(29))
            #expect(backend.polls.count == 1, "not before the interval")
            clock.advance(by: .seconds(1))
            try await recorder.first("the timed poll") { $0.addedMessage?.text == "answer on a later poll" }
            let stored = try await session.conversation("a").storedMessages(before: nil, limit: .max).map(\.text)
            #expect(stored == ["waiting for you", "answer on a later poll"])
            #expect(backend.polls == [false, false])
            print("polling: \(backend.polls.count) polls (on connect, after 30 s), \(stored.count) messages stored")
        }
    }

    @Test func aRefreshReturnsOnceWhatItFoundIsStoredAndAForcedOneAddsNothingTwice() async throws {
        let backend = PollingBackend()
        try await connected(backend) { session, recorder in
            backend.agentWrites("one", in: "a")
            backend.agentWrites("two", in: "b")
            try await session.refresh()
            #expect(try await session.conversations().map(\.id) == ["a", "b"], "stored before refresh returned")
            try await session.refresh(forced: true)
            try await session.refresh(forced: true)
            let added = recorder.events.compactMap(\.addedMessage).map(\.text)
            #expect(added.sorted() == ["one", "two"], "a forced re-read announces nothing twice")
            #expect(backend.polls.suffix(2) == [true, true])
            print("refresh: \(backend.polls.count) polls, \(added.count) messages announced, duplicates \(added.count - Set(added).count)")
        }
    }

    @Test func aConversationMadeByItsFirstMessageHoldsItWhenStartReturns() async throws {
        let backend = PollingBackend()
        try await connected(backend) { session, recorder in
            let appeal = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "my order is late")))
            #expect(try await appeal.storedMessages(before: nil, limit: .max).map(\.text) == ["my order is late"])
            try await session.refresh(forced: true)
            #expect(try await appeal.storedMessages(before: nil, limit: .max).count == 1, "the poll finds it stored")
        }
    }

    /// A resume given before `run()` must not open a link on empty credentials: the first link
    /// carries what the store kept (here the poll cursor), or a restarted app would start over.
    @Test func aResumeBeforeRunConnectsWithTheStoredCredentials() async throws {
        let backend = PollingBackend()
        backend.agentWrites("old", in: "a")
        backend.agentWrites("new", in: "a")
        let store = InMemoryChatStore()
        var stored = Credentials()
        stored["since"] = "1"
        await store.saveCredentials(stored, scope: StoreScope(backend: "polled", account: "default"))
        let session = ChatSession(backend: backend, store: store, configuration: .fastForTests, clock: SessionClock(TestClock()), logger: .quiet)
        try await session.resume()
        try await withRecording(session) { recorder in
            try await recorder.first("the poll on connect") { $0.addedMessage != nil }
            try await session.refresh()
            let added = recorder.events.compactMap(\.addedMessage).map(\.text)
            #expect(added == ["new"], "polled from the stored cursor, not from the start")
        }
    }

    @Test func aBackendThatPushesHasNoRefresh() async throws {
        let session = ChatSession(backend: WindowedBackend(window: 1), configuration: .fastForTests, logger: .quiet)
        try await withRecording(session) { _ in
            let error = await #expect(throws: SwitchboardError.self) { try await session.refresh() }
            #expect(error?.code == .unsupported)
        }
    }
}
