/// A ``ChatStore`` in memory: the default for sessions that need no persistence, and the
/// store tests use. Nothing survives the process.
///
/// Its calls run on the caller's thread under a lock (it is no actor): a session's loop reads and
/// writes it without a hop to another executor, which an actor's every call was (#33).
///
/// The lock guards every scope's data.
public final class InMemoryChatStore: ChatStore {
    private struct Conversations {
        var infos: [ConversationID: ConversationInfo] = [:]
        var order: [ConversationID] = []
        var messages: [ConversationID: MessageTable] = [:]
        var readMarkers: [ConversationID: [ParticipantID: ChatEvent.ReadMarker]] = [:]
        var sequences: [ConversationID: Int64] = [:]
        var cursor: SyncCursor?
        var outbox: [OutboxEntry] = []
        var credentials = Credentials()
    }

    /// Messages of one conversation with indexes by server and client id, and by order: a page
    /// is a binary search and a slice, not a sort of the whole history.
    private struct MessageTable {
        var rows: [Int: Message] = [:]
        var byServerID: [MessageID: Int] = [:]
        var byClientID: [ClientMessageID: Int] = [:]
        /// Every row by ``Message/orderKey``, oldest first.
        var ordered: [(key: MessageOrderKey, row: Int)] = []
        var nextRow = 0

        /// The first position whose key is not below `key`.
        func position(of key: MessageOrderKey) -> Int {
            ordered.lowerBound(of: key, orderKey: \.key)
        }

        mutating func unorder(_ row: Int, key: MessageOrderKey) {
            var index = position(of: key)
            while index < ordered.count, ordered[index].row != row { index += 1 }
            if index < ordered.count { ordered.remove(at: index) }
        }

        /// The `limit` newest messages before `before`, oldest first.
        func page(before: MessageOrderKey?, limit: Int) -> [Message] {
            let end = before.map(position(of:)) ?? ordered.count
            return ordered[max(0, end - max(0, limit))..<end].compactMap { rows[$0.row] }
        }

        mutating func save(_ message: Message) {
            let byServer = message.serverID.flatMap { byServerID[$0] }
            if let byServer, let byClient = message.clientID.flatMap({ byClientID[$0] }), byClient != byServer,
                let pending = rows.removeValue(forKey: byClient)
            {
                // The confirmed copy wins over the pending one stored under the client id.
                unorder(byClient, key: pending.orderKey)
                if let id = pending.serverID { byServerID[id] = nil }
                if let id = pending.clientID { byClientID[id] = nil }
            }
            let row =
                byServer ?? message.clientID.flatMap { byClientID[$0] } ?? {
                    defer { nextRow += 1 }
                    return nextRow
                }()
            if let old = rows[row] {
                if let id = old.serverID { byServerID[id] = nil }
                if let id = old.clientID { byClientID[id] = nil }
                unorder(row, key: old.orderKey)
            }
            rows[row] = message
            ordered.insert((message.orderKey, row), at: position(of: message.orderKey))
            if let id = message.serverID { byServerID[id] = row }
            if let id = message.clientID { byClientID[id] = row }
        }

        mutating func remove(serverID: MessageID) {
            guard let row = byServerID.removeValue(forKey: serverID), let old = rows.removeValue(forKey: row)
            else { return }
            if let id = old.clientID { byClientID[id] = nil }
            unorder(row, key: old.orderKey)
        }

        func message(serverID: MessageID) -> Message? { byServerID[serverID].flatMap { rows[$0] } }
        func message(clientID: ClientMessageID) -> Message? { byClientID[clientID].flatMap { rows[$0] } }

        /// The first confirmed row in order: pending rows sort last, so this is the first row
        /// unless nothing is confirmed.
        func oldestConfirmed() -> Message? {
            ordered.lazy.compactMap { self.rows[$0.row] }.first { $0.serverID != nil }
        }

        /// Rows waiting for the server, oldest first (they sort after every confirmed row).
        func pending() -> [Message] {
            ordered.reversed().lazy.compactMap { self.rows[$0.row] }
                .prefix { $0.serverID == nil }
                .filter { $0.deliveryState == .pending }
                .reversed()
        }
    }

    private let scopes = Locked<[StoreScope: Conversations]>([:])

    public init() {}

