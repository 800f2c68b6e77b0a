import Switchboard
import SwitchboardTestKit
import Testing

@Suite(.timeLimit(.minutes(1)))
struct StoreTransactionTests {
    /// Reads of messages by key (a single lookup is one too).
    static func messageLookups(_ store: ProbedStore) -> Int {
        store.count(.fetchMessagesByKeys)
    }

    /// A customer's session on a probed store, the agent, and their conversation.
    static func customerSession() -> (ChatSession, ProbedStore, InMemoryAgent, ConversationInfo) {
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer), Participant(id: "agent", role: .agent)])
        let store = ProbedStore()
        let session = ChatSession(
            backend: InMemoryBackend(server: emulator.server, user: "customer"), store: store,
            clock: SessionClock(TestClock()), logger: .quiet
        )
        return (session, store, emulator.server.agent("agent", name: "Agent"), conversation)
    }

    @Test func updatesThatArriveTogetherAreStoredInOneTransaction() async throws {
        let (session, store, agent, conversation) = Self.customerSession()
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation.id }
            // The engine is held writing the first message while 200 more arrive.
            store.holdNext(.apply)
            try agent.send("first", in: conversation.id)
            var yields = 0
            while !store.isHolding(.apply) {
                yields += 1
                try #require(yields < 1_000_000, "the engine never wrote")
                await Task.yield()
            }
            for index in 1...200 { try agent.send("burst \(index)", in: conversation.id) }
            while await session.statistics.bufferedInputs < 200 {
                yields += 1
                try #require(yields < 2_000_000, "the burst never queued")
                await Task.yield()
            }
            let before = store.count(.apply)
            store.release(.apply)
            try await recorder.waitUntil("the burst stored") { $0.compactMap(\.addedMessage).count == 201 }
            let transactions = store.count(.apply) - before
            let statistics = await session.statistics
            print("200 messages that arrived together: \(transactions) store transactions; engine: \(statistics.storeTransactions) transactions for \(statistics.batchedUpdates) updates")
            // Up to 64 updates a transaction: 200 take at least 4, and far fewer than 200.
            #expect(transactions <= 8, "updates that arrive together share a transaction")
            let stored = try await session.conversation(conversation.id).storedMessages(before: nil, limit: .max)
            #expect(stored.map(\.text) == ["first"] + (1...200).map { "burst \($0)" })
        }
    }

    /// A catch-up by retransmit: each retransmit's events are one transaction, and the stored
    /// messages they are reconciled with are read once per retransmit, not once per event.
    @Test func aCatchUpIsOneTransactionAndOneReadPerRetransmit() async throws {
        let (session, store, agent, conversation) = Self.customerSession()
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation.id }
            try await session.pause()
            // A link ended on purpose lets its requests in flight answer first (the first catch-up
            // of a new conversation, say), and keeps delivering meanwhile: wait until it is down.
            try await recorder.first("paused") {
                if case .connection(.disconnected, _) = $0.kind { return true }
                return false
            }
            for index in 1...250 { try agent.send("missed \(index)", in: conversation.id) }
            let (applies, lookups) = (store.count(.apply), Self.messageLookups(store))
            try await session.resume()
            try await recorder.first("caught up") { $0.addedMessage?.text == "missed 250" }
            let statistics = await session.statistics
            let transactions = store.count(.apply) - applies
            let reads = Self.messageLookups(store) - lookups
            print("catch-up of 250 events: \(statistics.retransmitRequests) retransmits, \(transactions) store transactions, \(reads) message reads")
            #expect(statistics.retransmitRequests >= 3, "250 events at 100 a retransmit")
            #expect(transactions <= statistics.retransmitRequests + 4, "a retransmit's events share a transaction")
            #expect(reads <= statistics.retransmitRequests + 4, "a retransmit's messages are looked up together")
            let stored = try await session.conversation(conversation.id).storedMessages(before: nil, limit: .max)
            #expect(stored.map(\.text) == (1...250).map { "missed \($0)" })
        }
    }
}
