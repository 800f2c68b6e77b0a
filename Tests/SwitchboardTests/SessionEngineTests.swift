import Foundation
import Logging
@_spi(TestKit) import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import Testing
import InMemoryTracing
import Tracing

extension TestBackend {
    /// A backend whose links yield what the test yields and that starts conversations itself:
    /// a start is answered with a queued conversation named by the draft's title, and refused
    /// for good (a fatal error) when the title is "banned".
    fileprivate static func scripted() -> TestBackend {
        let backend = TestBackend(name: "scripted", capabilities: [.conversationLifecycle])
        backend.answerAutomatically { pending in
            guard case .startConversation(let draft) = pending.request else {
                return .failure(SwitchboardError(.unsupported, "scripted: \(pending.request.name)"))
            }
            if draft.title == "banned" { return .failure(SwitchboardError(.fatal, "visitor banned")) }
            return .success(.conversation(ConversationInfo(id: ConversationID(draft.title ?? "local"), kind: .thread, state: .queued)))
        }
        return backend
    }

    /// A complete list of these conversations, all active threads.
    fileprivate static func list(_ ids: [String]) -> BackendUpdate {
        .snapshot(BackendSnapshot(conversations: ids.map { ConversationSnapshot(conversation: ConversationInfo(id: ConversationID($0), kind: .thread, state: .active)) }, isComplete: true))
    }
}

/// Runs `session` while `body` runs.
private func running<T: Sendable>(_ session: ChatSession, _ body: @Sendable () async throws -> T) async throws -> T {
    try await session.withRunning { _ in try await body() }
}

@Suite(.timeLimit(.minutes(1)))
struct SessionEngineTests {
    let time = Date(timeIntervalSince1970: 1_700_000_000)

