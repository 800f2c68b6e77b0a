import Foundation
public import Logging
public import PostgresNIO
public import Switchboard

/// The `ChatStore` for several processes: PostgreSQL through PostgresNIO. Gateways behind a
/// load balancer share one database; what a session stores — conversations, messages, read
/// markers, sequences, the cursor, the outbox and the credentials — is there for whichever process
/// runs the session next.
///
/// The store uses a running `PostgresClient` (its connection pool): the owner runs
/// `client.run()` in its task group for as long as the store is used, or lets
/// ``withStore(url:schema:logger:_:)`` do it. Tables live in one PostgreSQL schema
/// (`switchboard` unless told), created and migrated on the first call, under an advisory lock so
/// processes starting together migrate once.
///
/// Every call is one transaction and runs to its end even when the calling task is cancelled: a
/// session that closes right after a send is confirmed must not lose the write that takes the send
/// out of the outbox. Writes to one scope are serialized by a transaction-level advisory lock on the
/// scope, as SQLite's single writer serializes them, so concurrent saves of one message never race
/// on its unique index. Values are stored as the JSON of the model's `Codable` form (`bytea`)
/// beside the columns the queries need, as in `ChatStore` implementations elsewhere in the
/// package, so a model field added later needs no migration; messages and conversations in the
/// SQLite store's compact binary forms (rows stored as JSON still read; every process of a fleet
/// must run a version that reads them before one writes them).
///
/// ```swift
/// try await PostgresChatStore.withStore(url: "postgres://gateway:secret@db:5432/chat") { store in
///     let session = ChatSession(backend: backend, store: store)
///     try await session.withRunning { session in … }
/// }
/// ```
///
/// PostgreSQL's `text` cannot hold U+0000: an identifier (conversation, message, participant)
/// containing it is refused with `storageFailure` (`SwitchboardError.Code`). Message texts and every
/// other value are stored as bytes and may hold anything.
public final class PostgresChatStore: ChatStore {
    /// The PostgresNIO client the store queries through, for an app that wants the same pool.
    public let client: PostgresClient
    /// The PostgreSQL schema holding the store's tables.
    public let schema: String
    let logger: Logger
    let onWrite: (@Sendable (Duration) -> Void)?
    private let migrated = Locked(false)
    /// The fencing token this store writes each scope with, where it took the scope over
    /// (``takeOver(_:)``).
    private let fences = Locked([StoreScope: Int64]())

    /// The current schema version; ``migrate()`` brings an older schema up to it.
    public static let schemaVersion = 5

    /// A store in `schema` of the database `client` connects to. Nothing is read until the first
    /// call, which creates or migrates the tables.
    /// - Parameters:
    ///   - client: A PostgresNIO client whose `run()` the owner runs while the store is used.
    ///   - schema: The PostgreSQL schema of the store's tables; deployments that share a database
    ///     keep apart by schema.
    ///   - logger: Where migrations and failures are logged.
    ///   - onWrite: Called with how long each write (``apply(_:scope:)``, one transaction) took,
    ///     whether it committed or not: for a latency metric.
    /// - Throws: `invalidArgument` (`SwitchboardError.Code`) when `schema` is not a plain lower-case
    ///   SQL identifier (letters, digits and `_`, at most 63 characters, not starting with a digit).
    public init(
        client: PostgresClient,
        schema: String = "switchboard",
        logger: Logger = Logger(label: "switchboard.postgres"),
        onWrite: (@Sendable (Duration) -> Void)? = nil
    ) throws {
        guard Self.isPlainIdentifier(schema) else {
            throw SwitchboardError(.invalidArgument, "the schema name \(schema) is not a plain lower-case SQL identifier")
        }
        self.client = client
        self.schema = schema
        self.logger = logger
        self.onWrite = onWrite
    }

    /// Runs a client for `configuration` around `body`, which gets a migrated store; the client's
    /// connections close when `body` returns or throws.
    /// - Parameters:
    ///   - configuration: The PostgresNIO client configuration (``configuration(url:)`` makes one).
    ///   - schema: The PostgreSQL schema of the store's tables.
    ///   - logger: Where the store and the client log.
    ///   - body: What runs with the store.
    public static func withStore<T: Sendable>(
        configuration: PostgresClient.Configuration,
        schema: String = "switchboard",
        logger: Logger = Logger(label: "switchboard.postgres"),
        _ body: @Sendable (PostgresChatStore) async throws -> T
    ) async throws -> T {
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let store = try PostgresChatStore(client: client, schema: schema, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await store.migrate()
            return try await body(store)
        }
    }

