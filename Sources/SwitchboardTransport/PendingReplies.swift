public import Switchboard

/// Requests on a socket that wait for their replies, by request id.
///
/// A waiter is registered before its request is sent, so a reply that comes back at once is never
/// taken for a push; the wait ends with the reply, the error the reader hands over, the timeout,
/// or the link's end (``close(_:)``), whichever comes first.
public final class PendingReplies<Reply: Sendable>: Sendable {
    private struct Waiter {
        let label: String
        let continuation: AsyncThrowingStream<Reply, any Error>.Continuation
    }

    private struct State {
        var waiters: [String: Waiter] = [:]
        var closed: (any Error)?
    }

    private let state = Locked(State())

    public init() {}

    /// Registers `id`, runs `send`, then waits for the reply at most `timeout` on `clock`.
    ///
    /// - Parameters:
    ///   - label: what the request is (its name), handed to ``fail(_:_:)``'s error builder.
    ///   - timedOut: the error when no reply comes in time.
    /// - Throws: what `send` throws, the reader's error for this request, `timedOut()`, the
    ///   error the link was closed with, or `CancellationError`.
    public func request(
        _ id: String,
        label: String,
        timeout: Duration,
        clock: SessionClock,
        timedOut: @escaping @Sendable () -> any Error,
        send: () async throws -> Void
    ) async throws -> Reply {
        let (replies, continuation) = AsyncThrowingStream.makeStream(of: Reply.self)
        try state.withLock { state in
            if let closed = state.closed { throw closed }
            state.waiters[id] = Waiter(label: label, continuation: continuation)
        }
        defer { state.withLock { _ = $0.waiters.removeValue(forKey: id) } }
        try await send()
        return try await withThrowingTaskGroup(of: Reply.self) { group in
            group.addTask {
                for try await reply in replies { return reply }
                throw CancellationError()
            }
            group.addTask {
                try await clock.sleep(for: timeout)
                throw timedOut()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Hands `reply` to the request `id`; `false` when nothing waits for it (it timed out, or the
    /// frame is not a reply).
    @discardableResult
    public func resolve(_ id: String, with reply: Reply) -> Bool {
        guard let waiter = state.withLock({ $0.waiters.removeValue(forKey: id) }) else { return false }
        waiter.continuation.yield(reply)
        waiter.continuation.finish()
        return true
    }

    /// Fails the request `id` with the error `error(label)`; `false` when nothing waits for it.
    @discardableResult
    public func fail(_ id: String, _ error: (_ label: String) -> any Error) -> Bool {
        guard let waiter = state.withLock({ $0.waiters.removeValue(forKey: id) }) else { return false }
        waiter.continuation.finish(throwing: error(waiter.label))
        return true
    }

    /// Fails every waiting request, and every later one, with `error`. The first close wins.
    public func close(_ error: any Error) {
        let waiters = state.withLock { state in
            if state.closed == nil { state.closed = error }
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.continuation.finish(throwing: error) }
    }
}
