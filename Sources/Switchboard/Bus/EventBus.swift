import DequeModule
import Foundation

/// One bus for the events of every session, whatever its backend.
///
/// Sessions publish; apps subscribe with a filter and a buffering policy and get an
/// ``EventStream``. The guarantees:
/// - **Order** is kept per subscriber: a subscriber sees events in the order they were
///   published, so per conversation in the order the session delivered them.
/// - **No replay**: a subscriber sees what is published after it subscribed. State from before
///   is in the store.
/// - **Publishing never blocks and never throws.** A bounded subscriber that falls behind loses
///   the events that do not fit and receives one ``ChatEvent/Kind/gap(dropped:)`` event in their
///   place, in order, telling it to re-read from the store. Control events (`.connection`,
///   `.fatal`) are never dropped: they are kept past the bound.
/// - **No leaks**: a subscription ends when its stream and every iterator of it are gone, even
///   if it was never iterated.
/// - **Publishing allocates nothing**: the subscriber list is an immutable array replaced when
///   someone subscribes or leaves, so a publish only retains it.
public final class EventBus: Sendable {
    /// How many events a subscription holds for a slow consumer.
    public enum BufferingPolicy: Sendable, Hashable {
        /// Never drops; memory grows with the backlog.
        case unbounded
        /// Holds at most this many events; past that, a gap event replaces what was dropped.
        case bounded(Int)
    }

    /// The live subscriptions, replaced (never mutated in place) so a publish reads it by retain.
    private let subscribers = Locked<[EventSubscription]>([])

    public init() {}

    /// Sends `event` to every matching subscriber.
    public func publish(_ event: ChatEvent) {
        let current = subscribers.withLock { $0 }
        for subscription in current where subscription.takesEverything || subscription.filter.matches(event) {
            subscription.offer(event)
        }
    }

    /// A stream of the events that match `filter`, from now on.
    ///
    /// The subscription ends when the stream's iterator is dropped, the iterating task is
    /// cancelled, or ``finish()`` is called.
    public func subscribe(
        filter: EventFilter = .all,
        buffering: BufferingPolicy = .bounded(1024)
    ) -> EventStream {
        let subscription = EventSubscription(filter: filter, buffering: buffering) { [weak self] subscription in
            self?.subscribers.withLock { subscribers in
                subscribers = subscribers.filter { $0 !== subscription }
            }
        }
        subscribers.withLock { subscribers in subscribers = subscribers + [subscription] }
        return EventStream(subscription)
    }

    /// The number of live subscriptions.
    public var subscriberCount: Int { subscribers.withLock { $0.count } }

    /// Ends every subscription; their streams finish after what they hold.
    public func finish() {
        let current = subscribers.withLock { subscribers in
            defer { subscribers = [] }
            return subscribers
        }
        for subscription in current { subscription.finish() }
    }
}

/// The events of one bus subscription, in publish order.
///
/// Single consumer: iterate it from one task. A second consumer waiting at the same time is
/// refused: its `next()` returns `nil` at once (the first keeps every event). The subscription
/// ends when the stream and its iterators are all gone, whether or not it was ever iterated.
/// Backpressure and loss are as the subscription's ``EventBus/BufferingPolicy`` says.
public struct EventStream: AsyncSequence, Sendable {
    public typealias Element = ChatEvent
    public typealias Failure = Never

    private let lifetime: Lifetime

    init(_ subscription: EventSubscription) {
        self.lifetime = Lifetime(subscription)
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(lifetime)
    }

    /// Ends the subscription; the stream finishes after the events it holds.
    public func finish() {
        lifetime.subscription.finish()
    }

    /// Whether a consumer waits for the next event now (tests use it).
    var hasWaitingConsumer: Bool { lifetime.subscription.hasWaiter }

    /// Puts `event` into this stream only, past any bound (a ``Timeline`` marks its own place
    /// in the stream this way).
    func inject(_ event: ChatEvent) {
        lifetime.subscription.offer(event, force: true)
    }

    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = ChatEvent
        public typealias Failure = Never
        private let lifetime: Lifetime

        fileprivate init(_ lifetime: Lifetime) {
            self.lifetime = lifetime
        }

        public mutating func next() async -> ChatEvent? {
            await lifetime.subscription.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> ChatEvent? {
            await lifetime.subscription.next()
        }
    }

