@_spi(TestKit) public import Switchboard

/// A clock whose time moves only when a test calls ``advance(by:)``: sleepers wake exactly when
/// their deadline is reached, so timeouts, backoff and throttles are tested without sleeping.
///
/// Actions scheduled on it (``schedule(at:_:)``, a session's timer) count as sleepers, and run
/// as ``advance(by:)`` reaches them.
///
/// The lock guards the current instant and the sleepers.
public final class TestClock: SchedulingClock, Sendable {
    public struct Instant: InstantProtocol {
        public var offset: Duration
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var wake: Wake
    }

    /// What a sleeper's deadline does: resume a sleeping task, or run a scheduled action.
    private enum Wake {
        case task(CheckedContinuation<Void, any Error>)
        case action(@Sendable () -> Void)

        func callAsFunction() {
            switch self {
            case .task(let continuation): continuation.resume()
            case .action(let action): action()
            }
        }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
    }

    private let state = Locked(State())
    /// Signalled whenever a task starts sleeping.
    private let sleepersChanged = AsyncSignal()

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, wake: .task(continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) } else { sleepersChanged.signal() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            if case .task(let continuation)? = sleeper?.wake { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Runs `action` when ``advance(by:)`` reaches `deadline` (at once when it has passed);
    /// until then it counts as a sleeper.
    public func schedule(at deadline: Instant, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let id: Int? = state.withLock { state in
            guard state.now < deadline else { return nil }
            defer { state.nextID += 1 }
            state.sleepers[state.nextID] = Sleeper(deadline: deadline, wake: .action(action))
            return state.nextID
        }
        guard let id else {
            action()
            return ScheduledAction {}
        }
        sleepersChanged.signal()
        return ScheduledAction { [state] in _ = state.withLock { $0.sleepers.removeValue(forKey: id) } }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due { state.sleepers[id] = nil }
            return due.map(\.value.wake)
        }
        for wake in due { wake() }
    }

    /// Waits until a task sleeps until `offset` from now, then moves time by `offset`: a timer
    /// whose length the test knows (a heartbeat's interval, a pong or reply deadline, an
    /// emulator's pause) fires once it is set, never before, however slow the machine.
    ///
    /// - Throws: ``ConformanceFailure`` when no such sleeper appears within `timeout` of real
    ///   time (a hang).
    public func advance(toSleeperDueIn offset: Duration, timeout: Duration = .seconds(30)) async throws {
        try await waitForSleeper(dueIn: offset, timeout: timeout)
        advance(by: offset)
    }

    /// Waits until a task sleeps until `offset` from now.
    ///
    /// - Throws: ``ConformanceFailure`` when none does within `timeout` of real time (a hang).
    public func waitForSleeper(dueIn offset: Duration, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("a task asleep for \(offset) on the test clock", timeout: timeout, signal: sleepersChanged) {
            pendingDeadlines.contains(offset)
        }
    }

    /// How many tasks are asleep on this clock, and actions scheduled on it.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// How many of the sleepers are tasks (the rest are scheduled actions).
    public var sleepingTaskCount: Int {
        state.withLock { state in
            state.sleepers.values.count { if case .task = $0.wake { true } else { false } }
        }
    }

    /// The deadlines of the sleepers, as offsets from now, soonest first.
    public var pendingDeadlines: [Duration] {
        state.withLock { state in state.sleepers.values.map { state.now.duration(to: $0.deadline) }.sorted() }
    }

    /// Waits until at least `count` sleepers (tasks asleep or actions scheduled) are on the clock;
    /// `false` when they are not within `timeout` of real time. Each one added wakes the wait: no count of yields,
    /// which a loaded machine's network threads can outrun before the awaited sleep starts.
    public func waitForSleepers(_ count: Int = 1, timeout: Duration = .seconds(30)) async -> Bool {
        do {
            try await waitUntil("\(count) tasks asleep on the test clock", timeout: timeout, signal: sleepersChanged) { sleeperCount >= count }
            return true
        } catch {
            return sleeperCount >= count
        }
    }
}

/// A clock on which every sleep returns at once and moves time forward by its duration: code
/// that waits (backoff, hold timers) runs as fast as the machine allows, deterministically.
public final class ImmediateClock: Clock, Sendable {
    public typealias Instant = TestClock.Instant

    private let current = Locked(Instant(offset: .zero))

    public init() {}

    public var now: Instant { current.withLock { $0 } }
    public var minimumResolution: Duration { .zero }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        current.withLock { now in if now < deadline { now = deadline } }
        await Task.yield()
        try Task.checkCancellation()
    }
}

/// SplitMix64: a small, fast, seedable generator, so "random" faults and jitter repeat exactly
/// for a seed.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