    @Test func reconnectFollowsTheBackoffScheduleOnTheInjectedClock() async throws {
        let clock = TestClock()
        let backend = TestBackend(name: "failing", connects: .refuse(SwitchboardError(.connectionLost, "refused")))
        let session = ChatSession(
            backend: backend,
            configuration: SessionConfiguration(reconnectBackoff: BackoffPolicy(initial: .seconds(1), maximum: .seconds(8))),
            clock: SessionClock(clock, wallClock: { Date(timeIntervalSince1970: 0) }),
            random: SeededRandomNumberGenerator(seed: 11),
            logger: .quiet
        )
        let delays = try await running(session) {
            try await session.resume()
            var delays: [Duration] = []
            for attempt in 1...6 {
                #expect(await clock.waitForSleepers(1), "the engine waits on the clock before attempt \(attempt + 1)")
                #expect(clock.sleepingTaskCount == 0, "the engine's timer is an action scheduled on the clock, no task asleep")
                #expect(backend.connectCount == attempt, "no attempt before its delay has passed")
                let delay = try #require(clock.pendingDeadlines.first)
                delays.append(delay)
                clock.advance(by: delay)
            }
            #expect(await clock.waitForSleepers(1), "the engine waits on the clock before the next attempt as it closes")
            return delays
        }
        #expect(clock.sleeperCount == 0, "the session's end cancels the tick it had scheduled")
        let ceilings: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)]
        for (delay, ceiling) in zip(delays, ceilings) {
            #expect(delay <= ceiling && delay >= ceiling / 2, "\(delay) is within [\(ceiling / 2), \(ceiling)]")
        }
        print("reconnect delays under the test clock: \(delays)")
    }

    /// The continuous clock schedules on a dispatch queue: an action runs at its deadline, and
    /// one cancelled before its deadline never does. (The two share the queue: the later one
    /// runs after the earlier one's turn, so its running proves the earlier one's did not.)
    @Test func theContinuousClockRunsAScheduledActionAndNotACancelledOne() async {
        let clock = ContinuousClock()
        let ran = Locked<[String]>([])
        #expect(SessionClock(clock).schedules && !SessionClock(ImmediateClock()).schedules)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let cancelled = clock.schedule(at: clock.now.advanced(by: .milliseconds(200))) { ran.withLock { $0.append("cancelled") } }
            let deadline = clock.now.advanced(by: .milliseconds(400))
            _ = clock.schedule(at: deadline) {
                ran.withLock { $0.append(clock.now >= deadline ? "kept" : "kept early") }
                done.resume()
            }
            cancelled.cancel()
        }
        #expect(ran.withLock { $0 } == ["kept"])
    }

    @Test func aFatalConnectErrorEndsTheSession() async throws {
        let session = ChatSession(
            backend: TestBackend(name: "failing", connects: .refuse(SwitchboardError(.fatal, "account blocked"))),
            clock: SessionClock(TestClock()),
            logger: .quiet
        )
        let events = session.events(filter: .all, buffering: .unbounded)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await session.run() }
            try? await session.resume()
        }
        #expect(await session.isClosed)
        var sawFatal = false
        for await event in events {
            if case .fatal(let error) = event.kind { sawFatal = error.code == .fatal }
            if case .connection(.disconnected, .fatal?) = event.kind { break }
        }
        #expect(sawFatal)
    }

    /// A fatal answer ends the session whichever request gets it, not only the link's own
    /// connect or updates: the account is gone for every request after it too.
    @Test func aFatalAnswerToARequestEndsTheSession() async throws {
        let backend = TestBackend.scripted()
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("connected") { $0.kind == .connection(.connected, reason: nil) }
            do {
                _ = try await session.startConversation(ConversationDraft(title: "banned"))
                Issue.record("a start refused with a fatal error succeeded")
            } catch let error as SwitchboardError {
                #expect(error.code == .fatal)
            }
            let fatal = try await recorder.first("the fatal event") { if case .fatal = $0.kind { true } else { false } }
            try await recorder.first("disconnected for good") { if case .connection(.disconnected, .fatal?) = $0.kind { true } else { false } }
            #expect(await session.isClosed)
            print("a fatal answer to a request: \(fatal.kind), session closed: \(await session.isClosed)")
            await #expect(throws: SwitchboardError.self) { _ = try await session.startConversation(ConversationDraft(title: "later")) }
        }
    }

    /// A fatal answer outranks the link's own failure, whichever comes first: the session ends
    /// instead of reconnecting as if the link had only dropped (a server that deactivates an
    /// account cuts its long-poll and refuses the request in flight, in either order).
    @Test(arguments: [true, false])
    func aFatalAnswerHeardAsTheLinkFailsStillEndsTheSession(cutFirst: Bool) async throws {
        // The request waits for the test's answer through the link's cancellation too; without
        // `cutFirst`, the link's scope throws as it ends, as an adapter whose long-poll was cut.
        let backend = TestBackend(name: "cut", capabilities: [.conversationLifecycle], requestsOutliveCancellation: true)
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            if !cutFirst { link.throwWhenClosed(SwitchboardError(.connectionLost, "the long-poll was cut")) }
            try await recorder.first("connected") { $0.kind == .connection(.connected, reason: nil) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try? await session.startConversation(ConversationDraft(title: "late")) }
                let request = try await backend.nextRequest()
                if cutFirst {
                    link.fail(SwitchboardError(.connectionLost, "the long-poll was cut"))
                    // The loop has taken the cut once it cancels the request in flight.
                    try await request.waitUntilCancelled()
                }
                request.fail(SwitchboardError(.fatal, "account deactivated"))
                try await group.waitForAll()
            }
            let fatal = try await recorder.first("the fatal event") { if case .fatal = $0.kind { true } else { false } }
            try await recorder.first("disconnected for good") { if case .connection(.disconnected, .fatal?) = $0.kind { true } else { false } }
            #expect(await session.isClosed)
            print("a fatal answer \(cutFirst ? "after" : "before") the link's cut: \(fatal.kind), session closed: \(await session.isClosed)")
        }
        expectNothingLeft(backend)
    }

    /// Closing or pausing a session whose link is still connecting cancels the connect instead
    /// of waiting for it: `switchboard connect webim` to a refused port took the HTTP client's
    /// whole deadline (60 s) to exit.
    @Test func pausingOrClosingWhileConnectingCancelsTheConnect() async throws {
        // Every connect hangs (a server that accepts and never answers, a client that retries a
        // refused port until its deadline) until the engine cancels it.
        let backend = TestBackend(name: "hanging", connects: .hold)
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        let events = session.events(filter: .all, buffering: .unbounded)
        try await session.withRunning { session in
            try await session.resume()
            for await event in events {
                if case .connection(.connecting, _) = event.kind { break }
            }
            try await session.pause()
            for await event in events {
                if case .connection(.disconnected, .userInitiated?) = event.kind { break }
            }
            #expect(backend.abandonedConnects == 1, "the pause cancelled the connect")
            try await session.resume()
            for await event in events {
                if case .connection(.connecting, _) = event.kind { break }
            }
        }
        // Reaching here means the close did not wait for the second connect either.
        print("connects abandoned: \(backend.connectCount) started, \(backend.abandonedConnects) cancelled by a pause or the close")
        #expect(backend.connectCount == 2 && backend.abandonedConnects == 2)
    }

    @Test func typingIsThrottledLocallyToTheBackendsPolicy() async throws {
        let clock = TestClock()
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
        let backend = InMemoryBackend(server: emulator.server, user: "customer", typingPolicy: .minimumInterval(.seconds(10)))
        let session = ChatSession(backend: backend, clock: SessionClock(clock), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation.id }
            let chat = try await session.conversation(conversation.id)
            for _ in 0..<20 { try await chat.userTyping(draft: nil) }
            _ = try await emulator.waitForCustomerActivity(in: conversation.id, timeout: .seconds(10)) { $0.typing.count == 1 }
            clock.advance(by: .seconds(9))
            for _ in 0..<20 { try await chat.userTyping(draft: nil) }
            clock.advance(by: .seconds(1))
            try await chat.userTyping(draft: nil)
            let activity = try await emulator.waitForCustomerActivity(in: conversation.id, timeout: .seconds(10)) {
                $0.typing.count >= 2
            }
            #expect(activity.typing == [true, true], "41 keystrokes over 10 s send two notifications")
        }
    }

    @Test func theOutboxSurvivesARestartOfTheProcess() async throws {
        let store = InMemoryChatStore()
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
        let backend = InMemoryBackend(server: emulator.server, user: "customer")
        // First process: learns the conversation, goes offline, queues two sends, then dies.
        let first = ChatSession(backend: backend, store: store, logger: .quiet)
        try await withRecording(first) { firstEvents in
            try await first.resume()
            try await firstEvents.first("the conversation") { $0.conversationID == conversation.id }
            try await first.pause()
            try await firstEvents.first("offline") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
            let chat = try await first.conversation(conversation.id)
            try await chat.send(text: "one")
            try await chat.send(text: "two")
        }
        #expect(emulator.server.messages(in: conversation.id).isEmpty)
        // Second process, same store: the outbox resumes.
        let second = ChatSession(backend: backend, store: store, configuration: .fastForTests, logger: .quiet)
        try await withRecording(second) { recorder in
            try await second.resume()
            try await recorder.waitUntil("both sends confirmed") { events in
                events.compactMap(\.updatedMessage).filter { $0.serverID != nil }.count >= 2
            }
        }
        #expect(emulator.server.messages(in: conversation.id).map(\.text) == ["one", "two"])
        let stored = await store.fetchMessages(in: conversation.id, before: nil, limit: 10, scope: second.scope)
        #expect(stored.map(\.text) == ["one", "two"])
        #expect(stored.allSatisfy { $0.deliveryState == .sent && $0.serverID != nil })
        #expect(await store.fetchOutbox(scope: second.scope).isEmpty)
    }

    @Test func aSendUnderTheCallersClientIDIsQueuedOnceHoweverOftenItIsRepeated() async throws {
        let store = InMemoryChatStore()
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
        let second = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
        let session = ChatSession(backend: InMemoryBackend(server: emulator.server, user: "customer"), store: store, configuration: .fastForTests, logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation.id }
            try await recorder.first("the second conversation") { $0.conversationID == second.id }
            try await session.pause()
            try await recorder.first("offline") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
            let chat = try await session.conversation(conversation.id)
            // Offline: the first call queues it, the repeat answers with the queued copy.
            let first = try await chat.send(MessageDraft(text: "order 1"), clientID: "order-1")
            let repeated = try await chat.send(MessageDraft(text: "order 1, again"), clientID: "order-1")
            #expect(first.clientID == "order-1" && first.deliveryState == .pending)
            #expect(repeated == first, "a repeat while pending returns the pending message")
            #expect(await session.pendingSends.map(\.clientID) == ["order-1"])
            try await session.resume()
            try await recorder.waitUntil("the send confirmed") { events in
                events.compactMap(\.updatedMessage).contains { $0.clientID == "order-1" && $0.serverID != nil }
            }
            // Confirmed: a repeat returns the sent message and sends nothing.
            let later = try await chat.send(MessageDraft(text: "order 1, once more"), clientID: "order-1")
            #expect(later.serverID != nil && later.deliveryState == .sent && later.text == "order 1")
            await #expect { try await chat.send(MessageDraft(text: "x"), clientID: "") } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
            // The id is the session's: another conversation cannot reuse it.
            let other = try await session.conversation(second.id)
            await #expect { try await other.send(MessageDraft(text: "elsewhere"), clientID: "order-1") } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
        }
        let sent = emulator.server.messages(in: conversation.id)
        print("caller client id: 3 calls, \(sent.count) message(s) on the server")
        #expect(sent.map(\.text) == ["order 1"], "one message on the server for three calls")
        #expect(sent.map(\.clientID) == ["order-1"], "the server got the caller's client id")
        #expect(await store.fetchMessages(in: conversation.id, before: nil, limit: 10, scope: session.scope).map(\.text) == ["order 1"])
    }

    /// A send is one span from the app's call to the server's answer, under the app's own span,
    /// with the store write that queued it, the backend attempt and the store write that ended it
    /// as its children; a send the store answers (a repeat) is a span of its own that queued nothing.
    @Test func aSendIsOneSpanFromTheCallToTheServersAnswer() async throws {
        let tracer = InMemoryTracer()
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
        let session = ChatSession(
            backend: InMemoryBackend(server: emulator.server, user: "customer"), configuration: .fastForTests, logger: .quiet, tracer: tracer
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation.id }
            let chat = try await session.conversation(conversation.id)
            try await tracer.withSpan("app.checkout") { _ in
                _ = try await chat.send(MessageDraft(text: "traced"), clientID: "order-7")
            }
            try await recorder.waitUntil("the send confirmed") { events in
                events.compactMap(\.updatedMessage).contains { $0.clientID == "order-7" && $0.serverID != nil }
            }
            // Answered from the store: nothing queued, nothing sent.
            _ = try await chat.send(MessageDraft(text: "traced"), clientID: "order-7")
        }
        let spans = tracer.finishedSpans
        let app = try #require(spans.first { $0.operationName == "app.checkout" })
        let sends = spans.filter { $0.operationName == "switchboard.send" }
        let send = try #require(sends.first { $0.attributes["switchboard.send.outcome"]?.toSpanAttribute() == "sent" })
        let children = spans.filter { $0.parentSpanID == send.spanID }.map(\.operationName)
        print("send span: \(spans.count) spans; the send's children \(children); outcomes \(sends.map { $0.attributes["switchboard.send.outcome"].map { "\($0)" } ?? "none" })")
        #expect(send.parentSpanID == app.spanID && send.traceID == app.traceID, "under the app's span")
        #expect(children.sorted() == ["switchboard.backend.send", "switchboard.store.write", "switchboard.store.write"])
        #expect(send.attributes["switchboard.conversation"]?.toSpanAttribute() == .string(conversation.id.rawValue))
        #expect(sends.count == 2 && sends.contains { $0.attributes["switchboard.send.outcome"]?.toSpanAttribute() == "stored" && $0.parentSpanID == nil })
        let repeated = try #require(sends.first { $0.spanID != send.spanID })
        #expect(!spans.contains { $0.parentSpanID == repeated.spanID }, "the repeat touched neither store nor backend")
        #expect(tracer.activeSpans.isEmpty, "every span ended")
    }

    /// What a send's span says when the send does not go straight through: an attempt the
    /// server failed and the retry (two attempt spans), a store write that failed under the
    /// server's answer (the entry is queued again from the store and sent on the next link), a
    /// send refused before anything was stored, one the server refuses for good, and one still
    /// queued when the session ends. Every attempt and write span is a child of its send's.
    @Test func aSendsSpanTellsRetriesAFailedWriteRefusalsAndWhatWasLeftQueued() async throws {
        let tracer = InMemoryTracer()
        let backend = TestBackend(name: "traced")
        let chat = ConversationInfo(id: "chat", kind: .thread, state: .active)
        backend.onConnect { $0.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: chat)], isComplete: true))) }
        let store = ProbedStore()
        let session = ChatSession(
            backend: backend, store: store, configuration: .virtualTime, clock: SessionClock(TestClock()), logger: .quiet, tracer: tracer
        )
        /// Waits for the next send request, checking it carries `clientID`.
        @Sendable func nextSend(_ clientID: ClientMessageID) async throws -> TestBackend.PendingRequest {
            let request = try await backend.nextRequest()
            guard case .send(let outgoing) = request.request, outgoing.clientID == clientID else {
                throw ConformanceFailure("expected the send of \(clientID), got \(request.request)")
            }
            return request
        }
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == chat.id }
            let conversation = try await session.conversation(chat.id)
            @Sendable func sent(_ clientID: ClientMessageID) async throws {
                try await recorder.first("\(clientID) sent") { $0.updatedMessage?.clientID == clientID && $0.updatedMessage?.deliveryState == .sent }
            }

            // Failed once by the server, sent by the retry.
            _ = try await conversation.send(MessageDraft(text: "retried"), clientID: "retried")
            try await nextSend("retried").fail(SwitchboardError(.serverError, "try again"))
            try await nextSend("retried").acceptSend(serverID: "m1")
            try await sent("retried")

            // The write that records the server's answer fails: the entry the store still holds
            // is queued again, and the next link sends it.
            _ = try await conversation.send(MessageDraft(text: "stored late"), clientID: "stored-late")
            let first = try await nextSend("stored-late")
            store.failNext(.apply)
            first.acceptSend(serverID: "m2")
            try await nextSend("stored-late").acceptSend(serverID: "m2")
            try await sent("stored-late")

            // Refused before anything is stored.
            await #expect(throws: SwitchboardError.self) { try await conversation.send(MessageDraft(text: "no id"), clientID: "") }

            // Refused by the server for good.
            _ = try await conversation.send(MessageDraft(text: "rejected"), clientID: "rejected")
            try await nextSend("rejected").fail(SwitchboardError(.messageRejected, "spam"))
            try await recorder.first("rejected failed") { $0.updatedMessage?.clientID == "rejected" && $0.updatedMessage?.deliveryState.isFailed == true }

            // Still queued when the session ends.
            try await session.pause()
            _ = try await conversation.send(MessageDraft(text: "left"), clientID: "left")
        }
        let spans = tracer.finishedSpans
        let sends = spans.filter { $0.operationName == "switchboard.send" }
        func send(_ clientID: String) throws -> FinishedInMemorySpan {
            try #require(sends.first { $0.attributes["switchboard.send.client_id"]?.toSpanAttribute() == .string(clientID) })
        }
        func outcome(_ span: FinishedInMemorySpan) -> String {
            guard case .string(let outcome)? = span.attributes["switchboard.send.outcome"]?.toSpanAttribute() else { return "none" }
            return outcome
        }
        func children(_ span: FinishedInMemorySpan, _ name: String) -> [FinishedInMemorySpan] {
            spans.filter { $0.parentSpanID == span.spanID && $0.operationName == name }
        }
        func isError(_ span: FinishedInMemorySpan) -> Bool { span.status?.code == .error }

        let retried = try send("retried")
        let attempts = children(retried, "switchboard.backend.send")
        let storedLate = try send("stored-late")
        let lateWrites = children(storedLate, "switchboard.store.write")
        let refused = try send("")
        let rejected = try send("rejected")
        let left = try send("left")
        print(
            "send spans: \(sends.map { outcome($0) }); retried: \(attempts.count) attempts, \(attempts.filter(isError).count) failed; "
                + "stored late: \(children(storedLate, "switchboard.backend.send").count) attempts, \(lateWrites.count) writes, "
                + "\(lateWrites.filter(isError).count) failed; outbox left \(try await store.fetchOutbox(scope: session.scope).count)"
        )
        #expect(outcome(retried) == "sent" && !isError(retried))
        #expect(attempts.count == 2 && attempts.filter(isError).count == 1, "the failed attempt and the retry, each a child span")
        #expect(outcome(storedLate) == "sent" && !isError(storedLate))
        #expect(children(storedLate, "switchboard.backend.send").count == 2, "sent again on the next link")
        #expect(lateWrites.filter(isError).count == 1, "the failed write is a child span with an error status")
        #expect(outcome(refused) == "refused" && isError(refused) && !spans.contains { $0.parentSpanID == refused.spanID })
        #expect(outcome(rejected) == "failed" && isError(rejected))
        #expect(outcome(left) == "queued" && !isError(left))
        #expect(tracer.activeSpans.isEmpty, "every span ended")
        #expect(try await store.fetchOutbox(scope: session.scope).map(\.clientID) == ["left"], "only the send left queued is in the outbox")
        let late = try await store.fetchMessages(serverIDs: [], clientIDs: ["stored-late"], in: chat.id, scope: session.scope)
        #expect(late.map(\.deliveryState) == [.sent], "the message the failed write was about is stored sent")
    }

    @Test func aSendQueuedLongerThanTheExpiryFailsInsteadOfLandingLate() async throws {
        let clock = TestClock()
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
        let session = ChatSession(
            backend: InMemoryBackend(server: emulator.server, user: "customer"),
            configuration: SessionConfiguration(outboxExpiry: .seconds(12 * 3600)),
            clock: SessionClock(clock),
            logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation.id }
            try await session.pause()
            try await recorder.first("offline") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
            let chat = try await session.conversation(conversation.id)
            let stale = try await chat.send(text: "written before the night")
            clock.advance(by: .seconds(13 * 3600))
            try await chat.send(text: "written in the morning")
            try await session.resume()
            let failed = try await recorder.first("the stale send fails") {
                $0.updatedMessage?.clientID == stale.clientID && $0.updatedMessage?.deliveryState.isFailed == true
            }
            try await recorder.first("the fresh send goes") { $0.updatedMessage?.text == "written in the morning" && $0.updatedMessage?.serverID != nil }
            #expect(failed.updatedMessage?.deliveryState == .failed("expired"))
            #expect(emulator.server.messages(in: conversation.id).map(\.text) == ["written in the morning"], "nothing lands 13 h late")
            #expect(await session.pendingSends.isEmpty)
        }
    }

    @Test func anAgentsReadMarkerTurnsTheCustomersMessagesRead() async throws {
        let emulator = InMemoryEmulator()
        try await ConformanceHarness(context: ConformanceContext(emulator: emulator)).withSession { probe in
            let chat = try await probe.openConversation()
            let first = try await chat.send(text: "first")
            let second = try await chat.send(text: "second")
            for sent in [first, second] {
                try await probe.recorder.first("confirmed") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
            }
            try await emulator.agentMarkRead(in: chat.id)
            for sent in [first, second] {
                try await probe.recorder.first("read") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.deliveryState == .read }
            }
            let stored = try await chat.storedMessages(before: nil, limit: .max).filter { $0.clientID != nil }
            print("read derivation: \(stored.map { "\($0.text)=\($0.deliveryState)" })")
            #expect(stored.allSatisfy { $0.deliveryState == .read })
        }
    }

    @Test func aReInitAfterADroppedLinkDuplicatesNothing() async throws {
        let emulator = InMemoryEmulator()
        let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))
        try await harness.withSession { probe in
            let chat = try await probe.openConversation()
            for index in 1...3 { try await emulator.agentSend("before \(index)", in: chat.id) }
            try await probe.waitForMessages(["before 1", "before 2", "before 3"], in: chat)
            let connectedBefore = probe.recorder.events.filter(\.isConnected).count
            emulator.server.disconnectAll()
            try await probe.recorder.waitUntil("reconnected") { $0.filter(\.isConnected).count > connectedBefore }
            try await emulator.agentSend("after", in: chat.id)
            try await probe.waitForMessages(["after"], in: chat)
            let added = probe.recorder.events.compactMap(\.addedMessage).map(\.text)
            #expect(added == ["before 1", "before 2", "before 3", "after"])
            let conversationsAdded = probe.recorder.events.filter {
                if case .conversationAdded = $0.kind { return true }
                return false
            }
            #expect(conversationsAdded.count == 1, "the snapshot after the reconnect re-announces nothing")
        }
    }

    @Test func aCompleteListReadBeforeAConversationWasStartedDoesNotRemoveIt() async throws {
        let backend = TestBackend.scripted()
        let session = ChatSession(backend: backend, logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            link.yield(TestBackend.list(["server-1"]))
            try await recorder.first("the list") { $0.conversationID == ConversationID("server-1") }
            _ = try await session.startConversation(ConversationDraft(title: "local-1"))
            // The list the backend read before the start arrives after it (CXone's thread list
            // against a thread that exists only locally until its first message).
            link.yield(TestBackend.list(["server-1"]))
            link.yield(TestBackend.list(["server-1", "server-2"]))
            try await recorder.first("the later list") { $0.conversationID == ConversationID("server-2") }
            let ids = try await session.conversations().map(\.id.rawValue).sorted()
            #expect(ids == ["local-1", "server-1", "server-2"], "a stale list removes nothing started here")
            // Once a list has shown it, a list without it means it is gone.
            link.yield(TestBackend.list(["local-1", "server-1", "server-2"]))
            link.yield(TestBackend.list(["server-1", "server-2"]))
            try await recorder.first("removed") { $0.kind == .conversationRemoved && $0.conversationID == ConversationID("local-1") }
            let removed = recorder.events.filter { $0.kind == .conversationRemoved }.compactMap(\.conversationID?.rawValue)
            print("stale complete list after a local start: removed \(removed) (only after a list had shown it)")
            #expect(removed == ["local-1"])
        }
        expectNothingLeft(backend)
    }

    @Test func theTimelineGivesOrderedDiffs() async throws {
        let emulator = InMemoryEmulator()
        let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))
        try await harness.withSession { probe in
            let chat = try await probe.openConversation()
            for index in 1...5 { try await emulator.agentSend("agent \(index)", in: chat.id) }
            try await probe.waitForMessages((1...5).map { "agent \($0)" }, in: chat)
            let timeline = try await chat.timeline(limit: 3)
            var updates = timeline.makeAsyncIterator()
            let initial = try #require(await updates.next())
            #expect(initial.items.map(\.text) == ["agent 3", "agent 4", "agent 5"])
            let mine = try await chat.send(text: "mine")
            let pending = try #require(await updates.next())
            #expect(pending.diffs == [.insert(mine, at: 3), .remove(at: 0)], "the window keeps its newest 3")
            let confirmed = try #require(await updates.next())
            guard case .update(let sent, 2) = confirmed.diffs.first else {
                Issue.record("the confirmation updates the pending row in place, got \(confirmed.diffs)")
                return
            }
            #expect(sent.serverID != nil)
            // Older messages come through the same sequence, after what was already on its way,
            // and widen the window.
            #expect(try await timeline.loadOlder(limit: 2) == 2)
            try await emulator.agentSend("agent 6", in: chat.id)
            let older = try #require(await updates.next())
            #expect(older.diffs.count == 2)
            #expect(older.items.map(\.text) == ["agent 2", "agent 3", "agent 4", "agent 5", "mine"])
            let live = try #require(await updates.next())
            #expect(live.items.map(\.text) == ["agent 3", "agent 4", "agent 5", "mine", "agent 6"])
            #expect(try await timeline.loadOlder(limit: 5) == 2)
            let oldest = try #require(await updates.next())
            #expect(oldest.items.map(\.text).prefix(2) == ["agent 1", "agent 2"])
            #expect(try await timeline.loadOlder(limit: 2) == 0, "nothing is older than the first message")
            // A list built only from the diffs, in order, shows what the timeline holds.
            var list: [Message] = []
            for update in [initial, pending, confirmed, older, live, oldest] { list.apply(update.diffs) }
            #expect(list == timeline.items)
        }
    }

    @Test func textOverTheLimitIsRefusedBeforeAnythingIsStored() async throws {
        let emulator = InMemoryEmulator(server: InMemoryServer(configuration: .init(maxTextLength: 10)))
        let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))
        try await harness.withSession { probe in
            let chat = try await probe.openConversation()
            await #expect {
                try await chat.send(text: String(repeating: "x", count: 11))
            } throws: { ($0 as? SwitchboardError)?.code == .payloadTooLarge }
            #expect(try await chat.storedMessages(before: nil, limit: 10).isEmpty)
            #expect(await probe.session.pendingSends.isEmpty)
        }
    }
}


extension TestBackend {
    /// How many connects the engine cancelled while they were held.
    fileprivate var abandonedConnects: Int { links.filter { $0.state == .abandoned }.count }
}
