import Foundation
@_spi(TestKit) import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// The one conversation of the loop tests' backends.
private let chatID = ConversationID("chat")

/// A link's first update in most loop tests: the account has one active conversation.
private let oneConversation: BackendUpdate = .snapshot(
    BackendSnapshot(conversations: [ConversationSnapshot(conversation: ConversationInfo(id: chatID, kind: .supportChat, state: .active))], isComplete: true)
)

extension TestBackend {
    /// A backend whose every link starts with ``oneConversation`` and whose requests are answered
    /// as they arrive — sends with the message (or only "done"), everything else "done" — except
    /// those whose label is in `leaving`, which wait for the test. Sends with the text `poison`
    /// close the link, as a server that drops the socket on a frame.
    fileprivate static func recording(
        typingPolicy: TypingPolicy = .startEnd(autoStop: .seconds(5)),
        poison: String = "poison",
        answersSendsWithMessage: Bool = true,
        leaving: Set<String> = []
    ) -> TestBackend {
        let backend = TestBackend(name: "recording", capabilities: [.typing, .readMarkers], limits: BackendLimits(typingPolicy: typingPolicy))
        backend.onConnect { $0.yield(oneConversation) }
        let serverIDs = Locked(0)
        backend.answerAutomatically { pending in
            let label = label(pending.request)
            if leaving.contains(label) { return nil }
            guard case .send(let message) = pending.request else { return .success(.done) }
            if message.content.text == poison {
                let closed = SwitchboardError(.connectionLost, "closed with 1009: message too big")
                pending.link.fail(closed)
                return .failure(closed)
            }
            guard answersSendsWithMessage else { return .success(.done) }
            let serverID = serverIDs.withLock { count in
                count += 1
                return MessageID("m\(count)")
            }
            return .success(.message(TestBackend.accepted(message, serverID: serverID, time: Date())))
        }
        return backend
    }

    /// A short name of a request for the loop tests' logs.
    fileprivate static func label(_ request: BackendRequest) -> String {
        switch request {
        case .typing(_, let isTyping, _): "typing:\(isTyping)"
        case .markRead(_, .sequence(let sequence)): "read:\(sequence)"
        case .send(let message): "send:\(message.content.text)"
        default: request.name
        }
    }

    /// The requests the backend answered or failed, in the order they ended (a request the engine
    /// gave up is not in it).
    fileprivate var log: [String] {
        exchanges.compactMap { exchange in
            if case .abandoned = exchange.outcome { return nil }
            return Self.label(exchange.request)
        }
    }

    /// A sequenced backend whose one conversation has `head` events: each link announces only
    /// the head, and retransmits are answered completely.
    fileprivate static func sequenced(head: Int64) -> TestBackend {
        let backend = TestBackend(name: "sequenced", sync: .sequenced(batchLimit: 100))
        backend.onConnect { $0.yield(.conversationHead("big", lastSequence: head)) }
        backend.answerAutomatically { pending in
            guard case .retransmit(let conversation, let range) = pending.request else { return .success(.done) }
            let events = range.map { sequence in
                BackendEvent(
                    .messageAdded(Message(serverID: MessageID("m\(sequence)"), conversationID: conversation, sequence: sequence, text: "\(sequence)", time: Date(timeIntervalSince1970: Double(sequence))), position: .newest),
                    conversation: conversation, sequence: sequence
                )
            }
            return .success(.retransmitted(events, isComplete: true))
        }
        return backend
    }

    /// The ranges retransmits asked for, in order.
    fileprivate var retransmitRanges: [ClosedRange<Int64>] {
        requests.compactMap { request in
            if case .retransmit(_, let range) = request { return range }
            return nil
        }
    }