    /// Runs a client for the database at `url` around `body`, which gets a migrated store; the
    /// client's connections close when `body` returns or throws. One connection is made first, on
    /// its own, so wrong credentials or an unreachable server fail at once with the server's reason
    /// (the pool would retry them until a lease timed out).
    /// - Parameters:
    ///   - url: `postgres://user:password@host:port/database`, see ``configuration(url:)``.
    ///   - schema: The PostgreSQL schema of the store's tables.
    ///   - logger: Where the store and the client log.
    ///   - body: What runs with the store.
    /// - Throws: `invalidArgument` (`SwitchboardError.Code`) for a bad URL,
    ///   `storageFailure` (`SwitchboardError.Code`) when the server refuses or cannot be reached.
    public static func withStore<T: Sendable>(
        url: String,
        schema: String = "switchboard",
        logger: Logger = Logger(label: "switchboard.postgres"),
        _ body: @Sendable (PostgresChatStore) async throws -> T
    ) async throws -> T {
        try await checkConnection(url: url, logger: logger)
        return try await withStore(configuration: try configuration(url: url), schema: schema, logger: logger, body)
    }

    /// Makes one connection to the database at `url` and closes it: wrong credentials or an
    /// unreachable server fail at once with the server's reason, where a pool would retry them
    /// until a lease timed out.
    /// - Throws: `invalidArgument` (`SwitchboardError.Code`) for a bad URL,
    ///   `storageFailure` (`SwitchboardError.Code`) when the server refuses or cannot be reached.
    public static func checkConnection(url: String, logger: Logger = Logger(label: "switchboard.postgres")) async throws {
        let endpoint = try Endpoint(url: url)
        do {
            let connection = try await PostgresConnection.connect(configuration: try endpoint.connectionConfiguration(), id: 0, logger: logger)
            try await connection.close()
        } catch {
            throw classify(error, what: "connecting to PostgreSQL at \(endpoint.host):\(endpoint.port)")
        }
    }

    /// A client configuration from a `postgres://user:password@host:port/database` URL. The
    /// query may say `sslmode=disable` (plain TCP, for loopback), `prefer` (the default) or
    /// `require`.
    /// - Throws: `invalidArgument` (`SwitchboardError.Code`) for a URL that is not of that form.
    public static func configuration(url: String) throws -> PostgresClient.Configuration {
        try Endpoint(url: url).clientConfiguration
    }

    /// Where a `postgres://` URL points.
    package struct Endpoint: Sendable {
        enum TLSMode { case disable, prefer, require }
        var host: String
        var port: Int
        var username: String
        var password: String?
        var database: String?
        var tls: TLSMode

        package init(url: String) throws {
            guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
                let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
            else {
                throw SwitchboardError(.invalidArgument, "\(PostgresChatStore.redacted(url)) is not a postgres://user:password@host:port/database URL")
            }
            switch components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer" {
            case "disable": tls = .disable
            case "prefer", "allow": tls = .prefer
            case "require", "verify-ca", "verify-full": tls = .require
            case let mode: throw SwitchboardError(.invalidArgument, "unknown sslmode \(mode) in \(PostgresChatStore.redacted(url))")
            }
            let database = String(components.path.drop { $0 == "/" })
            self.host = host
            self.port = components.port ?? 5432
            self.username = user
            self.password = components.password
            self.database = database.isEmpty ? nil : database
        }

        package var clientConfiguration: PostgresClient.Configuration {
            let tls: PostgresClient.Configuration.TLS
            switch self.tls {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(.makeClientConfiguration())
            case .require: tls = .require(.makeClientConfiguration())
            }
            return PostgresClient.Configuration(host: host, port: port, username: username, password: password, database: database, tls: tls)
        }

        package func connectionConfiguration() throws -> PostgresConnection.Configuration {
            let tls: PostgresConnection.Configuration.TLS
            switch self.tls {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
            return PostgresConnection.Configuration(host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
    }

    /// `url` with its password replaced, for error messages and logs.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "…"
        return components.string ?? "the URL"
    }

    static func isPlainIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 63, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    // MARK: Schema

    /// Creates the schema and its tables, or brings them up to ``schemaVersion``. Every call does
    /// this once by itself; an app may call it at start-up to fail early on a bad database.
    public func migrate() async throws {
        if migrated.withLock({ $0 }) { return }
        try await transaction("migration") { connection, logger in
            try await connection.run("SELECT pg_advisory_xact_lock(hashtextextended(\("switchboard.migrate." + self.schema), 0))", logger: logger)
            try await connection.run("CREATE SCHEMA IF NOT EXISTS \(unescaped: self.schema)", logger: logger)
            try await connection.run(
                "CREATE TABLE IF NOT EXISTS \(unescaped: self.table("migration")) (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())",
                logger: logger
            )
            var current = 0
            for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM \(unescaped: self.table("migration"))", logger: logger).decode(Int.self) {
                current = version
            }
            guard current <= Self.schemaVersion else {
                throw SwitchboardError(.storageFailure, "the schema \(self.schema) is at version \(current), newer than this library's \(Self.schemaVersion)")
            }
            for (version, statements) in self.migrations.enumerated() where version + 1 > current {
                for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await connection.run("INSERT INTO \(unescaped: self.table("migration")) (version) VALUES (\(version + 1))", logger: logger)
                logger.info("migrated the store", metadata: ["schema": "\(self.schema)", "version": "\(version + 1)"])
            }
        }
        migrated.withLock { $0 = true }
    }

