import Foundation
@_spi(TestKit) import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// `TestBackend` under a real `ChatSession`: the test awaits each link and request, answers,
/// fails or cuts, and `finish()` names what was left.
@Suite(.timeLimit(.minutes(1)))
struct TestBackendTests {
    static let chat = ConversationID("chat")

    static var snapshot: BackendUpdate {
        let info = ConversationInfo(id: chat, kind: .supportChat, state: .active)
        return .snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info)], isComplete: true))
    }

    @Test func aSendTheTestAnswersReachesTheEventsAndTheStore() async throws {
        let backend = TestBackend()
        let store = InMemoryChatStore()
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            #expect(link.number == 1 && link.context.session == session.id)
            link.yield(Self.snapshot)
            try await recorder.first("the conversation") { $0.conversationID == Self.chat }
            let chat = try await session.conversation(Self.chat)
            let pending = try await chat.send(text: "hello")
            let request = try await backend.nextRequest()
            guard case .send(let outgoing) = request.request else {
                Issue.record("expected a send, got \(request.request.name)")
                return
            }
            #expect(outgoing.clientID == pending.clientID && outgoing.content.text == "hello")
            #expect(request.acceptSend(serverID: "m1"))
            let confirmed = try await recorder.first("the confirmation") { $0.updatedMessage?.serverID == "m1" }
            let stored = try await chat.storedMessages(before: nil, limit: 10)
            print("a send the test answered: event \(confirmed.updatedMessage!.deliveryState), store \(stored.map { "\($0.serverID?.rawValue ?? "-")/\($0.deliveryState)" })")
            #expect(confirmed.updatedMessage?.clientID == pending.clientID)
            #expect(stored.map(\.serverID) == ["m1"] && stored.first?.deliveryState == .sent)
            #expect(await store.fetchOutbox(scope: session.scope).isEmpty)
        }
        let leftOvers = backend.finish()
        #expect(leftOvers.isEmpty, "\(leftOvers)")
        #expect(backend.exchanges.map(\.request.name) == ["send"])
        if case .answered(.message(let message))? = backend.exchanges.first?.outcome {
            #expect(message.serverID == "m1")
        } else {
            Issue.record("the send was not answered: \(backend.exchanges)")
        }
    }

    @Test func aRequestTheTestFailsFailsTheCall() async throws {
        let backend = TestBackend(capabilities: [.conversationLifecycle])
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            link.yield(Self.snapshot)
            try await recorder.first("the conversation") { $0.conversationID == Self.chat }
            async let started: Result<ConversationID, any Error> = {
                do { return .success(try await session.startConversation(ConversationDraft(title: "refused")).id) } catch { return .failure(error) }
            }()
            let request = try await link.nextRequest()
            #expect(request.request.name == "startConversation")
            #expect(request.fail(SwitchboardError(.permissionDenied, "not on a weekend")))
            #expect(!request.answer(.done), "a request ends once")
            let outcome = await started
            #expect(throws: SwitchboardError.self) { try outcome.get() }
            if case .failure(let error as SwitchboardError) = outcome { #expect(error.code == .permissionDenied) }
            print("a start the test failed: \(request.outcome.map { "\($0)" } ?? "waiting")")
            #expect(!(await session.isClosed), "a refused start is no reason to end the session")
        }
        #expect(backend.finish().isEmpty)
    }

    /// The test cuts the link; the session reconnects, and the second link's context carries what
    /// the first one delivered: the conversation's sequence and the credentials to keep.
    @Test func aCutLinkReconnectsWithTheStoredSequenceAndCredentials() async throws {
        let backend = TestBackend(sync: .sequenced(batchLimit: 100))
        let session = ChatSession(backend: backend, clock: SessionClock(ImmediateClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            let first = try await backend.nextLink()
            #expect(first.context.credentials.isEmpty && first.context.conversationSequences.isEmpty)
            first.yield(Self.snapshot)
            first.yield(.credentials(Credentials(["token": "t1"])))
            for sequence in Int64(1)...3 {
                let message = Message(serverID: MessageID("m\(sequence)"), conversationID: Self.chat, sequence: sequence, text: "\(sequence)", time: Date(timeIntervalSince1970: Double(sequence)))
                first.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: Self.chat, sequence: sequence)))
            }
            try await recorder.waitUntil("three messages") { $0.compactMap(\.addedMessage).count == 3 }
            first.close(throwing: SwitchboardError(.connectionLost, "the test cut the link"))
            let second = try await backend.nextLink()
            try await first.waitUntilClosed()
            try await recorder.waitUntil("online again") { $0.filter(\.isConnected).count == 2 }
            print("after a cut: link \(second.number) with sequences \(second.context.conversationSequences), credentials \(second.context.credentials)")
            #expect(second.number == 2 && first.state == .closed && second.state == .open)
            #expect(second.context.conversationSequences == [Self.chat: 3])
            #expect(second.context.credentials["token"] == "t1")
        }
        let leftOvers = backend.finish()
        #expect(leftOvers.isEmpty, "\(leftOvers)")
    }

    /// A request nobody took, an update the engine never read and a link nobody awaited are each
    /// reported.
    @Test func finishReportsWhatWasLeftUnconsumed() async throws {
        let backend = TestBackend()
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        let link = try await withRecording(session) { recorder in
            try await session.resume()
            try await backend.waitUntil("a connect") { $0.connectCount == 1 }
            // Looked at, not taken: the link counts as never awaited.
            let link = backend.links[0]
            link.yield(Self.snapshot)
            try await recorder.first("the conversation") { $0.conversationID == Self.chat }
            _ = try await session.conversation(Self.chat).send(text: "never answered")
            try await backend.waitUntil("the send arrives") { $0.requests.count == 1 }
            return link
        }
        try await link.waitUntilClosed()
        // The link is gone: nobody reads this.
        link.yield(.cursor(.revision("late")))
        let leftOvers = backend.finish()
        print("left over: \(leftOvers)")
        #expect(leftOvers.requests.map(\.name) == ["send"])
        #expect(leftOvers.updates == [.cursor(.revision("late"))])
        #expect(leftOvers.links == [1])
        #expect(!leftOvers.isEmpty)
        #expect(backend.exchanges.map(\.request.name) == ["send"], "the unanswered send was abandoned as the link ended")
        if case .abandoned? = backend.exchanges.first?.outcome {} else { Issue.record("the send was not abandoned: \(backend.exchanges)") }
    }

    /// Six messages of the chat, with sequences 1…6 and times 1…6 s, and one of another
    /// conversation.
    static let held: [Message] = (1...6).map { index in
        Message(serverID: MessageID("m\(index)"), conversationID: chat, sequence: Int64(index), text: "\(index)", time: Date(timeIntervalSince1970: Double(index)))
    } + [Message(serverID: "elsewhere", conversationID: "other", sequence: 2, text: "x", time: Date(timeIntervalSince1970: 2))]

    @Test func historyPagesAreCutFromAListByTimeOrSequence() throws {
        func page(before: HistoryQuery.Anchor?, after: HistoryQuery.Anchor? = nil, limit: Int) throws -> (ids: [MessageID?], hasMore: Bool) {
            let page = try TestBackend.historyPage(of: Self.held, answering: HistoryQuery(conversationID: Self.chat, before: before, after: after, limit: limit)).get()
            return (page.messages.map(\.serverID), page.hasMore)
        }
        let newest = try page(before: nil, limit: 2)
        #expect(newest.ids == ["m5", "m6"] && newest.hasMore, "the newest page, oldest first")
        let byTime = try page(before: .time(Date(timeIntervalSince1970: 5)), limit: 2)
        #expect(byTime.ids == ["m3", "m4"] && byTime.hasMore)
        let bySequence = try page(before: .sequence(3), limit: 5)
        #expect(bySequence.ids == ["m1", "m2"] && !bySequence.hasMore, "the oldest page; the other conversation's message is not in it")
        let bounded = try page(before: .time(Date(timeIntervalSince1970: 6)), after: .sequence(2), limit: 2)
        #expect(bounded.ids == ["m4", "m5"] && bounded.hasMore)
        let reachingTheBound = try page(before: .sequence(6), after: .time(Date(timeIntervalSince1970: 2)), limit: 3)
        #expect(reachingTheBound.ids == ["m3", "m4", "m5"] && !reachingTheBound.hasMore, "nothing more above the bound")
        let token = #expect(throws: SwitchboardError.self) { try page(before: .token("p1"), limit: 2) }
        #expect(token?.code == .invalidArgument)
    }

    /// The app scrolls back twice; the test answers both pages from one list, and the second
    /// query starts before the oldest message the first one stored.
    @Test func historyCallsAnsweredFromAListReturnWhatTheyStored() async throws {
        let backend = TestBackend(capabilities: [.historyPaging])
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await backend.nextLink().yield(Self.snapshot)
            try await recorder.first("the conversation") { $0.conversationID == Self.chat }
            let chat = try await session.conversation(Self.chat)
            async let first = chat.history(before: nil, limit: 2)
            let firstRequest = try await backend.nextRequest()
            #expect(firstRequest.request == .history(HistoryQuery(conversationID: Self.chat, before: nil, limit: 2)))
            #expect(firstRequest.answerHistory(from: Self.held))
            #expect(try await first.map(\.serverID) == ["m5", "m6"])
            async let second = chat.history(before: nil, limit: 4)
            let secondRequest = try await backend.nextRequest()
            #expect(secondRequest.request == .history(HistoryQuery(conversationID: Self.chat, before: .sequence(5), limit: 4)))
            #expect(secondRequest.answerHistory(from: Self.held))
            let scrolled = try await second.compactMap(\.serverID)
            print("history from a list: \(backend.requests.count) pages asked, the app holds \(scrolled)")
            #expect(scrolled == ["m3", "m4", "m5", "m6"])
        }
        let leftOvers = backend.finish()
        #expect(leftOvers.isEmpty, "\(leftOvers)")
    }

    /// The example of `Docs/AdapterGuide.md` and of the kit's `TestingWithTestBackend` article,
    /// as they show it (kept in step by hand): an app's reaction to a send the server refuses
    /// and to a lost link, with no server.
    @Test func theGuidesExample() async throws {
        let backend = TestBackend()
        let session = ChatSession(backend: backend, clock: SessionClock(ImmediateClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            let chat = ConversationInfo(id: "chat", kind: .supportChat, state: .active)
            link.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: chat)], isComplete: true)))
            try await recorder.first("the conversation") { $0.conversationID == "chat" }

            // The server refuses the send: the message turns failed, with the server's reason.
            let sent = try await session.conversation("chat").send(text: "hello")
            let request = try await backend.nextRequest()
            request.fail(SwitchboardError(.messageRejected, "too long"))
            let failed = try await recorder.first("the refusal") { event in
                event.updatedMessage?.clientID == sent.clientID && event.updatedMessage?.deliveryState.isFailed == true
            }
            #expect(failed.updatedMessage?.deliveryState == .failed("too long"))

            // The link drops: the session reconnects by itself, with what it stored.
            link.close(throwing: SwitchboardError(.connectionLost, "the test cut the link"))
            let next = try await backend.nextLink()
            try await recorder.waitUntil("online again") { $0.filter(\.isConnected).count == 2 }
            #expect(next.number == 2)
        }
        #expect(backend.finish().isEmpty)
    }
}
