import Foundation
import GRDB
import Switchboard
import SwitchboardSQLite
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// The `ChatStore` contract (`StoreContract`), run against the in-memory and SQLite stores.
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
    let conversation = ConversationID("c1")
    let base = Date(timeIntervalSinceReferenceDate: 800_000_000)

    func message(server: String?, client: String?, sequence: Int64? = nil, second: Double, text: String) -> Message {
        Message(
            serverID: server.map(MessageID.init), clientID: client.map(ClientMessageID.init), conversationID: conversation, sequence: sequence,
            text: text, time: base.addingTimeInterval(second)
        )
    }

    /// Every case of the contract (`StoreContract` in SwitchboardTestKit) on every store.
    @Test(arguments: Kind.allCases, StoreContract.cases)
    func contract(_ kind: Kind, _ contractCase: StoreContractCase) async throws {
        try await contractCase.run { try kind.make() }
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
