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
    public typealias AsyncIterator = AsyncThrowingStream<BackendUpdate, any Error>.Iterator

    private let stream: AsyncThrowingStream<BackendUpdate, any Error>
    private let counter: Locked<Int>?

    /// Wraps a stream the link made itself (a test double's `unfolding` stream); the engine cannot
    /// count what it yields, so a request's answer may reach the session before them.
    public init(_ stream: AsyncThrowingStream<BackendUpdate, any Error>) {
        self.stream = stream
        self.counter = nil
    }

    private init(stream: AsyncThrowingStream<BackendUpdate, any Error>, counter: Locked<Int>) {
        self.stream = stream
        self.counter = counter
    }

    /// A counted stream and the continuation the link yields through.
    public static func makeStream() -> (updates: BackendUpdates, continuation: Continuation) {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        let counter = Locked(0)
        return (BackendUpdates(stream: stream, counter: counter), Continuation(continuation: continuation, counter: counter))
    }

    public func makeAsyncIterator() -> AsyncIterator { stream.makeAsyncIterator() }

    /// How many updates the link has yielded into the stream so far, or `nil` for a stream that is
    /// not counted.
    public var yielded: Int? { counter?.withLock { $0 } }

    /// The link's end of a counted stream.
    public struct Continuation: Sendable {
        fileprivate let continuation: AsyncThrowingStream<BackendUpdate, any Error>.Continuation
        fileprivate let counter: Locked<Int>

        /// Hands the engine one update; `false` once the stream has ended (the update is dropped).
        @discardableResult
        public func yield(_ update: BackendUpdate) -> Bool {
            // Counted under the lock with the yield, so a count read after `yield` returns covers it.
            counter.withLock { yielded in
                guard case .enqueued = continuation.yield(update) else { return false }
                yielded += 1
                return true
            }
        }

        /// Ends the stream, with the error the link ended with or none when it closed as asked.
        public func finish(throwing error: (any Error)? = nil) {
            continuation.finish(throwing: error)
        }
    }
}
