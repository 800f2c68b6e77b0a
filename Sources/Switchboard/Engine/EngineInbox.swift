import DequeModule

/// The engine's one input queue: every input of a ``ChatSession`` — an update from the link, an
/// app command, a timer tick, a request's outcome — goes in here, and the session's loop takes
/// them out one at a time.
///
/// Single consumer (the loop), many producers. Inbound updates are flow-controlled: while
/// ``updateWindow`` updates are buffered, a link's reader waits, and the updates a counted link
/// hands in straight from its own task (``offerUpdate(_:counting:)``) are held back in order,
/// so the loop takes other inputs (an app's command, a request's outcome) between a flood's
/// updates; everything else is bounded by its producer (an app call awaits its command, a
/// request's outcome comes from a bounded number of lanes, a timer from the one sleeper). The
/// lock guards the buffer, the held updates, the waiting consumer, the waiting readers and the
/// counters.
final class EngineInbox<Input: Sendable>: Sendable {
    /// What a counted link handed in while the window was full: its updates in order, then its end.
    private enum Held {
        case update(Input, TakenUpdates)
        case end(Input, TakenUpdates)
    }

    private struct State {
        var buffer: Deque<Input> = []
        /// Whether `buffer` held more than a few inputs since it was last empty (its storage is
        /// then let go when it empties).
        var grown = false
        var held: Deque<Held> = []
        var peakHeld = 0
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
            return .some(Self.enqueue(input, first: first, in: &state))
        }
        guard let consumer else { return false }
        consumer?.resume(returning: input)
        return true
    }

    /// The waiting consumer, to resume with `input` outside the lock, or `nil` when `input` was
    /// buffered.
    private static func enqueue(_ input: Input, first: Bool = false, in state: inout State) -> CheckedContinuation<Input?, Never>? {
        if let consumer = state.consumer {
            state.consumer = nil
            return consumer
        }
        if first { state.buffer.prepend(input) } else { state.buffer.append(input) }
        state.peakBuffered = max(state.peakBuffered, state.buffer.count)
        if state.buffer.count > 16 { state.grown = true }
        return nil
    }

    /// Adds an update a counted link hands in from its own task (no reader between): now when
    /// the window has room and nothing of a link is held, else held until the loop has taken
    /// enough. `taken` counts it as it goes into the queue. `false` when the loop has ended.
    func offerUpdate(_ input: Input, counting taken: TakenUpdates) -> Bool {
        let outcome: (consumer: CheckedContinuation<Input?, Never>?, queued: Bool)? = state.withLock { state in
            if state.isClosed { return nil }
            guard state.held.isEmpty, state.updatesInQueue < updateWindow else {
                state.held.append(.update(input, taken))
                state.peakHeld = max(state.peakHeld, state.held.count)
                return (nil, false)
            }
            state.updatesInQueue += 1
            return (Self.enqueue(input, in: &state), true)
        }
        guard let outcome else { return false }
        outcome.consumer?.resume(returning: input)
        if outcome.queued { taken.took() }
        return true
    }

    /// Adds a counted link's end (`input`: its failure) behind what it handed in, and ends
    /// `taken` as it goes into the queue.
    func offerEnd(_ input: Input, counting taken: TakenUpdates) {
        let outcome: (consumer: CheckedContinuation<Input?, Never>?, queued: Bool)? = state.withLock { state in
            if state.isClosed { return nil }
            guard state.held.isEmpty else {
                state.held.append(.end(input, taken))
                return (nil, false)
            }
            return (Self.enqueue(input, in: &state), true)
        }
        outcome?.consumer?.resume(returning: input)
        if outcome?.queued ?? true { taken.end() }
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

    /// The loop took an update: one more may come in, a held one first.
    func updateTaken() {
        let (reader, moved) = state.withLock { state -> (CheckedContinuation<Void, Never>?, [(TakenUpdates, ended: Bool)]) in
            state.updatesInQueue -= 1
            // The loop is running (it took the update), so nothing waits to consume: queued.
            var moved: [(TakenUpdates, ended: Bool)] = []
            while let first = state.held.first {
                switch first {
                case .update(let input, let taken):
                    guard state.updatesInQueue < updateWindow else { return (nil, moved) }
                    state.updatesInQueue += 1
                    state.buffer.append(input)
                    moved.append((taken, false))
                case .end(let input, let taken):
                    state.buffer.append(input)
                    moved.append((taken, true))
                }
                state.held.removeFirst()
                state.peakBuffered = max(state.peakBuffered, state.buffer.count)
            }
            // A reader waits for room only (a reader's link and a counted link's held updates
            // seldom live at once: links run one after another).
            guard state.updatesInQueue < updateWindow else { return (nil, moved) }
            while let id = state.readerOrder.popFirst() {
                if let reader = state.readers.removeValue(forKey: id) { return (reader, moved) }
            }
            return (nil, moved)
        }
        for (taken, ended) in moved {
            if ended { taken.end() } else { taken.took() }
        }
        reader?.resume()
    }

    /// The next input, in arrival order; `nil` once closed.
    @inline(never)
    func next() async -> Input? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Input?, Never>) in
            let ready: Input?? = state.withLock { state in
                if let input = state.buffer.popFirst() {
                    // A queue a burst grew goes back once drained: an idle session keeps none.
                    if state.buffer.isEmpty, state.grown {
                        state.buffer = []
                        state.grown = false
                    }
                    return .some(input)
                }
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

    /// Drops what a closed link handed in and is still held (the machine would drop each as it
    /// came, and the next link's updates would wait behind them), and ends `taken`.
    func dropHeld(counting taken: TakenUpdates) {
        state.withLock { state in
            state.held.removeAll { entry in
                switch entry {
                case .update(_, let held), .end(_, let held): held === taken
                }
            }
        }
        taken.end()
    }

    /// Held updates of counted links, past the window: the backlog a flood leaves (unbounded, as
    /// a link's stream was before it).
    var heldUpdates: Int { state.withLock { $0.held.count } }
    /// The most updates held at once.
    var peakHeldUpdates: Int { state.withLock { $0.peakHeld } }

    /// Refuses further inputs and returns the ones never taken, so their owners can be answered.
    func close() -> [Input] {
        let (left, consumer, readers, held) = state.withLock { state in
            state.isClosed = true
            let left = Array(state.buffer)
            state.buffer.removeAll()
            let held = state.held
            state.held.removeAll()
            let consumer = state.consumer
            state.consumer = nil
            let readers = Array(state.readers.values)
            state.readers.removeAll()
            state.readerOrder.removeAll()
            return (left, consumer, readers, held)
        }
        consumer?.resume(returning: nil)
        for reader in readers { reader.resume() }
        // No request waits on a link's updates that will never be taken.
        for entry in held {
            switch entry {
            case .update(_, let taken), .end(_, let taken): taken.end()
            }
        }
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

    /// Child tasks of the engine alive now (the link, the reader of a stream the link made itself,
    /// requests in flight, and a sleeper where the timer is not scheduled on the clock: a clock
    /// that cannot, or a deadline already due).
    var liveTasks: Int { tasks.withLock { $0.live } }
    var peakLiveTasks: Int { tasks.withLock { $0.peak } }
}
