public import Switchboard

/// Requests on a socket that wait for their replies, by request id.
///
/// A waiter is registered before its request is sent, so a reply that comes back at once is never
/// taken for a push; the wait ends with the reply, the error the reader hands over, the timeout,
/// or the link's end (``close(_:)``), whichever comes first.
public final class PendingReplies<Reply: Sendable>: Sendable {
    /// One request, from its registration until it returns.
    private struct Waiter {
        let id: String
        let label: String
        /// The request's task, while it waits.
        var continuation: CheckedContinuation<Reply, any Error>?
        /// How the request ended (`nil` while it has not): its task takes it if it has not
        /// waited yet (a reply can come before it does).
        var outcome: Result<Reply, any Error>?
    }

    private struct State {
        /// Every request until it returns, by a number of its own: a later request under the
        /// same id is another entry.
        var waiters: [Int: Waiter] = [:]
        /// The request each id's replies go to.
        var byID: [String: Int] = [:]
        var closed: (any Error)?
        var nextToken = 0

        /// Ends request `token` with `outcome` unless it has ended; returns its task to resume
        /// when it waits (else its wait takes the outcome).
        mutating func end(_ token: Int, with outcome: Result<Reply, any Error>) -> CheckedContinuation<Reply, any Error>? {
            guard var waiter = waiters[token], waiter.outcome == nil else { return nil }
            waiter.outcome = outcome
            defer { waiter.continuation = nil; waiters[token] = waiter }
            return waiter.continuation
        }
    }

    private let state = Locked(State())

    public init() {}

    /// Registers `id`, runs `send`, then waits for the reply at most `timeout` on `clock`.
    ///
    /// The reply resumes the waiting task directly; the timeout is an action scheduled on the
    /// clock (a task that sleeps beside the wait on a clock that cannot schedule). No task is
    /// started per request.
    ///
    /// A request under the id of one that still waits ends that one with `invalidState` (keeping
    /// a reply it already had): ids are the adapter's to keep apart, and the earlier request
    /// would otherwise wait for ever.
    ///
    /// - Parameters:
    ///   - label: what the request is (its name), handed to ``fail(_:_:)``'s error builder.
    ///   - timedOut: the error when no reply comes in time.
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
            let token = state.nextToken
            state.nextToken += 1
            var replaced: (CheckedContinuation<Reply, any Error>, SwitchboardError)?
            if let earlier = state.byID[id], let label = state.waiters[earlier]?.label {
                let error = SwitchboardError(.invalidState, "\(label): request \(id) was replaced by a later request with the same id")
                replaced = state.end(earlier, with: .failure(error)).map { ($0, error) }
            }
            state.waiters[token] = Waiter(id: id, label: label)
            state.byID[id] = token
            return (token, replaced)
        }
        if let (continuation, error) = replaced { continuation.resume(throwing: error) }
        defer { forget(token) }
        try await send()
        let expired: @Sendable () -> Void = { [self] in finish(token) { _ in .failure(timedOut()) } }
        if let timer = clock.schedule(at: clock.now + timeout, expired) {
            defer { timer.cancel() }
            return try await wait(token)
        }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await clock.sleep(for: timeout)
                expired()
            }
            defer { group.cancelAll() }
            return try await wait(token)
        }
    }

    /// Waits for the outcome of request `token`, or takes the one that came before the wait.
    private func wait(_ token: Int) async throws -> Reply {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Reply, any Error>) in
                let outcome: Result<Reply, any Error>? = state.withLock { state in
                    guard var waiter = state.waiters[token] else { return .failure(state.closed ?? CancellationError()) }
                    if let outcome = waiter.outcome { return outcome }
                    waiter.continuation = continuation
                    state.waiters[token] = waiter
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            finish(token) { _ in .failure(CancellationError()) }
        }
    }

    /// Ends request `token` with `outcome(label)` unless it has ended; `false` when it has.
    /// `outcome` runs outside the lock (an error builder may call anything).
    @discardableResult
    private func finish(_ token: Int, with outcome: (_ label: String) -> Result<Reply, any Error>) -> Bool {
        let label: String? = state.withLock { state in
            guard let waiter = state.waiters[token], waiter.outcome == nil else { return nil }
            return waiter.label
        }
        guard let label else { return false }
        let result = outcome(label)
        // Another outcome may have come while this one was built: the first wins.
        let ended: (ended: Bool, continuation: CheckedContinuation<Reply, any Error>?) = state.withLock { state in
            guard let waiter = state.waiters[token], waiter.outcome == nil else { return (false, nil) }
            return (true, state.end(token, with: result))
        }
        ended.continuation?.resume(with: result)
        return ended.ended
    }

    /// The request `id`'s replies go to, if it has not ended.
    private func token(of id: String) -> Int? {
        state.withLock { $0.byID[id] }
    }

    /// Drops request `token` once it has returned.
    private func forget(_ token: Int) {
        state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: token) else { return }
            if state.byID[waiter.id] == token { state.byID[waiter.id] = nil }
        }
    }

    /// Hands `reply` to the request `id`; `false` when nothing waits for it (it timed out, or the
    /// frame is not a reply).
    @discardableResult
    public func resolve(_ id: String, with reply: Reply) -> Bool {
        guard let token = token(of: id) else { return false }
        return finish(token) { _ in .success(reply) }
    }

    /// Fails the request `id` with the error `error(label)`; `false` when nothing waits for it.
    @discardableResult
    public func fail(_ id: String, _ error: (_ label: String) -> any Error) -> Bool {
        guard let token = token(of: id) else { return false }
        return finish(token) { label in .failure(error(label)) }
    }

    /// Fails every waiting request, and every later one, with `error`. The first close wins.
    public func close(_ error: any Error) {
        let waiting = state.withLock { state in
            if state.closed == nil { state.closed = error }
            return state.waiters.keys.compactMap { state.end($0, with: .failure(error)) }
        }
        for continuation in waiting { continuation.resume(throwing: error) }
    }
}
