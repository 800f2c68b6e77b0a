import DequeModule

/// The engine's one input queue: every input of a ``ChatSession`` — an update from the link, an
/// app command, a timer tick, a request's outcome — goes in here, and the session's loop takes
/// them out one at a time.
///
/// Single consumer (the loop), many producers. Inbound updates are flow-controlled: a link's
/// reader waits while ``updateWindow`` updates are buffered, so a fast server cannot grow the
/// queue without bound; everything else is bounded by its producer (an app call awaits its
/// command, a request's outcome comes from a bounded number of lanes, a timer from the one
/// sleeper). The lock guards the buffer, the waiting consumer, the waiting readers and the
/// counters.
final class EngineInbox<Input: Sendable>: Sendable {
    private struct State {
        var buffer: Deque<Input> = []
        var consumer: CheckedContinuation<Input?, Never>?
        var isClosed = false
        var peakBuffered = 0
        /// Updates yielded and not yet taken by the loop.
        var updatesInQueue = 0
        var readers: [Int: CheckedContinuation<Void, Never>] = [:]
        var readerOrder: Deque<Int> = []
        var nextReader = 0
    }

    /// How many inbound updates may wait in the queue before the link's reader waits.
    let updateWindow: Int
    private let state = Locked(State())
    private let tasks = Locked((live: 0, peak: 0))

    init(updateWindow: Int) {
        self.updateWindow = max(1, updateWindow)
    }

    /// Adds an input; `false` when the loop has ended and will never take it.
    @discardableResult
    func yield(_ input: Input) -> Bool {
        put(input, first: false)
    }

    /// Hands `input` to the waiting consumer, or buffers it (at the front when `first`).
    @discardableResult
    private func put(_ input: Input, first: Bool) -> Bool {
        let consumer: CheckedContinuation<Input?, Never>?? = state.withLock { state in
            if state.isClosed { return nil }
            if let consumer = state.consumer {
                state.consumer = nil
                return .some(consumer)
            }
            if first { state.buffer.prepend(input) } else { state.buffer.append(input) }
            state.peakBuffered = max(state.peakBuffered, state.buffer.count)
            return .some(nil)
        }
        guard let consumer else { return false }
        consumer?.resume(returning: input)
        return true
    }

    /// Adds an inbound update once the window has room (waits otherwise); returns `false`
    /// without adding it when the loop has ended or the reader is cancelled while waiting.
    @inline(never)
    func yieldUpdate(_ input: Input) async -> Bool {
        let id: Int? = state.withLock { state in
            if state.isClosed || state.updatesInQueue < updateWindow { return nil }
            defer { state.nextReader += 1 }
            return state.nextReader
        }
        if let id {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if state.isClosed || state.updatesInQueue < updateWindow || Task.isCancelled { return true }
                        state.readers[id] = continuation
                        state.readerOrder.append(id)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let reader = state.withLock { $0.readers.removeValue(forKey: id) }
                reader?.resume()
            }
            if Task.isCancelled { return false }
        }
        state.withLock { $0.updatesInQueue += 1 }
        if yield(input) { return true }
        state.withLock { $0.updatesInQueue -= 1 }
        return false
    }

    /// The loop took an update: one more may come in.
    func updateTaken() {
        let reader: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.updatesInQueue -= 1
            while let id = state.readerOrder.popFirst() {
                if let reader = state.readers.removeValue(forKey: id) { return reader }
            }
            return nil
        }
        reader?.resume()
    }

    /// The next input, in arrival order; `nil` once closed.
    @inline(never)
    func next() async -> Input? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Input?, Never>) in
            let ready: Input?? = state.withLock { state in
                if let input = state.buffer.popFirst() { return .some(input) }
                if state.isClosed { return .some(nil) }
                precondition(state.consumer == nil, "the engine inbox has one consumer")
                state.consumer = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The next buffered input if it satisfies `matches`, without waiting: the loop uses it to
    /// take the updates that arrived together as one batch.
    func nextIfBuffered(where matches: (Input) -> Bool) -> Input? {
        state.withLock { state in
            guard let first = state.buffer.first, matches(first) else { return nil }
            return state.buffer.removeFirst()
        }
    }

    /// Wakes the consumer with `input` ahead of anything buffered (used when the loop's task is
    /// cancelled).
    func interrupt(with input: Input) {
        put(input, first: true)
    }

    /// Refuses further inputs and returns the ones never taken, so their owners can be answered.
    func close() -> [Input] {
        let (left, consumer, readers) = state.withLock { state in
            state.isClosed = true
            let left = Array(state.buffer)
            state.buffer.removeAll()
            let consumer = state.consumer
            state.consumer = nil
            let readers = Array(state.readers.values)
            state.readers.removeAll()
            state.readerOrder.removeAll()
            return (left, consumer, readers)
        }
        consumer?.resume(returning: nil)
        for reader in readers { reader.resume() }
        return left
    }

    /// Inputs waiting now.
    var buffered: Int { state.withLock { $0.buffer.count } }
    /// The most inputs that ever waited at once.
    var peakBuffered: Int { state.withLock { $0.peakBuffered } }

    // MARK: Task accounting

    /// Counts a child task of the engine for the statistics; call ``taskEnded()`` when it ends.
    func taskStarted() {
        tasks.withLock { tasks in
            tasks.live += 1
            tasks.peak = Swift.max(tasks.peak, tasks.live)
        }
    }

    func taskEnded() { tasks.withLock { $0.live -= 1 } }

    /// Child tasks of the engine alive now (the link, its reader, requests in flight, and a sleeper
    /// where the timer is not scheduled on the clock: a clock that cannot, or a deadline already
    /// due).
    var liveTasks: Int { tasks.withLock { $0.live } }
    var peakLiveTasks: Int { tasks.withLock { $0.peak } }
}