    /// The statements of each version, in order. The indexes are SQLite's.
    private var migrations: [[String]] {
        [
            [
                """
                CREATE TABLE \(table("conversation")) (
                    backend text NOT NULL, account text NOT NULL, id text NOT NULL,
                    position bigint GENERATED ALWAYS AS IDENTITY, value bytea NOT NULL,
                    PRIMARY KEY (backend, account, id))
                """,
                "CREATE INDEX conversation_order ON \(table("conversation")) (backend, account, position)",
                """
                CREATE TABLE \(table("message")) (
                    position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    backend text NOT NULL, account text NOT NULL, conversation text NOT NULL,
                    server_id text, client_id text,
                    pending boolean NOT NULL, sequence bigint NOT NULL, time double precision NOT NULL, tie text COLLATE "C" NOT NULL,
                    value bytea NOT NULL)
                """,
                "CREATE UNIQUE INDEX message_server ON \(table("message")) (backend, account, conversation, server_id) WHERE server_id IS NOT NULL",
                "CREATE UNIQUE INDEX message_client ON \(table("message")) (backend, account, conversation, client_id) WHERE client_id IS NOT NULL",
                "CREATE INDEX message_client_scope ON \(table("message")) (backend, account, client_id) WHERE client_id IS NOT NULL",
                "CREATE INDEX message_order ON \(table("message")) (backend, account, conversation, pending, sequence, time, tie)",
                """
                CREATE TABLE \(table("read_marker")) (
                    backend text NOT NULL, account text NOT NULL, conversation text NOT NULL, participant text NOT NULL,
                    value bytea NOT NULL, PRIMARY KEY (backend, account, conversation, participant))
                """,
                """
                CREATE TABLE \(table("sequence")) (
                    backend text NOT NULL, account text NOT NULL, conversation text NOT NULL, value bigint NOT NULL,
                    PRIMARY KEY (backend, account, conversation))
                """,
                "CREATE TABLE \(table("cursor")) (backend text NOT NULL, account text NOT NULL, value bytea NOT NULL, PRIMARY KEY (backend, account))",
                """
                CREATE TABLE \(table("outbox")) (
                    backend text NOT NULL, account text NOT NULL, client_id text NOT NULL,
                    position bigint GENERATED ALWAYS AS IDENTITY, value bytea NOT NULL,
                    PRIMARY KEY (backend, account, client_id))
                """,
                "CREATE INDEX outbox_order ON \(table("outbox")) (backend, account, position)",
                "CREATE TABLE \(table("credentials")) (backend text NOT NULL, account text NOT NULL, value bytea NOT NULL, PRIMARY KEY (backend, account))",
            ],
            // The events `PostgresEventBridge` carries between processes: a sender's instance and
            // sequence, the event's JSON, when it was written (for pruning and recovery).
            [
                """
                CREATE TABLE \(table("event")) (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    instance text NOT NULL, sequence bigint NOT NULL, payload bytea NOT NULL,
                    created timestamptz NOT NULL DEFAULT now(),
                    UNIQUE (instance, sequence))
                """,
                "CREATE INDEX event_created ON \(table("event")) (created)",
            ],
            // Fencing tokens: the newest taker of each scope (``takeOver(_:)``).
            [
                "CREATE SEQUENCE \(table("fence_token"))",
                "CREATE TABLE \(table("fence")) (backend text NOT NULL, account text NOT NULL, token bigint NOT NULL, PRIMARY KEY (backend, account))",
            ],
            // The user joins every key (`StoreScope.user`). Rows stored before may be any user's:
            // they go to `StoreScope.userBeforeUsers`, which no session reads, until the app adopts
            // them. The tables as they were at version 3 (a table added later is not this one's).
            ["conversation", "message", "read_marker", "sequence", "cursor", "outbox", "credentials", "fence"].flatMap { name in
                [
                    "ALTER TABLE \(table(name)) ADD COLUMN user_id text NOT NULL DEFAULT '\(StoreScope.userBeforeUsers)'",
                    "ALTER TABLE \(table(name)) ALTER COLUMN user_id DROP DEFAULT",
                ]
                    // A message's key is its position.
                    + (name == "message" ? [] : ["ALTER TABLE \(table(name)) DROP CONSTRAINT \(name)_pkey"])
            } + [
                "ALTER TABLE \(table("conversation")) ADD PRIMARY KEY (backend, account, user_id, id)",
                "ALTER TABLE \(table("read_marker")) ADD PRIMARY KEY (backend, account, user_id, conversation, participant)",
                "ALTER TABLE \(table("sequence")) ADD PRIMARY KEY (backend, account, user_id, conversation)",
                "ALTER TABLE \(table("cursor")) ADD PRIMARY KEY (backend, account, user_id)",
                "ALTER TABLE \(table("outbox")) ADD PRIMARY KEY (backend, account, user_id, client_id)",
                "ALTER TABLE \(table("credentials")) ADD PRIMARY KEY (backend, account, user_id)",
                "ALTER TABLE \(table("fence")) ADD PRIMARY KEY (backend, account, user_id)",
                "DROP INDEX \(table("conversation_order")), \(table("message_server")), \(table("message_client")), \(table("message_client_scope")), \(table("message_order")), \(table("outbox_order"))",
                "CREATE INDEX conversation_order ON \(table("conversation")) (backend, account, user_id, position)",
                "CREATE UNIQUE INDEX message_server ON \(table("message")) (backend, account, user_id, conversation, server_id) WHERE server_id IS NOT NULL",
                "CREATE UNIQUE INDEX message_client ON \(table("message")) (backend, account, user_id, conversation, client_id) WHERE client_id IS NOT NULL",
                "CREATE INDEX message_client_scope ON \(table("message")) (backend, account, user_id, client_id) WHERE client_id IS NOT NULL",
                "CREATE INDEX message_order ON \(table("message")) (backend, account, user_id, conversation, pending, sequence, time, tie)",
                "CREATE INDEX outbox_order ON \(table("outbox")) (backend, account, user_id, position)",
            ],
            // A fleet's API (`SwitchboardGateway`). Each bridged event's writing transaction, its
            // session and conversation: `PostgresEventLog` reads the events in a commit-safe order
            // by (transaction, id). The commands a gateway answering a request left for the
            // process that runs the session, and the sessions' users and holders.
            [
                "ALTER TABLE \(table("event")) ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id()",
                "ALTER TABLE \(table("event")) ADD COLUMN session text",
                "ALTER TABLE \(table("event")) ADD COLUMN conversation text",
                "CREATE INDEX event_position ON \(table("event")) (tx, id)",
                // The newest position pruned from the event table: a reader behind it may have
                // missed events.
                "CREATE TABLE \(table("event_horizon")) (one boolean PRIMARY KEY DEFAULT true CHECK (one), tx xid8 NOT NULL, id bigint NOT NULL)",
                "INSERT INTO \(table("event_horizon")) (tx, id) VALUES ('0', 0)",
                """
                CREATE TABLE \(table("command")) (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    session text NOT NULL, kind text NOT NULL, conversation text NOT NULL, client_id text,
                    body bytea NOT NULL, error text, created timestamptz NOT NULL DEFAULT now(),
                    UNIQUE (session, client_id))
                """,
                "CREATE INDEX command_session ON \(table("command")) (session, id)",
                """
                CREATE TABLE \(table("gateway_session")) (
                    key text PRIMARY KEY, backend text NOT NULL, account text NOT NULL, user_id text NOT NULL,
                    process text NOT NULL, since timestamptz NOT NULL DEFAULT now())
                """,
            ],
        ]
    }