    /// A backend whose first send reply is lost after the server applied it; the server's copy
    /// then comes without the client id (as a re-read list does), and the resend is answered
    /// with the stored message, both ids on it.
    fileprivate static func losingTheFirstReply() -> TestBackend {
        let backend = TestBackend(name: "lost-reply")
        backend.onConnect { $0.yield(oneConversation) }
        let attempts = Locked(0)
        backend.answerAutomatically { pending in
            guard case .send(let outgoing) = pending.request else { return .success(.done) }
            var stored = Message(
                serverID: "s1", conversationID: outgoing.conversationID, senderRole: .customer,
                text: outgoing.content.text, time: Date(timeIntervalSince1970: 100), deliveryState: .sent
            )
            let attempt = attempts.withLock { attempts in
                defer { attempts += 1 }
                return attempts
            }
            if attempt == 0 {
                pending.link.yield(.event(BackendEvent(.messageAdded(stored, position: .newest), conversation: outgoing.conversationID)))
                return .failure(SwitchboardError(.timedOut, "the reply was lost"))
            }
            stored.clientID = outgoing.clientID
            return .success(.message(stored))
        }
        return backend
    }
}

@Suite(.timeLimit(.minutes(1)))
struct EngineLoopTests {
    /// Applies a timeline's diffs to a list, as a UI does, until `done` holds for the list.
    static func rows(of timeline: Timeline, until done: ([Message]) -> Bool) async -> [Message] {
        var list: [Message] = []
        for await update in timeline {
            list.apply(update.diffs)
            if done(list) { break }
        }
        return list
    }

