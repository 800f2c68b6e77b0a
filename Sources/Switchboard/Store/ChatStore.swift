/// Whose data a store call is about: the backend kind, an account key the app chooses (several
/// accounts of one backend can share a store) and the user (the Webim visitor, the CXone
/// customer, the Voximplant-style or Matrix user). Several sessions can share one store with
/// different scopes; none sees another's rows.
public struct StoreScope: Sendable, Hashable, Codable, CustomStringConvertible {
    public var backend: BackendName
    public var account: String
    /// The user the rows belong to (``ChatBackend/storeUser``): a session for another user on the
    /// same store sees none of them. `nil` where the backend does not know the user before it
    /// connects (an anonymous visitor, a Matrix access token).
    public var user: String?

    /// An empty `user` is no user: both name the same rows.
    public init(backend: BackendName, account: String, user: String? = nil) {
        self.backend = backend
        self.account = account
        self.user = user?.isEmpty == true ? nil : user
    }

    public var description: String { user.map { "\(backend)/\(account)/\($0)" } ?? "\(backend)/\(account)" }

    /// The user the durable stores gave the rows they held before the user joined the keys: no
    /// session reads them (they may be any user's), until the app hands them to the user they
    /// belong to (`adoptRowsStoredBeforeUsers(backend:account:as:)` on the SQLite and PostgreSQL
    /// stores).
    public static let userBeforeUsers = "~stored-before-users"
}

/// Where a session keeps what it knows: conversations with their participants and read
/// markers, messages (unique per scope, conversation and server id), sync cursors, the outbox
/// and the backend's credentials.
///
/// Every write goes through ``apply(_:scope:)``, which makes several writes one transaction — all
/// of them or none — so a send (its message and its outbox entry) or a send's outcome (the
/// confirmed message and the end of its outbox entry) can never be half stored by a crash. The
/// one-write helpers (`saveConversation`, `saveMessages`, `saveCredentials` …) are extensions on
/// it. Every method is one atomic step; implementations make them safe to call concurrently. A
/// message is identified by its server id, or by its client id until the server has confirmed
/// it: saving a message that now has a server id replaces the row stored under its client id.
///
/// `InMemoryChatStore` ships in the core; `SwitchboardSQLite` and `SwitchboardPostgres` provide
/// the durable stores. `StoreContract` in `SwitchboardTestKit` checks a store against all of
/// this.
public protocol ChatStore: Sendable {
    /// Applies `writes` in order as one transaction: after a crash either all of them are
    /// stored or none.
    func apply(_ writes: [StoreWrite], scope: StoreScope) async throws

    /// The conversations, in the order they were first saved.
    func fetchConversations(scope: StoreScope) async throws -> [ConversationInfo]
    func fetchConversation(_ id: ConversationID, scope: StoreScope) async throws -> ConversationInfo?

    /// The stored messages with any of `serverIDs` in `conversation` or any of `clientIDs` (the
    /// app's own sends, in any conversation of the scope), in one read: what incoming messages
    /// are reconciled with. Each match comes at least once, in no set order.
    func fetchMessages(
        serverIDs: [MessageID],
        clientIDs: [ClientMessageID],
        in conversation: ConversationID,
        scope: StoreScope
    ) async throws -> [Message]
    /// The `limit` newest messages older than `before` (all when `nil`), oldest first.
    func fetchMessages(
        in conversation: ConversationID,
        before: MessageOrderKey?,
        limit: Int,
        scope: StoreScope
    ) async throws -> [Message]
    func countMessages(in conversation: ConversationID, scope: StoreScope) async throws -> Int
    /// The oldest message of a conversation that the server has confirmed (has a server id),
    /// without reading the rest: where history paging continues from.
    func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) async throws -> Message?
    /// The messages of the scope still waiting for the server: no server id and
    /// ``Message/DeliveryState/pending``. Read at load to repair a send whose outbox entry is
    /// missing.
    func fetchPendingMessages(scope: StoreScope) async throws -> [Message]

    /// The participants' read markers in a conversation.
    func fetchReadMarkers(
        in conversation: ConversationID,
        scope: StoreScope
    ) async throws -> [ParticipantID: ChatEvent.ReadMarker]
    /// The sequence delivered so far per conversation.
    func fetchSequences(scope: StoreScope) async throws -> [ConversationID: Int64]
    /// The account-wide cursor.
    func fetchCursor(scope: StoreScope) async throws -> SyncCursor?
    /// Outbox entries, oldest first.
    func fetchOutbox(scope: StoreScope) async throws -> [OutboxEntry]
    func fetchCredentials(scope: StoreScope) async throws -> Credentials
}

