import Switchboard
import SwitchboardTestKit
import Testing

@testable import Switchboard

/// A counted link's updates: read by an iterator (an adapter's own tests, a tool), or handed to the
/// engine from the task that yields them.
@Suite(.timeLimit(.minutes(1)))
struct BackendUpdatesTests {
    private static func typing(_ index: Int) -> BackendUpdate {
        .event(BackendEvent(.typing(ParticipantID("agent-\(index)"), isTyping: true, draft: nil), conversation: "c"))
    }

    private static func index(_ update: BackendUpdate) -> Int? {
        guard case .event(let event) = update, case .typing(let who, _, _) = event.kind else { return nil }
        return Int(who.rawValue.dropFirst("agent-".count))
    }

    /// What was yielded before an iterator came, in order, then the link's error once, then the
    /// end; a yield after the end is refused, and the count is what was taken in.
    @Test func anIteratorReadsWhatWasBufferedThenTheError() async throws {
        let (updates, continuation) = BackendUpdates.makeStream()
        for index in 0..<3 { #expect(continuation.yield(Self.typing(index))) }
        continuation.finish(throwing: SwitchboardError(.connectionLost, "cut"))
        #expect(!continuation.yield(Self.typing(9)), "refused after the end")
        #expect(updates.yielded == 3)
        var iterator = updates.makeAsyncIterator()
        var read: [Int] = []
        await #expect(throws: SwitchboardError.self) {
            while let update = try await iterator.next() { read.append(Self.index(update) ?? -1) }
        }
        #expect(read == [0, 1, 2])
        #expect(try await iterator.next() == nil, "the error is thrown once")
    }

    /// An iterator that waits gets the update yielded later; cancelling one that waits ends the
    /// stream (as `AsyncThrowingStream` does), and the link's yields are refused from then on.
    @Test func aWaitingIteratorAndItsCancellation() async throws {
        let (updates, continuation) = BackendUpdates.makeStream()
        let reading = Task {
            var iterator = updates.makeAsyncIterator()
            return try await iterator.next().flatMap(Self.index)
        }
        while !continuation.yield(Self.typing(7)) {}
        #expect(try await reading.value == 7)

        let (more, link) = BackendUpdates.makeStream()
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let waiting = Task {
            var iterator = more.makeAsyncIterator()
            start.yield()
            return try await iterator.next()
        }
        for await _ in started { break }
        waiting.cancel()
        #expect(try await waiting.value == nil)
        #expect(!link.yield(Self.typing(1)), "refused once the reader is gone")
    }

    /// Attached, the buffered updates go first, then each as it is yielded, in the yielding task,
    /// then the end; detached, yields are refused.
    @Test func attachedUpdatesGoStraightToTheDelivery() throws {
        let (updates, continuation) = BackendUpdates.makeStream()
        continuation.yield(Self.typing(0))
        continuation.yield(Self.typing(1))
        let seen = Locked<[String]>([])
        let pipe = try #require(updates.pipe)
        let attached = pipe.attach(UpdatePipe.Delivery(
            update: { update in
                seen.withLock { $0.append("\(Self.index(update) ?? -1)") }
                return true
            },
            end: { error in seen.withLock { $0.append("end \(error.map { "\($0)" } ?? "closed")") } }
        ))
        #expect(attached)
        #expect(seen.withLock { $0 } == ["0", "1"], "what was buffered, at once")
        continuation.yield(Self.typing(2))
        #expect(seen.withLock { $0 } == ["0", "1", "2"], "handed on before yield returns")
        continuation.finish()
        #expect(seen.withLock { $0 } == ["0", "1", "2", "end closed"])
        #expect(updates.yielded == 3)

        let (other, link) = BackendUpdates.makeStream()
        let otherPipe = try #require(other.pipe)
        #expect(otherPipe.attach(UpdatePipe.Delivery(update: { _ in true }, end: { _ in })))
        otherPipe.detach()
        #expect(!link.yield(Self.typing(3)), "refused once the engine detached")
        #expect(BackendUpdates(AsyncThrowingStream { $0.finish() }).pipe == nil, "a stream the link made is read by a task")
    }