    @Test func aLostReplyThenTheServersCopyThenTheResendShowOneMessageEverywhere() async throws {
        let backend = TestBackend.losingTheFirstReply()
        let store = InMemoryChatStore()
        let session = ChatSession(
            backend: backend, store: store, configuration: .fastForTests,
            clock: SessionClock(ImmediateClock()), logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == chatID }
            let chat = try await session.conversation(chatID)
            let timeline = try await chat.timeline(limit: 10)
            let sent = try await chat.send(text: "hello")
            try await recorder.first("the merge") {
                $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID == "s1"
            }
            // The timeline: pending row, server copy, then the merge into one row.
            let list = await Self.rows(of: timeline) { rows in
                rows.count == 1 && rows.first?.clientID != nil && rows.first?.serverID != nil
            }
            let stored = try await chat.storedMessages(before: nil, limit: 10)
            print("lost reply: store \(stored.map { "\($0.serverID?.rawValue ?? "-")/\($0.clientID != nil)" }), timeline \(list.count) row(s)")
            #expect(stored.count == 1 && stored.first?.serverID == "s1" && stored.first?.clientID == sent.clientID)
            #expect(list.map(\.serverID) == ["s1"] && timeline.items == list, "the timeline shows one message")
            #expect(await session.pendingSends.isEmpty)
        }
        expectNothingLeft(backend)
    }

    @Test func aConversationFirstSeenWithALargeHeadCatchesUpOnlyItsNewestEvents() async throws {
        let backend = TestBackend.sequenced(head: 50_000)
        let session = ChatSession(
            backend: backend,
            configuration: SessionConfiguration(newConversationCatchUp: 100),
            clock: SessionClock(TestClock()),
            logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.waitUntil("the newest 100") { $0.compactMap(\.addedMessage).count == 100 }
            let added = recorder.events.compactMap(\.addedMessage).compactMap(\.sequence)
            let ranges = backend.retransmitRanges
            print("first seen at 50,000: asked for \(ranges), delivered \(added.first!)...\(added.last!)")
            #expect(ranges == [49_901...50_000])
            #expect(added == Array(49_901...50_000))
            #expect(await session.statistics.retransmittedEvents == 100)
        }
        expectNothingLeft(backend)
    }

    /// A store read an inbound event needs fails (a stopping session's read is cancelled, a
    /// database connection breaks): its transaction stores nothing — not the message, not the
    /// sequence past it — the session reads its stored sequences again and drops the link, and
    /// the next link fetches the event from where the store says. (The event used to be skipped
    /// and the sequence stored past it: the message was lost for good.)
    @Test func aReadThatFailsForAnEventStoresNothingOfItsTransaction() async throws {
        let backend = TestBackend(name: "sequenced", sync: .sequenced(batchLimit: 100))
        let message = Message(serverID: "m1", conversationID: "c", sequence: 1, text: "hello", time: Date(timeIntervalSince1970: 1))
        let links = Locked(0)
        backend.onConnect { link in
            // The first link hears the event live; the next one finds it in the log (head 1).
            let first = links.withLock { links in
                defer { links += 1 }
                return links == 0
            }
            if first {
                link.yield(.conversationHead("c", lastSequence: 0))
                link.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: "c", sequence: 1)))
            } else {
                link.yield(.conversationHead("c", lastSequence: 1))
            }
        }
        backend.answerAutomatically { pending in
            guard case .retransmit(let conversation, let range) = pending.request else { return .success(.done) }
            let events = range.map { _ in BackendEvent(.messageAdded(message, position: .newest), conversation: conversation, sequence: 1) }
            return .success(.retransmitted(events, isComplete: true))
        }
        let store = ProbedStore()
        let scope = StoreScope(backend: "sequenced", account: "default")
        // The run's read and the event's own.
        store.failNext(.fetchMessagesByKeys, count: 2)
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the failed read reported") {
                if case .error(let error) = $0.kind { return error.code == .storageFailure }
                return false
            }
            try await recorder.first("the link dropped") {
                if case .connection(.waitingToReconnect, _) = $0.kind { return true }
                return false
            }
            let sequences = try await store.base.fetchSequences(scope: scope)
            let stored = try await store.base.fetchMessages(in: "c", before: nil, limit: 10, scope: scope)
            print("an event whose read failed: stored sequences \(sequences), messages \(stored.map(\.text)); links \(backend.connectCount)")
            #expect((sequences["c"] ?? 0) < 1, "the sequence did not move past the event")
            #expect(stored.isEmpty)
            // The app reconnects at once (the test clock holds the backoff).
            try await session.pause()
            try await session.resume()
            try await recorder.first("the event again") { $0.addedMessage?.serverID == "m1" }
            try await session.pause()
        }
        #expect(try await store.base.fetchMessages(in: "c", before: nil, limit: 10, scope: scope).map(\.text) == ["hello"])
        #expect(try await store.base.fetchSequences(scope: scope)["c"] == 1)
        #expect(backend.retransmitRanges == [1...1], "the second link asked for the event the store does not have")
    }

    @Test func aConversationRemovedWithItsLastEventsKeepsNoSequence() async throws {
        let backend = TestBackend(name: "sequenced", sync: .sequenced(batchLimit: 100))
        let store = InMemoryChatStore()
        let message = Message(serverID: "m1", conversationID: "gone", sequence: 1, text: "last words", time: Date(timeIntervalSince1970: 1))
        backend.onConnect { link in
            link.yield(.conversationHead("gone", lastSequence: 0))
            // The last message and the removal arrive together: one run of the tracker.
            link.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: "gone", sequence: 1)))
            link.yield(.event(BackendEvent(.conversationRemoved, conversation: "gone", sequence: 2)))
        }
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.waitUntil("the removal") { events in events.contains { if case .conversationRemoved = $0.kind { true } else { false } } }
            // A command goes through the loop after the update: the update's actions are done.
            try await session.pause()
        }
        let sequences = await store.fetchSequences(scope: StoreScope(backend: "sequenced", account: "default"))
        print("a conversation removed with its last events: stored sequences \(sequences)")
        #expect(sequences["gone"] == nil, "a removed conversation resumes nowhere")
        expectNothingLeft(backend)
    }

    /// Runs a session on `backend` (on a test clock nobody advances) and hands `body` its one
    /// conversation once the session knows it.
    private func withChat(
        _ backend: TestBackend,
        _ body: @Sendable (ChatSession, EventRecorder, any Conversation) async throws -> Void
    ) async throws {
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == chatID }
            try await body(session, recorder, try await session.conversation(chatID))
        }
        expectNothingLeft(backend)
    }

    @Test func typingStartsAgainAfterAnOfflinePeriod() async throws {
        let backend = TestBackend.recording()
        try await withChat(backend) { session, recorder, chat in
            try await chat.userTyping(draft: nil)
            try await backend.waitUntil("typing started") { $0.log == ["typing:true"] }
            // Offline while the "ended" timer is pending: the timer dies with the link.
            try await session.pause()
            try await recorder.first("offline") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
            try await session.resume()
            try await recorder.waitUntil("online again") { $0.filter(\.isConnected).count == 2 }
            try await chat.userTyping(draft: nil)
            try await backend.waitUntil("typing started again") { $0.log.count == 2 }
            try await chat.userStoppedTyping()
            try await backend.waitUntil("typing ended") { $0.log.count == 3 }
            print("typing across an offline period: \(backend.log)")
            #expect(backend.log == ["typing:true", "typing:true", "typing:false"])
        }
    }

    @Test func aStopNeverOvertakesItsTypingAndMarkersNeverMoveBack() async throws {
        // "typing" is slow on the wire: the test answers it late; "stopped" is given while it is
        // still there.
        // Each call returns when the server answered it, so the calls after the first wait in the
        // conversation's lane: each is made once the one before is queued.
        let backend = TestBackend.recording(leaving: ["typing:true"])
        try await withChat(backend) { session, _, chat in
            @Sendable func queued(_ count: Int) async {
                while await session.statistics.requestsQueued < count { await Task.yield() }
            }
            let typingCall = Task { try await chat.userTyping(draft: nil) }
            let typing = try await backend.nextRequest()
            #expect(TestBackend.label(typing.request) == "typing:true", "typing on the wire")
            let stop = Task { try await chat.userStoppedTyping() }
            await queued(2)
            let five = Task { try await chat.markRead(upTo: .sequence(5)) }
            await queued(3)
            await #expect(throws: SwitchboardError.self, "a marker behind is refused, before anything is sent") {
                try await chat.markRead(upTo: .sequence(3))
            }
            let seven = Task { try await chat.markRead(upTo: .sequence(7)) }
            await queued(4)
            typing.answer(.done)
            #expect(try await typingCall.value == .sent)
            try await stop.value
            try await five.value
            try await seven.value
            try await backend.waitUntil("everything sent") { $0.log.count == 4 }
            print("one conversation's requests on the wire: \(backend.log)")
            #expect(backend.log == ["typing:true", "typing:false", "read:5", "read:7"])
        }
    }

    @Test func aSendThatKeepsKillingTheLinkFailsAndTheNextOneGoes() async throws {
        let clock = TestClock()
        let backend = TestBackend.recording()
        let configuration = SessionConfiguration(
            reconnectBackoff: BackoffPolicy(initial: .seconds(1), maximum: .seconds(64)),
            maxLinkLossesPerSend: 4,
            stableLinkDuration: .seconds(3600)
        )
        let session = ChatSession(
            backend: backend, configuration: configuration, clock: SessionClock(clock),
            random: SeededRandomNumberGenerator(seed: 7), logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == chatID }
            let chat = try await session.conversation(chatID)
            let poison = try await chat.send(text: "poison")
            let next = try await chat.send(text: "after")
            // Virtual time moves in steps of 50 ms until the poison send fails, and then until
            // the next send is confirmed; the connection events' times give the delays waited.
            let failed = try await advance(clock, until: recorder, "the poison send fails") {
                $0.updatedMessage?.clientID == poison.clientID && $0.updatedMessage?.deliveryState.isFailed == true
            }
            _ = try await advance(clock, until: recorder, "the next send goes") {
                $0.updatedMessage?.clientID == next.clientID && $0.updatedMessage?.serverID != nil
            }
            var delays: [Duration] = []
            var waitingSince: Date?
            for event in recorder.events {
                switch event.kind.connectionState {
                case .waitingToReconnect: waitingSince = event.time
                case .connecting:
                    if let since = waitingSince { delays.append(.milliseconds(Int((event.time.timeIntervalSince(since) * 1000).rounded()))) }
                    waitingSince = nil
                default: break
                }
            }
            print("poison send: \(backend.connectCount) links, reconnect delays \(delays), \(failed.updatedMessage!.deliveryState)")
            #expect(failed.updatedMessage?.deliveryState == .failed("the connection closed 4 times while this message was being sent"))
            #expect(backend.log.filter { $0 == "send:poison" }.count == 4)
            #expect(backend.log.last == "send:after")
            // Reset to its floor after each link, every delay would be within [0.5 s, 1 s].
            #expect(delays.count >= 3 && delays[2] >= .seconds(2), "the backoff keeps growing when each link dies right after it opens: \(delays)")
        }
        // A link the poison cut may go before the engine reads its snapshot: only the requests
        // must all have been answered.
        #expect(backend.finish().requests.isEmpty)
    }

    @Test func aSendAnsweredDoneIsSentAndLeavesTheOutboxInOneWrite() async throws {
        let backend = TestBackend.recording(answersSendsWithMessage: false)
        let store = InMemoryChatStore()
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == chatID }
            let chat = try await session.conversation(chatID)
            let pending = try await chat.send(text: "hello")
            let sent = try await recorder.first("sent") { $0.updatedMessage?.clientID == pending.clientID }
            #expect(sent.updatedMessage?.deliveryState == .sent, "a send the server took is sent, not pending for ever")
            #expect(try await chat.storedMessages(before: nil, limit: 10).map(\.deliveryState) == [.sent])
            #expect(await store.fetchOutbox(scope: session.scope).isEmpty)
        }
        expectNothingLeft(backend)
    }

    @Test func runCalledTwiceThrowsATypedError() async throws {
        let backend = TestBackend.recording()
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("running") { $0.isConnected }
            await #expect {
                try await session.run()
            } throws: { ($0 as? SwitchboardError)?.code == .invalidState }
        }
        await #expect {
            try await session.run()
        } throws: { ($0 as? SwitchboardError)?.code == .invalidState }
    }

    /// Two history calls for one conversation while its page is on the way: the second joins the
    /// first, so the backend is asked once, and both return the page once it is answered.
    @Test func twoHistoryCallsWhileThePageIsOnItsWayAskTheBackendOnce() async throws {
        let backend = TestBackend(name: "paged", capabilities: [.historyPaging])
        let store = ProbedStore()
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        let page = (1...3).map { index in
            Message(serverID: MessageID("h\(index)"), conversationID: chatID, senderRole: .agent, text: "old \(index)", time: Date(timeIntervalSince1970: Double(index)))
        }
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            link.yield(oneConversation)
            try await recorder.first("the conversation") { $0.conversationID == chatID }
            let chat = try await session.conversation(chatID)
            // Where the first call's page starts is read from the store: held there.
            store.holdNext(.fetchOldestConfirmedMessage)
            let results = try await withThrowingTaskGroup(of: [Message].self) { group in
                group.addTask { try await chat.history(before: nil, limit: 10) }
                // The loop is inside the first call, reading where its page starts.
                try await store.waitUntil("the first call at the store") { $0.isHolding(.fetchOldestConfirmedMessage) }
                let readsBefore = store.finishedCount(.fetchMessagesPage)
                group.addTask { try await chat.history(before: nil, limit: 10) }
                // The second call read the stored page; its command reaches the inbox before the
                // loop may go on (both run on the session's actor), so it waits behind the first.
                try await store.waitUntil("the second call's read") { $0.finishedCount(.fetchMessagesPage) > readsBefore }
                #expect(await session.statistics.bufferedInputs == 1, "the second call waits for the loop")
                store.release(.fetchOldestConfirmedMessage)
                let request = try await backend.nextRequest()
                #expect(request.request == .history(HistoryQuery(conversationID: chatID, before: nil, limit: 10)))
                #expect(request.answer(.history(HistoryPage(messages: page, hasMore: true))))
                var results: [[Message]] = []
                for try await result in group { results.append(result) }
                return results
            }
            let asked = backend.requests.filter { $0.name == "history" }
            print("two history calls, one page on the way: \(asked.count) history request(s), calls returned \(results.map { $0.map(\.text) })")
            #expect(asked.count == 1)
            #expect(results.count == 2 && results.allSatisfy { $0.map(\.serverID) == ["h1", "h2", "h3"] })
        }
        expectNothingLeft(backend)
    }

    /// A conversation the backend started is in the store and on the bus before
    /// `startConversation` returns.
    @Test func aStartedConversationIsStoredAndPublishedBeforeTheCallReturns() async throws {
        let backend = TestBackend(name: "starting", capabilities: [.conversationLifecycle])
        let store = InMemoryChatStore()
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        let events = session.events(filter: .all, buffering: .unbounded)
        let started = ConversationInfo(id: "new", kind: .supportChat, title: "help", state: .queued)
        try await withRecording(session) { recorder in
            try await session.resume()
            _ = try await backend.nextLink()
            try await recorder.first("connected") { $0.isConnected }
            let conversation = try await withThrowingTaskGroup(of: (any Conversation)?.self) { group -> (any Conversation)? in
                group.addTask { try await session.startConversation(ConversationDraft(title: "help")) }
                let request = try await backend.nextRequest()
                guard case .startConversation(let draft) = request.request else {
                    Issue.record("expected a start, got \(request.request.name)")
                    return nil
                }
                #expect(draft.title == "help" && draft.clientID != nil)
                request.answer(.conversation(started))
                return try await group.next()!
            }
            // Read at once: nothing was awaited between the call's return and here.
            let stored = await store.fetchConversation("new", scope: session.scope)
            events.finish()
            var published: [ChatEvent] = []
            for await event in events { published.append(event) }
            let added = published.filter { if case .conversationAdded(let info) = $0.kind { info.id == "new" } else { false } }
            print("started: \(conversation?.id.rawValue ?? "-"), stored \(stored?.title ?? "-"), \(added.count) conversationAdded event(s) on the bus by then")
            #expect(conversation?.id == "new")
            #expect(stored?.state == .queued && stored?.title == "help")
            #expect(added.count == 1)
        }
        expectNothingLeft(backend)
    }

    @Test func errorsAreEqualOnlyWhenTheySayTheSame() {
        #expect(SwitchboardError(.connectionLost, "a") == SwitchboardError(.connectionLost, "a"))
        #expect(SwitchboardError(.connectionLost, "a") != SwitchboardError(.connectionLost, "b"))
        #expect(SwitchboardError(.rateLimited, "a", retryAfter: .seconds(1)) != SwitchboardError(.rateLimited, "a", retryAfter: .seconds(2)))
        #expect(SwitchboardError(.fatal, "a", vendorCode: "1") != SwitchboardError(.fatal, "a", vendorCode: "2"))
        #expect(
            SwitchboardError(.fatal, "a", underlying: SwitchboardError(.timedOut, "x"))
                != SwitchboardError(.fatal, "a", underlying: SwitchboardError(.timedOut, "y"))
        )
    }

    @Test func commandsAfterTheSessionEndedThrowSessionClosed() async throws {
        let backend = TestBackend.recording()
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        let chat = try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == chatID }
            return try await session.conversation(chatID)
        }
        expectNothingLeft(backend)
        await #expect {
            try await chat.userTyping(draft: nil)
        } throws: { ($0 as? SwitchboardError)?.code == .sessionClosed }
    }
}

