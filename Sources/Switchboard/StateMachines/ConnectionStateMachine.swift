/// The session's connection: what the app wants (running, paused, closed), the one link there is
/// at most, and what comes after a link ends — in one place.
///
/// A pure value: it takes one input at a time (an app's resume, pause or close; the link opening,
/// hearing its first update, carrying a request, failing, closing; a timer) and returns the
/// actions its owner performs (start or end a link, set or cancel a timer, publish the connection
/// state, clear the credentials). No I/O, no clock; randomness (backoff jitter) is passed in.
///
/// The rules that live here and nowhere else:
/// - **One link at a time**, opened while the app wants a connection and no backoff runs.
/// - **Ending on purpose drains**: a link ended by a pause or a close stops taking new work but
///   lets the requests in flight answer first, so a send the server took is not left in the outbox;
///   a link that fails, or a session being cancelled, goes at once.
/// - **Failure precedence**: a fatal error heard while the link goes outranks what the adapter
///   threw from its scope, which outranks what the link's updates reported; a cancellation thrown
///   while tearing down says nothing.
/// - **Proved healthy**: a link that heard its first update and then lasted `stableLinkDuration`,
///   or carried a request through, resets the backoff. One that dies right after it opens (a
///   poison send, a server that accepts and drops) does not, so reconnects keep backing off.
/// - **Backoff** (``ReconnectStateMachine``): transient failures wait longer each time, a refused
///   login clears the credentials and retries once, a fatal error closes the session.
struct ConnectionStateMachine: Sendable {
    /// The link the session has.
    struct Link: Sendable, Hashable {
        let id: Int
        var isOpen = false
        /// Requests handed to the link and not answered yet.
        var jobsOut = 0
        var sawFirstUpdate = false
        var stableTimerFired = false
        var provedHealthy = false
    }

    enum State: Sendable, Hashable {
        /// No link: created, paused, or not ready yet.
        case idle
        /// A link connecting (`isOpen` false) or open.
        case linked(Link)
        /// Ended on purpose with requests in flight: they answer before the link closes. A fatal
        /// error heard meanwhile is kept, and ends the session once the link has closed.
        case draining(Link, fatal: SwitchboardError?)
        /// Takes no more work; waits for the link's scope to end. `failure` is `nil` for a link
        /// ended on purpose.
        case ending(Link, failure: SwitchboardError?)
        /// Waiting out the backoff before the next link.
        case waitingToReconnect
        /// Closed, and the link gone: final.
        case closed
    }

    enum Action: Sendable, Hashable {
        /// Start link `id`: open the backend's connection and serve it.
        case startLink(Int)
        /// Hand link `id` no more work (its scope ends once its requests have).
        case finishJobs(Int)
        /// Cancel link `id`'s connect: it has not opened, so nothing is in flight.
        case abortConnect(Int)
        /// Publish the session's connection state.
        case publish(ConnectionState, DisconnectReason?)
        case setReconnectTimer(after: Duration)
        case cancelReconnectTimer
        case setStableTimer(link: Int, after: Duration)
        case cancelStableTimer(link: Int)
        /// The link is open: resume the outbox, send read markers, poll.
        case linkEstablished
        /// The link is gone with everything it carried: abandon its lanes' work. `interrupted`
        /// when it failed rather than being ended on purpose.
        case linkDropped(interrupted: Bool)
        /// Forget the stored credentials: the server refused them.
        case clearCredentials
        /// The session ends for good with `error` (publish it as fatal).
        case gaveUp(SwitchboardError)
    }

    let stableLinkDuration: Duration
    private(set) var lifecycle = LifecycleStateMachine()
    private(set) var state: State = .idle
    private(set) var reconnect: ReconnectStateMachine
    /// The connection state last published.
    private(set) var published: ConnectionState = .disconnected
    /// The stored state (credentials, cursor) is loaded: links may open.
    private(set) var isReady = false
    /// The task running the loop was cancelled: nothing drains, nothing reconnects.
    private(set) var isCancelled = false
    private var nextLinkID = 0

    init(backoff: BackoffPolicy, stableLinkDuration: Duration) {
        self.reconnect = ReconnectStateMachine(policy: backoff)
        self.stableLinkDuration = stableLinkDuration
    }

    // MARK: What the owner asks

    /// The link, whatever it is doing.
    var link: Link? {
        switch state {
        case .linked(let link), .draining(let link, _), .ending(let link, _): link
        case .idle, .waitingToReconnect, .closed: nil
        }
    }

