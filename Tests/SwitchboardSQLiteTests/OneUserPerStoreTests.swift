import Foundation
import GRDB
import Switchboard
@testable import SwitchboardSQLite
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// Two users of one device share one SQLite file: neither sees, nor sends, what is the other's,
/// and signing one out (`forgetUser`) leaves no row of theirs — read from the file's tables.
@Suite(.timeLimit(.minutes(1)))
struct OneUserPerStoreTests {
    /// An emulator with one conversation each for the customers `alice` and `carol`, and the agent `bob`.
    static func aliceAndCarol() -> (emulator: InMemoryEmulator, alicesChat: ConversationID, carolsChat: ConversationID) {
        let emulator = InMemoryEmulator()
        let agent = Participant(id: "bob", role: .agent)
        let alices = emulator.server.createConversation(participants: [Participant(id: "alice", role: .customer), agent])
        let carols = emulator.server.createConversation(participants: [Participant(id: "carol", role: .customer), agent])
        return (emulator, alices.id, carols.id)
    }

    /// Rows per user in every table of the file (all of them, so a table added later is counted
    /// too).
    static func rowsPerUser(in store: SQLiteChatStore) async throws -> [String: [String: Int]] {
        try await store.database.read { db in
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'grdb_%'")
            var rows: [String: [String: Int]] = [:]
            for table in tables {
                for row in try Row.fetchAll(db, sql: "SELECT userID, COUNT(*) AS n FROM \(table) GROUP BY userID") {
                    rows[row["userID"], default: [:]][table] = row["n"]
                }
            }
            return rows
        }
    }

    @Test func aSecondUserSeesNoneOfTheFirstsRowsAndSendsNoneOfTheirQueuedMessages() async throws {
        try await withDatabaseFile { path in
            let (emulator, alicesChat, carolsChat) = Self.aliceAndCarol()
            let alice = InMemoryBackend(server: emulator.server, user: "alice")
            let carol = InMemoryBackend(server: emulator.server, user: "carol")
            let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))

            // Alice: a message from the agent, then a send queued while offline.
            try await harness.withSession(backend: alice, store: try SQLiteChatStore(path: path)) { probe in
                try await probe.recorder.first("alice's chat") { $0.conversationID == alicesChat }
                _ = try emulator.server.agent("bob", name: "Bob").send("for alice", in: alicesChat)
                try await probe.recorder.first("the agent's message") { $0.addedMessage?.text == "for alice" }
                try await probe.session.pause()
                try await probe.session.conversation(alicesChat).send(text: "alice's queued send")
            }

            // Carol, on the same file: her own chat only, and nothing of Alice's goes out.
            let (carolSees, carolsRows) = try await harness.withSession(backend: carol, store: try SQLiteChatStore(path: path)) { probe in
                try await probe.recorder.first("carol's chat") { $0.conversationID == carolsChat }
                let sent = try await probe.session.conversation(carolsChat).send(text: "carol writes")
                try await probe.recorder.first("carol's send confirmed") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
                var texts: [String] = []
                for info in try await probe.session.conversations() {
                    texts += try await probe.session.conversation(info.id).storedMessages(before: nil, limit: .max).map(\.text)
                }
                return (texts, await probe.session.pendingSends.count)
            }
            let alicesSendsOnServer = emulator.server.messages(in: alicesChat).filter { $0.text == "alice's queued send" }.count
            print("one user per store: carol stored \(carolSees), \(carolsRows) pending; alice's queued send on the server while carol ran: \(alicesSendsOnServer)")
            #expect(carolSees == ["carol writes"], "carol sees none of alice's messages")
            #expect(carolsRows == 0, "carol's outbox holds none of alice's sends")
            #expect(alicesSendsOnServer == 0, "alice's queued send did not go out under carol")

