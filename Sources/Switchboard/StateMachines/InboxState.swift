public import Foundation

/// A change to an ``Inbox``'s list, at an index of the list as it was before the change.
public enum InboxDiff: Sendable, Hashable {
    case insert(InboxItem, at: Int)
    /// The item changed and kept its place.
    case update(InboxItem, at: Int)
    case remove(at: Int)
    /// Replace everything (first load, or after the subscriber fell behind).
    case reset([InboxItem])
}

/// One conversation of one session, as an inbox lists it.
public struct InboxItem: Sendable, Hashable, Identifiable {
    public struct ID: Sendable, Hashable {
        public var session: SessionID
        public var conversation: ConversationID
    }

    public var session: SessionID
    public var conversation: ConversationInfo

    public init(session: SessionID, conversation: ConversationInfo) {
        self.session = session
        self.conversation = conversation
    }

    public var id: ID { ID(session: session, conversation: conversation.id) }

    /// When it was last active: its newest message, else when it was made.
    public var activity: Date {
        conversation.updatedAt ?? conversation.lastMessage?.time ?? conversation.createdAt ?? .distantPast
    }
}

/// The items of an inbox, newest activity first, and the diffs each change makes. Pure: the
/// ``Inbox`` feeds it what the bus says and hands its diffs on.
public struct InboxState: Sendable, Hashable {
    public private(set) var items: [InboxItem] = []

    public init(items: [InboxItem] = []) {
        self.items = items.sorted(by: Self.precedes)
    }

    /// Messages from others not read, across every conversation listed.
    public var unreadTotal: Int { items.reduce(0) { $0 + $1.conversation.unreadCount } }

    public mutating func reset(_ items: [InboxItem]) -> [InboxDiff] {
        self.items = items.sorted(by: Self.precedes)
        return [.reset(self.items)]
    }

    /// Adds `item`, or changes it where it is listed: in place while its activity is the same,
    /// else removed and inserted where it now goes. A conversation that just became active goes
    /// before those with the same activity time: backends that stamp whole seconds (the
    /// Voximplant-style protocol) give several the same time, and the one that changed last is
    /// the newest.
    public mutating func upsert(_ item: InboxItem) -> [InboxDiff] {
        guard let index = items.firstIndex(where: { $0.id == item.id }) else {
            let target = Self.newestIndex(of: item, in: items)
            items.insert(item, at: target)
            return [.insert(item, at: target)]
        }
        guard items[index] != item else { return [] }
        let activityChanged = items[index].activity != item.activity
        items.remove(at: index)
        let target = activityChanged ? Self.newestIndex(of: item, in: items) : index
        items.insert(item, at: target)
        return target == index ? [.update(item, at: index)] : [.remove(at: index), .insert(item, at: target)]
    }

    public mutating func remove(_ id: InboxItem.ID) -> [InboxDiff] {
        guard let index = items.firstIndex(where: { $0.id == id }) else { return [] }
        items.remove(at: index)
        return [.remove(at: index)]
    }

    /// Newest activity first; ties by session, then conversation, so the order of a list read
    /// whole (a reset) is total. Changes then keep ties in the order they happened (``upsert(_:)``).
    static func precedes(_ a: InboxItem, _ b: InboxItem) -> Bool {
        if a.activity != b.activity { return a.activity > b.activity }
        if a.session != b.session { return a.session.rawValue < b.session.rawValue }
        return a.conversation.id.rawValue < b.conversation.id.rawValue
    }

    /// Where `item` goes as the newest of its activity time: after every item that is newer,
    /// before every other.
    private static func newestIndex(of item: InboxItem, in items: [InboxItem]) -> Int {
        var low = 0
        var high = items.count
        while low < high {
            let middle = (low + high) / 2
            if items[middle].activity > item.activity { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

extension Array where Element == InboxItem {
    /// Applies an inbox's diffs, in order: a list kept this way matches ``Inbox/items``.
    public mutating func apply(_ diffs: [InboxDiff]) {
        for diff in diffs {
            switch diff {
            case .insert(let item, let index): insert(item, at: index)
            case .update(let item, let index): self[index] = item
            case .remove(let index): remove(at: index)
            case .reset(let items): self = items
            }
        }
    }
}