    /// The id of an open link that takes work.
    var openLinkID: Int? {
        if case .linked(let link) = state, link.isOpen { return link.id }
        return nil
    }

    var isLinkOpen: Bool { openLinkID != nil }

    /// The loop is done: closed with no link left, or cancelled.
    var isFinished: Bool { isCancelled || state == .closed }

    // MARK: Inputs

    /// The stored state is loaded: a link may open now.
    mutating func ready() -> [Action] {
        isReady = true
        return reconcile()
    }

    mutating func resume() throws(SwitchboardError) -> [Action] {
        try lifecycle.resume() == .connect ? reconcile() : []
    }

    mutating func pause() throws(SwitchboardError) -> [Action] {
        try lifecycle.pause() == .disconnect ? reconcile() : []
    }

    mutating func close() -> [Action] {
        lifecycle.close() == .shutDown ? reconcile() : []
    }

    /// The backoff is over.
    mutating func reconnectTimerFired() -> [Action] {
        guard state == .waitingToReconnect else { return [] }
        state = .idle
        return reconcile()
    }

    mutating func linkOpened(_ id: Int) -> [Action] {
        guard case .linked(var link) = state, link.id == id, !link.isOpen else { return [] }
        link.isOpen = true
        state = .linked(link)
        return publish(.connected, nil) + [.setStableTimer(link: id, after: stableLinkDuration), .linkEstablished]
    }

    /// Link `id` delivered an update.
    mutating func updateArrived(_ id: Int) {
        guard link?.id == id, link?.sawFirstUpdate == false else { return }
        modifyLink(id) { $0.sawFirstUpdate = true }
        provedHealthyIfDue(id)
    }

    mutating func stableTimerFired(_ id: Int) {
        modifyLink(id) { $0.stableTimerFired = true }
        provedHealthyIfDue(id)
    }

    /// A request was handed to link `id`.
    mutating func requestDispatched(_ id: Int) {
        modifyLink(id) { $0.jobsOut += 1 }
    }

    /// A request link `id` carried answered (or failed).
    mutating func requestFinished(_ id: Int, failure: SwitchboardError?) -> [Action] {
        guard link?.id == id else { return [] }
        modifyLink(id) { $0.jobsOut -= 1 }
        var actions: [Action] = []
        if let failure, failure.code == .fatal {
            // The backend ended the session for good, whichever request heard it first (a send
            // refused because the account was deactivated): the link ends with that error and
            // the backoff gives up.
            actions += endLink(failure: failure)
        } else if failure == nil {
            provedHealthyIfDue(id, byRequest: true)
        }
        return actions + drained()
    }

    /// A request handed to link `id` was not taken (its scope had stopped taking work): it is not
    /// out, and it answers nothing.
    mutating func requestNotTaken(_ id: Int) -> [Action] {
        guard link?.id == id else { return [] }
        modifyLink(id) { $0.jobsOut -= 1 }
        return drained()
    }

    /// A draining link whose last request has reported may close.
    private mutating func drained() -> [Action] {
        guard case .draining(let link, let fatal) = state, link.jobsOut == 0 else { return [] }
        state = .ending(link, failure: fatal)
        return [.finishJobs(link.id)]
    }

    /// Link `id`'s updates ended or threw.
    mutating func linkFailed(_ id: Int, _ error: SwitchboardError) -> [Action] {
        guard link?.id == id else { return [] }
        if case .draining(let link, let fatal) = state {
            // The link died while its requests were answering: they fail with it. It was ended
            // on purpose, so only a fatal error counts.
            state = .ending(link, failure: error.code == .fatal ? error : fatal)
            return [.finishJobs(id)]
        }
        return endLink(failure: error)
    }

    /// Link `id`'s scope has ended, and every request it carried has reported; `thrown` is what
    /// the adapter threw from it. Decides what comes next.
    mutating func linkClosed(_ id: Int, thrown: SwitchboardError?, using random: inout some RandomNumberGenerator) -> [Action] {
        guard let link, link.id == id else { return [] }
        // What the link heard as it went, and whether the loop ended it on purpose.
        let failure: SwitchboardError?
        switch state {
        case .ending(_, let heard), .draining(_, let heard): failure = heard
        case .linked: failure = nil
        default: return []
        }
        let endedOnPurpose: Bool
        switch state {
        case .ending(_, nil), .draining(_, nil): endedOnPurpose = true
        default: endedOnPurpose = false
        }
        state = .idle
        var actions: [Action] = [.cancelStableTimer(link: id), .linkDropped(interrupted: !endedOnPurpose)]
        if endedOnPurpose || isCancelled {
            reconnect.disconnected()
            if !isCancelled { actions += reconcile() }
            return actions
        }
        let fatal = failure.flatMap { $0.code == .fatal ? $0 : nil }
        let cause = fatal ?? thrown.flatMap { $0.code == .cancelled ? nil : $0 } ?? failure ?? SwitchboardError(.connectionLost, "the link ended")
        switch reconnect.failed(cause, using: &random) {
        case .retry(let delay, let clearCredentials):
            if clearCredentials { actions.append(.clearCredentials) }
            state = .waitingToReconnect
            actions += publish(.waitingToReconnect, .connectionLost(cause))
            actions.append(.setReconnectTimer(after: delay))
        case .giveUp(let error):
            _ = lifecycle.close()
            state = .closed
            actions.append(.gaveUp(error))
            actions += publish(.disconnected, .fatal(error))
        }
        return actions
    }

