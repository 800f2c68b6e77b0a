/// The app-visible lifecycle of a session: created paused → resume → running ⇄ paused →
/// closed. Closed is final: every call after it fails with ``SwitchboardError/Code/sessionClosed``.
struct LifecycleStateMachine: Sendable, Hashable {
    enum State: Sendable, Hashable {
        case created
        case running
        case paused
        case closed
    }

    enum Action: Sendable, Hashable {
        /// Open the link (or keep it).
        case connect
        /// Drop the link but keep state.
        case disconnect
        /// Drop the link and end the session.
        case shutDown
        case none
    }

    private(set) var state: State = .created

    init() {}

    mutating func resume() throws(SwitchboardError) -> Action {
        switch state {
        case .created, .paused:
            state = .running
            return .connect
        case .running:
            return .none
        case .closed:
            throw Self.closedError
        }
    }

    mutating func pause() throws(SwitchboardError) -> Action {
        switch state {
        case .running:
            state = .paused
            return .disconnect
        case .created, .paused:
            state = .paused
            return .none
        case .closed:
            throw Self.closedError
        }
    }

    /// Idempotent: closing a closed session does nothing.
    mutating func close() -> Action {
        if state == .closed { return .none }
        state = .closed
        return .shutDown
    }

    /// Throws unless the session is open (anything but closed).
    func checkOpen() throws(SwitchboardError) {
        if state == .closed { throw Self.closedError }
    }

    var wantsConnection: Bool { state == .running }

    static var closedError: SwitchboardError { SwitchboardError(.sessionClosed, "the session is closed") }
}
