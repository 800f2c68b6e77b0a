/// A change to a timeline's items, index-based for a list UI. Apply them in order.
public enum TimelineDiff: Sendable, Hashable {
    case insert(Message, at: Int)
    case update(Message, at: Int)
    case remove(at: Int)
    /// Replace everything (first load, reset, or after the subscriber fell behind).
    case reset([Message])
}

/// The items of a timeline window, kept sorted by ``Message/orderKey``, and the diffs each
/// change makes. A message is the same item across its life: matched by server id or, before
/// the server has confirmed it, by client id. A message that carries both ids replaces every row
/// that matches either (the server's copy that arrived without the client id after a lost reply,
/// and the pending copy), so a merge shows as one row.
///
/// Rows are found through an index of their ids and a binary search on their order key, so an
/// upsert does not scan the window.
public struct TimelineState: Sendable, Hashable {
    public private(set) var items: [Message] = []
    private var keysByServerID: [MessageID: MessageOrderKey] = [:]
    private var keysByClientID: [ClientMessageID: MessageOrderKey] = [:]

    public init(items: [Message] = []) {
        _ = reset(items)
    }

    /// Adds or replaces `message`.
    public mutating func upsert(_ message: Message) -> [TimelineDiff] {
        var diffs: [TimelineDiff] = []
        let matches = indices(of: message)
        // Rows beyond the first that the message also names are merged into it: they go.
        for index in matches.dropFirst().sorted(by: >) {
            unindex(items.remove(at: index))
            diffs.append(.remove(at: index))
        }
        if let index = matches.first {
            if items[index] == message { return diffs }
            let old = items[index]
            if old.orderKey == message.orderKey || fitsAt(index, message) {
                unindex(old)
                items[index] = message
                addToIndex(message)
                diffs.append(.update(message, at: index))
                return diffs
            }
            unindex(items.remove(at: index))
            diffs.append(.remove(at: index))
        }
        let target = insertionIndex(for: message)
        items.insert(message, at: target)
        addToIndex(message)
        diffs.append(.insert(message, at: target))
        return diffs
    }

    /// Updates `message` only if the window holds it.
    public mutating func updateIfPresent(_ message: Message) -> [TimelineDiff] {
        indices(of: message).isEmpty ? [] : upsert(message)
    }

    public mutating func remove(_ serverID: MessageID) -> [TimelineDiff] {
        guard let key = keysByServerID[serverID], let index = position(of: key, serverID: serverID, clientID: nil) else {
            return []
        }
        unindex(items.remove(at: index))
        return [.remove(at: index)]
    }

    public mutating func reset(_ messages: [Message]) -> [TimelineDiff] {
        items = messages.sorted { $0.orderKey < $1.orderKey }
        keysByServerID.removeAll(keepingCapacity: true)
        keysByClientID.removeAll(keepingCapacity: true)
        for item in items { addToIndex(item) }
        return [.reset(items)]
    }

    /// Keeps at most `limit` items, dropping the oldest.
    public mutating func trim(to limit: Int) -> [TimelineDiff] {
        guard items.count > limit else { return [] }
        var diffs: [TimelineDiff] = []
        while items.count > max(0, limit) {
            unindex(items.removeFirst())
            diffs.append(.remove(at: 0))
        }
        return diffs
    }

    // MARK: The index

    private mutating func addToIndex(_ message: Message) {
        if let serverID = message.serverID { keysByServerID[serverID] = message.orderKey }
        if let clientID = message.clientID { keysByClientID[clientID] = message.orderKey }
    }

    private mutating func unindex(_ message: Message) {
        if let serverID = message.serverID, keysByServerID[serverID] == message.orderKey { keysByServerID[serverID] = nil }
        if let clientID = message.clientID, keysByClientID[clientID] == message.orderKey { keysByClientID[clientID] = nil }
    }

    /// The rows that `message` names by server id or client id, lowest index first.
    private func indices(of message: Message) -> [Int] {
        var found: [Int] = []
        if let serverID = message.serverID, let key = keysByServerID[serverID],
            let index = position(of: key, serverID: serverID, clientID: nil)
        {
            found.append(index)
        }
        if let clientID = message.clientID, let key = keysByClientID[clientID],
            let index = position(of: key, serverID: nil, clientID: clientID), !found.contains(index)
        {
            found.append(index)
        }
        return found.sorted()
    }

    /// The row with `key` that has the id, found by binary search (rows may share a key).
    private func position(of key: MessageOrderKey, serverID: MessageID?, clientID: ClientMessageID?) -> Int? {
        var index = items.lowerBound(of: key, orderKey: \.orderKey)
        while index < items.count, items[index].orderKey == key {
            let item = items[index]
            if let serverID, item.serverID == serverID { return index }
            if let clientID, item.clientID == clientID { return index }
            index += 1
        }
        return nil
    }

    private func fitsAt(_ index: Int, _ message: Message) -> Bool {
        let key = message.orderKey
        let afterPrevious = index == 0 || items[index - 1].orderKey < key
        let beforeNext = index == items.count - 1 || key < items[index + 1].orderKey
        return afterPrevious && beforeNext
    }

    private func insertionIndex(for message: Message) -> Int {
        items.lowerBound(of: message.orderKey, orderKey: \.orderKey)
    }
}
