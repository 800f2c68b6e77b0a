/// A store bound to one scope: the rows of one backend, account and user, read and written
/// without naming the scope again.
///
/// A ``ChatStore`` serves many scopes (one SQLite file or PostgreSQL schema holds every account
/// and user of a device or a gateway), so its requirements take the scope; whoever works for one
/// scope binds it once. ``ChatSession/store`` is its session's store bound to its
/// ``ChatSession/scope``:
///
/// ```swift
/// let newest = try await session.store.fetchMessages(in: conversation, before: nil, limit: 50)
/// ```
public struct ScopedChatStore: Sendable {
    /// The store, with all its scopes.
    public let base: any ChatStore
    public let scope: StoreScope

    public init(_ base: any ChatStore, scope: StoreScope) {
        self.base = base
        self.scope = scope
    }

    /// Applies `writes` in order as one transaction (``ChatStore/apply(_:scope:)``).
    public func apply(_ writes: [StoreWrite]) async throws {
        try await base.apply(writes, scope: scope)
    }

    /// The conversations, in the order they were first saved.
    public func fetchConversations() async throws -> [ConversationInfo] {
        try await base.fetchConversations(scope: scope)
    }

    public func fetchConversation(_ id: ConversationID) async throws -> ConversationInfo? {
        try await base.fetchConversation(id, scope: scope)
    }

    /// The stored messages with any of `serverIDs` in `conversation` or any of `clientIDs`, in
    /// one read (``ChatStore/fetchMessages(serverIDs:clientIDs:in:scope:)``).
    public func fetchMessages(serverIDs: [MessageID], clientIDs: [ClientMessageID], in conversation: ConversationID) async throws -> [Message] {
        try await base.fetchMessages(serverIDs: serverIDs, clientIDs: clientIDs, in: conversation, scope: scope)
    }

    /// The `limit` newest messages older than `before` (all when `nil`), oldest first.
    public func fetchMessages(in conversation: ConversationID, before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        try await base.fetchMessages(in: conversation, before: before, limit: limit, scope: scope)
    }

    public func fetchMessage(serverID: MessageID, in conversation: ConversationID) async throws -> Message? {
        try await base.fetchMessage(serverID: serverID, in: conversation, scope: scope)
    }

    /// The app's own send with `clientID`, in any conversation of the scope.
    public func fetchMessage(clientID: ClientMessageID) async throws -> Message? {
        try await base.fetchMessage(clientID: clientID, scope: scope)
    }

    public func countMessages(in conversation: ConversationID) async throws -> Int {
        try await base.countMessages(in: conversation, scope: scope)
    }

    /// The oldest message of a conversation that the server has confirmed.
    public func fetchOldestConfirmedMessage(in conversation: ConversationID) async throws -> Message? {
        try await base.fetchOldestConfirmedMessage(in: conversation, scope: scope)
    }

    /// The messages still waiting for the server.
    public func fetchPendingMessages() async throws -> [Message] {
        try await base.fetchPendingMessages(scope: scope)
    }

    /// The participants' read markers in a conversation.
    public func fetchReadMarkers(in conversation: ConversationID) async throws -> [ParticipantID: ChatEvent.ReadMarker] {
        try await base.fetchReadMarkers(in: conversation, scope: scope)
    }

    /// The sequence delivered so far per conversation.
    public func fetchSequences() async throws -> [ConversationID: Int64] {
        try await base.fetchSequences(scope: scope)
    }

    /// The account-wide cursor.
    public func fetchCursor() async throws -> SyncCursor? {
        try await base.fetchCursor(scope: scope)
    }

    /// Outbox entries, oldest first.
    public func fetchOutbox() async throws -> [OutboxEntry] {
        try await base.fetchOutbox(scope: scope)
    }

    public func fetchCredentials() async throws -> Credentials {
        try await base.fetchCredentials(scope: scope)
    }
}

extension ChatStore {
    /// This store bound to `scope`.
    public func scoped(to scope: StoreScope) -> ScopedChatStore {
        ScopedChatStore(self, scope: scope)
    }
}