    /// The task running the loop was cancelled: the link goes at once, nothing reconnects.
    mutating func cancelled() -> [Action] {
        isCancelled = true
        if case .draining(let link, let fatal) = state {
            state = .ending(link, failure: fatal)
            return [.finishJobs(link.id)]
        }
        return link == nil ? [] : endLink(failure: nil)
    }

    /// The loop has ended: the session is disconnected.
    mutating func loopEnded() -> [Action] {
        isCancelled = true
        return publish(.disconnected, .userInitiated)
    }

    // MARK: Rules

    /// Opens a link when the app wants one and none is up, coming or backing off; ends it when
    /// the app does not.
    private mutating func reconcile() -> [Action] {
        if lifecycle.wantsConnection {
            guard isReady, state == .idle else { return [] }
            reconnect.connecting()
            let id = nextLinkID
            nextLinkID += 1
            state = .linked(Link(id: id))
            return publish(.connecting, nil) + [.startLink(id)]
        }
        switch state {
        case .waitingToReconnect:
            state = lifecycle.state == .closed ? .closed : .idle
            return [.cancelReconnectTimer] + publish(.disconnected, .userInitiated)
        case .idle:
            if lifecycle.state == .closed { state = .closed }
            return publish(.disconnected, .userInitiated)
        case .linked, .draining, .ending:
            return endLink(failure: nil)
        case .closed:
            return []
        }
    }

    /// Stops handing the link work; its scope ends and reports `linkClosed`. A link ended on
    /// purpose first lets the requests in flight answer; a failed one goes at once.
    private mutating func endLink(failure: SwitchboardError?) -> [Action] {
        switch state {
        case .linked(let link):
            if failure == nil, !isCancelled, link.jobsOut > 0 {
                state = .draining(link, fatal: nil)
                return []
            }
            state = .ending(link, failure: failure)
            // A link still connecting has nothing to drain: its connect (a server that does not
            // answer, a client retrying a refused port) is cancelled, not waited for.
            return [.finishJobs(link.id)] + (link.isOpen ? [] : [.abortConnect(link.id)])
        case .draining(let link, _):
            // A fatal error heard while the link goes for another reason still ends the session
            // (a server that deactivates an account cuts its long-poll and refuses its next
            // request, in either order); the drain goes on.
            if let failure, failure.code == .fatal { state = .draining(link, fatal: failure) }
            return []
        case .ending(let link, _):
            if let failure, failure.code == .fatal { state = .ending(link, failure: failure) }
            return []
        case .idle, .waitingToReconnect, .closed:
            return []
        }
    }

    /// A link that heard its first update and lasted, or carried a request through, proves the
    /// server healthy: the backoff starts afresh.
    private mutating func provedHealthyIfDue(_ id: Int, byRequest: Bool = false) {
        guard let link, link.id == id, !link.provedHealthy, link.sawFirstUpdate, link.stableTimerFired || byRequest else { return }
        modifyLink(id) { $0.provedHealthy = true }
        reconnect.connected()
    }

    private mutating func modifyLink(_ id: Int, _ change: (inout Link) -> Void) {
        switch state {
        case .linked(var link) where link.id == id:
            change(&link)
            state = .linked(link)
        case .draining(var link, let fatal) where link.id == id:
            change(&link)
            state = .draining(link, fatal: fatal)
        case .ending(var link, let failure) where link.id == id:
            change(&link)
            state = .ending(link, failure: failure)
        default:
            break
        }
    }

    private mutating func publish(_ connection: ConnectionState, _ reason: DisconnectReason?) -> [Action] {
        guard connection != published else { return [] }
        published = connection
        return [.publish(connection, reason)]
    }
}
