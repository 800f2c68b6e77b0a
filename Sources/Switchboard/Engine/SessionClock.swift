public import Foundation

/// The time source of a session: a monotonic clock for delays and a wall clock for
/// timestamps, both injected so tests control them.
///
/// It erases a `Clock` whose duration is `Duration` (a `ContinuousClock`, or a test clock
/// from `SwitchboardTestKit`), so the engine and adapters need no generic parameter.
public struct SessionClock: Sendable {
    private let _elapsed: @Sendable () -> Duration
    private let _sleep: @Sendable (Duration) async throws -> Void
    private let _date: @Sendable () -> Date
    private let _schedule: (@Sendable (Duration, @escaping @Sendable () -> Void) -> ScheduledAction)?

    /// - Parameters:
    ///   - clock: drives delays (backoff, timers, throttles).
    ///   - wallClock: gives the `Date` of locally created messages and events; defaults to
    ///     a date that moves with `clock` from the moment of creation.
    public init<C: Clock>(_ clock: C, wallClock: (@Sendable () -> Date)? = nil) where C.Duration == Duration {
        let start = clock.now
        let startDate = Date()
        let elapsed: @Sendable () -> Duration = { start.duration(to: clock.now) }
        self._elapsed = elapsed
        self._sleep = { duration in try await clock.sleep(for: duration) }
        self._date = wallClock ?? { startDate.addingTimeInterval(elapsed().seconds) }
        if let scheduling = clock as? any SchedulingClock<C.Instant> {
            self._schedule = { deadline, action in scheduling.schedule(at: start.advanced(by: deadline), action) }
        } else {
            self._schedule = nil
        }
    }

    /// The real clocks.
    public static var continuous: SessionClock { SessionClock(ContinuousClock(), wallClock: { Date() }) }

    /// Monotonic time since the clock was made.
    public var now: Duration { _elapsed() }

    /// Wall-clock time for timestamps.
    public var date: Date { _date() }

    /// Suspends for `duration` of this clock.
    ///
    /// - Throws: `CancellationError` when the task is cancelled.
    public func sleep(for duration: Duration) async throws {
        try await _sleep(duration)
    }

    /// Whether ``schedule(at:_:)`` runs actions without a task: the clock is a
    /// ``SchedulingClock`` (the continuous clock, `TestClock`).
    public var schedules: Bool { _schedule != nil }

    /// Runs `action` once ``now`` reaches `deadline` (at once when it has), with no task waiting
    /// for it, unless it is cancelled first.
    ///
    /// - Returns: `nil` when the clock cannot (it is no ``SchedulingClock``): the caller sleeps
    ///   in a task instead.
    public func schedule(at deadline: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction? {
        _schedule?(deadline, action)
    }
}

/// A clock that runs an action at an instant without a task waiting for it.
///
/// A session's timer (the machine's earliest deadline) is scheduled on it: a process of 10,000
/// idle sessions keeps no task per session that only waits. `ContinuousClock` schedules on a
/// dispatch queue; `TestClock` (SwitchboardTestKit) when a test moves its time.
public protocol SchedulingClock<Instant>: Clock where Duration == Swift.Duration {
    /// Runs `action` once at `deadline` (soon when it has passed), unless the returned action
    /// is cancelled first. `action` must not block: it runs on the clock's own thread or queue.
    func schedule(at deadline: Instant, _ action: @escaping @Sendable () -> Void) -> ScheduledAction
}

/// An action a ``SchedulingClock`` will run; cancelling it after it ran does nothing.
public struct ScheduledAction: Sendable {
    private let _cancel: @Sendable () -> Void

    public init(cancel: @escaping @Sendable () -> Void) { self._cancel = cancel }

    /// Keeps the action from running if it has not yet.
    public func cancel() { _cancel() }
}

extension ContinuousClock: SchedulingClock {
    /// One dispatch timer (`asyncAfter`) per action, on a queue the process's sessions share. A
    /// cancelled action is let go at once; its timer fires later and runs nothing.
    public func schedule(at deadline: Instant, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let pending = Locked<(@Sendable () -> Void)?>(action)
        let delay = now.duration(to: deadline)
        let nanoseconds = min(max(0, delay.components.seconds), 1 << 32) * 1_000_000_000 + max(0, delay.components.attoseconds / 1_000_000_000)
        scheduledActions.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) {
            pending.withLock { action in defer { action = nil }; return action }?()
        }
        return ScheduledAction { pending.withLock { $0 = nil } }
    }
}

/// Where `ContinuousClock`'s scheduled actions run (each is short: a session's yields a tick).
private let scheduledActions = DispatchQueue(label: "switchboard.scheduled-actions")
