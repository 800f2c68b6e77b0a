import Foundation
import GRDB
import Switchboard
import SwitchboardSQLite
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// The `ChatStore` contract, run against every store: what the engine relies on.
@Suite struct ChatStoreContractTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case inMemory, sqlite
        var testDescription: String { rawValue }

        func make() throws -> any ChatStore {
            switch self {
            case .inMemory: InMemoryChatStore()
            case .sqlite: try SQLiteChatStore.inMemory()
            }
        }
    }

    let scope = StoreScope(backend: "test", account: "alice")
    let other = StoreScope(backend: "test", account: "bob")
    let conversation = ConversationID("c1")
    let base = Date(timeIntervalSinceReferenceDate: 800_000_000)

    func message(server: String?, client: String?, sequence: Int64? = nil, second: Double, text: String) -> Message {
        Message(
            serverID: server.map(MessageID.init), clientID: client.map(ClientMessageID.init), conversationID: conversation, sequence: sequence,
            text: text, time: base.addingTimeInterval(second)
        )
    }

    @Test(arguments: Kind.allCases)
    func conversationsKeepTheirOrderAndScope(_ kind: Kind) async throws {
        let store = try kind.make()
        for id in ["b", "a", "c"] { try await store.saveConversation(ConversationInfo(id: ConversationID(id), kind: .supportChat), scope: scope) }
        try await store.saveConversation(ConversationInfo(id: "b", kind: .supportChat, title: "renamed"), scope: scope)
        try await store.saveConversation(ConversationInfo(id: "z", kind: .direct), scope: other)
        #expect(try await store.fetchConversations(scope: scope).map(\.id.rawValue) == ["b", "a", "c"], "\(kind): first-saved order survives an update")
        #expect(try await store.fetchConversation("b", scope: scope)?.title == "renamed")
        #expect(try await store.fetchConversation("z", scope: scope) == nil, "\(kind): scopes do not see each other")
        try await store.saveMessages([message(server: "m1", client: nil, second: 1, text: "x")], scope: scope)
        try await store.saveReadMarker(.sequence(3), of: "bob", in: conversation, scope: scope)
        try await store.saveSequence(3, for: conversation, scope: scope)
        try await store.removeConversation(conversation, scope: scope)
        #expect(try await store.countMessages(in: conversation, scope: scope) == 0)
        #expect(try await store.fetchReadMarkers(in: conversation, scope: scope).isEmpty)
        #expect(try await store.fetchSequences(scope: scope)[conversation] == nil, "\(kind): removing a conversation removes what hangs on it")
    }

    @Test(arguments: Kind.allCases)
    func aConfirmedMessageReplacesItsPendingCopy(_ kind: Kind) async throws {
        let store = try kind.make()
        try await store.saveMessages([message(server: nil, client: "k1", second: 5, text: "hello")], scope: scope)
        #expect(try await store.fetchMessage(clientID: "k1", scope: scope)?.serverID == nil)
        try await store.saveMessages([message(server: "s1", client: "k1", sequence: 7, second: 5, text: "hello")], scope: scope)
        #expect(try await store.countMessages(in: conversation, scope: scope) == 1, "\(kind): one row, not two")
        #expect(try await store.fetchMessage(serverID: "s1", in: conversation, scope: scope)?.sequence == 7)
        #expect(try await store.fetchMessage(clientID: "k1", scope: scope)?.serverID == MessageID("s1"))
        // A server copy that arrived first, then the pending copy's confirmation: still one row.
        try await store.saveMessages([message(server: "s2", client: nil, second: 6, text: "echo"), message(server: nil, client: "k2", second: 6, text: "echo")], scope: scope)
        try await store.saveMessages([message(server: "s2", client: "k2", second: 6, text: "echo")], scope: scope)
        #expect(try await store.countMessages(in: conversation, scope: scope) == 2, "\(kind): the pending copy gives way to the confirmed one")
        try await store.removeMessage(serverID: "s1", in: conversation, scope: scope)
        #expect(try await store.fetchMessage(clientID: "k1", scope: scope) == nil)
        try await store.removeAllMessages(in: conversation, scope: scope)
        #expect(try await store.countMessages(in: conversation, scope: scope) == 0)
    }

    @Test(arguments: Kind.allCases)
    func pagesFollowTheMessageOrder(_ kind: Kind) async throws {
        let store = try kind.make()
        var messages: [Message] = []
        for index in 1...30 { messages.append(message(server: "s\(index)", client: nil, sequence: Int64(index), second: Double(100 - index), text: "\(index)")) }
        messages.append(message(server: nil, client: "pending-1", second: 0, text: "p1"))
        messages.append(message(server: "late", client: nil, second: 50, text: "no sequence"))
        try await store.saveMessages(messages.shuffled(), scope: scope)
        let all = try await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: scope)
        #expect(all.map(\.orderKey) == all.map(\.orderKey).sorted(), "\(kind): oldest first by MessageOrderKey")
        #expect(all.last?.text == "p1", "pending messages come last")
        var pages: [[String]] = []
        var before: MessageOrderKey?
        while true {
            let page = try await store.fetchMessages(in: conversation, before: before, limit: 7, scope: scope)
            guard let first = page.first else { break }
            pages.insert(page.map(\.text), at: 0)
            before = first.orderKey
        }
        #expect(pages.flatMap { $0 } == all.map(\.text), "\(kind): pages of 7 before a key tile the whole history")
        #expect(pages.count == 5)
        #expect(try await store.fetchMessages(in: conversation, before: nil, limit: 0, scope: scope).isEmpty)
    }

    @Test(arguments: Kind.allCases)
    func theFirstCallOnAScopeMayBeAnyCall(_ kind: Kind) async throws {
        let entry = OutboxEntry(message: OutgoingMessage(clientID: "k1", conversationID: conversation, content: MessageDraft(text: "hi")), createdAt: base)
        let store = try kind.make()
        try await store.saveOutboxEntry(entry, scope: scope)
        #expect(try await store.fetchOutbox(scope: scope) == [entry], "\(kind): an outbox entry on a scope nothing else has touched")
        try await kind.make().saveMessages([message(server: "s1", client: nil, second: 1, text: "x")], scope: other)
        try await kind.make().saveCursor(.revision("1"), scope: other)
    }

    @Test(arguments: Kind.allCases)
    func markersSequencesCursorOutboxAndCredentials(_ kind: Kind) async throws {
        let store = try kind.make()
        try await store.saveReadMarker(.sequence(4), of: "bob", in: conversation, scope: scope)
        try await store.saveReadMarker(.message("s9"), of: "bob", in: conversation, scope: scope)
        try await store.saveReadMarker(.time(base), of: "carol", in: conversation, scope: scope)
        #expect(try await store.fetchReadMarkers(in: conversation, scope: scope) == ["bob": .message("s9"), "carol": .time(base)])
        try await store.saveSequence(10, for: conversation, scope: scope)
        try await store.saveSequence(12, for: conversation, scope: scope)
        #expect(try await store.fetchSequences(scope: scope) == [conversation: 12])
        try await store.saveCursor(.revision("r7"), scope: scope)
        #expect(try await store.fetchCursor(scope: scope) == .revision("r7"))
        try await store.saveCursor(nil, scope: scope)
        #expect(try await store.fetchCursor(scope: scope) == nil)
        let entries = (1...3).map {
            OutboxEntry(message: OutgoingMessage(clientID: ClientMessageID("k\($0)"), conversationID: conversation, content: MessageDraft(text: "\($0)")), createdAt: base)
        }
        for entry in entries { try await store.saveOutboxEntry(entry, scope: scope) }
        var retried = entries[0]
        retried.attempts = 2
        try await store.saveOutboxEntry(retried, scope: scope)
        try await store.removeOutboxEntry("k2", scope: scope)
        #expect(try await store.fetchOutbox(scope: scope) == [retried, entries[2]], "\(kind): FIFO, updated in place")
        #expect(try await store.fetchCredentials(scope: scope).isEmpty)
        try await store.saveCredentials(Credentials(["token": "t"]), scope: scope)
        #expect(try await store.fetchCredentials(scope: scope)["token"] == "t")
        #expect(try await store.fetchCredentials(scope: other).isEmpty)
    }

    @Test(arguments: Kind.allCases)
    func aBatchIsAppliedInOrderAsOne(_ kind: Kind) async throws {
        let store = try kind.make()
        var pending = message(server: nil, client: "k1", second: 5, text: "hello")
        pending.deliveryState = .pending
        let entry = OutboxEntry(message: OutgoingMessage(clientID: "k1", conversationID: conversation, content: MessageDraft(text: "hello")), createdAt: base)
        try await store.apply([.saveConversation(ConversationInfo(id: conversation)), .saveMessages([pending]), .saveOutboxEntry(entry)], scope: scope)
        #expect(try await store.fetchOutbox(scope: scope) == [entry])
        #expect(try await store.fetchPendingMessages(scope: scope).map(\.clientID) == ["k1"])
        // The send's outcome: the confirmed message and the end of the entry, together.
        var confirmed = pending
        confirmed.serverID = "s1"
        confirmed.sequence = 1
        confirmed.deliveryState = .sent
        try await store.apply([.saveMessages([confirmed]), .removeOutboxEntry("k1"), .saveSequence(1, for: conversation), .saveCursor(.revision("r1"))], scope: scope)
        #expect(try await store.fetchOutbox(scope: scope).isEmpty)
        #expect(try await store.fetchPendingMessages(scope: scope).isEmpty)
        #expect(try await store.countMessages(in: conversation, scope: scope) == 1)
        #expect(try await store.fetchSequences(scope: scope) == [conversation: 1])
        #expect(try await store.fetchCursor(scope: scope) == .revision("r1"))
        // In order: a save then a removal of the same message leaves nothing.
        try await store.apply([.saveMessages([message(server: "s2", client: nil, sequence: 2, second: 6, text: "x")]), .removeMessage("s2", in: conversation)], scope: scope)
        #expect(try await store.fetchMessage(serverID: "s2", in: conversation, scope: scope) == nil, "\(kind)")
    }

    @Test(arguments: Kind.allCases)
    func theOldestConfirmedMessageAndThePendingOnesAreReadAlone(_ kind: Kind) async throws {
        let store = try kind.make()
        var failed = message(server: nil, client: "k2", second: 1, text: "failed")
        failed.deliveryState = .failed("no")
        var waiting = message(server: nil, client: "k1", second: 0, text: "waiting")
        waiting.deliveryState = .pending
        try await store.saveMessages(
            [message(server: "s3", client: nil, sequence: 3, second: 30, text: "c"), message(server: "s2", client: nil, sequence: 2, second: 20, text: "b"), waiting, failed],
            scope: scope
        )
        #expect(try await store.fetchOldestConfirmedMessage(in: conversation, scope: scope)?.serverID == "s2", "\(kind)")
        #expect(try await store.fetchOldestConfirmedMessage(in: "empty", scope: scope) == nil)
        let waitingOnes = try await store.fetchPendingMessages(scope: scope)
        #expect(waitingOnes.map(\.text) == ["waiting"], "\(kind): failed messages are not waiting: \(waitingOnes.map { "\($0.text) \($0.deliveryState)" })")
        #expect(try await store.fetchPendingMessages(scope: other).isEmpty)
    }

    /// The lookup incoming messages are reconciled with: by server id in the conversation, by
    /// client id in the whole scope, any number of keys at once, another account seeing nothing.
    @Test(arguments: Kind.allCases)
    func reconciliationCandidatesInOneRead(_ kind: Kind) async throws {
        let store = try kind.make()
        try await store.saveMessages(
            [message(server: "s1", client: nil, second: 1, text: "agent"), message(server: nil, client: "c1", second: 2, text: "mine, pending")]
                + (2...700).map { message(server: "s\($0)", client: nil, second: Double($0 + 2), text: "agent \($0)") },
            scope: scope
        )
        let both = try await store.fetchMessages(serverIDs: ["s1"], clientIDs: ["c1"], in: conversation, scope: scope)
        #expect(Set(both.map(\.text)) == ["agent", "mine, pending"], "\(kind)")
        #expect(try await store.fetchMessages(serverIDs: ["s9999"], clientIDs: [], in: conversation, scope: scope).isEmpty, "\(kind)")
        #expect(try await store.fetchMessages(serverIDs: ["s1"], clientIDs: ["c1"], in: conversation, scope: other).isEmpty, "\(kind): another account")
        #expect(try await store.fetchMessages(serverIDs: ["s1"], clientIDs: [], in: "c2", scope: scope).isEmpty, "\(kind): by server id, in its conversation")
        // More keys than one statement takes (chunks of 500).
        let many = try await store.fetchMessages(serverIDs: (1...700).map { MessageID("s\($0)") }, clientIDs: [], in: conversation, scope: scope)
        #expect(many.count == 700, "\(kind)")
    }

    @Test func aSQLiteBatchThatFailsStoresNothing() async throws {
        let store = try SQLiteChatStore.inMemory()
        try await store.database.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let entry = OutboxEntry(message: OutgoingMessage(clientID: "k1", conversationID: conversation, content: MessageDraft(text: "hello")), createdAt: base)
        await #expect {
            try await store.apply([.saveMessages([message(server: nil, client: "k1", second: 5, text: "hello")]), .saveOutboxEntry(entry)], scope: scope)
        } throws: { ($0 as? SwitchboardError)?.code == .storageFailure }
        #expect(try await store.countMessages(in: conversation, scope: scope) == 0, "the message of a failed batch is not stored")
    }
}

/// The whole conformance suite on the reference backend, with every session on a SQLite store:
/// the engine's guarantees hold on the durable store too.
@Suite(.timeLimit(.minutes(2)))
struct SQLiteConformanceTests {
    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        let context = ConformanceContext(
            emulator: InMemoryEmulator(),
            makeStore: { try SQLiteChatStore.inMemory() },
            makeClock: { SessionClock(ImmediateClock()) }
        )
        let outcome = try await conformanceCase.run(context)
        #expect(outcome == .passed)
    }
}
