import DequeModule

/// A link's inbound updates in wire order: what ``BackendConnection/updates`` hands the engine.
///
/// Made with ``makeStream()``, the stream counts the updates its link yielded, and the engine
/// uses the count to keep a request's answer behind them: when a request returns, its answer
/// reaches the session after every update the link yielded before it returned (a room's new
/// cursor before the close that made it, a started thread's welcome message before the start's
/// answer). The link's updates and a request's answer otherwise travel in tasks of their own,
/// and the answer could be stored first.
///
/// A stream wrapped with ``init(_:)`` is not counted: its updates carry no order with answers.
public struct BackendUpdates: AsyncSequence, Sendable {
    public typealias Element = BackendUpdate

    private enum Source: Sendable {
        case stream(AsyncThrowingStream<BackendUpdate, any Error>)
        case pipe(UpdatePipe)
    }

    private let source: Source

    /// Wraps a stream the link made itself (a test double's `unfolding` stream); the engine cannot
    /// count what it yields, so a request's answer may reach the session before them.
    public init(_ stream: AsyncThrowingStream<BackendUpdate, any Error>) {
        source = .stream(stream)
    }

    /// A counted stream and the continuation the link yields through.
    public static func makeStream() -> (updates: BackendUpdates, continuation: Continuation) {
        let pipe = UpdatePipe()
        return (BackendUpdates(source: .pipe(pipe)), Continuation(pipe: pipe))
    }

    private init(source: Source) {
        self.source = source
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .stream(let stream): AsyncIterator(.stream(stream.makeAsyncIterator()))
        case .pipe(let pipe): AsyncIterator(.pipe(pipe))
        }
    }

    /// How many updates the link has yielded into the stream so far, or `nil` for a stream that is
    /// not counted.
    public var yielded: Int? {
        guard case .pipe(let pipe) = source else { return nil }
        return pipe.yielded
    }

    /// A counted stream's pipe, which the engine takes the updates from in the link's own task.
    var pipe: UpdatePipe? {
        guard case .pipe(let pipe) = source else { return nil }
        return pipe
    }

    /// Iterates the updates in wire order; cancelling the task that waits for one ends the
    /// stream, as with `AsyncThrowingStream`. Single consumer.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate enum Base {
            case stream(AsyncThrowingStream<BackendUpdate, any Error>.Iterator)
            case pipe(UpdatePipe)
        }

        private var base: Base

        fileprivate init(_ base: Base) {
            self.base = base
        }

        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> BackendUpdate? {
            switch base {
            case .stream(var iterator):
                defer { base = .stream(iterator) }
                return try await iterator.next(isolation: actor)
            case .pipe(let pipe):
                return try await pipe.next()
            }
        }

        public mutating func next() async throws -> BackendUpdate? {
            try await next(isolation: nil)
        }
    }

    /// The link's end of a counted stream.
    public struct Continuation: Sendable {
        fileprivate let pipe: UpdatePipe

        /// Hands the engine one update; `false` once the stream has ended (the update is dropped).
        ///
        /// Once the engine reads the stream, the update goes into the session's queue right here,
        /// in the caller's task, under short locks; before, it is buffered.
        @discardableResult
        public func yield(_ update: BackendUpdate) -> Bool {
            pipe.yield(update)
        }

        /// Ends the stream, with the error the link ended with or none when it closed as asked.
        public func finish(throwing error: (any Error)? = nil) {
            pipe.finish(throwing: error)
        }
    }
}

/// A counted link's updates: buffered for an iterator, or handed straight to the engine from the
/// task that yields them once the engine attaches its delivery (``attach(_:)``). With a delivery
/// the engine needs no task to read the link, and an update reaches the session's inbox with no
/// hop between tasks. The lock keeps the count, the order and the end together: an update counted
/// has been handed on (or buffered) before `yield` returns.
final class UpdatePipe: Sendable {
    /// Where the engine takes the updates: each update, then the link's end (`nil` when it closed
    /// as asked). `update` returns `false` when the engine will take no more.
    struct Delivery: Sendable {
        let update: @Sendable (BackendUpdate) -> Bool
        let end: @Sendable ((any Error)?) -> Void
    }

