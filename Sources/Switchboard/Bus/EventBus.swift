import DequeModule
import Foundation
import Synchronization

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
///   place, in order, telling it to re-read from the store.
public final class EventBus: Sendable {
    /// How many events a subscription holds for a slow consumer.
    public enum BufferingPolicy: Sendable, Hashable {
        /// Never drops; memory grows with the backlog.
        case unbounded
        /// Holds at most this many events; past that, a gap event replaces what was dropped.
        case bounded(Int)
    }

    private let subscribers = Mutex<[Int: EventSubscription]>([:])
    private let nextID = Atomic<Int>(0)

    public init() {}

    /// Sends `event` to every matching subscriber.
    public func publish(_ event: ChatEvent) {
        let current = subscribers.withLock { Array($0.values) }
        for subscription in current where subscription.filter.matches(event) {
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
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let subscription = EventSubscription(filter: filter, buffering: buffering) { [weak self] in
            self?.subscribers.withLock { _ = $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = subscription }
        return EventStream(subscription)
    }

    /// The number of live subscriptions.
    public var subscriberCount: Int { subscribers.withLock { $0.count } }

    /// Ends every subscription; their streams finish after what they hold.
    public func finish() {
        let current = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for subscription in current { subscription.finish() }
    }
}

/// The events of one bus subscription, in publish order.
///
/// Single consumer: iterate it from one task. When the iterator is dropped the subscription
/// ends. Backpressure and loss are as the subscription's ``EventBus/BufferingPolicy`` says.
public struct EventStream: AsyncSequence, Sendable {
    public typealias Element = ChatEvent
    public typealias Failure = Never

    private let subscription: EventSubscription

    init(_ subscription: EventSubscription) {
        self.subscription = subscription
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription)
    }

    /// Ends the subscription; the stream finishes after the events it holds.
    public func finish() {
        subscription.finish()
    }

    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = ChatEvent
        public typealias Failure = Never
        private let lifetime: Lifetime

        init(_ subscription: EventSubscription) {
            self.lifetime = Lifetime(subscription)
        }

        public mutating func next() async -> ChatEvent? {
            await lifetime.subscription.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> ChatEvent? {
            await lifetime.subscription.next()
        }
    }

    /// Ends the subscription when the last iterator copy goes away.
    private final class Lifetime: Sendable {
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
    }

    let filter: EventFilter
    private let capacity: Int?
    private let state = Mutex(State())
    private let onFinish: @Sendable () -> Void

    init(filter: EventFilter, buffering: EventBus.BufferingPolicy, onFinish: @escaping @Sendable () -> Void) {
        self.filter = filter
        switch buffering {
        case .unbounded: self.capacity = nil
        case .bounded(let capacity): self.capacity = max(1, capacity)
        }
        self.onFinish = onFinish
    }

    func offer(_ event: ChatEvent) {
        let waiter: CheckedContinuation<ChatEvent?, Never>? = state.withLock { state in
            if state.isFinished { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if let capacity, state.bufferedEvents >= capacity {
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
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ChatEvent?, Never>) in
                let ready: ChatEvent?? = state.withLock { state in
                    if let item = state.buffer.popFirst() {
                        switch item {
                        case .event(let event):
                            state.bufferedEvents -= 1
                            return .some(event)
                        case .gap(let dropped, let first):
                            return .some(Self.gapEvent(dropped: dropped, first: first))
                        }
                    }
                    if state.isFinished || Task.isCancelled { return .some(nil) }
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
        onFinish()
    }

    /// The gap event stands where the first dropped event stood, so it carries that event's
    /// origin and time (no clock of its own).
    private static func gapEvent(dropped: Int, first: ChatEvent) -> ChatEvent {
        ChatEvent(origin: first.origin, conversationID: nil, time: first.time, kind: .gap(dropped: dropped))
    }
}
