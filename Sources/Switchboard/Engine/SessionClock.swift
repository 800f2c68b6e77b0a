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

/// An action a ``SchedulingClock`` will run. Cancelling is best effort: an action the clock has
/// already taken to run (its deadline came as it was cancelled) still runs, and cancelling it
/// after it ran does nothing. (The session's ticks carry a generation, so a late one is ignored.)
public struct ScheduledAction: Sendable {
    private let _cancel: @Sendable () -> Void

    public init(cancel: @escaping @Sendable () -> Void) { self._cancel = cancel }

    /// Keeps the action from running unless the clock has already taken it to run.
    public func cancel() { _cancel() }
}

extension ContinuousClock: SchedulingClock {
    /// One dispatch timer source per action, on a queue the process's sessions share; cancelling
    /// the action cancels its source, which frees it at once.
    ///
    /// The source counts the time until the deadline on the system's uptime, which stops while
    /// the device sleeps (`ContinuousClock` does not): across a sleep the action comes late by the
    /// time asleep. A session's link usually fails across a sleep, and its failure arms a timer
    /// afresh.
    public func schedule(at deadline: Instant, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let delay = now.duration(to: deadline)
        let (seconds, attoseconds) = delay.components
        let nanoseconds = min(max(0, seconds), 1 << 32) * 1_000_000_000 + max(0, (attoseconds + 999_999_999) / 1_000_000_000)
        let timer = DispatchTimer(DispatchSource.makeTimerSource(queue: scheduledActions))
        // The handler holds the source until it fires or is cancelled: cancelling a source lets
        // go of its handler.
        timer.source.setEventHandler {
            timer.source.cancel()
            action()
        }
        timer.source.schedule(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        timer.source.resume()
        return ScheduledAction { timer.source.cancel() }
    }
}

/// A dispatch timer source, which is safe to use from any thread.
private final class DispatchTimer: @unchecked Sendable {
    let source: any DispatchSourceTimer
    init(_ source: any DispatchSourceTimer) { self.source = source }
}

/// Where `ContinuousClock`'s scheduled actions run (each is short: a session's yields a tick).
private let scheduledActions = DispatchQueue(label: "switchboard.scheduled-actions")
