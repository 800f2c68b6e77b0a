import DequeModule

/// A FIFO async lock: bodies run one at a time, in the order they arrived, each to completion
/// (across its suspension points). For adapters whose protocol wants requests strictly one at a
/// time (Webim's action queue); the engine itself orders its work with its input loop.
///
/// Bodies must not take the same gate again (that would wait for itself). Waiting for the gate
/// is not cancellable: a body in front always finishes. The lock guards the busy flag and the
/// waiters.
public final class AsyncGate: Sendable {
    private struct State {
        var busy = false
        var waiters: Deque<CheckedContinuation<Void, Never>> = []
    }

    private let state = Locked(State())

    public init() {}

    /// Runs `body` once every body that arrived earlier has finished.
    public func withGate<T>(_ body: () async throws -> T) async rethrows -> T {
        let mustWait = state.withLock { state in
            if state.busy { return true }
            state.busy = true
            return false
        }
        if mustWait {
            await withCheckedContinuation { continuation in
                // Re-check under the lock: the holder may have left in between.
                let runNow = state.withLock { state in
                    if state.busy {
                        state.waiters.append(continuation)
                        return false
                    }
                    state.busy = true
                    return true
                }
                if runNow { continuation.resume() }
            }
        }
        defer {
            let next: CheckedContinuation<Void, Never>? = state.withLock { state in
                if let next = state.waiters.popFirst() { return next }
                state.busy = false
                return nil
            }
            next?.resume()
        }
        return try await body()
    }
}