    /// The tables keyed by scope: what `StoreWrite.removeEverything` empties of one, the
    /// fencing token included.
    static let scopedTables = ["conversation", "message", "read_marker", "sequence", "cursor", "outbox", "credentials", "fence"]

    /// A table of the store's schema, for SQL.
    func table(_ name: String) -> String { "\(schema).\(name)" }

    // MARK: Conversations

    public func fetchConversations(scope: StoreScope) async throws -> [ConversationInfo] {
        try await values(ConversationInfo.self, "SELECT value FROM \(unescaped: table("conversation")) WHERE \(scope: scope) ORDER BY position")
    }

    public func fetchConversation(_ id: ConversationID, scope: StoreScope) async throws -> ConversationInfo? {
        try await values(ConversationInfo.self, "SELECT value FROM \(unescaped: table("conversation")) WHERE \(scope: scope) AND id = \(id.rawValue)").first
    }

    // MARK: Messages

    /// One statement whatever the number of keys: the keys go as two array parameters.
    public func fetchMessages(
        serverIDs: [MessageID],
        clientIDs: [ClientMessageID],
        in conversation: ConversationID,
        scope: StoreScope
    ) async throws -> [Message] {
        guard !serverIDs.isEmpty || !clientIDs.isEmpty else { return [] }
        return try await values(
            Message.self,
            """
            SELECT value FROM \(unescaped: table("message")) WHERE \(scope: scope)
            AND ((conversation = \(conversation.rawValue) AND server_id = ANY(\(serverIDs.map(\.rawValue))))
                OR client_id = ANY(\(clientIDs.map(\.rawValue))))
            ORDER BY position
            """
        )
    }

    public func fetchMessages(
        in conversation: ConversationID,
        before: MessageOrderKey?,
        limit: Int,
        scope: StoreScope
    ) async throws -> [Message] {
        guard limit > 0 else { return [] }
        let newestFirst: PostgresQuery
        if let before {
            // `MessageOrderKey`'s order as a row comparison: pending last, then sequence, time, id.
            newestFirst = """
                SELECT value FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue)
                AND (pending, sequence, time, tie) < (\(before.isPending), \(before.sequence), \(before.time.timeIntervalSinceReferenceDate), \(before.tieBreaker))
                ORDER BY pending DESC, sequence DESC, time DESC, tie DESC LIMIT \(Int64(limit))
                """
        } else {
            newestFirst = """
                SELECT value FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue)
                ORDER BY pending DESC, sequence DESC, time DESC, tie DESC LIMIT \(Int64(limit))
                """
        }
        return try await values(Message.self, newestFirst).reversed()
    }

