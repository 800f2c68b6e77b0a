import Foundation
import PostgresNIO
import Switchboard
import SwitchboardPostgres
import SwitchboardTestKit
import Testing

/// `PostgresChatStore` on a real PostgreSQL server (see `PostgresServer`).
@Suite(PostgresServer.needed, .timeLimit(.minutes(2)))
struct PostgresChatStoreTests {
    let scope = StoreScope(backend: "test", account: "alice")
    let conversation = ConversationID("c1")

    /// Every case of the `ChatStore` contract, each store in a schema of its own.
    @Test(arguments: StoreContract.cases)
    func contract(_ contractCase: StoreContractCase) async throws {
        try await PostgresServer.withClient { client, schemas in
            try await contractCase.run { try PostgresChatStore(client: client, schema: schemas.fresh()) }
        }
    }

    /// Inbound messages are written many to a statement: the same writes leave the same messages
    /// as the in-memory store's one at a time. The batch has 2,500 inbound messages over two
    /// conversations (three statements), server ids that come twice in one statement (the last
    /// value wins), a send confirmed in the middle (found by its client id, between two runs), a
    /// removal between writes, and a second batch that updates what the first stored.
    @Test func inboundMessagesInOneStatementMatchTheReference() async throws {
        try await PostgresServer.withClient { client, schemas in
            let store = try PostgresChatStore(client: client, schema: schemas.fresh())
            let reference = InMemoryChatStore()
            let other = ConversationID("c2")
            let time = Date(timeIntervalSince1970: 1_700_000_000)
            func inbound(_ index: Int, text: String? = nil) -> Message {
                Message(
                    serverID: MessageID("s\(index)"), conversationID: index % 3 == 0 ? other : conversation, sequence: Int64(index),
                    senderRole: .agent, text: text ?? "inbound \(index)", time: time.addingTimeInterval(Double(index))
                )
            }
            let pending = Message(clientID: "k1", conversationID: conversation, text: "mine", time: time, deliveryState: .pending)
            var confirmed = pending
            confirmed.serverID = "s-mine"
            confirmed.sequence = 1_300
            confirmed.deliveryState = .sent
            let batches: [[StoreWrite]] = [
                [.saveMessages([pending])],
                [
                    .saveMessages((0..<1_200).map { inbound($0) }),
                    .saveMessages([inbound(5, text: "edited in the same batch"), confirmed, inbound(1_200)]),
                    .removeMessage("s7", in: conversation),
                    .saveMessages((1_201..<2_500).map { inbound($0) } + [inbound(1_201, text: "twice in one statement")]),
                ],
                [.saveMessages((2_000..<2_010).map { inbound($0, text: "updated \($0)") })],
            ]
            for writes in batches {
                try await store.apply(writes, scope: scope)
                try await reference.apply(writes, scope: scope)
            }
            var compared = 0
            for id in [conversation, other] {
                let stored = try await store.fetchMessages(in: id, before: nil, limit: .max, scope: scope)
                let expected = try await reference.fetchMessages(in: id, before: nil, limit: .max, scope: scope)
                let same = stored == expected
                let difference = zip(stored, expected).first { $0 != $1 }.map { "stored \($0.0.text), expected \($0.1.text)" } ?? "none in the common part"
                #expect(same, "conversation \(id): \(stored.count) stored, \(expected.count) expected; first difference: \(difference)")
                compared += stored.count
            }
            let pendingLeft = try await store.fetchPendingMessages(scope: scope)
            let written = batches.joined().reduce(0) { count, write in
                if case .saveMessages(let messages) = write { return count + messages.count }
                return count
            }
            print("inbound batches on PostgreSQL: \(written) messages written, \(compared) stored, equal to the in-memory store's, \(pendingLeft.count) pending")
            #expect(pendingLeft.isEmpty)
            #expect(compared == 2_500)
        }
    }

