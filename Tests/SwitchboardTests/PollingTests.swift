import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

/// The server of the polling tests, like Webim's offline appeals: it holds conversations with
/// messages and pushes nothing. The lock guards the conversations and the server's clock.
private final class AppealsServer: Sendable {
    struct State {
        var conversations: [ConversationID: [Message]] = [:]
        var order: [ConversationID] = []
        var clock = 0
    }

    static let start = Date(timeIntervalSince1970: 1_700_000_000)
    let state = Locked(State())

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

    /// What a poll finds: what changed since `since` (everything, forced), and the cursor to
    /// keep in the credentials.
    func poll(forced: Bool, since: Int) -> [BackendUpdate] {
        state.withLock { state in
            let cutoff = forced ? Date.distantPast : Self.start.addingTimeInterval(Double(since))
            let changed = state.order.compactMap { id -> ConversationSnapshot? in
                let messages = state.conversations[id]!.filter { forced || $0.time > cutoff }
                guard forced || !messages.isEmpty else { return nil }
                return ConversationSnapshot(conversation: ConversationInfo(id: id, kind: .supportChat, state: .queued), messages: messages)
            }
            // Each link starts from the stored cursor; a real backend moves it in its
            // credentials, as this one does.
            var cursor = Credentials()
            cursor["since"] = String(state.clock)
            return [.snapshot(BackendSnapshot(conversations: changed, isComplete: forced)), .credentials(cursor)]
        }
    }

    /// Starts an appeal with its first message.
    func start(with first: MessageDraft) -> ConversationSnapshot {
        let id = ConversationID("appeal-\(state.withLock { $0.order.count + 1 })")
        agentWrites(first.text, in: id)
        let messages = state.withLock { $0.conversations[id]! }
        return ConversationSnapshot(conversation: ConversationInfo(id: id, kind: .supportChat, state: .queued), messages: messages)
    }
}

extension TestBackend {
    /// A backend that pushes nothing, answering from `server` as it is asked: a poll returns
    /// what changed since the cursor in the link's credentials (or everything, forced), and the
    /// first message of a started conversation makes it.
    fileprivate static func polled(_ server: AppealsServer) -> TestBackend {
        let backend = TestBackend(name: "polled", capabilities: [.conversationLifecycle], sync: .polled)
        backend.answerAutomatically { pending in
            switch pending.request {
            case .poll(let forced):
                let since = Int(pending.link.context.credentials["since"] ?? "0") ?? 0
                return .success(.updates(server.poll(forced: forced, since: since)))
            case .startConversation(let draft):
                guard let first = draft.firstMessage else {
                    Issue.record("a polled conversation starts with a message")
                    return .failure(SwitchboardError(.invalidArgument, "polled: a conversation starts with a message"))
                }
                return .success(.startedConversation(server.start(with: first)))
            default:
                return .failure(SwitchboardError(.unsupported, "polled: \(pending.request.name)"))
            }
        }
        return backend
    }

    /// The polls so far: `true` for a forced one.
    fileprivate var polls: [Bool] {
        requests.compactMap { request in
            if case .poll(let forced) = request { return forced }
            return nil
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct PollingTests {
    func session(_ backend: TestBackend, clock: TestClock) -> ChatSession {
        var configuration = SessionConfiguration.fastForTests
        configuration.pollInterval = .seconds(30)
        return ChatSession(backend: backend, configuration: configuration, clock: SessionClock(clock), random: SeededRandomNumberGenerator(seed: 9), logger: .quiet)
    }

    /// Runs a session over `backend` on a test clock, connected, for `body`; then expects
    /// nothing left on the backend.
    func connected(_ backend: TestBackend, _ body: (ChatSession, EventRecorder) async throws -> Void) async throws {
        let session = session(backend, clock: TestClock())
        try await withRecording(session) { recorder in
            try await session.resume()
            _ = try await backend.nextLink()
            try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
            try await body(session, recorder)
        }
        expectNothingLeft(backend)
    }

    @Test func theEnginePollsOnConnectAndEveryIntervalAndStoresWhatItFinds() async throws {
        let server = AppealsServer()
        let backend = TestBackend.polled(server)
        server.agentWrites("waiting for you", in: "a")
        let clock = TestClock()
        let session = session(backend, clock: clock)
        try await withRecording(session) { recorder in
            try await session.resume()
            _ = try await backend.nextLink()
            try await recorder.first("the poll on connect") { $0.addedMessage?.text == "waiting for you" }
            server.agentWrites("answer on a later poll", in: "a")
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
        expectNothingLeft(backend)
    }

    @Test func aRefreshReturnsOnceWhatItFoundIsStoredAndAForcedOneAddsNothingTwice() async throws {
        let server = AppealsServer()
        let backend = TestBackend.polled(server)
        try await connected(backend) { session, recorder in
            server.agentWrites("one", in: "a")
            server.agentWrites("two", in: "b")
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
        let backend = TestBackend.polled(AppealsServer())
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
        let server = AppealsServer()
        let backend = TestBackend.polled(server)
        server.agentWrites("old", in: "a")
        server.agentWrites("new", in: "a")
        let store = InMemoryChatStore()
        var stored = Credentials()
        stored["since"] = "1"
        try await store.saveCredentials(stored, scope: StoreScope(backend: "polled", account: "default"))
        let session = ChatSession(backend: backend, store: store, configuration: .fastForTests, clock: SessionClock(TestClock()), logger: .quiet)
        try await session.resume()
        try await withRecording(session) { recorder in
            _ = try await backend.nextLink()
            try await recorder.first("the poll on connect") { $0.addedMessage != nil }
            try await session.refresh()
            let added = recorder.events.compactMap(\.addedMessage).map(\.text)
            #expect(added == ["new"], "polled from the stored cursor, not from the start")
        }
        expectNothingLeft(backend)
    }

    @Test func aBackendThatPushesHasNoRefresh() async throws {
        let backend = TestBackend(name: "pushing")
        let session = ChatSession(backend: backend, configuration: .fastForTests, logger: .quiet)
        try await withRecording(session) { _ in
            let error = await #expect(throws: SwitchboardError.self) { try await session.refresh() }
            #expect(error?.code == .unsupported)
        }
        expectNothingLeft(backend)
    }
}