    /// Ends the subscription when the last copy of the stream and of its iterators goes away.
    fileprivate final class Lifetime: Sendable {
        let subscription: EventSubscription
        init(_ subscription: EventSubscription) { self.subscription = subscription }
        deinit { subscription.finish() }
    }
}

/// One subscriber's buffer. The lock guards the buffer, the waiting consumer and the finished
/// flag.
final class EventSubscription: Sendable {
    private enum Item {
        case event(ChatEvent)
        /// Stands for dropped events: how many, and the first one (whose origin and time the gap
        /// event takes).
        case gap(Int, first: ChatEvent)
    }

    private struct State {
        var buffer: Deque<Item> = []
        var bufferedEvents = 0
        var waiter: CheckedContinuation<ChatEvent?, Never>?
        var isFinished = false

        /// The next buffered event, a gap standing for dropped ones included; nil when none is.
        mutating func popFirst() -> ChatEvent? {
            switch buffer.popFirst() {
            case .event(let event):
                bufferedEvents -= 1
                return event
            case .gap(let dropped, let first):
                return EventSubscription.gapEvent(dropped: dropped, first: first)
            case nil:
                return nil
            }
        }
    }

    let filter: EventFilter
    /// The filter is ``EventFilter/all``: a publish skips matching.
    let takesEverything: Bool
    private let capacity: Int?
    private let state = Locked(State())
    private let onFinish: @Sendable (EventSubscription) -> Void

    init(
        filter: EventFilter,
        buffering: EventBus.BufferingPolicy,
        onFinish: @escaping @Sendable (EventSubscription) -> Void
    ) {
        self.filter = filter
        self.takesEverything = filter == .all
        switch buffering {
        case .unbounded: self.capacity = nil
        case .bounded(let capacity): self.capacity = max(1, capacity)
        }
        self.onFinish = onFinish
    }

    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }

    /// Offers `event`; `force` keeps it past the bound (as control events always are).
    func offer(_ event: ChatEvent, force: Bool = false) {
        let waiter: CheckedContinuation<ChatEvent?, Never>? = state.withLock { state in
            if state.isFinished { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if let capacity, state.bufferedEvents >= capacity, !force, !event.kind.isControl {
                if case .gap(let dropped, let first) = state.buffer.last {
                    state.buffer[state.buffer.count - 1] = .gap(dropped + 1, first: first)
                } else {
                    state.buffer.append(.gap(1, first: event))
                }
                return nil
            }
            state.buffer.append(.event(event))
            state.bufferedEvents += 1
            return nil
        }
        waiter?.resume(returning: event)
    }

    func next() async -> ChatEvent? {
        // A cancelled consumer ends its subscription (it still gets what is buffered), as the
        // cancellation handler below would have.
        if Task.isCancelled { finish() }
        // A consumer that is behind takes what is buffered without a continuation or a
        // cancellation handler: the common case under load, and the cheap one.
        if let ready = state.withLock({ $0.popFirst() }) { return ready }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ChatEvent?, Never>) in
                let ready: ChatEvent?? = state.withLock { state in
                    if let event = state.popFirst() { return .some(event) }
                    if state.isFinished || Task.isCancelled { return .some(nil) }
                    // One consumer: a second one waiting at the same time is refused.
                    if state.waiter != nil { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }

    func finish() {
        let waiter: CheckedContinuation<ChatEvent?, Never>?? = state.withLock { state in
            if state.isFinished { return nil }
            state.isFinished = true
            defer { state.waiter = nil }
            return .some(state.waiter)
        }
        guard let waiter else { return }
        waiter?.resume(returning: nil)
        onFinish(self)
    }


    /// The gap event stands where the first dropped event stood, so it carries that event's
    /// origin and time (no clock of its own).
    fileprivate static func gapEvent(dropped: Int, first: ChatEvent) -> ChatEvent {
        ChatEvent(origin: first.origin, conversationID: nil, time: first.time, kind: .gap(dropped: dropped))
    }
}

extension ChatEvent.Kind {
    /// Events about the session itself that a subscriber must never miss.
    var isControl: Bool {
        switch self {
        case .connection, .fatal: true
        default: false
        }
    }
}
