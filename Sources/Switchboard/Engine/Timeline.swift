import Synchronization

/// A live window over one conversation for a UI: the items in order, and ordered diffs
/// (insert / update / remove at index) as messages arrive, change or go.
///
/// Iterate it from one task; each element carries the diffs and the items after them. The
/// first element is a `.reset` with the initial window. ``loadOlder(limit:)`` extends the
/// window backwards (store first, then the backend) and returns its own update. When the
/// underlying subscription falls behind, the timeline reloads from the store and emits a
/// `.reset`.
public final class Timeline: AsyncSequence, Sendable {
    public struct Update: Sendable, Hashable {
        public var diffs: [TimelineDiff]
        public var items: [Message]
    }

    public typealias Element = Update
    public typealias Failure = Never

    private let conversation: any Conversation
    private let events: EventStream
    /// Guards the items and whether the initial reset was handed out.
    private let state: Mutex<(timeline: TimelineState, deliveredInitial: Bool, limit: Int)>

    init(conversation: any Conversation, limit: Int) async throws {
        self.conversation = conversation
        // Subscribe before reading the store, so nothing falls between the two.
        self.events = conversation.events(buffering: .bounded(4096))
        let initial = try await conversation.storedMessages(before: nil, limit: limit)
        self.state = Mutex((TimelineState(items: initial), false, limit))
    }

    /// The items now, oldest first.
    public var items: [Message] { state.withLock { $0.timeline.items } }

    /// Extends the window with up to `limit` older messages.
    ///
    /// - Returns: the diffs it made, or `nil` when there is nothing older.
    public func loadOlder(limit: Int) async throws -> Update? {
        let oldest = state.withLock { $0.timeline.items.first?.orderKey }
        let older = try await conversation.history(before: oldest, limit: limit)
        guard !older.isEmpty else { return nil }
        return state.withLock { state in
            state.limit += older.count
            let diffs = older.flatMap { state.timeline.upsert($0) }
            return Update(diffs: diffs, items: state.timeline.items)
        }
    }

    /// Reloads the newest window from the store.
    public func reset() async throws -> Update {
        let limit = state.withLock { $0.limit }
        let messages = try await conversation.storedMessages(before: nil, limit: limit)
        return state.withLock { state in
            Update(diffs: state.timeline.reset(messages), items: state.timeline.items)
        }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(timeline: self, events: events.makeAsyncIterator()) }

    public struct Iterator: AsyncIteratorProtocol {
        let timeline: Timeline
        var events: EventStream.Iterator

        public mutating func next() async -> Update? {
            if let initial = timeline.takeInitial() { return initial }
            while let event = await events.next() {
                if let update = await timeline.apply(event) { return update }
            }
            return nil
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Update? {
            await next()
        }
    }

    private func takeInitial() -> Update? {
        state.withLock { state in
            guard !state.deliveredInitial else { return nil }
            state.deliveredInitial = true
            return Update(diffs: [.reset(state.timeline.items)], items: state.timeline.items)
        }
    }

    private func apply(_ event: ChatEvent) async -> Update? {
        switch event.kind {
        case .gap:
            return try? await reset()
        case .historyCleared:
            return state.withLock { Update(diffs: $0.timeline.reset([]), items: []) }
        default:
            return state.withLock { state in
                let diffs: [TimelineDiff]
                switch event.kind {
                case .messageAdded(let message, _): diffs = state.timeline.upsert(message)
                case .messageUpdated(let message): diffs = state.timeline.updateIfPresent(message)
                case .messageRemoved(let id): diffs = state.timeline.remove(id)
                default: diffs = []
                }
                return diffs.isEmpty ? nil : Update(diffs: diffs, items: state.timeline.items)
            }
        }
    }
}
