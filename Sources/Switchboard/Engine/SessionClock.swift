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
}