    @Test func aBatchThatFailsStoresNothing() async throws {
        try await PostgresServer.withClient { client, schemas in
            let store = try PostgresChatStore(client: client, schema: schemas.fresh())
            try await store.migrate()
            try await client.run(
                """
                CREATE FUNCTION \(unescaped: store.schema).refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$
                """
            )
            try await client.run("CREATE TRIGGER refuse BEFORE INSERT ON \(unescaped: store.schema).outbox FOR EACH ROW EXECUTE FUNCTION \(unescaped: store.schema).refuse()")
            let entry = OutboxEntry(message: OutgoingMessage(clientID: "k1", conversationID: conversation, content: MessageDraft(text: "hello")), createdAt: Date())
            let message = Message(clientID: "k1", conversationID: conversation, text: "hello", time: Date())
            let error = await #expect(throws: SwitchboardError.self) {
                try await store.apply([.saveMessages([message]), .saveOutboxEntry(entry)], scope: scope)
            }
            print("a batch refused by the server: \(error.map { "\($0)" } ?? "no error")")
            #expect(error?.code == .storageFailure)
            #expect(error?.message.contains("refused") == true, "the server's reason is in the error")
            #expect(try await store.countMessages(in: conversation, scope: scope) == 0, "the message of a failed batch is not stored")
        }
    }

    /// Gateways starting together migrate once; a schema newer than the library is refused, not
    /// written to.
    @Test func processesStartingTogetherMigrateOnce() async throws {
        try await PostgresServer.withClient { client, schemas in
            let schema = schemas.fresh()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await PostgresChatStore(client: client, schema: schema).migrate() }
                }
                try await group.waitForAll()
            }
            var versions: [Int] = []
            for try await version in try await client.query("SELECT version FROM \(unescaped: schema).migration").decode(Int.self) { versions.append(version) }
            print("8 stores migrating one schema at once: versions recorded \(versions)")
            #expect(versions == Array(1...PostgresChatStore.schemaVersion))
            try await client.run("INSERT INTO \(unescaped: schema).migration (version) VALUES (\(PostgresChatStore.schemaVersion + 1))")
            let error = await #expect(throws: SwitchboardError.self) {
                try await PostgresChatStore(client: client, schema: schema).fetchCursor(scope: scope)
            }
            #expect(error?.code == .storageFailure && error?.message.contains("newer") == true, "\(String(describing: error))")
        }
    }

    /// `forgetUser` on PostgreSQL: every row of the user goes, in every table keyed by user (read
    /// from the catalog, so a table added later is counted too), the fencing token included;
    /// another user's rows stay.
    @Test func forgettingAUserLeavesNoRowOfTheirsInAnyTable() async throws {
        try await PostgresServer.withClient { client, schemas in
            let schema = schemas.fresh()
            let store = try PostgresChatStore(client: client, schema: schema)
            let emulator = InMemoryEmulator()
            let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator, patience: .seconds(45)))
            let agent = Participant(id: "bob", role: .agent)
            var sessions: [String: ChatSession] = [:]
            for user in ["carol", "alice"] {
                let chat = emulator.server.createConversation(participants: [Participant(id: ParticipantID(user), role: .customer), agent])
                let backend = InMemoryBackend(server: emulator.server, user: ParticipantID(user))
                sessions[user] = try await harness.withSession(backend: backend, store: store) { probe in
                    try await store.takeOver(probe.session.scope)
                    try await store.apply([.saveCredentials(Credentials(["token": user])), .saveCursor(.token(user)), .saveReadMarker(.sequence(1), of: "bob", in: chat.id)], scope: probe.session.scope)
                    try await probe.recorder.first("the chat") { $0.conversationID == chat.id }
                    try await probe.session.pause()
                    try await probe.session.conversation(chat.id).send(text: "\(user) writes")
                    return probe.session
                }
            }
            func rowsPerUser() async throws -> [String: [String: Int]] {
                var tables: [String] = []
                let named = try await client.query(
                    "SELECT table_name FROM information_schema.columns WHERE table_schema = \(schema) AND column_name = 'user_id' ORDER BY table_name"
                )
                for try await table in named.decode(String.self) { tables.append(table) }
                var rows: [String: [String: Int]] = [:]
                for table in tables {
                    for try await (user, count) in try await client.query("SELECT user_id, count(*)::bigint FROM \(unescaped: schema).\(unescaped: table) GROUP BY user_id")
                        .decode((String, Int64).self)
                    {
                        rows[user, default: [:]][table] = Int(count)
                    }
                }
                return rows
            }
            let before = try await rowsPerUser()
            try await sessions["alice"]!.forgetUser()
            let after = try await rowsPerUser()
            print("forgetUser on PostgreSQL: alice's rows \(before["alice"] ?? [:]) before, \(after["alice"] ?? [:]) after; carol's \(after["carol"] ?? [:])")
            #expect(before["alice"]?.keys.sorted() == ["conversation", "credentials", "cursor", "fence", "message", "outbox", "read_marker", "sequence"], "alice had rows in every table")
            #expect(after["alice"] == nil, "no row of alice's is left")
            #expect(after["carol"] == before["carol"], "carol's rows are untouched")
        }
    }

    /// Rows stored before the user joined the keys are no session's until the app adopts them.
    @Test func rowsStoredBeforeUsersWaitToBeAdopted() async throws {
        try await PostgresServer.withClient { client, schemas in
            let store = try PostgresChatStore(client: client, schema: schemas.fresh())
            let before = StoreScope(backend: "webim", account: "default", user: StoreScope.userBeforeUsers)
            try await store.apply([.saveCredentials(Credentials(["page-id": "p1"])), .saveConversation(ConversationInfo(id: conversation))], scope: before)
            let owner = StoreScope(backend: "webim", account: "default", user: "visitor:v1")
            #expect(try await store.fetchCredentials(scope: StoreScope(backend: "webim", account: "default"))["page-id"] == nil)
            #expect(try await store.adoptRowsStoredBeforeUsers(backend: "webim", account: "default", as: "visitor:v1") == 2)
            #expect(try await store.fetchCredentials(scope: owner)["page-id"] == "p1")
            #expect(try await store.fetchConversations(scope: owner).map(\.id) == [conversation])
            #expect(try await store.fetchConversations(scope: before).isEmpty)
        }
    }

    /// Two processes' stores on one schema: the one that took the session over last writes; the
    /// other, which lost it and has not noticed (a partition), has every write refused, and
    /// nothing it tried is stored. A store that never took the scope over writes as before.
    @Test func aStoreWhoseSessionWasTakenOverWritesNothing() async throws {
        try await PostgresServer.withClient { client, schemas in
            let schema = schemas.fresh()
            let old = try PostgresChatStore(client: client, schema: schema)
            let new = try PostgresChatStore(client: client, schema: schema)
            func message(_ text: String) -> Message {
                Message(serverID: MessageID(text), conversationID: conversation, text: text, time: Date())
            }
            let first = try await old.takeOver(scope)
            try await old.saveMessages([message("before the takeover")], scope: scope)
            let second = try await new.takeOver(scope)
            var refused = 0
            var lastError: SwitchboardError?
            for index in 0..<5 {
                do {
                    try await old.apply([.saveMessages([message("stale \(index)")]), .saveCursor(.token("stale"))], scope: scope)
                } catch let error as SwitchboardError {
                    refused += 1
                    lastError = error
                }
            }
            try await new.saveMessages([message("after the takeover")], scope: scope)
            let stored = try await new.fetchMessages(in: conversation, before: nil, limit: 100, scope: scope).map(\.text)
            let cursor = try await new.fetchCursor(scope: scope)
            print("fencing: tokens \(first) then \(second); the old owner's 5 writes after the takeover — refused \(refused), stored \(stored.filter { $0.hasPrefix("stale") }.count); stored \(stored)")
            #expect(second > first)
            #expect(refused == 5)
            #expect(lastError?.code == .storageFailure && lastError?.vendorCode == "fenced", "\(String(describing: lastError))")
            #expect(stored == ["before the takeover", "after the takeover"])
            #expect(cursor == nil)
            // Its session over, the old store writes the scope unfenced again (a tool, a migration).
            old.endTakeOver(scope)
            try await old.saveCursor(.token("tool"), scope: scope)
            #expect(try await new.fetchCursor(scope: scope) == .token("tool"))
        }
    }

    /// What PostgreSQL's `text` cannot hold is refused with a clear error; message texts are bytes
    /// and hold anything.
    @Test func whatTextCannotHoldIsRefusedClearly() async throws {
        try await PostgresServer.withClient { client, schemas in
            let store = try PostgresChatStore(client: client, schema: schemas.fresh())
            let odd = Message(serverID: "s1", conversationID: conversation, text: "nul \u{0} emoji 🙂 quote ' backslash \\", time: Date())
            try await store.saveMessages([odd], scope: scope)
            #expect(try await store.fetchMessage(serverID: "s1", in: conversation, scope: scope)?.text == odd.text)
            let badID = Message(serverID: "s\u{0}2", conversationID: conversation, text: "x", time: Date())
            let error = await #expect(throws: SwitchboardError.self) { try await store.saveMessages([badID], scope: scope) }
            print("an id with U+0000: \(error.map { "\($0)" } ?? "stored")")
            #expect(error?.code == .storageFailure)
            #expect(try await store.countMessages(in: conversation, scope: scope) == 1, "the failed save changed nothing")
        }
    }

    /// A write whose caller is cancelled still runs to its end (a session closing right after a
    /// send was confirmed must not lose the write that ends its outbox entry).
    @Test func aWriteRunsToItsEndWhenTheCallerIsCancelled() async throws {
        try await PostgresServer.withClient { client, schemas in
            let store = try PostgresChatStore(client: client, schema: schemas.fresh())
            try await store.migrate()
            let messages = (1...200).map { Message(serverID: MessageID("s\($0)"), conversationID: conversation, text: "\($0)", time: Date()) }
            let scope = self.scope
            let write = Task { try await store.saveMessages(messages, scope: scope) }
            write.cancel()
            try await write.value
            let count = try await store.countMessages(in: conversation, scope: scope)
            print("a 200-message write cancelled as it started: \(count) of 200 stored")
            #expect(count == 200)
        }
    }

    @Test func aWrongPasswordFailsAtOnceWithTheServersReason() async throws {
        let url = try LiveServer.postgres.require().replacingOccurrences(of: ":switchboard@", with: ":not-the-password@")
        let error = await #expect(throws: SwitchboardError.self) {
            try await PostgresChatStore.withStore(url: url, schema: "switchboard_never") { _ in }
        }
        print("a wrong password: \(error.map { "\($0)" } ?? "connected")")
        #expect(error?.code == .storageFailure)
        #expect(error?.message.contains("28P01") == true, "PostgreSQL's invalid-password state is named")
        #expect(error?.message.contains("not-the-password") == false)
    }

    @Test func aServerThatIsNotThereFailsAtOnce() async throws {
        let error = await #expect(throws: SwitchboardError.self) {
            // Port 1 on loopback: nothing listens there.
            try await PostgresChatStore.withStore(url: "postgres://u:p@127.0.0.1:1/db?sslmode=disable") { _ in }
        }
        print("no server: \(error.map { "\($0)" } ?? "connected")")
        #expect(error?.code == .storageFailure)
    }

    /// A gateway's own URL and store, end to end: the store `withStore(url:)` hands over works.
    @Test func withStoreHandsOverAMigratedStore() async throws {
        let url = try LiveServer.postgres.require()
        let schema = "switchboard_test_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let count = try await PostgresChatStore.withStore(url: url, schema: schema) { store in
            try await store.saveMessages([Message(serverID: "s1", conversationID: conversation, text: "hello", time: Date())], scope: scope)
            let count = try await store.countMessages(in: conversation, scope: scope)
            try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
            return count
        }
        #expect(count == 1)
    }
}