    /// Reads a scope's data under the lock.
    private func read<T>(_ scope: StoreScope, _ body: (Conversations) -> T) -> T {
        scopes.withLock { body($0[scope] ?? Conversations()) }
    }

    public func fetchConversations(scope: StoreScope) -> [ConversationInfo] {
        read(scope) { data in data.order.compactMap { data.infos[$0] } }
    }

    public func fetchConversation(_ id: ConversationID, scope: StoreScope) -> ConversationInfo? {
        read(scope) { $0.infos[id] }
    }

    public func fetchMessages(serverIDs: [MessageID], clientIDs: [ClientMessageID], in conversation: ConversationID, scope: StoreScope) -> [Message] {
        read(scope) { data in
            let byServerID = serverIDs.compactMap { data.messages[conversation]?.message(serverID: $0) }
            let byClientID = clientIDs.compactMap { id in data.messages.values.lazy.compactMap { $0.message(clientID: id) }.first }
            return byServerID + byClientID
        }
    }

    public func fetchMessages(
        in conversation: ConversationID,
        before: MessageOrderKey?,
        limit: Int,
        scope: StoreScope
    ) -> [Message] {
        read(scope) { $0.messages[conversation]?.page(before: before, limit: limit) ?? [] }
    }

    public func countMessages(in conversation: ConversationID, scope: StoreScope) -> Int {
        read(scope) { $0.messages[conversation]?.rows.count ?? 0 }
    }

    public func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) -> Message? {
        read(scope) { $0.messages[conversation]?.oldestConfirmed() }
    }

    public func fetchPendingMessages(scope: StoreScope) -> [Message] {
        read(scope) { data in
            // Messages may be stored for a conversation that was never saved itself.
            let listed = Set(data.order)
            let ids = data.order + data.messages.keys.filter { !listed.contains($0) }.sorted { $0.rawValue < $1.rawValue }
            return ids.flatMap { data.messages[$0]?.pending() ?? [] }
        }
    }

    public func fetchReadMarkers(in conversation: ConversationID, scope: StoreScope) -> [ParticipantID: ChatEvent.ReadMarker] {
        read(scope) { $0.readMarkers[conversation] ?? [:] }
    }

    public func fetchSequences(scope: StoreScope) -> [ConversationID: Int64] {
        read(scope) { $0.sequences }
    }

    public func fetchCursor(scope: StoreScope) -> SyncCursor? {
        read(scope) { $0.cursor }
    }

    public func fetchOutbox(scope: StoreScope) -> [OutboxEntry] {
        read(scope) { $0.outbox }
    }

    public func fetchCredentials(scope: StoreScope) -> Credentials {
        read(scope) { $0.credentials }
    }

    /// Applies every write under one hold of the lock: atomic.
    public func apply(_ writes: [StoreWrite], scope: StoreScope) {
        scopes.withLock { scopes in
            for write in writes { Self.perform(write, on: &scopes[scope, default: Conversations()]) }
        }
    }

    private static func perform(_ write: StoreWrite, on data: inout Conversations) {
        switch write {
        case .saveConversation(let conversation):
            if data.infos.updateValue(conversation, forKey: conversation.id) == nil { data.order.append(conversation.id) }
        case .removeConversation(let id):
            data.infos[id] = nil
            data.order.removeAll { $0 == id }
            data.messages[id] = nil
            data.readMarkers[id] = nil
            data.sequences[id] = nil
        case .saveMessages(let messages):
            for message in messages { data.messages[message.conversationID, default: MessageTable()].save(message) }
        case .removeMessage(let id, let conversation):
            data.messages[conversation]?.remove(serverID: id)
        case .removeAllMessages(let conversation):
            data.messages[conversation] = nil
        case .saveReadMarker(let marker, let participant, let conversation):
            data.readMarkers[conversation, default: [:]][participant] = marker
        case .saveSequence(let sequence, let conversation):
            data.sequences[conversation] = sequence
        case .saveCursor(let cursor):
            data.cursor = cursor
        case .saveOutboxEntry(let entry):
            if let index = data.outbox.firstIndex(where: { $0.clientID == entry.clientID }) {
                data.outbox[index] = entry
            } else {
                data.outbox.append(entry)
            }
        case .removeOutboxEntry(let clientID):
            data.outbox.removeAll { $0.clientID == clientID }
        case .saveCredentials(let credentials):
            data.credentials = credentials
        case .removeEverything:
            data = Conversations()
        }
    }
}
