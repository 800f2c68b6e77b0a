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
/// the server has confirmed it, by client id.
public struct TimelineState: Sendable, Hashable {
    public private(set) var items: [Message] = []

    public init(items: [Message] = []) {
        self.items = items.sorted { $0.orderKey < $1.orderKey }
    }

    /// Adds or replaces `message`.
    public mutating func upsert(_ message: Message) -> [TimelineDiff] {
        if let index = index(of: message) {
            if items[index] == message { return [] }
            let oldKey = items[index].orderKey
            if oldKey == message.orderKey || fitsAt(index, message) {
                items[index] = message
                return [.update(message, at: index)]
            }
            items.remove(at: index)
            let target = insertionIndex(for: message)
            items.insert(message, at: target)
            return [.remove(at: index), .insert(message, at: target)]
        }
        let target = insertionIndex(for: message)
        items.insert(message, at: target)
        return [.insert(message, at: target)]
    }

    /// Updates `message` only if the window holds it.
    public mutating func updateIfPresent(_ message: Message) -> [TimelineDiff] {
        index(of: message) == nil ? [] : upsert(message)
    }

    public mutating func remove(_ serverID: MessageID) -> [TimelineDiff] {
        guard let index = items.firstIndex(where: { $0.serverID == serverID }) else { return [] }
        items.remove(at: index)
        return [.remove(at: index)]
    }

    public mutating func reset(_ messages: [Message]) -> [TimelineDiff] {
        items = messages.sorted { $0.orderKey < $1.orderKey }
        return [.reset(items)]
    }

    private func index(of message: Message) -> Int? {
        items.firstIndex { item in
            (message.serverID != nil && item.serverID == message.serverID)
                || (message.clientID != nil && item.clientID == message.clientID)
        }
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
