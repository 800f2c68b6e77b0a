import Foundation
@testable import Switchboard
import Testing

@Suite(.timeLimit(.minutes(1)))
struct EventBusTests {
    func event(_ index: Int, session: SessionID = "s1", backend: BackendName = "b", conversation: ConversationID? = "c1") -> ChatEvent {
        ChatEvent(
            origin: ChatEvent.Origin(session: session, backend: backend),
            conversationID: conversation,
            time: Date(timeIntervalSince1970: 0),
            sequence: Int64(index),
            kind: .custom(name: "n", payload: .int(Int64(index)))
        )
    }

    func take(_ count: Int, from stream: EventStream) async -> [ChatEvent] {
        var taken: [ChatEvent] = []
        for await event in stream {
            taken.append(event)
            if taken.count == count { break }
        }
        return taken
    }

    @Test func aStreamThatIsNeverIteratedUnregistersWhenDropped() {
        let bus = EventBus()
        do {
            let stream = bus.subscribe()
            #expect(bus.subscriberCount == 1)
            _ = stream
        }
        #expect(bus.subscriberCount == 0, "a dropped stream leaves no subscription behind")
    }

    @Test func aSecondConcurrentConsumerIsRefusedAndTheFirstKeepsEveryEvent() async throws {
        let bus = EventBus()
        let stream = bus.subscribe(buffering: .unbounded)
        var first = stream.makeAsyncIterator()
        var second = stream.makeAsyncIterator()
        async let waiting = first.next()
        var yields = 0
        while !stream.hasWaitingConsumer {
            yields += 1
            try #require(yields < 1_000_000, "the first consumer never waited")
            await Task.yield()
        }
        #expect(await second.next() == nil, "a second consumer waiting at the same time is refused at once")
        bus.publish(event(1))
        #expect(await waiting?.sequence == 1, "the first consumer keeps its event")
    }

    @Test func controlEventsAreNeverDroppedAsOverflow() async {
        let bus = EventBus()
        let stream = bus.subscribe(buffering: .bounded(2))
        for index in 0..<5 { bus.publish(event(index)) }
        let origin = ChatEvent.Origin(session: "s1", backend: "b")
        let time = Date(timeIntervalSince1970: 0)
        bus.publish(ChatEvent(origin: origin, conversationID: nil, time: time, kind: .connection(.waitingToReconnect, reason: nil)))
        bus.publish(ChatEvent(origin: origin, conversationID: nil, time: time, kind: .fatal(SwitchboardError(.fatal, "banned"))))
        let received = await take(5, from: stream)
        let kinds = received.map { event -> String in
            switch event.kind {
            case .gap(let dropped): "gap(\(dropped))"
            case .connection(let state, _): "connection(\(state))"
            case .fatal: "fatal"
            default: "event \(event.sequence ?? -1)"
            }
        }
        print("bounded(2) after 5 events and 2 control events: \(kinds)")
        #expect(kinds == ["event 0", "event 1", "gap(3)", "connection(waitingToReconnect)", "fatal"])
    }

    @Test func everySubscriberGetsEveryEventInOrder() async {
        let bus = EventBus()
        let streams = (0..<3).map { _ in bus.subscribe(buffering: .unbounded) }
        for index in 0..<100 { bus.publish(event(index)) }
        for stream in streams {
            let received = await take(100, from: stream)
            #expect(received.map(\.sequence) == (0..<100).map { Int64($0) })
        }
    }

