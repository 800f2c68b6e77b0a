import Foundation
public import GRDB
public import Switchboard

/// The durable `ChatStore`: SQLite through GRDB. What a session stores — conversations,
/// messages, read markers, sequences, the cursor, the outbox and the credentials — survives the
/// process, so a send stored as pending goes out after a restart and a restart catches up from the
/// stored cursor instead of from scratch.
///
/// Every call is one transaction, run to its end even if the calling task is cancelled. What the
/// engine calls on every event — ``apply(_:scope:)`` and the reads by key — runs on the calling
/// thread (the session's loop: no hop to a queue and back); lists and pages are `@concurrent`, off
/// the caller's executor, so an app reading history from the main actor does not block it. A file
/// store uses a WAL `DatabasePool` (readers do not wait for the writer) whose checkpoints run on a
/// connection of their own (`WALCheckpointer`): a commit writes the WAL and does not wait for
/// the disk, but for the first commit of each WAL cycle, which syncs the WAL's header, and, under
/// writes that never pause, one commit in about 8,000 pages, which checkpoints.
/// ``inMemory()`` is a `DatabaseQueue` for tests. Values are stored as JSON of the model's
/// `Codable` form beside the columns the queries need, so a model field added later needs no
/// migration; messages and conversations, which the engine writes and history pages read the
/// most, in compact binary forms (rows stored as JSON still read; a version before a form cannot
/// read rows written in it).
///
/// ```swift
/// let store = try SQLiteChatStore(path: applicationSupport.appending(path: "chat.sqlite").path)
/// let session = ChatSession(backend: backend, store: store)
/// ```
public final class SQLiteChatStore: ChatStore {
    /// The GRDB database, for an app that wants to observe it or back it up. Do not call the store
    /// from inside one of its accesses or observation callbacks: the store's transactions run
    /// synchronously, and GRDB refuses a reentrant access.
    public let database: any DatabaseWriter
    /// Checkpoints a file store's WAL off the writer's path (none for a database the app opened).
    let checkpointer: WALCheckpointer?

    /// Opens (creating when needed) the store at `path` and migrates it to the current schema.
    /// A new file is created readable and writable by its owner only (0600); SQLite gives its
    /// `-wal` and `-shm` files the same mode. The store holds credentials.
    /// - Throws: `SwitchboardError.Code.storageFailure` when the file cannot be opened or migrated.
    public convenience init(path: String) throws {
        if !FileManager.default.fileExists(atPath: path),
            !FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        {
            throw SwitchboardError(.storageFailure, "cannot create the store at \(path)")
        }
        let checkpointer = WALCheckpointer()
        var configuration = Configuration()
        configuration.prepareDatabase { db in try checkpointer.install(on: db) }
        // Another store on the file (a second process, or the closing of one, which checkpoints
        // the WAL away) holds its locks for moments: wait for them rather than fail at once.
        configuration.busyMode = .timeout(WALCheckpointer.busyTimeout)
        let database: DatabasePool
        do {
            database = try DatabasePool(path: path, configuration: configuration)
            try checkpointer.open(path: path)
        } catch {
            throw SwitchboardError(.storageFailure, "cannot open the store at \(path)", underlying: error)
        }
        try self.init(database: database, checkpointer: checkpointer)
    }

    /// A store on an existing GRDB database (a pool, or a queue), migrated to the current schema.
    /// The database's own configuration decides its checkpoints (SQLite's automatic one unless
    /// it says otherwise).
    public convenience init(database: any DatabaseWriter) throws {
        try self.init(database: database, checkpointer: nil)
    }

    private init(database: any DatabaseWriter, checkpointer: WALCheckpointer?) throws {
        self.database = database
        self.checkpointer = checkpointer
        do {
            try Self.migrator.migrate(database)
        } catch {
            throw SwitchboardError(.storageFailure, "cannot migrate the store", underlying: error)
        }
    }

    /// A store in memory: the same SQL, nothing on disk.
    public static func inMemory() throws -> SQLiteChatStore {
        do {
            return try SQLiteChatStore(database: DatabaseQueue())
        } catch let error as SwitchboardError {
            throw error
        } catch {
            throw SwitchboardError(.storageFailure, "cannot open an in-memory store", underlying: error)
        }
    }