    public func countMessages(in conversation: ConversationID, scope: StoreScope) async throws -> Int {
        try await read("count") { connection, logger in
            var count = 0
            let rows = try await connection.query(
                "SELECT count(*) FROM \(unescaped: self.table("message")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue)",
                logger: logger
            )
            for try await value in rows.decode(Int.self) { count = value }
            return count
        }
    }

    public func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        try await values(
            Message.self,
            """
            SELECT value FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue) AND NOT pending
            ORDER BY pending, sequence, time, tie LIMIT 1
            """
        ).first
    }

    public func fetchPendingMessages(scope: StoreScope) async throws -> [Message] {
        try await values(Message.self, "SELECT value FROM \(unescaped: table("message")) WHERE \(scope: scope) AND pending ORDER BY position")
            .filter { $0.deliveryState == .pending }
    }

    /// Saves inbound messages (each with a server id and no client id) as ``save(_:scope:on:logger:)``
    /// saves each in turn, in one upsert per 1,000: their rows through `unnest`, in order. A
    /// server id that comes twice is written once, with its last value (one statement may not
    /// update a row twice), where it came first.
    ///
    /// Most messages are inbound: found by server id or new. An upsert on the unique index, where
    /// a lookup first would cost a statement more and, before the table's first ANALYZE, a scan of
    /// the conversation (the planner cannot tell the two indexes on the scope and conversation
    /// apart without statistics: 3.5 ms at 20,000 rows instead of 0.03).
    private func saveInbound(_ messages: [Message], scope: StoreScope, on connection: PostgresConnection, logger: Logger) async throws {
        var unique: [Message] = []
        var index: [String: Int] = [:]
        for message in messages {
            let key = message.conversationID.rawValue + "\u{0}" + (message.serverID?.rawValue ?? "")
            if let at = index[key] {
                unique[at] = message
            } else {
                index[key] = unique.count
                unique.append(message)
            }
        }
        var start = 0
        while start < unique.count {
            let chunk = unique[start..<min(unique.count, start + 1_000)]
            start += chunk.count
            let keys = chunk.map(\.orderKey)
            let conversations = chunk.map(\.conversationID.rawValue)
            let serverIDs = chunk.map { $0.serverID?.rawValue ?? "" }
            let pending = keys.map(\.isPending)
            let sequences = keys.map(\.sequence)
            let times = keys.map { $0.time.timeIntervalSinceReferenceDate }
            let ties = keys.map(\.tieBreaker)
            let values = try chunk.map { ByteBuffer(bytes: try StoredValue.encode($0)) }
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("message")) (backend, account, user_id, conversation, server_id, client_id, pending, sequence, time, tie, value)
                SELECT \(scope.backend.rawValue), \(scope.account), \(scope.userKey), c, s, NULL, p, q, t, k, v
                FROM unnest(\(conversations)::text[], \(serverIDs)::text[], \(pending)::boolean[], \(sequences)::bigint[],
                \(times)::double precision[], \(ties)::text[], \(values)::bytea[]) WITH ORDINALITY AS r(c, s, p, q, t, k, v, n)
                ORDER BY n
                ON CONFLICT (backend, account, user_id, conversation, server_id) WHERE server_id IS NOT NULL DO UPDATE SET
                client_id = excluded.client_id, pending = excluded.pending, sequence = excluded.sequence, time = excluded.time, tie = excluded.tie,
                value = excluded.value
                """,
                logger: logger
            )
        }
    }

    /// Replaces the row stored under the message's server id, else under its client id, else adds
    /// one. A row under the client id that another row's server id wins over is dropped: the
    /// confirmed message replaces its pending copy.
    private func save(_ message: Message, scope: StoreScope, on connection: PostgresConnection, logger: Logger) async throws {
        if message.serverID != nil, message.clientID == nil {
            try await saveInbound([message], scope: scope, on: connection, logger: logger)
            return
        }
        let value = try StoredValue.encode(message)
        let key = message.orderKey
        let time = key.time.timeIntervalSinceReferenceDate
        var byServer: Int64?
        if let serverID = message.serverID {
            byServer = try await first(Int64.self, "SELECT position FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(message.conversationID.rawValue) AND server_id = \(serverID.rawValue)", on: connection, logger: logger)
        }
        var byClient: Int64?
        if let clientID = message.clientID {
            byClient = try await first(Int64.self, "SELECT position FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(message.conversationID.rawValue) AND client_id = \(clientID.rawValue)", on: connection, logger: logger)
        }
        if let byServer, let byClient, byServer != byClient {
            try await connection.run("DELETE FROM \(unescaped: table("message")) WHERE position = \(byClient)", logger: logger)
        }
        if let row = byServer ?? byClient {
            try await connection.run(
                """
                UPDATE \(unescaped: table("message")) SET server_id = \(message.serverID?.rawValue), client_id = \(message.clientID?.rawValue),
                pending = \(key.isPending), sequence = \(key.sequence), time = \(time), tie = \(key.tieBreaker), value = \(value)
                WHERE position = \(row)
                """,
                logger: logger
            )
        } else {
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("message")) (backend, account, user_id, conversation, server_id, client_id, pending, sequence, time, tie, value)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(message.conversationID.rawValue), \(message.serverID?.rawValue),
                \(message.clientID?.rawValue), \(key.isPending), \(key.sequence), \(time), \(key.tieBreaker), \(value))
                """,
                logger: logger
            )
        }
    }

    // MARK: Read markers, sequences, cursor

    public func fetchReadMarkers(in conversation: ConversationID, scope: StoreScope) async throws -> [ParticipantID: ChatEvent.ReadMarker] {
        try await read("read markers") { connection, logger in
            var markers: [ParticipantID: ChatEvent.ReadMarker] = [:]
            let rows = try await connection.query(
                "SELECT participant, value FROM \(unescaped: self.table("read_marker")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue)",
                logger: logger
            )
            for try await (participant, value) in rows.decode((String, Data).self) {
                markers[ParticipantID(participant)] = try StoredValue.decode(ChatEvent.ReadMarker.self, value)
            }
            return markers
        }
    }

    public func fetchSequences(scope: StoreScope) async throws -> [ConversationID: Int64] {
        try await read("sequences") { connection, logger in
            var sequences: [ConversationID: Int64] = [:]
            let rows = try await connection.query("SELECT conversation, value FROM \(unescaped: self.table("sequence")) WHERE \(scope: scope)", logger: logger)
            for try await (conversation, value) in rows.decode((String, Int64).self) { sequences[ConversationID(conversation)] = value }
            return sequences
        }
    }

    public func fetchCursor(scope: StoreScope) async throws -> SyncCursor? {
        try await values(SyncCursor.self, "SELECT value FROM \(unescaped: table("cursor")) WHERE \(scope: scope)").first
    }

    // MARK: Outbox and credentials

    public func fetchOutbox(scope: StoreScope) async throws -> [OutboxEntry] {
        try await values(OutboxEntry.self, "SELECT value FROM \(unescaped: table("outbox")) WHERE \(scope: scope) ORDER BY position")
    }

    public func fetchCredentials(scope: StoreScope) async throws -> Credentials {
        try await values(Credentials.self, "SELECT value FROM \(unescaped: table("credentials")) WHERE \(scope: scope)").first ?? Credentials()
    }

    // MARK: Transactions

    public func apply(_ writes: [StoreWrite], scope: StoreScope) async throws {
        guard !writes.isEmpty else { return }
        try await migrate()
        let started = ContinuousClock.now
        defer { onWrite?(ContinuousClock.now - started) }
        let fence = fences.withLock { $0[scope] }
        // One transaction: a write that fails, or a value that does not encode, rolls it all back.
        try await transaction("write") { connection, logger in
            try await connection.run("SELECT pg_advisory_xact_lock(hashtextextended(\(self.lockKey(scope)), 0))", logger: logger)
            if let fence { try await self.checkFence(fence, scope: scope, on: connection, logger: logger) }
            // Inbound messages (a server id and no client id) in a row, across the batch's
            // writes, go in one statement; anything else first writes those before it.
            var inbound: [Message] = []
            func writeInbound() async throws {
                try await self.saveInbound(inbound, scope: scope, on: connection, logger: logger)
                inbound = []
            }
            for write in writes {
                guard case .saveMessages(let messages) = write else {
                    try await writeInbound()
                    try await self.perform(write, scope: scope, on: connection, logger: logger)
                    continue
                }
                for message in messages {
                    if message.serverID != nil, message.clientID == nil {
                        inbound.append(message)
                    } else {
                        try await writeInbound()
                        try await self.save(message, scope: scope, on: connection, logger: logger)
                    }
                }
            }
            try await writeInbound()
        }
    }

    /// The key of the advisory lock that serializes the scope's writes: the schema's own, so
    /// stores in other schemas of the database (other deployments, tests) never wait on it.
    private func lockKey(_ scope: StoreScope) -> String { "switchboard.scope.\(schema).\(scope)" }

    // MARK: Rows stored before users

    /// Gives the rows this schema held before the user joined its keys (version 4 put them under
    /// `StoreScope.userBeforeUsers`) to `user` of `backend` and `account`: call it once, before
    /// that user's first session, when the app knows whose they were. One transaction; when
    /// `user` already has a row with the same key nothing changes and it throws.
    ///
    /// - Returns: how many rows changed hands.
    /// - Throws: `SwitchboardError.Code.storageFailure`.
    @discardableResult
    public func adoptRowsStoredBeforeUsers(backend: BackendName, account: String, as user: String?) async throws -> Int {
        try await migrate()
        let adopter = StoreScope(backend: backend, account: account, user: user)
        return try await transaction("adoption") { connection, logger in
            var changed = 0
            for name in Self.scopedTables {
                let rows = try await connection.query(
                    """
                    WITH moved AS (UPDATE \(unescaped: self.table(name)) SET user_id = \(adopter.userKey)
                    WHERE backend = \(backend.rawValue) AND account = \(account) AND user_id = \(StoreScope.userBeforeUsers) RETURNING 1)
                    SELECT count(*)::bigint FROM moved
                    """,
                    logger: logger
                )
                for try await count in rows.decode(Int64.self) { changed += Int(count) }
            }
            return changed
        }
    }

    // MARK: Fencing

    /// Takes `scope` over for this store: a fencing token newer than any other taker's. From then
    /// on each write of the scope checks, in its transaction, that no one has taken the scope
    /// over since, and fails with `storageFailure` (vendor code `fenced`) when someone has — so
    /// a process that lost a session and has not noticed yet (a network partition) writes
    /// nothing over the process that runs it now. Call it when a session starts in this process,
    /// before the session reads the store.
    ///
    /// The token is taken under the scope's write lock: a write of the last taker that began
    /// before it commits first, and the new session reads what it wrote.
    @discardableResult
    public func takeOver(_ scope: StoreScope) async throws -> Int64 {
        try await migrate()
        let token = try await transaction("fencing") { connection, logger in
            try await connection.run("SELECT pg_advisory_xact_lock(hashtextextended(\(self.lockKey(scope)), 0))", logger: logger)
            var token: Int64 = 0
            let rows = try await connection.query(
                """
                INSERT INTO \(unescaped: self.table("fence")) (backend, account, user_id, token)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), nextval(\(self.table("fence_token"))))
                ON CONFLICT (backend, account, user_id) DO UPDATE SET token = excluded.token RETURNING token
                """,
                logger: logger
            )
            for try await value in rows.decode(Int64.self) { token = value }
            return token
        }
        fences.withLock { $0[scope] = token }
        return token
    }

    /// Writes of `scope` stop checking this store's fencing token (its session has ended).
    public func endTakeOver(_ scope: StoreScope) {
        fences.withLock { $0[scope] = nil }
    }

    private func checkFence(_ token: Int64, scope: StoreScope, on connection: PostgresConnection, logger: Logger) async throws {
        let newest = try await first(Int64.self, "SELECT token FROM \(unescaped: table("fence")) WHERE \(scope: scope)", on: connection, logger: logger)
        guard newest == token else {
            throw SwitchboardError(
                .storageFailure,
                "the session of \(scope) was taken over by another process (fencing token \(token), newest \(newest.map(String.init) ?? "none")): this write is refused",
                vendorCode: "fenced"
            )
        }
    }

    private func perform(_ write: StoreWrite, scope: StoreScope, on connection: PostgresConnection, logger: Logger) async throws {
        switch write {
        case .saveConversation(let conversation):
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("conversation")) (backend, account, user_id, id, value)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(conversation.id.rawValue), \(try StoredValue.encode(conversation)))
                ON CONFLICT (backend, account, user_id, id) DO UPDATE SET value = excluded.value
                """,
                logger: logger
            )
        case .removeConversation(let id):
            try await connection.run("DELETE FROM \(unescaped: table("conversation")) WHERE \(scope: scope) AND id = \(id.rawValue)", logger: logger)
            for name in ["message", "read_marker", "sequence"] {
                try await connection.run("DELETE FROM \(unescaped: table(name)) WHERE \(scope: scope) AND conversation = \(id.rawValue)", logger: logger)
            }
        case .saveMessages(let messages):
            // `apply` writes messages itself, inbound ones many to a statement; one at a time here.
            for message in messages { try await save(message, scope: scope, on: connection, logger: logger) }
        case .removeMessage(let id, let conversation):
            try await connection.run(
                "DELETE FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue) AND server_id = \(id.rawValue)",
                logger: logger
            )
        case .removeAllMessages(let conversation):
            try await connection.run("DELETE FROM \(unescaped: table("message")) WHERE \(scope: scope) AND conversation = \(conversation.rawValue)", logger: logger)
        case .saveReadMarker(let marker, let participant, let conversation):
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("read_marker")) (backend, account, user_id, conversation, participant, value)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(conversation.rawValue), \(participant.rawValue), \(try StoredValue.encode(marker)))
                ON CONFLICT (backend, account, user_id, conversation, participant) DO UPDATE SET value = excluded.value
                """,
                logger: logger
            )
        case .saveSequence(let sequence, let conversation):
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("sequence")) (backend, account, user_id, conversation, value)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(conversation.rawValue), \(sequence))
                ON CONFLICT (backend, account, user_id, conversation) DO UPDATE SET value = excluded.value
                """,
                logger: logger
            )
        case .saveCursor(let cursor?):
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("cursor")) (backend, account, user_id, value) VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(try StoredValue.encode(cursor)))
                ON CONFLICT (backend, account, user_id) DO UPDATE SET value = excluded.value
                """,
                logger: logger
            )
        case .saveCursor(nil):
            try await connection.run("DELETE FROM \(unescaped: table("cursor")) WHERE \(scope: scope)", logger: logger)
        case .saveOutboxEntry(let entry):
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("outbox")) (backend, account, user_id, client_id, value)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(entry.clientID.rawValue), \(try StoredValue.encode(entry)))
                ON CONFLICT (backend, account, user_id, client_id) DO UPDATE SET value = excluded.value
                """,
                logger: logger
            )
        case .removeOutboxEntry(let clientID):
            try await connection.run("DELETE FROM \(unescaped: table("outbox")) WHERE \(scope: scope) AND client_id = \(clientID.rawValue)", logger: logger)
        case .saveCredentials(let credentials):
            try await connection.run(
                """
                INSERT INTO \(unescaped: table("credentials")) (backend, account, user_id, value)
                VALUES (\(scope.backend.rawValue), \(scope.account), \(scope.userKey), \(try StoredValue.encode(credentials)))
                ON CONFLICT (backend, account, user_id) DO UPDATE SET value = excluded.value
                """,
                logger: logger
            )
        case .removeEverything:
            for name in Self.scopedTables {
                try await connection.run("DELETE FROM \(unescaped: table(name)) WHERE \(scope: scope)", logger: logger)
            }
        }
    }

    // MARK: Plumbing

    /// The decoded `value` column of every row `query` selects.
    private func values<T: Decodable & Sendable>(_ type: T.Type, _ query: PostgresQuery) async throws -> [T] {
        try await read("read of \(type)") { connection, logger in
            var values: [T] = []
            for try await value in try await connection.query(query, logger: logger).decode(Data.self) {
                values.append(try StoredValue.decode(type, value))
            }
            return values
        }
    }

    /// The first column of the first row `query` selects, in a transaction's connection.
    private func first<T: PostgresDecodable & Sendable>(_ type: T.Type, _ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> T? {
        for try await value in try await connection.query(query, logger: logger).decode(type) { return value }
        return nil
    }

    /// One read on a pooled connection (a single statement is its own transaction).
    private func read<T: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T) async throws -> T {
        try await migrate()
        // A read a cancelled caller no longer wants may stop with it: it runs in the caller's task.
        do {
            return try await client.withConnection { connection in try await body(connection, self.logger) }
        } catch {
            throw Self.classify(error, what: "PostgreSQL \(what)")
        }
    }

    /// One transaction on a pooled connection: committed when `body` returns, rolled back when it
    /// throws, and run to its end even when the calling task is cancelled. The transaction runs in
    /// a task of its own that the caller awaits (never leaves behind): PostgresNIO stops a
    /// cancelled task's statements, and a session that closes right after a send was confirmed
    /// must not lose the write that ends its outbox entry. Swift has no structured way to keep a
    /// child from its parent's cancellation; the SQLite store gets the same by running its
    /// transactions synchronously.
    private func transaction<T: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T) async throws -> T {
        do {
            return try await Task {
                try await self.client.withTransaction(logger: self.logger) { connection in try await body(connection, self.logger) }
            }.value
        } catch {
            throw Self.classify(error, what: "PostgreSQL \(what)")
        }
    }

    /// A failure as a ``SwitchboardError``: the server's reason where there is one (PostgresNIO's
    /// own description hides it to keep query values out of logs; the server's message names none),
    /// the failing part of a transaction, a column that does not decode.
    package static func classify(_ error: any Error, what: String) -> SwitchboardError {
        switch error {
        case let error as SwitchboardError:
            return error
        case let error as PostgresTransactionError:
            // What failed first says most: the body, else the BEGIN, the COMMIT or the ROLLBACK.
            guard let cause = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError else {
                return SwitchboardError(.storageFailure, "\(what) failed", underlying: error)
            }
            return classify(cause, what: what)
        case let error as PSQLError:
            if let server = error.serverInfo {
                let state = server[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                return SwitchboardError(.storageFailure, "\(what) failed: \(server[.message] ?? "the server refused")\(state)", underlying: error)
            }
            return SwitchboardError(.storageFailure, "\(what) failed: \(error.code)", underlying: error)
        case let error as PostgresDecodingError:
            return SwitchboardError(.storageFailure, "\(what) failed: a column did not decode (\(error.code))", underlying: error)
        default:
            return SwitchboardError(.storageFailure, "\(what) failed", underlying: error)
        }
    }
}

extension PostgresQuery.StringInterpolation {
    /// The condition every query of a scope starts with, its three values bound.
    fileprivate mutating func appendInterpolation(scope: StoreScope) {
        appendLiteral("backend = ")
        appendInterpolation(scope.backend.rawValue)
        appendLiteral(" AND account = ")
        appendInterpolation(scope.account)
        appendLiteral(" AND user_id = ")
        appendInterpolation(scope.userKey)
    }
}

extension PostgresConnection {
    /// Runs a statement whose rows are not wanted, reading its answer to the end: only then has
    /// it run, and only then does a failure in it surface here.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

extension PostgresClient {
    /// Runs a statement whose rows are not wanted on a pooled connection, to the end of its answer.
    package func run(_ query: PostgresQuery, logger: Logger? = nil) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

extension StoreScope {
    /// The `user_id` column: an anonymous user is `''`.
    fileprivate var userKey: String { user ?? "" }
}
