import Foundation

/// Exponential backoff with jitter: the delay before attempt *n* (0-based) is drawn uniformly
/// from `[d/2, d]` where `d = min(maximum, initial × multiplier^n)` ("equal jitter").
public struct BackoffPolicy: Sendable, Hashable {
    public var initial: Duration
    public var multiplier: Double
    public var maximum: Duration
    /// Failed attempts in a row after which the session gives up with a fatal error; `nil`
    /// retries for ever.
    public var maxAttempts: Int?

    public init(
        initial: Duration = .milliseconds(500),
        multiplier: Double = 2,
        maximum: Duration = .seconds(30),
        maxAttempts: Int? = nil
    ) {
        self.initial = initial
        self.multiplier = multiplier
        self.maximum = maximum
        self.maxAttempts = maxAttempts
    }

    /// The ceiling of the delay before attempt `attempt`, before jitter.
    public func ceiling(forAttempt attempt: Int) -> Duration {
        let factor = pow(multiplier, Double(min(attempt, 62)))
        let seconds = min(initial.seconds * factor, maximum.seconds)
        return .milliseconds(Int64(seconds * 1000))
    }

    /// The jittered delay before attempt `attempt`.
    public func delay<G: RandomNumberGenerator>(forAttempt attempt: Int, using generator: inout G) -> Duration {
        let ceiling = ceiling(forAttempt: attempt)
        let milliseconds = Int64(ceiling.seconds * 1000)
        guard milliseconds > 1 else { return ceiling }
        return .milliseconds(Int64.random(in: (milliseconds / 2)...milliseconds, using: &generator))
    }
}

/// Decides what happens after a connection attempt or an established link fails, from the
/// error's classification only.
///
/// - transient: retry after a backoff delay that grows with each failure in a row;
/// - rate limited: retry after the larger of the server's retry-after and the backoff delay;
/// - authentication: clear the stored credentials and retry at once, once; a second
///   authentication failure in a row is fatal;
/// - fatal, or an invalid argument (the configuration is wrong): give up.
///
/// A link that reached ``connected()`` resets the failure count.
struct ReconnectStateMachine: Sendable, Hashable {
    enum State: Sendable, Hashable {
        case idle
        case connecting(attempt: Int)
        case connected
        case waiting(attempt: Int, delay: Duration)
        case failed
    }

    enum FailureAction: Sendable, Hashable {
        case retry(after: Duration, clearCredentials: Bool)
        case giveUp(SwitchboardError)
    }

    let policy: BackoffPolicy
    private(set) var state: State = .idle
    private var failuresInARow = 0
    private var authenticationFailuresInARow = 0

    init(policy: BackoffPolicy) {
        self.policy = policy
    }

    mutating func connecting() {
        state = .connecting(attempt: failuresInARow)
    }

    mutating func connected() {
        state = .connected
        failuresInARow = 0
        authenticationFailuresInARow = 0
    }

    /// The link was dropped on purpose (pause); the next connect starts afresh.
    mutating func disconnected() {
        state = .idle
    }

    mutating func failed<G: RandomNumberGenerator>(
        _ error: SwitchboardError,
        using generator: inout G
    ) -> FailureAction {
        // Fatal, or a configuration the backend refuses (an unknown channel, a URL that is not
        // one): retrying cannot help.
        if error.isFatal || error.code == .invalidArgument {
            state = .failed
            return .giveUp(error)
        }
        if error.isAuthenticationFailure {
            authenticationFailuresInARow += 1
            if authenticationFailuresInARow > 1 {
                state = .failed
                return .giveUp(SwitchboardError(.fatal, "authentication failed twice in a row", underlying: error))
            }
            state = .waiting(attempt: failuresInARow, delay: .zero)
            return .retry(after: .zero, clearCredentials: true)
        }
        let attempt = failuresInARow
        failuresInARow += 1
        if let maxAttempts = policy.maxAttempts, failuresInARow > maxAttempts {
            state = .failed
            return .giveUp(
                SwitchboardError(.fatal, "gave up after \(maxAttempts) failed connection attempts", underlying: error)
            )
        }
        var delay = policy.delay(forAttempt: attempt, using: &generator)
        if let retryAfter = error.retryAfter, retryAfter > delay {
            delay = retryAfter
        }
        state = .waiting(attempt: failuresInARow, delay: delay)
        return .retry(after: delay, clearCredentials: false)
    }
}