/// The whole conformance suite with every session on a PostgreSQL store.
@Suite(PostgresServer.needed, .timeLimit(.minutes(3)))
struct PostgresConformanceTests {
    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        try await PostgresServer.withClient { client, schemas in
            let context = ConformanceContext(
                emulator: InMemoryEmulator(),
                makeStore: { try PostgresChatStore(client: client, schema: schemas.fresh()) },
                makeClock: { SessionClock(ImmediateClock()) },
                // Every store's writes cross one real server that the other suites load too.
                patience: .seconds(45)
            )
            let outcome = try await conformanceCase.run(context)
            #expect(outcome == .passed)
        }
    }
}

/// What needs no server.
struct PostgresConfigurationTests {
    @Test func aURLBecomesAConfiguration() throws {
        let configuration = try PostgresChatStore.configuration(url: "postgres://gateway:s3cret@db.example:6543/chat?sslmode=disable")
        #expect(configuration.host == "db.example" && configuration.port == 6543)
        #expect(configuration.username == "gateway" && configuration.password == "s3cret" && configuration.database == "chat")
        let defaults = try PostgresChatStore.configuration(url: "postgresql://gateway@db.example")
        #expect(defaults.port == 5432 && defaults.database == nil && defaults.password == nil)
    }

    @Test(arguments: ["mysql://u@h/db", "postgres://h/db", "postgres://u:p@/db", "postgres://u:p@h/db?sslmode=sometimes", "not a url"])
    func aBadURLIsRefusedWithoutItsPassword(_ url: String) {
        let error = #expect(throws: SwitchboardError.self) { try PostgresChatStore.configuration(url: url) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains(":p@") == false, "the password is not in the error: \(String(describing: error))")
    }

    @Test(arguments: ["Switchboard", "1st", "a-b", "x; DROP TABLE y", "", String(repeating: "a", count: 64)])
    func aSchemaNameMustBeAPlainIdentifier(_ name: String) {
        // The client is never run: the name is refused before anything is sent.
        let client = PostgresClient(configuration: .init(host: "127.0.0.1", username: "u", password: nil, database: nil, tls: .disable))
        let error = #expect(throws: SwitchboardError.self) { try PostgresChatStore(client: client, schema: name) }
        #expect(error?.code == .invalidArgument)
    }
}