    private enum End {
        case finished
        case failed(any Error)
    }

    private struct State {
        var buffer: Deque<BackendUpdate> = []
        var end: End?
        var consumer: CheckedContinuation<BackendUpdate?, any Error>?
        var delivery: Delivery?
        var yielded = 0
        /// Nothing more is taken: the iterator was cancelled or read the end, or the engine
        /// detached.
        var closed = false
    }

    private let state = Locked(State())

    var yielded: Int { state.withLock { $0.yielded } }

    func yield(_ update: BackendUpdate) -> Bool {
        let consumer: CheckedContinuation<BackendUpdate?, any Error>?? = state.withLock { state in
            guard !state.closed, state.end == nil else { return nil }
            if let delivery = state.delivery {
                // Under the lock: the order and the count hold across tasks that yield at once.
                guard delivery.update(update) else {
                    state.closed = true
                    state.delivery = nil
                    return nil
                }
                state.yielded += 1
                return .some(nil)
            }
            state.yielded += 1
            if let consumer = state.consumer {
                state.consumer = nil
                return .some(consumer)
            }
            state.buffer.append(update)
            return .some(nil)
        }
        guard let consumer else { return false }
        consumer?.resume(returning: update)
        return true
    }

    func finish(throwing error: (any Error)?) {
        let consumer: CheckedContinuation<BackendUpdate?, any Error>? = state.withLock { state in
            guard !state.closed, state.end == nil else { return nil }
            state.end = error.map(End.failed) ?? .finished
            if let delivery = state.delivery {
                delivery.end(error)
                state.delivery = nil
                state.closed = true
                return nil
            }
            guard let consumer = state.consumer else { return nil }
            state.consumer = nil
            state.closed = true
            return consumer
        }
        guard let consumer else { return }
        if let error { consumer.resume(throwing: error) } else { consumer.resume(returning: nil) }
    }

    /// From now on the updates go to `delivery` as the link yields them, after the ones already
    /// buffered (and the end, if the link already ended). `false` when an iterator is reading
    /// the pipe or it is closed: then nothing changes.
    func attach(_ delivery: Delivery) -> Bool {
        state.withLock { state in
            guard !state.closed, state.consumer == nil, state.delivery == nil else { return false }
            let buffered = state.buffer
            // Attached, the pipe buffers nothing again: its storage goes.
            state.buffer = []
            for update in buffered {
                guard delivery.update(update) else {
                    state.closed = true
                    return true
                }
            }
            if let end = state.end {
                state.closed = true
                switch end {
                case .finished: delivery.end(nil)
                case .failed(let error): delivery.end(error)
                }
                return true
            }
            state.delivery = delivery
            return true
        }
    }

    /// The engine takes no more: later updates are dropped and `yield` returns `false`.
    func detach() {
        state.withLock { state in
            state.delivery = nil
            state.closed = true
            state.buffer.removeAll()
        }
    }

    func next() async throws -> BackendUpdate? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BackendUpdate?, any Error>) in
                let ready: Result<BackendUpdate?, any Error>? = state.withLock { state in
                    if let update = state.buffer.popFirst() { return .success(update) }
                    if state.closed || Task.isCancelled {
                        state.closed = true
                        return .success(nil)
                    }
                    switch state.end {
                    case .finished?:
                        state.closed = true
                        return .success(nil)
                    case .failed(let error)?:
                        state.closed = true
                        return .failure(error)
                    case nil:
                        precondition(state.consumer == nil && state.delivery == nil, "a link's updates have one consumer")
                        state.consumer = continuation
                        return nil
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let consumer = state.withLock { state in
                state.closed = true
                defer { state.consumer = nil }
                return state.consumer
            }
            consumer?.resume(returning: nil)
        }
    }
}