/// One write of a ``ChatStore/apply(_:scope:)`` transaction.
public enum StoreWrite: Sendable, Hashable {
    /// Inserts or replaces the conversation; a new one goes last in the first-saved order.
    case saveConversation(ConversationInfo)
    /// Removes the conversation with its messages, read markers and sequence.
    case removeConversation(ConversationID)
    /// Inserts or replaces each message: by server id, else by client id (a confirmed message
    /// replaces its pending copy).
    case saveMessages([Message])
    case removeMessage(MessageID, in: ConversationID)
    case removeAllMessages(in: ConversationID)
    /// A participant's read marker in a conversation, replacing the one before.
    case saveReadMarker(ChatEvent.ReadMarker, of: ParticipantID, in: ConversationID)
    /// The sequence delivered so far in a conversation.
    case saveSequence(Int64, for: ConversationID)
    /// The account-wide cursor; `nil` removes it.
    case saveCursor(SyncCursor?)
    /// Inserts or replaces an outbox entry, keeping its place in the FIFO order.
    case saveOutboxEntry(OutboxEntry)
    case removeOutboxEntry(ClientMessageID)
    /// Replaces the credentials (the engine merges them before).
    case saveCredentials(Credentials)
    /// Removes every row of the scope: its conversations, messages, read markers, sequences,
    /// cursor, outbox and credentials (``ChatSession/forgetUser()``).
    case removeEverything
}

// One write, or one lookup, at a time: each a transaction of its own.
extension ChatStore {
    public func saveConversation(_ conversation: ConversationInfo, scope: StoreScope) async throws {
        try await apply([.saveConversation(conversation)], scope: scope)
    }

    /// Removes the conversation with its messages, read markers and sequence.
    public func removeConversation(_ id: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeConversation(id)], scope: scope)
    }

    /// Inserts or replaces, in one transaction.
    public func saveMessages(_ messages: [Message], scope: StoreScope) async throws {
        try await apply([.saveMessages(messages)], scope: scope)
    }

    public func removeMessage(serverID: MessageID, in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeMessage(serverID, in: conversation)], scope: scope)
    }

    public func removeAllMessages(in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeAllMessages(in: conversation)], scope: scope)
    }

    public func saveReadMarker(_ marker: ChatEvent.ReadMarker, of participant: ParticipantID, in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.saveReadMarker(marker, of: participant, in: conversation)], scope: scope)
    }

    public func saveSequence(_ sequence: Int64, for conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.saveSequence(sequence, for: conversation)], scope: scope)
    }

    public func saveCursor(_ cursor: SyncCursor?, scope: StoreScope) async throws {
        try await apply([.saveCursor(cursor)], scope: scope)
    }

    public func saveOutboxEntry(_ entry: OutboxEntry, scope: StoreScope) async throws {
        try await apply([.saveOutboxEntry(entry)], scope: scope)
    }

    public func removeOutboxEntry(_ clientID: ClientMessageID, scope: StoreScope) async throws {
        try await apply([.removeOutboxEntry(clientID)], scope: scope)
    }

    public func saveCredentials(_ credentials: Credentials, scope: StoreScope) async throws {
        try await apply([.saveCredentials(credentials)], scope: scope)
    }

    public func fetchMessage(serverID: MessageID, in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        try await fetchMessages(serverIDs: [serverID], clientIDs: [], in: conversation, scope: scope).first
    }

    /// The app's own send with `clientID`, in any conversation of the scope.
    public func fetchMessage(clientID: ClientMessageID, scope: StoreScope) async throws -> Message? {
        try await fetchMessages(serverIDs: [], clientIDs: [clientID], in: "", scope: scope).first
    }
}