    // MARK: Schema

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE conversation (
                        backend TEXT NOT NULL, account TEXT NOT NULL, id TEXT NOT NULL, value BLOB NOT NULL,
                        PRIMARY KEY (backend, account, id));
                    CREATE TABLE message (
                        backend TEXT NOT NULL, account TEXT NOT NULL, conversation TEXT NOT NULL,
                        serverID TEXT, clientID TEXT,
                        pending INTEGER NOT NULL, sequence INTEGER NOT NULL, time REAL NOT NULL, tie TEXT NOT NULL,
                        value BLOB NOT NULL);
                    CREATE UNIQUE INDEX message_server ON message (backend, account, conversation, serverID) WHERE serverID IS NOT NULL;
                    CREATE UNIQUE INDEX message_client ON message (backend, account, conversation, clientID) WHERE clientID IS NOT NULL;
                    CREATE INDEX message_client_scope ON message (backend, account, clientID) WHERE clientID IS NOT NULL;
                    CREATE INDEX message_order ON message (backend, account, conversation, pending, sequence, time, tie);
                    CREATE TABLE readMarker (
                        backend TEXT NOT NULL, account TEXT NOT NULL, conversation TEXT NOT NULL, participant TEXT NOT NULL,
                        value BLOB NOT NULL, PRIMARY KEY (backend, account, conversation, participant));
                    CREATE TABLE sequence (
                        backend TEXT NOT NULL, account TEXT NOT NULL, conversation TEXT NOT NULL, value INTEGER NOT NULL,
                        PRIMARY KEY (backend, account, conversation));
                    CREATE TABLE cursor (
                        backend TEXT NOT NULL, account TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (backend, account));
                    CREATE TABLE outbox (
                        backend TEXT NOT NULL, account TEXT NOT NULL, clientID TEXT NOT NULL, value BLOB NOT NULL,
                        PRIMARY KEY (backend, account, clientID));
                    CREATE TABLE credentials (
                        backend TEXT NOT NULL, account TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (backend, account));
                    """
            )
        }
        // The user joins every key (`StoreScope.user`). Rows stored before may be any user's:
        // they go to `StoreScope.userBeforeUsers`, which no session reads, until the app adopts
        // them. SQLite cannot change a primary key, so each table is built anew and its rows
        // copied in their order.
        migrator.registerMigration("v2: the user in every key") { db in
            let columns: [String: (definition: String, copied: String)] = [
                "conversation": ("id TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (backend, account, userID, id)", "id, value"),
                "message": (
                    """
                    conversation TEXT NOT NULL, serverID TEXT, clientID TEXT,
                    pending INTEGER NOT NULL, sequence INTEGER NOT NULL, time REAL NOT NULL, tie TEXT NOT NULL, value BLOB NOT NULL
                    """,
                    "conversation, serverID, clientID, pending, sequence, time, tie, value"
                ),
                "readMarker": (
                    "conversation TEXT NOT NULL, participant TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (backend, account, userID, conversation, participant)",
                    "conversation, participant, value"
                ),
                "sequence": ("conversation TEXT NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (backend, account, userID, conversation)", "conversation, value"),
                "cursor": ("value BLOB NOT NULL, PRIMARY KEY (backend, account, userID)", "value"),
                "outbox": ("clientID TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (backend, account, userID, clientID)", "clientID, value"),
                "credentials": ("value BLOB NOT NULL, PRIMARY KEY (backend, account, userID)", "value"),
            ]
            // The tables as they were at v1 (a table added later is not this migration's).
            for table in ["conversation", "message", "readMarker", "sequence", "cursor", "outbox", "credentials"] {
                let (definition, copied) = columns[table]!
                try db.execute(sql: "ALTER TABLE \(table) RENAME TO \(table)_v1")
                try db.execute(sql: "CREATE TABLE \(table) (backend TEXT NOT NULL, account TEXT NOT NULL, userID TEXT NOT NULL, \(definition))")
                try db.execute(
                    sql: "INSERT INTO \(table) (rowid, backend, account, userID, \(copied)) SELECT rowid, backend, account, ?, \(copied) FROM \(table)_v1 ORDER BY rowid",
                    arguments: [StoreScope.userBeforeUsers]
                )
                try db.execute(sql: "DROP TABLE \(table)_v1")
            }
            try db.execute(
                sql: """
                    CREATE UNIQUE INDEX message_server ON message (backend, account, userID, conversation, serverID) WHERE serverID IS NOT NULL;
                    CREATE UNIQUE INDEX message_client ON message (backend, account, userID, conversation, clientID) WHERE clientID IS NOT NULL;
                    CREATE INDEX message_client_scope ON message (backend, account, userID, clientID) WHERE clientID IS NOT NULL;
                    CREATE INDEX message_order ON message (backend, account, userID, conversation, pending, sequence, time, tie);
                    """
            )
        }
        return migrator
    }

    /// Every table of the schema: what `StoreWrite.removeEverything` empties of a scope.
    static let tables = ["conversation", "message", "readMarker", "sequence", "cursor", "outbox", "credentials"]

    // MARK: Conversations

    @concurrent public func fetchConversations(scope: StoreScope) async throws -> [ConversationInfo] {
        try fetchInOrder(ConversationInfo.self, from: "conversation", scope: scope)
    }

    public func fetchConversation(_ id: ConversationID, scope: StoreScope) async throws -> ConversationInfo? {
        try readByKey { db in
            try Data.fetchOne(db, cached: "SELECT value FROM conversation WHERE backend = ? AND account = ? AND userID = ? AND id = ?", arguments: scope.arguments + [id.rawValue])
                .map { try StoredValue.decode(ConversationInfo.self, $0) }
        }
    }

    // MARK: Messages

    public func fetchMessages(
        serverIDs: [MessageID],
        clientIDs: [ClientMessageID],
        in conversation: ConversationID,
        scope: StoreScope
    ) async throws -> [Message] {
        guard !serverIDs.isEmpty || !clientIDs.isEmpty else { return [] }
        return try readByKey { db in
            try Self.messages(serverIDs: serverIDs, in: conversation, scope: scope, db) + Self.messages(clientIDs: clientIDs, scope: scope, db)
        }
    }

    // SQLite takes at most 32,766 parameters; chunks of 500 keep each statement small.

    /// The messages of `conversation` with these server ids.
    private static func messages(serverIDs: [MessageID], in conversation: ConversationID, scope: StoreScope, _ db: Database) throws -> [Message] {
        try serverIDs.map(\.rawValue).chunked(500).flatMap { chunk in
            try Data.fetchAll(
                db,
                cached: "SELECT value FROM message WHERE backend = ? AND account = ? AND userID = ? AND conversation = ? AND serverID IN (\(placeholders(chunk.count)))",
                arguments: scope.arguments + StatementArguments([conversation.rawValue] + chunk)
            ).map { try StoredValue.decode(Message.self, $0) }
        }
    }

    /// The messages of the scope, in any conversation, with these client ids.
    private static func messages(clientIDs: [ClientMessageID], scope: StoreScope, _ db: Database) throws -> [Message] {
        try clientIDs.map(\.rawValue).chunked(500).flatMap { chunk in
            try Data.fetchAll(
                db,
                cached: "SELECT value FROM message WHERE backend = ? AND account = ? AND userID = ? AND clientID IN (\(placeholders(chunk.count)))",
                arguments: scope.arguments + StatementArguments(Array(chunk))
            ).map { try StoredValue.decode(Message.self, $0) }
        }
    }

    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    @concurrent public func fetchMessages(
        in conversation: ConversationID,
        before: MessageOrderKey?,
        limit: Int,
        scope: StoreScope
    ) async throws -> [Message] {
        guard limit > 0 else { return [] }
        return try read { db in
            var sql = "SELECT value FROM message WHERE backend = ? AND account = ? AND userID = ? AND conversation = ?"
            var arguments = scope.arguments + [conversation.rawValue]
            if let before {
                // `MessageOrderKey`'s order, as a row comparison: pending last, then sequence, time, id.
                sql += " AND (pending, sequence, time, tie) < (?, ?, ?, ?)"
                arguments += [before.isPending, before.sequence, before.time.timeIntervalSinceReferenceDate, before.tieBreaker]
            }
            sql += " ORDER BY pending DESC, sequence DESC, time DESC, tie DESC LIMIT ?"
            arguments += [limit]
            return try Data.fetchAll(db, cached: sql, arguments: arguments).reversed().map { try StoredValue.decode(Message.self, $0) }
        }
    }

    @concurrent public func countMessages(in conversation: ConversationID, scope: StoreScope) async throws -> Int {
        try read { db in
            try Int.fetchOne(db, cached: "SELECT COUNT(*) FROM message WHERE backend = ? AND account = ? AND userID = ? AND conversation = ?", arguments: scope.arguments + [conversation.rawValue]) ?? 0
        }
    }

    /// Replaces the row stored under the message's server id, else under its client id, else adds
    /// one. A row under the client id that another row's server id wins over is dropped: the
    /// confirmed message replaces its pending copy.
    private static func save(_ message: Message, value: Data, scope: StoreScope, _ db: Database) throws {
        let where_ = "backend = ? AND account = ? AND userID = ? AND conversation = ?"
        let base = scope.arguments + [message.conversationID.rawValue]
        let byServer = try message.serverID.flatMap {
            try Int64.fetchOne(db, cached: "SELECT rowid FROM message WHERE \(where_) AND serverID = ?", arguments: base + [$0.rawValue])
        }
        let byClient = try message.clientID.flatMap {
            try Int64.fetchOne(db, cached: "SELECT rowid FROM message WHERE \(where_) AND clientID = ?", arguments: base + [$0.rawValue])
        }
        if let byServer, let byClient, byServer != byClient {
            try db.execute(cached: "DELETE FROM message WHERE rowid = ?", arguments: [byClient])
        }
        let key = message.orderKey
        let columns: StatementArguments = [
            message.serverID?.rawValue, message.clientID?.rawValue, key.isPending, key.sequence, key.time.timeIntervalSinceReferenceDate,
            key.tieBreaker, value,
        ]
        if let row = byServer ?? byClient {
            try db.execute(
                cached: "UPDATE message SET serverID = ?, clientID = ?, pending = ?, sequence = ?, time = ?, tie = ?, value = ? WHERE rowid = ?",
                arguments: columns + [row]
            )
        } else {
            try db.execute(
                cached: """
                    INSERT INTO message (backend, account, userID, conversation, serverID, clientID, pending, sequence, time, tie, value)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: base + columns
            )
        }
    }

    @concurrent public func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        try read { db in
            try Data.fetchOne(
                db,
                cached: """
                    SELECT value FROM message WHERE backend = ? AND account = ? AND userID = ? AND conversation = ? AND pending = 0
                    ORDER BY pending, sequence, time, tie LIMIT 1
                    """,
                arguments: scope.arguments + [conversation.rawValue]
            ).map { try StoredValue.decode(Message.self, $0) }
        }
    }

    @concurrent public func fetchPendingMessages(scope: StoreScope) async throws -> [Message] {
        try read { db in
            try Data.fetchAll(db, cached: "SELECT value FROM message WHERE backend = ? AND account = ? AND userID = ? AND pending = 1 ORDER BY rowid", arguments: scope.arguments)
                .map { try StoredValue.decode(Message.self, $0) }
                .filter { $0.deliveryState == .pending }
        }
    }

    // MARK: Read markers, sequences, cursor

    @concurrent public func fetchReadMarkers(in conversation: ConversationID, scope: StoreScope) async throws -> [ParticipantID: ChatEvent.ReadMarker] {
        try read { db in
            var markers: [ParticipantID: ChatEvent.ReadMarker] = [:]
            let rows = try Row.fetchAll(
                db,
                cached: "SELECT participant, value FROM readMarker WHERE backend = ? AND account = ? AND userID = ? AND conversation = ?",
                arguments: scope.arguments + [conversation.rawValue]
            )
            for row in rows {
                markers[ParticipantID(row["participant"])] = try StoredValue.decode(ChatEvent.ReadMarker.self, row["value"])
            }
            return markers
        }
    }

    @concurrent public func fetchSequences(scope: StoreScope) async throws -> [ConversationID: Int64] {
        try read { db in
            var sequences: [ConversationID: Int64] = [:]
            for row in try Row.fetchAll(db, cached: "SELECT conversation, value FROM sequence WHERE backend = ? AND account = ? AND userID = ?", arguments: scope.arguments) {
                sequences[ConversationID(row["conversation"])] = row["value"]
            }
            return sequences
        }
    }

    @concurrent public func fetchCursor(scope: StoreScope) async throws -> SyncCursor? {
        try read { db in
            try Data.fetchOne(db, cached: "SELECT value FROM cursor WHERE backend = ? AND account = ? AND userID = ?", arguments: scope.arguments)
                .map { try StoredValue.decode(SyncCursor.self, $0) }
        }
    }

    // MARK: Outbox and credentials

    @concurrent public func fetchOutbox(scope: StoreScope) async throws -> [OutboxEntry] {
        try fetchInOrder(OutboxEntry.self, from: "outbox", scope: scope)
    }

    @concurrent public func fetchCredentials(scope: StoreScope) async throws -> Credentials {
        try read { db in
            try Data.fetchOne(db, cached: "SELECT value FROM credentials WHERE backend = ? AND account = ? AND userID = ?", arguments: scope.arguments)
                .map { try StoredValue.decode(Credentials.self, $0) } ?? Credentials()
        }
    }

    // MARK: Rows stored before users

    /// Gives the rows this store held before the user joined its keys (migration v2 put them
    /// under `StoreScope.userBeforeUsers`) to `user` of `backend` and `account`: call it once,
    /// before that user's first session, when the app knows whose they were. One transaction;
    /// when `user` already has a row with the same key nothing changes and it throws.
    ///
    /// - Returns: how many rows changed hands.
    /// - Throws: `SwitchboardError.Code.storageFailure`.
    @discardableResult
    @concurrent public func adoptRowsStoredBeforeUsers(backend: BackendName, account: String, as user: String?) async throws -> Int {
        let adopter = StoreScope(backend: backend, account: account, user: user)
        return try write { db in
            var changed = 0
            for table in Self.tables {
                try db.execute(
                    sql: "UPDATE \(table) SET userID = ? WHERE backend = ? AND account = ? AND userID = ?",
                    arguments: [adopter.user ?? "", backend.rawValue, account, StoreScope.userBeforeUsers]
                )
                changed += db.changesCount
            }
            return changed
        }
    }

    // MARK: Transactions

    public func apply(_ writes: [StoreWrite], scope: StoreScope) async throws {
        guard !writes.isEmpty else { return }
        // One transaction: a write that fails, or a value that does not encode, rolls it all back.
        try write { db in
            for write in writes { try Self.perform(write, scope: scope, db) }
        }
    }

    private static func perform(_ write: StoreWrite, scope: StoreScope, _ db: Database) throws {
        let key = "backend = ? AND account = ? AND userID = ?"
        switch write {
        case .saveConversation(let conversation):
            try upsertKeepingOrder(try StoredValue.encode(conversation), into: "conversation", keyColumn: "id", key: conversation.id.rawValue, scope: scope, db)
        case .removeConversation(let id):
            let arguments = scope.arguments + [id.rawValue]
            try db.execute(cached: "DELETE FROM conversation WHERE \(key) AND id = ?", arguments: arguments)
            for table in ["message", "readMarker", "sequence"] {
                try db.execute(cached: "DELETE FROM \(table) WHERE \(key) AND conversation = ?", arguments: arguments)
            }
        case .saveMessages(let messages):
            for message in messages { try save(message, value: try StoredValue.encode(message), scope: scope, db) }
        case .removeMessage(let id, let conversation):
            try db.execute(cached: "DELETE FROM message WHERE \(key) AND conversation = ? AND serverID = ?", arguments: scope.arguments + [conversation.rawValue, id.rawValue])
        case .removeAllMessages(let conversation):
            try db.execute(cached: "DELETE FROM message WHERE \(key) AND conversation = ?", arguments: scope.arguments + [conversation.rawValue])
        case .saveReadMarker(let marker, let participant, let conversation):
            try db.execute(
                cached: "INSERT OR REPLACE INTO readMarker (backend, account, userID, conversation, participant, value) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: scope.arguments + [conversation.rawValue, participant.rawValue, try StoredValue.encode(marker)]
            )
        case .saveSequence(let sequence, let conversation):
            try db.execute(
                cached: "INSERT OR REPLACE INTO sequence (backend, account, userID, conversation, value) VALUES (?, ?, ?, ?, ?)",
                arguments: scope.arguments + [conversation.rawValue, sequence]
            )
        case .saveCursor(let cursor?):
            try db.execute(cached: "INSERT OR REPLACE INTO cursor (backend, account, userID, value) VALUES (?, ?, ?, ?)", arguments: scope.arguments + [try StoredValue.encode(cursor)])
        case .saveCursor(nil):
            try db.execute(cached: "DELETE FROM cursor WHERE \(key)", arguments: scope.arguments)
        case .saveOutboxEntry(let entry):
            try upsertKeepingOrder(try StoredValue.encode(entry), into: "outbox", keyColumn: "clientID", key: entry.clientID.rawValue, scope: scope, db)
        case .removeOutboxEntry(let clientID):
            try db.execute(cached: "DELETE FROM outbox WHERE \(key) AND clientID = ?", arguments: scope.arguments + [clientID.rawValue])
        case .saveCredentials(let credentials):
            try db.execute(cached: "INSERT OR REPLACE INTO credentials (backend, account, userID, value) VALUES (?, ?, ?, ?)", arguments: scope.arguments + [try StoredValue.encode(credentials)])
        case .removeEverything:
            for table in tables { try db.execute(cached: "DELETE FROM \(table) WHERE \(key)", arguments: scope.arguments) }
        }
    }

    // MARK: Plumbing

    /// The values of `table` in the order they were first saved (`conversation`, `outbox`).
    private func fetchInOrder<T: Decodable>(_ type: T.Type, from table: String, scope: StoreScope) throws -> [T] {
        try read { db in
            try Data.fetchAll(db, cached: "SELECT value FROM \(table) WHERE backend = ? AND account = ? AND userID = ? ORDER BY rowid", arguments: scope.arguments)
                .map { try StoredValue.decode(type, $0) }
        }
    }

    /// Inserts `value` under `key`, or replaces it in place: an upsert keeps the row, and so its
    /// place in the order.
    private static func upsertKeepingOrder(
        _ value: Data,
        into table: String,
        keyColumn: String,
        key: String,
        scope: StoreScope,
        _ db: Database
    ) throws {
        try db.execute(
            cached: """
                INSERT INTO \(table) (backend, account, userID, \(keyColumn), value) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (backend, account, userID, \(keyColumn)) DO UPDATE SET value = excluded.value
                """,
            arguments: scope.arguments + [key, value]
        )
    }

    /// One read transaction, on the calling thread. GRDB's synchronous access enters the
    /// connection's serial queue without a thread hop when it is free (a hop there and a resume
    /// back cost more than the statements of a read by key), and runs to its end whatever becomes
    /// of the calling task. A reader does not wait for the writer; it waits up to GRDB's 10 s for
    /// another process's lock.
    private func read<T>(_ body: (Database) throws -> T) throws -> T {
        try Self.classifying("read") { try database.read(body) }
    }

    /// A read by key, on the writer's connection: the engine reads the rows an arriving event
    /// touches before it writes them, and a reader connection would find its page cache stale
    /// after every commit and read the index pages again (a keyed read cost 180 µs there, as
    /// much as the write after it; Python's `sqlite3` reads the same two keys in 32 µs on a reader
    /// connection after each commit and in 23 on the writer). It waits for a write in progress, as the
    /// engine's next write would.
    private func readByKey<T>(_ body: (Database) throws -> T) throws -> T {
        try Self.classifying("read") {
            try database.writeWithoutTransaction { db in
                // One snapshot for its statements, should another process write the file.
                var result: T?
                try db.inTransaction(.deferred) {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        }
    }

    /// One write transaction, on the calling thread (as ``read(_:)``), run to its end even when
    /// the caller is cancelled: a session that closes right after a send is confirmed must not
    /// lose the write that takes the send out of the outbox. A file store's commit writes the WAL
    /// and does not sync it (`synchronous = NORMAL`): the transaction survives the process being
    /// killed as soon as it returns; checkpoints, which sync, run on a connection of their own.
    private func write<T>(_ body: (Database) throws -> T) throws -> T {
        try Self.classifying("write") { try database.write(body) }
    }

    /// Runs `body`, classifying a failure as `storageFailure`.
    private static func classifying<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SwitchboardError {
            throw error
        } catch {
            throw SwitchboardError(.storageFailure, "SQLite \(what) failed", underlying: error)
        }
    }
}

extension StoreScope {
    /// The three key columns every table starts with; an anonymous user is `''`.
    fileprivate var arguments: StatementArguments { [backend.rawValue, account, user ?? ""] }
}

/// Statements compiled once per connection and reused (GRDB's statement cache): the engine runs
/// the same few statements for every event, and compiling one costs more than running it.
extension Database {
    fileprivate func execute(cached sql: String, arguments: StatementArguments = []) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

extension DatabaseValueConvertible {
    fileprivate static func fetchOne(_ db: Database, cached sql: String, arguments: StatementArguments = []) throws -> Self? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    fileprivate static func fetchAll(_ db: Database, cached sql: String, arguments: StatementArguments = []) throws -> [Self] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}

extension Row {
    fileprivate static func fetchAll(_ db: Database, cached sql: String, arguments: StatementArguments = []) throws -> [Row] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}

extension Array {
    /// The elements in consecutive slices of at most `size`.
    fileprivate func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min(count, $0 + size)] }
    }
}
