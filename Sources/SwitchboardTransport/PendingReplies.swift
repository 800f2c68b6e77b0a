public import Switchboard

/// Requests on a socket that wait for their replies, by request id.
///
/// A waiter is registered before its request is sent, so a reply that comes back at once is never
/// taken for a push; the wait ends with the reply, the error the reader hands over, the timeout,
/// or the link's end (``close(_:)``), whichever comes first.
public final class PendingReplies<Reply: Sendable>: Sendable {
    private struct Waiter {
        let label: String
        /// Tells this request from a later one that reuses its id.
        let token: Int
        /// The request's task, once it waits.
        var continuation: CheckedContinuation<Reply, any Error>?
        /// How the request ended, kept until its task waits (a reply can come before it does).
        var outcome: Result<Reply, any Error>?
    }

    private struct State {
        var waiters: [String: Waiter] = [:]
        var closed: (any Error)?
        var nextToken = 0
        /// The outcomes of requests whose id a later request took before they waited, by token.
        var orphans: [Int: Result<Reply, any Error>] = [:]
    }

    private let state = Locked(State())

    public init() {}

    /// Registers `id`, runs `send`, then waits for the reply at most `timeout` on `clock`.
    ///
    /// The reply resumes the waiting task directly; the timeout is an action scheduled on the
    /// clock (a task that sleeps beside the wait on a clock that cannot schedule). No task is
    /// started per request.
    ///
    /// - Parameters:
    ///   - label: what the request is (its name), handed to ``fail(_:_:)``'s error builder.
    ///   - timedOut: the error when no reply comes in time.
    /// A request under the id of one that still waits ends that one with `invalidState`: ids are
    /// the adapter's to keep apart, and the earlier request would otherwise wait for ever.
    ///
    /// - Throws: what `send` throws, the reader's error for this request, `timedOut()`, the
    ///   error the link was closed with, `invalidState` when a later request took its id, or
    ///   `CancellationError`.
    public func request(
        _ id: String,
        label: String,
        timeout: Duration,
        clock: SessionClock,
        timedOut: @escaping @Sendable () -> any Error,
        send: () async throws -> Void
    ) async throws -> Reply {
        let (token, replaced) = try state.withLock { state in
            if let closed = state.closed { throw closed }
            defer { state.nextToken += 1 }
            guard let replaced = state.waiters.updateValue(Waiter(label: label, token: state.nextToken), forKey: id) else {
                return (state.nextToken, nil as (CheckedContinuation<Reply, any Error>, SwitchboardError)?)
            }
            // The request whose id this one takes ends: with what it already got, or with
            // `invalidState`; its wait (if it has not waited yet) finds that under its token.
            let error = SwitchboardError(.invalidState, "\(replaced.label): request \(id) was replaced by a later request with the same id")
            if let continuation = replaced.continuation { return (state.nextToken, (continuation, error)) }
            state.orphans[replaced.token] = replaced.outcome ?? .failure(error)
            return (state.nextToken, nil)
        }
        if let (continuation, error) = replaced { continuation.resume(throwing: error) }
        defer { forget(id, token: token) }
        try await send()
        let expired: @Sendable () -> Void = { [self] in finish(id, token: token) { _ in .failure(timedOut()) } }
        if let timer = clock.schedule(at: clock.now + timeout, expired) {
            defer { timer.cancel() }
            return try await wait(id, token: token)
        }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await clock.sleep(for: timeout)
                expired()
            }
            defer { group.cancelAll() }
            return try await wait(id, token: token)
        }
    }

    /// Waits for the outcome of request `id`, or takes the one that came before the wait.
    private func wait(_ id: String, token: Int) async throws -> Reply {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Reply, any Error>) in
                let outcome: Result<Reply, any Error>? = state.withLock { state in
                    guard var waiter = state.waiters[id], waiter.token == token else {
                        if let orphaned = state.orphans.removeValue(forKey: token) { return orphaned }
                        return .failure(state.closed ?? CancellationError())
                    }
                    if let outcome = waiter.outcome {
                        state.waiters[id] = nil
                        return outcome
                    }
                    waiter.continuation = continuation
                    state.waiters[id] = waiter
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            finish(id, token: token) { _ in .failure(CancellationError()) }
        }
    }

    /// Ends request `id` (this one, when `token` is given) with `outcome(label)` unless it has
    /// ended; `false` when nothing waits for it. `outcome` runs outside the lock (an error builder
    /// may call anything).
    @discardableResult
    private func finish(_ id: String, token: Int? = nil, with outcome: (_ label: String) -> Result<Reply, any Error>) -> Bool {
        let waiting: (label: String, token: Int)? = state.withLock { state in
            guard let waiter = state.waiters[id], token.map({ $0 == waiter.token }) ?? true, waiter.outcome == nil else { return nil }
            return (waiter.label, waiter.token)
        }
        guard let waiting else { return false }
        let result = outcome(waiting.label)
        let continuation: CheckedContinuation<Reply, any Error>?? = state.withLock { state in
            // Another outcome may have come while this one was built: the first wins.
            guard var waiter = state.waiters[id], waiter.token == waiting.token, waiter.outcome == nil else { return .none }
            guard let continuation = waiter.continuation else {
                waiter.outcome = result
                state.waiters[id] = waiter
                return .some(nil)
            }
            state.waiters[id] = nil
            return .some(continuation)
        }
        guard let continuation else { return false }
        continuation?.resume(with: result)
        return true
    }

    /// Drops request `id`'s registration once it has returned.
    private func forget(_ id: String, token: Int) {
        state.withLock { state in
            if state.waiters[id]?.token == token { state.waiters[id] = nil }
            state.orphans[token] = nil
        }
    }

    /// Hands `reply` to the request `id`; `false` when nothing waits for it (it timed out, or the
    /// frame is not a reply).
    @discardableResult
    public func resolve(_ id: String, with reply: Reply) -> Bool {
        finish(id) { _ in .success(reply) }
    }

    /// Fails the request `id` with the error `error(label)`; `false` when nothing waits for it.
    @discardableResult
    public func fail(_ id: String, _ error: (_ label: String) -> any Error) -> Bool {
        finish(id) { label in .failure(error(label)) }
    }

    /// Fails every waiting request, and every later one, with `error`. The first close wins.
    public func close(_ error: any Error) {
        let waiting = state.withLock { state in
            if state.closed == nil { state.closed = error }
            var waiting: [CheckedContinuation<Reply, any Error>] = []
            for (id, var waiter) in state.waiters where waiter.outcome == nil {
                if let continuation = waiter.continuation {
                    waiting.append(continuation)
                    state.waiters[id] = nil
                } else {
                    waiter.outcome = .failure(error)
                    state.waiters[id] = waiter
                }
            }
            return waiting
        }
        for continuation in waiting { continuation.resume(throwing: error) }
    }
}
