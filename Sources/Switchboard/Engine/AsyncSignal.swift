
/// A broadcast wake-up: tasks wait for the generation to move past the one they saw; a
/// signal moves it and wakes them all. Waiting ends early when the waiting task is cancelled.
/// The lock guards the generation and the waiters.
public final class AsyncSignal: Sendable {
    private struct State {
        var generation = 0
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Locked(State())

    public init() {}

    public var generation: Int { state.withLock { $0.generation } }

    public func signal() {
        let waiters = state.withLock { state in
            state.generation += 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is past `generation`, or the task is cancelled.
    public func wait(since generation: Int) async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
