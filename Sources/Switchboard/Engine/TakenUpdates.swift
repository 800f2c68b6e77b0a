/// How many of a link's updates the session's inbox has taken into its queue, for a request's
/// answer to wait behind (``BackendUpdates``): each update is counted as it goes into the queue
/// (from the link's task, as the loop makes room for a held one, or from a reader), and a request
/// that returned after its link yielded `n` updates is answered once `n` are in. The link's end
/// (it failed or closed, the loop ended, the engine let it go) lets every waiter go, as does the
/// waiter's cancellation. The lock guards the count, whether the link has ended and the waiters.
final class TakenUpdates: Sendable {
    private struct Waiter {
        let id: Int
        let count: Int
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var taken = 0
        var ended = false
        var waiters: [Waiter] = []
        var nextWaiter = 0
    }

    private let state = Locked(State())

    /// The reader handed the inbox one more update. (Out of line: inlined into the reader, its
    /// lock's closure took room on the reader's task stack.)
    @inline(never)
    func took() {
        let ready: [Waiter] = state.withLock { state in
            state.taken += 1
            guard state.waiters.contains(where: { $0.count <= state.taken }) else { return [] }
            let taken = state.taken
            defer { state.waiters.removeAll { $0.count <= taken } }
            return state.waiters.filter { $0.count <= taken }
        }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// How many updates are in the session's queue, and whether the link's updates have ended.
    var taken: (count: Int, ended: Bool) { state.withLock { ($0.taken, $0.ended) } }

    /// The reader ended: no waiter waits any longer.
    func end() {
        let waiters: [Waiter] = state.withLock { state in
            state.ended = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume() }
    }

    /// Returns once `count` updates are in, the reader has ended, or the task is cancelled.
    func wait(until count: Int) async {
        let id: Int? = state.withLock { state in
            if state.ended || state.taken >= count { return nil }
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.ended || state.taken >= count || Task.isCancelled { return true }
                    state.waiters.append(Waiter(id: id, count: count, continuation: continuation))
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter: Waiter? = state.withLock { state in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }
}