            // Alice again: her queued send goes out, once, under her.
            try await harness.withSession(backend: alice, store: try SQLiteChatStore(path: path)) { probe in
                try await probe.recorder.waitUntil("alice's queued send confirmed") { events in
                    events.compactMap(\.updatedMessage).contains { $0.text == "alice's queued send" && $0.serverID != nil }
                }
            }
            let alicesOnServer = emulator.server.messages(in: alicesChat).filter { $0.text == "alice's queued send" }
            #expect(alicesOnServer.count == 1 && alicesOnServer.first?.sender == "alice", "alice's send went out once, as alice")
        }
    }

    @Test func forgettingAUserLeavesNoRowOfTheirsAndKeepsTheOthers() async throws {
        try await withDatabaseFile { path in
            let (emulator, alicesChat, carolsChat) = Self.aliceAndCarol()
            let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))
            let store = try SQLiteChatStore(path: path)
            for (user, chat) in [("carol", carolsChat), ("alice", alicesChat)] {
                try await harness.withSession(backend: InMemoryBackend(server: emulator.server, user: ParticipantID(user)), store: store) { probe in
                    try await probe.recorder.first("the chat") { $0.conversationID == chat }
                    let sent = try await probe.session.conversation(chat).send(text: "\(user) writes")
                    try await probe.recorder.first("confirmed") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
                    try await probe.session.conversation(chat).markRead()
                }
            }

            // What the other adapters keep beside (a token, an account-wide cursor, the agent's read
            // marker), so every table holds a row of alice's.
            let alicesScope = StoreScope(backend: "in-memory", account: "default", user: "alice")
            try await store.apply(
                [.saveCredentials(Credentials(["token": "alice's"])), .saveCursor(.token("alice's")), .saveReadMarker(.sequence(1), of: "bob", in: alicesChat)],
                scope: alicesScope
            )

            // Alice signs out while running, with a send queued.
            let before = try await harness.withSession(backend: InMemoryBackend(server: emulator.server, user: "alice"), store: store) { probe in
                #expect(probe.session.scope == alicesScope)
                try await probe.recorder.first("connected") { $0.isConnected }
                try await probe.session.pause()
                try await probe.session.conversation(alicesChat).send(text: "never sent")
                let before = try await Self.rowsPerUser(in: store)
                try await probe.session.forgetUser()
                #expect(await probe.session.isClosed)
                #expect(await probe.session.pendingSends.isEmpty)
                return before
            }
            let after = try await Self.rowsPerUser(in: store)
            print("forgetUser on SQLite: alice's rows \(before["alice"] ?? [:]) before, \(after["alice"] ?? [:]) after; carol's \(after["carol"] ?? [:])")
            #expect(before["alice"]?.keys.sorted() == ["conversation", "credentials", "cursor", "message", "outbox", "readMarker", "sequence"], "alice had rows in every table")
            #expect(after["alice"] == nil, "no row of alice's is left in any table")
            #expect(after["carol"] == before["carol"], "carol's rows are untouched")

            // A new session for alice starts from nothing, and the dropped send never went out.
            try await harness.withSession(backend: InMemoryBackend(server: emulator.server, user: "alice"), store: store) { probe in
                try await probe.recorder.first("alice's chat again") { $0.conversationID == alicesChat }
                #expect(await probe.session.pendingSends.isEmpty)
            }
            #expect(!emulator.server.messages(in: alicesChat).contains { $0.text == "never sent" })
        }
    }

    /// A file written before the user joined the keys: its rows may be any user's, so no session
    /// reads them (an anonymous one would have read an identified user's) until the app adopts
    /// them for the user they belong to.
    @Test func rowsStoredBeforeTheUserJoinedTheKeysWaitToBeAdopted() async throws {
        try await withDatabaseFile { path in
            let queue = try DatabaseQueue(path: path)
            try SQLiteChatStore.migrator.migrate(queue, upTo: "v1")
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO credentials (backend, account, value) VALUES ('webim', 'default', ?)", arguments: [try JSONEncoder().encode(Credentials(["page-id": "p1"]))])
                try db.execute(sql: "INSERT INTO outbox (backend, account, clientID, value) VALUES ('webim', 'default', 'k1', ?)", arguments: [
                    try JSONEncoder().encode(OutboxEntry(message: OutgoingMessage(clientID: "k1", conversationID: "c", content: MessageDraft(text: "old")), createdAt: Date()))
                ])
            }
            try queue.close()
            let store = try SQLiteChatStore(path: path)
            let anonymous = StoreScope(backend: "webim", account: "default")
            let owner = StoreScope(backend: "webim", account: "default", user: "visitor:v1")
            #expect(try await store.fetchCredentials(scope: anonymous)["page-id"] == nil, "an anonymous session does not get them")
            #expect(try await store.fetchOutbox(scope: owner).isEmpty, "nor does any user before adopting them")
            let adopted = try await store.adoptRowsStoredBeforeUsers(backend: "webim", account: "default", as: "visitor:v1")
            #expect(adopted == 2)
            #expect(try await store.fetchCredentials(scope: owner)["page-id"] == "p1")
            #expect(try await store.fetchOutbox(scope: owner).map(\.message.content.text) == ["old"])
            #expect(try await store.fetchCredentials(scope: anonymous)["page-id"] == nil)
        }
    }
}
