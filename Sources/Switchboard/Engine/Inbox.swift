import Foundation

/// A live list of the conversations of several sessions on one bus, newest activity first, for a
/// UI: the items with their unread counts and last messages, the total unread count, and ordered
/// diffs (insert / update / remove at index) as conversations change.
///
/// Iterate it from one task, as a ``Timeline``: the first element is a `.reset` with every
/// conversation the sessions have stored, and **every diff comes through this one sequence**, in
/// order. Apply the diffs in the order they come (`[InboxItem].apply(_:)`) and the list matches
/// ``items``. A conversation is read again from its session's store when the bus says it (or one
/// of its messages) changed, so the list shows what the store holds. When the subscription falls
/// behind, the inbox reloads and emits a `.reset`; a reload that fails is tried again at the next
/// event, and a session closed since lists nothing.
///
/// ```swift
/// let inbox = try await Inbox(bus: bus, sessions: [webim, cxone])
/// for await update in inbox {
///     badge = update.unreadTotal
///     list.apply(update.diffs)
/// }
/// ```
public final class Inbox: AsyncSequence, Sendable {
    public struct Update: Sendable, Hashable {
        public var diffs: [InboxDiff]
        public var items: [InboxItem]
        /// Messages from others not read, across every conversation listed.
        public var unreadTotal: Int
    }

    public typealias Element = Update
    public typealias Failure = Never

    private struct State {
        var inbox: InboxState
        var deliveredInitial = false
        /// The handle of each conversation read since, so a change reads only its conversation.
        var handles: [InboxItem.ID: any Conversation] = [:]
        /// The subscription fell behind and the reload failed: the list waits for one that works.
        var needsReload = false
    }

    private let sessions: [SessionID: any Session]
    private let events: EventStream
    private let state: Locked<State>

    /// Lists the conversations `sessions` have stored, and follows what `bus` says of them.
    ///
    /// - Parameters:
    ///   - bus: the bus the sessions publish on.
    ///   - sessions: the sessions whose conversations the inbox lists.
    ///   - buffering: how many events wait for the iterating task before the inbox falls behind
    ///     (and reloads).
    public init(bus: EventBus, sessions: [any Session], buffering: EventBus.BufferingPolicy = .bounded(4096)) async throws {
        self.sessions = Dictionary(sessions.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        // Subscribe before reading the stores, so nothing falls between the two.
        self.events = bus.subscribe(filter: EventFilter(sessions: Set(self.sessions.keys)), buffering: buffering)
        self.state = Locked(State(inbox: InboxState()))
        let initial = try await loadAll()
        state.withLock { _ = $0.inbox.reset(initial) }
    }

    /// The items now, newest activity first, as of the last update handed out.
    public var items: [InboxItem] { state.withLock { $0.inbox.items } }

    /// Messages from others not read, across every conversation listed.
    public var unreadTotal: Int { state.withLock { $0.inbox.unreadTotal } }

    public func makeAsyncIterator() -> Iterator { Iterator(inbox: self, events: events.makeAsyncIterator()) }

    public struct Iterator: AsyncIteratorProtocol {
        let inbox: Inbox
        var events: EventStream.Iterator

        public mutating func next() async -> Update? {
            if let initial = inbox.takeInitial() { return initial }
            while let event = await events.next() {
                if let update = await inbox.apply(event) { return update }
            }
            return nil
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Update? {
            await next()
        }
    }

    private func loadAll() async throws -> [InboxItem] {
        var items: [InboxItem] = []
        for (id, session) in sessions {
            do {
                items += try await session.conversations().map { InboxItem(session: id, conversation: $0) }
            } catch let error as SwitchboardError where error.code == .sessionClosed {
                continue
            }
        }
        return items
    }

    private func takeInitial() -> Update? {
        state.withLock { state in
            guard !state.deliveredInitial else { return nil }
            state.deliveredInitial = true
            return Update(diffs: [.reset(state.inbox.items)], items: state.inbox.items, unreadTotal: state.inbox.unreadTotal)
        }
    }

    private func apply(_ event: ChatEvent) async -> Update? {
        let diffs: [InboxDiff]
        if case .gap = event.kind { state.withLock { $0.needsReload = true } }
        if state.withLock({ $0.needsReload }) {
            // What fell behind is read whole: this event is in it.
            guard let all = try? await loadAll() else { return nil }
            diffs = state.withLock { state in
                state.needsReload = false
                return state.inbox.reset(all)
            }
            return state.withLock { Update(diffs: diffs, items: $0.inbox.items, unreadTotal: $0.inbox.unreadTotal) }
        }
        switch event.kind {
        case .conversationRemoved:
            guard let conversation = event.conversationID else { return nil }
            let id = InboxItem.ID(session: event.origin.session, conversation: conversation)
            diffs = state.withLock { state in
                state.handles[id] = nil
                return state.inbox.remove(id)
            }
        default:
            guard let conversation = event.conversationID, Self.changesTheList(event.kind), let session = sessions[event.origin.session] else { return nil }
            // What the store holds now: the engine stored the change before it published it.
            let id = InboxItem.ID(session: event.origin.session, conversation: conversation)
            let stored: ConversationInfo?
            do {
                let handle: any Conversation
                if let known = state.withLock({ $0.handles[id] }) {
                    handle = known
                } else {
                    handle = try await session.conversation(conversation)
                    state.withLock { $0.handles[id] = handle }
                }
                stored = try await handle.info()
            } catch let error as SwitchboardError where error.code == .conversationNotFound {
                stored = nil
            } catch {
                return nil
            }
            diffs = state.withLock { state in
                guard let stored else {
                    state.handles[id] = nil
                    return state.inbox.remove(id)
                }
                return state.inbox.upsert(InboxItem(session: id.session, conversation: stored))
            }
        }
        guard !diffs.isEmpty else { return nil }
        return state.withLock { Update(diffs: diffs, items: $0.inbox.items, unreadTotal: $0.inbox.unreadTotal) }
    }

    /// Whether an event of this kind can change how a conversation is listed.
    private static func changesTheList(_ kind: ChatEvent.Kind) -> Bool {
        switch kind.category {
        case .conversation, .message, .participants, .readMarker: true
        default: false
        }
    }
}