/// Moves virtual time in steps, letting the engine run between them (yielding, never sleeping),
/// until an event matches; returns it.
private func advance(
    _ clock: TestClock,
    within horizon: Duration = .seconds(64),
    until recorder: EventRecorder,
    _ what: String,
    _ matches: @Sendable (ChatEvent) -> Bool
) async throws -> ChatEvent {
    // The engine runs until it waits on the clock for something due within `horizon` (a
    // reconnect, a retry); then time moves to that deadline, exactly. Steps of fixed virtual
    // time with a fixed number of yields between them took 48–59 s of a 60 s limit with every
    // suite at once: each step waited its yields whether or not the engine had anything to do.
    for _ in 0..<1_000 {
        var due: Duration?
        for _ in 0..<1_000_000 {
            if let event = recorder.events.first(where: matches) { return event }
            due = clock.pendingDeadlines.first { $0 <= horizon }
            if due != nil { break }
            await Task.yield()
        }
        guard let due else { break }
        clock.advance(by: due)
    }
    throw ConformanceFailure("virtual time ran out waiting for \(what)")
}

extension ChatEvent.Kind {
    fileprivate var connectionState: ConnectionState? {
        if case .connection(let state, _) = self { return state }
        return nil
    }
}

/// Ends the backend and expects nothing left: every request answered, every update read, every
/// link seen.
func expectNothingLeft(_ backend: TestBackend, sourceLocation: SourceLocation = #_sourceLocation) {
    let leftOvers = backend.finish()
    #expect(leftOvers.isEmpty, "left over: \(leftOvers)", sourceLocation: sourceLocation)
}
