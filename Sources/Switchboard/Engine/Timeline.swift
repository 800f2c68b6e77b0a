import Foundation

/// A live window over one conversation for a UI: the items in order, and ordered diffs
/// (insert / update / remove at index) as messages arrive, change or go.
///
/// Iterate it from one task; each element carries the diffs and the items after them. The
/// first element is a `.reset` with the initial window. **Every diff comes through this one
/// sequence**, in order: ``loadOlder(limit:)`` only asks for older messages, and the diffs that
/// put them in the window arrive here, after whatever was already on its way. Apply the diffs
/// in the order they come and the list matches ``items``.
///
/// The window holds the newest `limit` messages (raised by what ``loadOlder(limit:)`` loads);
/// when new messages push past it the oldest rows are removed, with diffs. When the
/// underlying subscription falls behind, the timeline reloads from the store and emits a
/// `.reset`.
public final class Timeline: AsyncSequence, Sendable {
    public struct Update: Sendable, Hashable {
        public var diffs: [TimelineDiff]
        public var items: [Message]
    }

    public typealias Element = Update
    public typealias Failure = Never

    /// The marker ``loadOlder(limit:)`` puts in the timeline's own event stream, so older
    /// messages enter the window in order with live events. Never published on a bus.
    private static let olderMarker = "switchboard.timeline.older"

    private struct State {
        var timeline: TimelineState
        var deliveredInitial = false
        var limit: Int
        /// Older pages loaded and not yet applied, by marker number.
        var older: [Int: [Message]] = [:]
        var nextMarker = 0
    }

    private let conversation: any Conversation
    private let events: EventStream
    /// Guards the items, the window size and the older pages waiting for their marker.
    private let state: Locked<State>

    init(conversation: any Conversation, limit: Int) async throws {
        self.conversation = conversation
        // Subscribe before reading the store, so nothing falls between the two.
        self.events = conversation.events(buffering: .bounded(4096))
        let initial = try await conversation.storedMessages(before: nil, limit: limit)
        self.state = Locked(State(timeline: TimelineState(items: initial), limit: Swift.max(1, limit)))
    }

    /// The items now, oldest first, as of the last update handed out.
    public var items: [Message] { state.withLock { $0.timeline.items } }

    /// Asks for up to `limit` messages older than the window (the store first, then the
    /// backend). Their diffs come through the timeline's sequence.
    ///
    /// - Returns: how many older messages were found; 0 when there is nothing older.
    @discardableResult
    public func loadOlder(limit: Int) async throws -> Int {
        let oldest = state.withLock { $0.timeline.items.first?.orderKey }
        let older = try await conversation.history(before: oldest, limit: limit)
        guard !older.isEmpty else { return 0 }
        let marker = state.withLock { state in
            defer { state.nextMarker += 1 }
            state.older[state.nextMarker] = older
            return state.nextMarker
        }
        events.inject(
            ChatEvent(
                origin: ChatEvent.Origin(session: conversation.sessionID, backend: BackendName("timeline")),
                conversationID: conversation.id,
                time: older.last?.time ?? Date(),
                kind: .custom(name: Self.olderMarker, payload: .int(Int64(marker)))
            )
        )
        return older.count
    }

    /// Reloads the newest window from the store.
    public func reset() async throws -> Update {
        let limit = state.withLock { $0.limit }
        let messages = try await conversation.storedMessages(before: nil, limit: limit)
        return state.withLock { state in
            state.older.removeAll()
            return Update(diffs: state.timeline.reset(messages), items: state.timeline.items)
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
        case .custom(Self.olderMarker, .int(let marker)):
            return state.withLock { state in
                guard let older = state.older.removeValue(forKey: Int(marker)) else { return nil }
                state.limit += older.count
                let diffs = older.flatMap { state.timeline.upsert($0) }
                return diffs.isEmpty ? nil : Update(diffs: diffs, items: state.timeline.items)
            }
        default:
            return state.withLock { state in
                var diffs: [TimelineDiff]
                switch event.kind {
                case .messageAdded(let message, .history):
                    // A page from the backend: only what falls inside the window.
                    guard let oldest = state.timeline.items.first, oldest.orderKey < message.orderKey else { return nil }
                    diffs = state.timeline.upsert(message)
                case .messageAdded(let message, _): diffs = state.timeline.upsert(message)
                case .messageUpdated(let message): diffs = state.timeline.updateIfPresent(message)
                case .messageRemoved(let id): diffs = state.timeline.remove(id)
                default: diffs = []
                }
                diffs += state.timeline.trim(to: state.limit)
                return diffs.isEmpty ? nil : Update(diffs: diffs, items: state.timeline.items)
            }
        }
    }
}
