import Switchboard
import SwitchboardTestKit
import Testing

/// A store that counts its transactions and can hold one until the test lets it go, so a test
/// can make updates pile up while the engine is busy writing.
final class CountingStore: ChatStore {
    private struct State {
        var applies = 0
        var messageLookups = 0
        var holdNext = false
        var held: CheckedContinuation<Void, Never>?
    }

    let base = InMemoryChatStore()
    private let state = Locked(State())

    var applies: Int { state.withLock { $0.applies } }
    /// Reads of messages by key: single lookups and reconciliation reads.
    var messageLookups: Int { state.withLock { $0.messageLookups } }
    var isHolding: Bool { state.withLock { $0.held != nil } }

    func holdNextApply() { state.withLock { $0.holdNext = true } }

    func release() {
        let held = state.withLock { state in
            defer { state.held = nil }
            return state.held
        }
        held?.resume()
    }

    func apply(_ writes: [StoreWrite], scope: StoreScope) async throws {
        let hold = state.withLock { state in
            state.applies += 1
            defer { state.holdNext = false }
            return state.holdNext
        }
        if hold {
            await withCheckedContinuation { continuation in state.withLock { $0.held = continuation } }
        }
        await base.apply(writes, scope: scope)
    }

    func fetchConversations(scope: StoreScope) async throws -> [ConversationInfo] { await base.fetchConversations(scope: scope) }
    func fetchConversation(_ id: ConversationID, scope: StoreScope) async throws -> ConversationInfo? { await base.fetchConversation(id, scope: scope) }
    func saveConversation(_ conversation: ConversationInfo, scope: StoreScope) async throws { try await apply([.saveConversation(conversation)], scope: scope) }
    func removeConversation(_ id: ConversationID, scope: StoreScope) async throws { try await apply([.removeConversation(id)], scope: scope) }
    func fetchMessage(serverID: MessageID, in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        state.withLock { $0.messageLookups += 1 }
        return await base.fetchMessage(serverID: serverID, in: conversation, scope: scope)
    }
    func fetchMessage(clientID: ClientMessageID, scope: StoreScope) async throws -> Message? {
        state.withLock { $0.messageLookups += 1 }
        return await base.fetchMessage(clientID: clientID, scope: scope)
    }
    func fetchMessages(serverIDs: [MessageID], clientIDs: [ClientMessageID], in conversation: ConversationID, scope: StoreScope) async throws -> [Message] {
        state.withLock { $0.messageLookups += 1 }
        return try await base.fetchMessages(serverIDs: serverIDs, clientIDs: clientIDs, in: conversation, scope: scope)
    }
    func fetchMessages(in conversation: ConversationID, before: MessageOrderKey?, limit: Int, scope: StoreScope) async throws -> [Message] {
        await base.fetchMessages(in: conversation, before: before, limit: limit, scope: scope)
    }
    func countMessages(in conversation: ConversationID, scope: StoreScope) async throws -> Int { await base.countMessages(in: conversation, scope: scope) }
    func saveMessages(_ messages: [Message], scope: StoreScope) async throws { try await apply([.saveMessages(messages)], scope: scope) }
    func removeMessage(serverID: MessageID, in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeMessage(serverID, in: conversation)], scope: scope)
    }
    func removeAllMessages(in conversation: ConversationID, scope: StoreScope) async throws { try await apply([.removeAllMessages(in: conversation)], scope: scope) }
    func fetchReadMarkers(in conversation: ConversationID, scope: StoreScope) async throws -> [ParticipantID: ChatEvent.ReadMarker] {
        await base.fetchReadMarkers(in: conversation, scope: scope)
    }
    func saveReadMarker(_ marker: ChatEvent.ReadMarker, of participant: ParticipantID, in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.saveReadMarker(marker, of: participant, in: conversation)], scope: scope)
    }
    func fetchSequences(scope: StoreScope) async throws -> [ConversationID: Int64] { await base.fetchSequences(scope: scope) }
    func saveSequence(_ sequence: Int64, for conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.saveSequence(sequence, for: conversation)], scope: scope)
    }
    func fetchCursor(scope: StoreScope) async throws -> SyncCursor? { await base.fetchCursor(scope: scope) }
    func saveCursor(_ cursor: SyncCursor?, scope: StoreScope) async throws { try await apply([.saveCursor(cursor)], scope: scope) }
    func fetchOutbox(scope: StoreScope) async throws -> [OutboxEntry] { await base.fetchOutbox(scope: scope) }
    func saveOutboxEntry(_ entry: OutboxEntry, scope: StoreScope) async throws { try await apply([.saveOutboxEntry(entry)], scope: scope) }
    func removeOutboxEntry(_ clientID: ClientMessageID, scope: StoreScope) async throws { try await apply([.removeOutboxEntry(clientID)], scope: scope) }
    func fetchCredentials(scope: StoreScope) async throws -> Credentials { await base.fetchCredentials(scope: scope) }
    func saveCredentials(_ credentials: Credentials, scope: StoreScope) async throws { try await apply([.saveCredentials(credentials)], scope: scope) }
    func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        await base.fetchOldestConfirmedMessage(in: conversation, scope: scope)
    }
    func fetchPendingMessages(scope: StoreScope) async throws -> [Message] { await base.fetchPendingMessages(scope: scope) }
}

@Suite(.timeLimit(.minutes(1)))
struct StoreTransactionTests {
    /// A customer's session on a counting store, the agent, and their conversation.
    static func customerSession() -> (ChatSession, CountingStore, InMemoryAgent, ConversationInfo) {
        let emulator = InMemoryEmulator()
        let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer), Participant(id: "agent", role: .agent)])
        let store = CountingStore()
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
            store.holdNextApply()
            try agent.send("first", in: conversation.id)
            var yields = 0
            while !store.isHolding {
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
            let before = store.applies
            store.release()
            try await recorder.waitUntil("the burst stored") { $0.compactMap(\.addedMessage).count == 201 }
            let transactions = store.applies - before
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
            let (applies, lookups) = (store.applies, store.messageLookups)
            try await session.resume()
            try await recorder.first("caught up") { $0.addedMessage?.text == "missed 250" }
            let statistics = await session.statistics
            let transactions = store.applies - applies
            let reads = store.messageLookups - lookups
            print("catch-up of 250 events: \(statistics.retransmitRequests) retransmits, \(transactions) store transactions, \(reads) message reads")
            #expect(statistics.retransmitRequests >= 3, "250 events at 100 a retransmit")
            #expect(transactions <= statistics.retransmitRequests + 4, "a retransmit's events share a transaction")
            #expect(reads <= statistics.retransmitRequests + 4, "a retransmit's messages are looked up together")
            let stored = try await session.conversation(conversation.id).storedMessages(before: nil, limit: .max)
            #expect(stored.map(\.text) == (1...250).map { "missed \($0)" })
        }
    }
}
