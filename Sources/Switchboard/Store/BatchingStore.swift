
/// The store as the engine's loop sees it: while a batch is open, writes are kept and applied
/// together, as one transaction, when the batch commits; reads by key see the kept writes. A
/// read that cannot be answered from them (a page, a list) first applies what is kept, so it
/// reads the truth. With no batch open every call goes straight to the store.
///
/// The loop opens a batch for inbound updates that arrive together, so a burst of messages and
/// the sequence or cursor after them cost one transaction instead of one per write. Only the loop
/// uses it; the lock guards the kept writes and the overlay.
final class BatchingStore: ChatStore {
    private struct Batch {
        var writes: [StoreWrite] = []
        var conversations: [ConversationID: ConversationInfo] = [:]
        var messagesByServerID: [ConversationID: [MessageID: Message]] = [:]
        var messagesByClientID: [ClientMessageID: Message] = [:]
    }

    let base: any ChatStore
    private let batch = Locked<Batch?>(nil)

    init(_ base: any ChatStore) {
        self.base = base
    }

    var isBatching: Bool { batch.withLock { $0 != nil } }

    /// Starts keeping writes.
    func begin() {
        batch.withLock { $0 = Batch() }
    }

    /// Applies the kept writes as one transaction and stops keeping them.
    ///
    /// - Returns: how many writes the transaction held.
    @discardableResult
    func commit(scope: StoreScope) async throws -> Int {
        try await applyKept(keepingOn: false, scope: scope)
    }

    /// Applies what is kept so far and goes on keeping: before a read the overlay cannot answer.
    private func flush(scope: StoreScope) async throws {
        try await applyKept(keepingOn: true, scope: scope)
    }

    /// Applies the kept writes as one transaction; the batch then starts empty, or ends.
    @discardableResult
    private func applyKept(keepingOn: Bool, scope: StoreScope) async throws -> Int {
        let writes: [StoreWrite] = batch.withLock { batch in
            guard let kept = batch else { return [] }
            batch = keepingOn ? Batch() : nil
            return kept.writes
        }
        if !writes.isEmpty { try await base.apply(writes, scope: scope) }
        return writes.count
    }

    // MARK: Reads by key: the overlay first

    func fetchConversation(_ id: ConversationID, scope: StoreScope) async throws -> ConversationInfo? {
        if let kept = batch.withLock({ $0?.conversations[id] }) { return kept }
        return try await base.fetchConversation(id, scope: scope)
    }

    func fetchMessage(serverID: MessageID, in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        if let kept = batch.withLock({ $0?.messagesByServerID[conversation]?[serverID] }) { return kept }
        return try await base.fetchMessage(serverID: serverID, in: conversation, scope: scope)
    }

    func fetchMessage(clientID: ClientMessageID, scope: StoreScope) async throws -> Message? {
        if let kept = batch.withLock({ $0?.messagesByClientID[clientID] }) { return kept }
        return try await base.fetchMessage(clientID: clientID, scope: scope)
    }

    func fetchMessages(
        serverIDs: [MessageID],
        clientIDs: [ClientMessageID],
        in conversation: ConversationID,
        scope: StoreScope
    ) async throws -> [Message] {
        let (kept, missingServerIDs, missingClientIDs) = batch.withLock { batch in
            guard let batch else { return ([Message](), serverIDs, clientIDs) }
            var kept: [Message] = []
            var missingServerIDs: [MessageID] = []
            var missingClientIDs: [ClientMessageID] = []
            for id in serverIDs {
                if let message = batch.messagesByServerID[conversation]?[id] {
                    kept.append(message)
                } else {
                    missingServerIDs.append(id)
                }
            }
            for id in clientIDs {
                if let message = batch.messagesByClientID[id] {
                    kept.append(message)
                } else {
                    missingClientIDs.append(id)
                }
            }
            return (kept, missingServerIDs, missingClientIDs)
        }
        guard !missingServerIDs.isEmpty || !missingClientIDs.isEmpty else { return kept }
        return kept + (try await base.fetchMessages(serverIDs: missingServerIDs, clientIDs: missingClientIDs, in: conversation, scope: scope))
    }

    // MARK: Other reads: what is kept is applied first

    func fetchConversations(scope: StoreScope) async throws -> [ConversationInfo] {
        try await flush(scope: scope)
        return try await base.fetchConversations(scope: scope)
    }