    @Test func filtersSelectSessionsBackendsConversationsAndKinds() async {
        let bus = EventBus()
        let bySession = bus.subscribe(filter: EventFilter(sessions: ["s2"]))
        let byBackend = bus.subscribe(filter: EventFilter(backends: ["webim"]))
        let byConversation = bus.subscribe(filter: EventFilter(conversations: ["c9"]))
        let byKind = bus.subscribe(filter: EventFilter(categories: [.connection]))
        bus.publish(event(1, session: "s1"))
        bus.publish(event(2, session: "s2"))
        bus.publish(event(3, backend: "webim"))
        bus.publish(event(4, conversation: "c9"))
        bus.publish(
            ChatEvent(origin: .init(session: "s1", backend: "b"), conversationID: nil, time: Date(), kind: .connection(.connected, reason: nil))
        )
        bus.publish(event(5, conversation: nil))
        #expect(await take(1, from: bySession).map(\.sequence) == [2])
        #expect(await take(1, from: byBackend).map(\.sequence) == [3])
        #expect(await take(1, from: byConversation).map(\.sequence) == [4])
        #expect(await take(1, from: byKind).first?.kind == .connection(.connected, reason: nil))
    }

    @Test func concurrentPublishersKeepPerConversationOrder() async {
        let bus = EventBus()
        let stream = bus.subscribe(buffering: .unbounded)
        await withTaskGroup(of: Void.self) { group in
            for conversation in 0..<4 {
                group.addTask {
                    for index in 0..<500 { bus.publish(event(index, conversation: ConversationID("c\(conversation)"))) }
                }
            }
        }
        let received = await take(2000, from: stream)
        for conversation in 0..<4 {
            let sequences = received.filter { $0.conversationID == ConversationID("c\(conversation)") }.compactMap(\.sequence)
            #expect(sequences == (0..<500).map { Int64($0) })
        }
    }

    @Test func aSlowBoundedSubscriberGetsAGapEventInPlaceOfWhatWasDropped() async {
        let bus = EventBus()
        let slow = bus.subscribe(buffering: .bounded(3))
        let fast = bus.subscribe(buffering: .unbounded)
        for index in 0..<10 { bus.publish(event(index)) }
        var iterator = slow.makeAsyncIterator()
        var first: [ChatEvent] = []
        for _ in 0..<4 { if let event = await iterator.next() { first.append(event) } }
        #expect(first.prefix(3).map(\.sequence) == [0, 1, 2])
        #expect(first.last?.kind == .gap(dropped: 7))
        #expect(first.last?.time == event(3).time, "the gap takes the time of the first event it replaces")
        bus.publish(event(10))
        #expect(await iterator.next()?.sequence == 10, "after the gap the subscriber goes on with new events")
        #expect(await take(11, from: fast).count == 11, "an unbounded subscriber loses nothing")
    }

    @Test func finishEndsStreamsAfterWhatTheyHold() async {
        let bus = EventBus()
        let stream = bus.subscribe()
        bus.publish(event(1))
        bus.finish()
        bus.publish(event(2))
        var received: [Int64?] = []
        for await event in stream { received.append(event.sequence) }
        #expect(received == [1])
        #expect(bus.subscriberCount == 0)
    }

    @Test func droppingTheStreamEndsTheSubscription() async {
        let bus = EventBus()
        do {
            let stream = bus.subscribe()
            var iterator = stream.makeAsyncIterator()
            bus.publish(event(1))
            _ = await iterator.next()
            #expect(bus.subscriberCount == 1)
        }
        #expect(bus.subscriberCount == 0)
    }

    @Test func cancellingAWaitingConsumerEndsItsStream() async {
        let bus = EventBus()
        let stream = bus.subscribe()
        let consumer = Task { await take(1, from: stream).count }
        consumer.cancel()
        #expect(await consumer.value == 0)
    }

    /// A cancelled consumer that is behind gets what was buffered and nothing published after:
    /// its subscription ends at its next `next()`, though an event is waiting.
    @Test func cancellingAConsumerThatIsBehindEndsItsStream() async {
        let bus = EventBus()
        let stream = bus.subscribe(buffering: .unbounded)
        for index in 0..<3 { bus.publish(event(index)) }
        let consumer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var seen = 0
            // Each event taken publishes another: a subscription that stayed open would never end
            // (the cap stops the test instead).
            for await _ in stream {
                seen += 1
                if seen == 100 { break }
                bus.publish(event(100 + seen))
            }
            return seen
        }
        #expect(await consumer.value == 3)
        #expect(bus.subscriberCount == 0)
    }
}
