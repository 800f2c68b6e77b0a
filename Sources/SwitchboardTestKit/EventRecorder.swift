public import Foundation
@_spi(TestKit) public import Switchboard

/// Records every event of a bus subscription, so a test can wait for what it expects and then
/// look at everything that happened. Run ``run()`` in the test's task group; it ends when the
/// subscription finishes.
///
/// The lock guards the recorded events.
public final class EventRecorder: Sendable {
    private let stream: EventStream
    private let recorded = Locked<[ChatEvent]>([])
    private let arrived = Locked<[Date]>([])
    private let now: @Sendable () -> Date
    private let signal = AsyncSignal()
    /// How long a wait lasts, unless it says, before it fails as a hang.
    public let patience: Duration

    /// - Parameters:
    ///   - stream: the events to record (a session's or a bus's subscription).
    ///   - patience: how long a wait lasts, unless it says, before it fails as a hang; longer for
    ///     a real server beside other suites on a loaded machine.
    ///   - now: when an event arrives (``arrivals``); the wall clock by default.
    public init(
        _ stream: EventStream,
        patience: Duration = .seconds(30),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.stream = stream
        self.patience = patience
        self.now = now
    }

    /// Drains the subscription until it finishes.
    public func run() async {
        for await event in stream {
            let time = now()
            recorded.withLock { $0.append(event) }
            arrived.withLock { $0.append(time) }
            signal.signal()
        }
    }

    /// When each recorded event arrived, in the order of ``events`` (the app's clock, not the
    /// server's time in the event).
    public var arrivals: [Date] { arrived.withLock { $0 } }

    /// Ends the subscription (and so ``run()``).
    public func finish() { stream.finish() }

    /// Everything recorded so far, in order.
    public var events: [ChatEvent] { recorded.withLock { $0 } }

    /// The recorded events that match.
    public func events(where predicate: (ChatEvent) -> Bool) -> [ChatEvent] {
        recorded.withLock { $0.filter(predicate) }
    }

    /// Waits for the first event (recorded already or to come) that matches, for `timeout` or
    /// the recorder's ``patience``.
    @discardableResult
    public func first(
        _ what: String,
        timeout: Duration? = nil,
        where predicate: @escaping @Sendable (ChatEvent) -> Bool
    ) async throws -> ChatEvent {
        try await waitUntil(what, timeout: timeout) { events in events.contains(where: predicate) }
        return recorded.withLock { $0.first(where: predicate)! }
    }

    /// Waits until the recorded events satisfy `condition`.
    public func waitUntil(
        _ what: String,
        timeout: Duration? = nil,
        _ condition: @escaping @Sendable ([ChatEvent]) -> Bool
    ) async throws {
        try await SwitchboardTestKit.waitUntil(what, timeout: timeout ?? patience, signal: signal) {
            condition(self.events)
        }
    }

    /// Waits until `check` holds, re-evaluating it whenever an event arrives.
    public func waitUntil(
        _ what: String,
        timeout: Duration? = nil,
        check: @escaping @Sendable () async throws -> Bool
    ) async throws {
        try await SwitchboardTestKit.waitUntil(what, timeout: timeout ?? patience, signal: signal, check)
    }
}

/// Runs `session` and records all its events for the duration of `body`, which gets the
/// recorder; both stop when `body` returns or throws.
public func withRecording<T: Sendable>(
    _ session: ChatSession,
    _ body: (EventRecorder) async throws -> T
) async throws -> T {
    let recorder = EventRecorder(session.events(filter: .all, buffering: .unbounded))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await session.run() }
        group.addTask { await recorder.run() }
        defer { group.cancelAll() }
        return try await body(recorder)
    }
}

/// Runs `session` with a recorder until `body` returns, as ``withRecording(_:_:)`` does: resumed
/// and connected before `body` runs, closed after it returns.
public func withConnectedRecording<T: Sendable>(
    _ session: ChatSession,
    _ body: (EventRecorder) async throws -> T
) async throws -> T {
    try await withRecording(session) { recorder in
        try await session.resume()
        try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
        let result = try await body(recorder)
        await session.close()
        return result
    }
}