    func fetchMessages(in conversation: ConversationID, before: MessageOrderKey?, limit: Int, scope: StoreScope) async throws -> [Message] {
        try await flush(scope: scope)
        return try await base.fetchMessages(in: conversation, before: before, limit: limit, scope: scope)
    }

    func countMessages(in conversation: ConversationID, scope: StoreScope) async throws -> Int {
        try await flush(scope: scope)
        return try await base.countMessages(in: conversation, scope: scope)
    }

    func fetchReadMarkers(in conversation: ConversationID, scope: StoreScope) async throws -> [ParticipantID: ChatEvent.ReadMarker] {
        try await flush(scope: scope)
        return try await base.fetchReadMarkers(in: conversation, scope: scope)
    }

    func fetchSequences(scope: StoreScope) async throws -> [ConversationID: Int64] {
        try await flush(scope: scope)
        return try await base.fetchSequences(scope: scope)
    }

    func fetchCursor(scope: StoreScope) async throws -> SyncCursor? {
        try await flush(scope: scope)
        return try await base.fetchCursor(scope: scope)
    }

    func fetchOutbox(scope: StoreScope) async throws -> [OutboxEntry] {
        try await flush(scope: scope)
        return try await base.fetchOutbox(scope: scope)
    }

    func fetchCredentials(scope: StoreScope) async throws -> Credentials {
        try await flush(scope: scope)
        return try await base.fetchCredentials(scope: scope)
    }

    func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        try await flush(scope: scope)
        return try await base.fetchOldestConfirmedMessage(in: conversation, scope: scope)
    }

    func fetchPendingMessages(scope: StoreScope) async throws -> [Message] {
        try await flush(scope: scope)
        return try await base.fetchPendingMessages(scope: scope)
    }

    // MARK: Writes: kept while a batch is open

    func apply(_ writes: [StoreWrite], scope: StoreScope) async throws {
        // A removal's effect on the overlay is not tracked: what is kept is applied with it.
        let removes = writes.contains { write in
            switch write {
            case .removeConversation, .removeMessage, .removeAllMessages: true
            default: false
            }
        }
        let kept: Bool = batch.withLock { batch in
            guard batch != nil, !removes else { return false }
            batch!.writes += writes
            for write in writes {
                switch write {
                case .saveConversation(let conversation):
                    batch!.conversations[conversation.id] = conversation
                case .saveMessages(let messages):
                    for message in messages {
                        if let serverID = message.serverID {
                            batch!.messagesByServerID[message.conversationID, default: [:]][serverID] = message
                        }
                        if let clientID = message.clientID { batch!.messagesByClientID[clientID] = message }
                    }
                default:
                    break
                }
            }
            return true
        }
        if kept { return }
        try await flush(scope: scope)
        try await base.apply(writes, scope: scope)
    }

    func saveConversation(_ conversation: ConversationInfo, scope: StoreScope) async throws {
        try await apply([.saveConversation(conversation)], scope: scope)
    }

    func removeConversation(_ id: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeConversation(id)], scope: scope)
    }

    func saveMessages(_ messages: [Message], scope: StoreScope) async throws {
        try await apply([.saveMessages(messages)], scope: scope)
    }

    func removeMessage(serverID: MessageID, in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeMessage(serverID, in: conversation)], scope: scope)
    }

    func removeAllMessages(in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.removeAllMessages(in: conversation)], scope: scope)
    }

    func saveReadMarker(_ marker: ChatEvent.ReadMarker, of participant: ParticipantID, in conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.saveReadMarker(marker, of: participant, in: conversation)], scope: scope)
    }

    func saveSequence(_ sequence: Int64, for conversation: ConversationID, scope: StoreScope) async throws {
        try await apply([.saveSequence(sequence, for: conversation)], scope: scope)
    }

    func saveCursor(_ cursor: SyncCursor?, scope: StoreScope) async throws {
        try await apply([.saveCursor(cursor)], scope: scope)
    }

    func saveOutboxEntry(_ entry: OutboxEntry, scope: StoreScope) async throws {
        try await apply([.saveOutboxEntry(entry)], scope: scope)
    }

    func removeOutboxEntry(_ clientID: ClientMessageID, scope: StoreScope) async throws {
        try await apply([.removeOutboxEntry(clientID)], scope: scope)
    }

    func saveCredentials(_ credentials: Credentials, scope: StoreScope) async throws {
        try await apply([.saveCredentials(credentials)], scope: scope)
    }
}
