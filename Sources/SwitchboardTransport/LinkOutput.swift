public import Switchboard

/// What every link has, written once: its update stream, ended once with the error that ended
/// it (which the requests still waiting then fail with), and the loops it runs while it is up.
///
/// A link yields what it reads with ``yield(_:)`` and ends with ``end(_:)`` when its socket
/// closes, its long-poll fails or the server ends the session; the engine reads ``updates``.
public final class LinkOutput: Sendable {
    /// The link's updates, in wire order; they throw the error the link ended with.
    public let updates: BackendUpdates
    private let continuation: BackendUpdates.Continuation
    private let ended = Locked<SwitchboardError?>(nil)
    private let onEnd: @Sendable (SwitchboardError) -> Void

    /// - Parameter onEnd: what else ends with the link, once (the replies still waiting:
    ///   `PendingReplies.close(_:)`).
    public init(onEnd: @escaping @Sendable (SwitchboardError) -> Void = { _ in }) {
        (updates, continuation) = BackendUpdates.makeStream()
        self.onEnd = onEnd
    }

    /// Hands the engine one update.
    public func yield(_ update: BackendUpdate) {
        continuation.yield(update)
    }

    /// Ends the link: the first end wins; the stream throws its error, and `onEnd` runs with it.
    public func end(_ error: SwitchboardError) {
        let first = ended.withLock { ended in
            guard ended == nil else { return false }
            ended = error
            return true
        }
        guard first else { return }
        onEnd(error)
        continuation.finish(throwing: error)
    }

    /// Ends the stream without an error: the link closed as asked.
    public func finish() {
        continuation.finish()
    }

    /// The error the link ended with, or `nil` while it is up.
    public var endedWith: SwitchboardError? { ended.withLock { $0 } }

    /// Throws the error the link ended with: a request on a link that is gone fails at once.
    public func checkOpen() throws(SwitchboardError) {
        if let error = endedWith { throw error }
    }

    /// Runs `loops` (a reader, a long-poll, a heartbeat) as child tasks while `body` runs, and
    /// cancels them when it returns or throws: the link's work lives in the link's scope.
    public func whileRunning<Result: Sendable>(
        _ loops: [@Sendable () async -> Void],
        _ body: () async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for loop in loops { group.addTask { await loop() } }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}

/// A link's heartbeat: a ping every `interval`, and the link ends `timedOut` when nothing is heard
/// within `pongTimeout` of one.
public struct Heartbeat: Sendable {
    public var interval: Duration
    public var pongTimeout: Duration
    /// Pings only after `interval` of silence (Voximplant-style: any inbound frame shows the
    /// link alive); otherwise every interval (CXone's heartbeat).
    public var onlyWhenSilent: Bool

    public init(interval: Duration, pongTimeout: Duration, onlyWhenSilent: Bool) {
        self.interval = interval
        self.pongTimeout = pongTimeout
        self.onlyWhenSilent = onlyWhenSilent
    }

    /// Runs until cancelled, or until it ends `link`.
    ///
    /// - Parameters:
    ///   - lastHeard: when the peer was last heard on `clock` (the pong, or any frame).
    ///   - ping: sends one ping; a failure ends the heartbeat (the reader sees the socket fail).
    public func run(
        clock: SessionClock,
        lastHeard: @Sendable () -> Duration,
        ping: @Sendable () async throws -> Void,
        ending link: LinkOutput
    ) async {
        do {
            while true {
                try await clock.sleep(for: interval)
                if onlyWhenSilent, clock.now - lastHeard() < interval { continue }
                let sent = clock.now
                try await ping()
                try await clock.sleep(for: pongTimeout)
                if lastHeard() < sent {
                    link.end(SwitchboardError(.timedOut, "no pong within \(pongTimeout)"))
                    return
                }
            }
        } catch {
            return
        }
    }
}