    /// Updates handed in past the window are held, in order, and counted as taken (what a
    /// request's answer waits for) only as they go into the queue; the link's end goes in behind
    /// them.
    /// What a closed link left held is dropped, and a request waiting on it lets go.
    @Test func aClosedLinksHeldUpdatesAreDropped() async {
        let inbox = EngineInbox<String>(updateWindow: 1)
        let closed = TakenUpdates()
        let next = TakenUpdates()
        for index in 1...3 { _ = inbox.offerUpdate("old \(index)", counting: closed) }
        _ = inbox.offerUpdate("new 1", counting: next)
        #expect(inbox.heldUpdates == 3)
        inbox.dropHeld(counting: closed)
        #expect(inbox.heldUpdates == 1, "the next link's update stays")
        await closed.wait(until: 3)
        #expect(closed.taken.ended)
        var order: [String] = []
        while let input = inbox.nextIfBuffered(where: { _ in true }) {
            order.append(input)
            inbox.updateTaken()
        }
        #expect(order == ["old 1", "new 1"])
    }

    @Test func heldUpdatesCountAsTheyGoIntoTheQueue() {
        let inbox = EngineInbox<String>(updateWindow: 2)
        let taken = TakenUpdates()
        for index in 1...5 { #expect(inbox.offerUpdate("update \(index)", counting: taken)) }
        inbox.offerEnd("end", counting: taken)
        #expect(taken.taken == (2, false), "two in the queue, three held")
        #expect(inbox.buffered == 2)
        var order: [String] = []
        while let input = inbox.nextIfBuffered(where: { _ in true }) {
            order.append(input)
            if input.hasPrefix("update") { inbox.updateTaken() }
        }
        #expect(order == ["update 1", "update 2", "update 3", "update 4", "update 5", "end"])
        #expect(taken.taken == (5, true))
        #expect(inbox.peakBuffered <= 3, "the window and the end")
        _ = inbox.close()
        #expect(!inbox.offerUpdate("late", counting: taken), "refused once the loop has ended")
    }

    /// A link that yields far more than the window at once from its own task: the session gets
    /// every update in order, and the inbox never holds more than the window of them. An idle
    /// session's only engine task is the link's: no reader task.
    @Test func aFloodPastTheWindowArrivesWholeAndInOrder() async throws {
        let server = InMemoryServer()
        let customer = Participant(id: "customer", role: .customer, displayName: "Customer")
        let agent = Participant(id: "agent", role: .agent, displayName: "Agent")
        let robot = server.agent(agent.id, name: "Agent")
        let conversation = server.createConversation(title: "flood", participants: [customer, agent]).id
        let window = 8
        let session = ChatSession(
            backend: InMemoryBackend(server: server, user: customer.id),
            configuration: SessionConfiguration(inboundWindow: window),
            clock: SessionClock(TestClock()),
            logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation }
            // Idle once the requests of the start have ended (each counts until its outcome is in).
            var idle = await session.statistics.liveTasks
            while idle > 1 {
                await Task.yield()
                idle = await session.statistics.liveTasks
            }
            let flood = window * 25
            for index in 0..<flood { _ = try robot.send("flood \(index)", in: conversation) }
            let chat = try await session.conversation(conversation)
            _ = try await chat.send(text: "after the flood")
            try await recorder.first("the last of the flood") { event in
                if case .messageAdded(let message, _) = event.kind { return message.text == "flood \(flood - 1)" }
                return false
            }
            let texts = recorder.events.compactMap { event -> String? in
                if case .messageAdded(let message, _) = event.kind { return message.text }
                return nil
            }
            let received = texts.filter { $0.hasPrefix("flood ") }
            let statistics = await session.statistics
            print("flood past a window of \(window): \(flood) messages, \(received.count) stored, in order \(received == (0..<flood).map { "flood \($0)" }), inputs waiting at most \(statistics.peakBufferedInputs), held past the window at most \(statistics.peakHeldUpdates) and \(statistics.heldUpdates) at the end, engine tasks when idle \(idle)")
            #expect(received == (0..<flood).map { "flood \($0)" })
            #expect(texts.contains("after the flood"))
            #expect(statistics.peakBufferedInputs <= window + 4, "the window holds")
            #expect(statistics.peakHeldUpdates > 0, "the flood was held back past the window")
            #expect(statistics.heldUpdates == 0, "and all of it went in")
            #expect(idle == 1, "an idle counted link runs no reader task")
        }
    }
}
