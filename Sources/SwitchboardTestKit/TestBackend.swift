public import Foundation
@_spi(TestKit) public import Switchboard

/// A backend the test drives by hand, in the manner of NIO's `NIOAsyncTestingChannel`: it
/// connects when the engine asks, hands each link to the test, yields only the updates the test
/// yields, and leaves every request waiting until the test answers it.
///
/// ```swift
/// let backend = TestBackend(capabilities: [.typing])
/// let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
/// try await withRecording(session) { recorder in
///     try await session.resume()
///     let link = try await backend.nextLink()
///     link.yield(.snapshot(BackendSnapshot(conversations: [chat], isComplete: true)))
///     let chat = try await session.conversation("chat")
///     let sent = try await chat.send(text: "hello")
///     let request = try await backend.nextRequest()
///     request.acceptSend(serverID: "m1")
///     try await recorder.first("confirmed") { $0.updatedMessage?.serverID == "m1" }
/// }
/// #expect(backend.finish().isEmpty)
/// ```
///
/// - **Links.** Each call of ``withConnection(_:_:)`` is a ``Link``. ``nextLink(timeout:)`` hands
///   the test the next one, in the order the engine asked for them, with the
///   `ConnectionContext` it passed. What a connect does is the ``ConnectPolicy``: open at once
///   (the default), wait for the test (``Link/open()`` or ``Link/refuse(with:)``), or fail; one
///   connect at a time can be scripted with ``failNextConnect(with:)`` and ``holdNextConnect()``.
/// - **Updates.** ``Link/yield(_:)`` queues an update; the engine reads them in order.
///   ``Link/finishUpdates()``, ``Link/fail(_:)`` and ``Link/close(throwing:)`` end the stream:
///   the link is lost.
/// - **Requests.** Every request the engine performs waits as a ``PendingRequest`` until the
///   test takes it (``nextRequest(timeout:)``) and answers or fails it, unless a rule given to
///   ``answerAutomatically(_:)`` answers it first. A request still waiting when its link ends,
///   or whose task the engine cancels, is resumed with an error, so nothing leaks.
///   ``PendingRequest/acceptSend(serverID:sequence:time:)`` and
///   ``PendingRequest/answerHistory(from:)`` answer the common ones as a server would, and
///   ``historyPage(of:answering:)`` cuts a history page from a list for a rule.
/// - **Leftovers.** ``finish()`` ends whatever is still waiting and reports what nobody consumed:
///   requests the test never took, updates the engine never read, links the test never looked
///   at. A test ends with `#expect(backend.finish().isEmpty)`.
///
/// Every wait has a real-time limit (``patience`` unless the call says) and wakes on the change
/// it waits for: nothing sleeps or polls. The lock guards the links, the requests and the
/// scripts; no callback runs under it.
public final class TestBackend: ChatBackend, Sendable {
    /// What a connect does when the engine asks for a link.
    public enum ConnectPolicy: Sendable, Hashable {
        /// The link opens at once.
        case open
        /// The connect waits until the test calls ``Link/open()`` or ``Link/refuse(with:)``,
        /// or until the engine cancels it (``Link/State-swift.enum/abandoned``).
        case hold
        /// The connect fails with this error.
        case refuse(SwitchboardError)
    }

    /// How a request ended.
    public enum Outcome: Sendable, Hashable {
        /// Answered by the test or a rule.
        case answered(BackendResponse)
        /// Failed by the test or a rule.
        case failed(SwitchboardError)
        /// Nobody answered before the engine cancelled the request, its link ended, or
        /// ``TestBackend/finish()`` ran; the engine got this error.
        case abandoned(SwitchboardError)
    }

    /// A request that has ended and how, in the order the requests ended.
    public struct Exchange: Sendable, Hashable {
        /// What the engine asked.
        public var request: BackendRequest
        /// How it ended.
        public var outcome: Outcome
        /// The ``Link/number`` of the link it came on.
        public var link: Int
    }

    /// What a test left unconsumed, as ``finish()`` reports it (NIO's `LeftOverState`).
    public struct LeftOvers: Sendable, Hashable, CustomStringConvertible {
        /// Requests that reached the backend and that neither the test took
        /// (``nextRequest(timeout:)``) nor a rule answered, in arrival order: whether still
        /// waiting or abandoned by the engine.
        public var requests: [BackendRequest]
        /// Updates the test yielded and the engine never read, link after link.
        public var updates: [BackendUpdate]
        /// The numbers of links the engine opened (or that were held) that the test never took
        /// with ``nextLink(timeout:)`` nor saw in an ``onConnect(_:)`` handler. Connects the
        /// ``ConnectPolicy`` refused are not counted: the test scripted them.
        public var links: [Int]

        /// `true` when nothing was left.
        public var isEmpty: Bool { requests.isEmpty && updates.isEmpty && links.isEmpty }

        public var description: String {
            if isEmpty { return "nothing left" }
            var parts: [String] = []
            if !requests.isEmpty { parts.append("requests never taken: \(requests.map(\.name))") }
            if !updates.isEmpty { parts.append("updates never read: \(updates.count)") }
            if !links.isEmpty { parts.append("links never awaited: \(links)") }
            return parts.joined(separator: "; ")
        }
    }

    /// A rule of ``answerAutomatically(_:)``.
    public typealias AnswerRule = @Sendable (PendingRequest) -> Result<BackendResponse, SwitchboardError>?

    // MARK: State

    enum UpdatesEnd {
        case finished
        case failed(any Error)
    }

    struct LinkRecord {
        var context: ConnectionContext
        var state: Link.State = .connecting
        /// The test's decision on a held connect, when it came before the connect waited.
        var decision: Result<Void, SwitchboardError>?
        var connectWaiter: CheckedContinuation<Void, any Error>?
        var buffer: [BackendUpdate] = []
        var end: UpdatesEnd?
        var updateWaiter: CheckedContinuation<BackendUpdate?, any Error>?
        var scopeError: SwitchboardError?
        var taken = false
        var seenByHandler = false
        var refusedByPolicy = false
    }

    struct RequestRecord {
        var request: BackendRequest
        var link: Int
        /// Registered for the test (no rule answered it).
        var visible = false
        var taken = false
        var automatic = false
        var cancelled = false
        var continuation: CheckedContinuation<BackendResponse, any Error>?
        var outcome: Outcome?
    }

    struct State {
        var defaultConnect: ConnectPolicy
        var script: [ConnectPolicy] = []
        var links: [LinkRecord] = []
        var requests: [RequestRecord] = []
        var exchanges: [Exchange] = []
        var rules: [AnswerRule] = []
        var connectHandlers: [@Sendable (Link) -> Void] = []
        var finished = false
    }

    let state: Locked<State>
    /// Fires on every change a test may wait for.
    let changed = AsyncSignal()
    let requestsOutliveCancellation: Bool

    public let descriptor: BackendDescriptor
    /// How long a wait lasts, unless it says, before it fails as a hang.
    public let patience: Duration

    /// Makes a backend with this descriptor.
    ///
    /// - Parameters:
    ///   - name: the backend's name in events and logs.
    ///   - capabilities: what the engine may ask for; none by default, so the engine sends only
    ///     what the test allows (a send needs none).
    ///   - limits: the numbers the engine keeps to (text length, typing policy, page size).
    ///   - sync: how the engine syncs with it; snapshots and events as they come by default.
    ///   - connects: what each connect does unless one is scripted.
    ///   - requestsOutliveCancellation: when `true`, a request whose task the engine cancels stays
    ///     waiting until the test answers it (a server that answers whatever the client does);
    ///     ``PendingRequest/isCancelled`` tells. The link's scope cannot end before that. When
    ///     `false` (the default), the cancelled request ends at once as abandoned.
    ///   - patience: how long a wait lasts, unless it says, before it fails as a hang.
    public convenience init(
        name: BackendName = "test",
        capabilities: BackendCapabilities = [],
        limits: BackendLimits = BackendLimits(),
        sync: SyncModel = .snapshots,
        connects: ConnectPolicy = .open,
        requestsOutliveCancellation: Bool = false,
        patience: Duration = .seconds(30)
    ) {
        self.init(
            descriptor: BackendDescriptor(name: name, capabilities: capabilities, limits: limits, sync: sync),
            connects: connects,
            requestsOutliveCancellation: requestsOutliveCancellation,
            patience: patience
        )
    }

    /// Makes a backend with this descriptor.
    ///
    /// - Parameters:
    ///   - descriptor: the name, capabilities and limits the engine sees.
    ///   - connects: what each connect does unless one is scripted.
    ///   - requestsOutliveCancellation: when `true`, a request whose task the engine cancels stays
    ///     waiting until the test answers it; when `false`, it ends at once as abandoned.
    ///   - patience: how long a wait lasts, unless it says, before it fails as a hang.
    public init(
        descriptor: BackendDescriptor,
        connects: ConnectPolicy = .open,
        requestsOutliveCancellation: Bool = false,
        patience: Duration = .seconds(30)
    ) {
        self.descriptor = descriptor
        self.state = Locked(State(defaultConnect: connects))
        self.requestsOutliveCancellation = requestsOutliveCancellation
        self.patience = patience
    }

    // MARK: Scripting

    /// Sets what every connect does from now on, unless one is scripted.
    ///
    /// - Parameter policy: open at once, wait for the test, or fail.
    public func setConnectPolicy(_ policy: ConnectPolicy) {
        state.withLock { $0.defaultConnect = policy }
    }

    /// Scripts the next connect not yet scripted; scripts are used in order, then the policy
    /// set with ``setConnectPolicy(_:)`` applies again.
    ///
    /// - Parameter policy: what that connect does.
    public func scriptNextConnect(_ policy: ConnectPolicy) {
        state.withLock { $0.script.append(policy) }
    }

    /// The next connect fails with `error` (a refused port, a rejected token).
    ///
    /// - Parameter error: what the connect throws; its classification says what the engine
    ///   does next.
    public func failNextConnect(with error: SwitchboardError) {
        scriptNextConnect(.refuse(error))
    }

    /// The next connect waits until the test calls ``Link/open()`` or ``Link/refuse(with:)`` on
    /// its link, or until the engine cancels it.
    public func holdNextConnect() {
        scriptNextConnect(.hold)
    }

    /// Runs `handler` with each link as it opens, before the engine reads its updates: for what
    /// every link does (a snapshot, a head) in a test that does not await each link. A link
    /// given to a handler does not count as left over.
    ///
    /// - Parameter handler: called outside the backend's lock; it may yield on the link.
    public func onConnect(_ handler: @escaping @Sendable (Link) -> Void) {
        state.withLock { $0.connectHandlers.append(handler) }
    }

    /// Adds a rule that answers requests as they arrive, so a test is not made to answer the
    /// ones it does not care about (typing, read markers). Rules are asked in the order they
    /// were added; the first that returns a result answers, and `nil` from all of them leaves
    /// the request to the test.
    ///
    /// ```swift
    /// backend.answerAutomatically { request in
    ///     if case .typing = request.request { return .success(.done) }
    ///     return nil
    /// }
    /// ```
    ///
    /// - Parameter rule: gets the request (with its link, so it may cut it) and returns the
    ///   answer or failure, or `nil`. Called outside the backend's lock.
    public func answerAutomatically(_ rule: @escaping AnswerRule) {
        state.withLock { $0.rules.append(rule) }
    }

    // MARK: Awaiting

    /// Waits for the next link the engine asked for, in order; refused and held connects are
    /// links too.
    ///
    /// - Parameter timeout: how long to wait; ``patience`` when `nil`.
    /// - Returns: the link, with the context the engine passed.
    /// - Throws: ``ConformanceFailure`` naming the wait when no link comes in time;
    ///   `CancellationError` when the waiting task is cancelled.
    public func nextLink(timeout: Duration? = nil) async throws -> Link {
        let found = Locked<Link?>(nil)
        try await SwitchboardTestKit.waitUntil("the next link of \(descriptor.name)", timeout: timeout ?? patience, signal: changed) {
            let link = self.state.withLock { state -> Link? in
                guard let index = state.links.firstIndex(where: { !$0.taken }) else { return nil }
                state.links[index].taken = true
                return Link(backend: self, index: index, context: state.links[index].context)
            }
            found.withLock { $0 = link }
            return link != nil
        }
        return found.withLock { $0! }
    }

    /// Waits for the next request, on any link, that no rule answered and the test has not
    /// taken yet, in arrival order.
    ///
    /// - Parameter timeout: how long to wait; ``patience`` when `nil`.
    /// - Returns: the request, waiting for the test's answer (unless the engine gave it up:
    ///   ``PendingRequest/outcome``).
    /// - Throws: ``ConformanceFailure`` naming the wait when no request comes in time;
    ///   `CancellationError` when the waiting task is cancelled.
    public func nextRequest(timeout: Duration? = nil) async throws -> PendingRequest {
        try await takeRequest(onLink: nil, timeout: timeout)
    }

    func takeRequest(onLink link: Int?, timeout: Duration?) async throws -> PendingRequest {
        let found = Locked<PendingRequest?>(nil)
        let what = link.map { "the next request on link \($0 + 1) of \(descriptor.name)" } ?? "the next request to \(descriptor.name)"
        try await SwitchboardTestKit.waitUntil(what, timeout: timeout ?? patience, signal: changed) {
            let pending = self.state.withLock { state -> PendingRequest? in
                guard
                    let index = state.requests.firstIndex(where: { record in
                        record.visible && !record.taken && (link == nil || record.link == link)
                    })
                else { return nil }
                state.requests[index].taken = true
                let record = state.requests[index]
                return PendingRequest(
                    backend: self,
                    index: index,
                    request: record.request,
                    link: Link(backend: self, index: record.link, context: state.links[record.link].context)
                )
            }
            found.withLock { $0 = pending }
            return pending != nil
        }
        return found.withLock { $0! }
    }

    /// Waits until `condition` holds for the backend, re-checking it on every change (a link, a
    /// request, an answer, an update read).
    ///
    /// - Parameters:
    ///   - what: what is awaited, for the error when it does not come.
    ///   - timeout: how long to wait; ``patience`` when `nil`.
    ///   - condition: checked now and after each change.
    /// - Throws: ``ConformanceFailure`` naming `what` when the condition does not hold in time;
    ///   `CancellationError` when the waiting task is cancelled.
    public func waitUntil(
        _ what: String,
        timeout: Duration? = nil,
        _ condition: @escaping @Sendable (TestBackend) -> Bool
    ) async throws {
        try await SwitchboardTestKit.waitUntil(what, timeout: timeout ?? patience, signal: changed) { condition(self) }
    }

    // MARK: Looking back

    /// How many times the engine asked for a link (refused connects included).
    public var connectCount: Int { state.withLock { $0.links.count } }

    /// Every link so far, in the order the engine asked for them (taking none of them).
    public var links: [Link] {
        state.withLock { state in state.links.indices.map { Link(backend: self, index: $0, context: state.links[$0].context) } }
    }

    /// Every request that reached the backend, in arrival order, whoever answered it.
    public var requests: [BackendRequest] { state.withLock { $0.requests.map(\.request) } }

    /// The requests that have ended and how, in the order they ended.
    public var exchanges: [Exchange] { state.withLock { $0.exchanges } }

    /// Ends whatever still waits — requests fail with `connectionLost`, held connects are
    /// refused, the updates of open links finish — and reports what nobody consumed. Call it
    /// when the test is done with the session (after it ended, normally); later connects are
    /// refused.
    ///
    /// - Returns: the requests the test never took, the updates the engine never read and the
    ///   links the test never awaited.
    @discardableResult
    public func finish() -> LeftOvers {
        let lost = SwitchboardError(.connectionLost, "the test backend finished")
        var requestWaiters: [CheckedContinuation<BackendResponse, any Error>] = []
        var connectWaiters: [CheckedContinuation<Void, any Error>] = []
        var updateWaiters: [CheckedContinuation<BackendUpdate?, any Error>] = []
        let leftOvers = state.withLock { state in
            state.finished = true
            let leftOvers = LeftOvers(
                requests: state.requests.filter { !$0.taken && !$0.automatic }.map(\.request),
                updates: state.links.flatMap(\.buffer),
                links: state.links.indices.filter { index in
                    let link = state.links[index]
                    return !link.taken && !link.seenByHandler && !link.refusedByPolicy
                }.map { $0 + 1 }
            )
            for index in state.requests.indices where state.requests[index].outcome == nil {
                state.requests[index].outcome = .abandoned(lost)
                state.exchanges.append(Exchange(request: state.requests[index].request, outcome: .abandoned(lost), link: state.requests[index].link + 1))
                if let waiter = state.requests[index].continuation { requestWaiters.append(waiter) }
                state.requests[index].continuation = nil
            }
            for index in state.links.indices {
                if let waiter = state.links[index].connectWaiter {
                    connectWaiters.append(waiter)
                    state.links[index].state = .refused(lost)
                }
                state.links[index].connectWaiter = nil
                if state.links[index].end == nil { state.links[index].end = .finished }
                if let waiter = state.links[index].updateWaiter { updateWaiters.append(waiter) }
                state.links[index].updateWaiter = nil
            }
            return leftOvers
        }
        for waiter in requestWaiters { waiter.resume(throwing: lost) }
        for waiter in connectWaiters { waiter.resume(throwing: lost) }
        for waiter in updateWaiters { waiter.resume(returning: nil) }
        changed.signal()
        return leftOvers
    }

    // MARK: ChatBackend

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (index, policy) = state.withLock { state in
            state.links.append(LinkRecord(context: context))
            let policy = state.finished ? .refuse(SwitchboardError(.connectionLost, "the test backend finished")) : state.script.isEmpty ? state.defaultConnect : state.script.removeFirst()
            return (state.links.count - 1, policy)
        }
        changed.signal()
        switch policy {
        case .open:
            break
        case .refuse(let error):
            state.withLock { state in
                state.links[index].state = .refused(error)
                state.links[index].refusedByPolicy = true
            }
            changed.signal()
            throw error
        case .hold:
            try await waitForOpening(index)
        }
        let link = Link(backend: self, index: index, context: context)
        let handlers = state.withLock { state in
            state.links[index].state = .open
            state.links[index].seenByHandler = !state.connectHandlers.isEmpty
            return state.connectHandlers
        }
        for handler in handlers { handler(link) }
        changed.signal()
        let result: Result
        do {
            result = try await body(Connection(backend: self, index: index))
        } catch {
            linkEnded(index)
            throw error
        }
        if let error = linkEnded(index) { throw error }
        return result
    }

    struct Connection: AnsweringConnection {
        let backend: TestBackend
        let index: Int
        let updates: BackendUpdates

        init(backend: TestBackend, index: Int) {
            self.backend = backend
            self.index = index
            self.updates = BackendUpdates(AsyncThrowingStream(unfolding: { try await backend.nextUpdate(on: index) }))
        }

        func answer(_ request: BackendRequest) async throws -> BackendResponse {
            try await backend.perform(request, on: index)
        }
    }

    // MARK: Inside a link

    private func waitForOpening(_ index: Int) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let decided: Swift.Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled {
                        state.links[index].state = .abandoned
                        return .failure(CancellationError())
                    }
                    if state.finished { return .failure(SwitchboardError(.connectionLost, "the test backend finished")) }
                    if let decision = state.links[index].decision { return decision.mapError { $0 as any Error } }
                    state.links[index].connectWaiter = continuation
                    return nil
                }
                if let decided {
                    continuation.resume(with: decided)
                    changed.signal()
                }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.links[index].connectWaiter = nil }
                if state.links[index].connectWaiter != nil { state.links[index].state = .abandoned }
                return state.links[index].connectWaiter
            }
            waiter?.resume(throwing: CancellationError())
            changed.signal()
        }
    }

    /// Decides a held connect; `false` when it is not (or no longer) connecting.
    func decide(_ index: Int, _ decision: Result<Void, SwitchboardError>) -> Bool {
        let (decided, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Void, any Error>?) in
            guard state.links[index].state == .connecting, state.links[index].decision == nil else { return (false, nil) }
            state.links[index].decision = decision
            if case .failure(let error) = decision { state.links[index].state = .refused(error) }
            defer { state.links[index].connectWaiter = nil }
            return (true, state.links[index].connectWaiter)
        }
        waiter?.resume(with: decision.mapError { $0 as any Error })
        changed.signal()
        return decided
    }

    /// The link's scope ended: requests still waiting on it are abandoned, a reader still
    /// waiting gets the end. Returns the error the scope is to throw.
    @discardableResult
    private func linkEnded(_ index: Int) -> SwitchboardError? {
        let lost = SwitchboardError(.connectionLost, "the link ended")
        var requestWaiters: [CheckedContinuation<BackendResponse, any Error>] = []
        let (updateWaiter, scopeError) = state.withLock { state in
            state.links[index].state = .closed
            for request in state.requests.indices where state.requests[request].link == index && state.requests[request].outcome == nil && state.requests[request].continuation != nil {
                state.requests[request].outcome = .abandoned(lost)
                state.exchanges.append(Exchange(request: state.requests[request].request, outcome: .abandoned(lost), link: index + 1))
                requestWaiters.append(state.requests[request].continuation!)
                state.requests[request].continuation = nil
            }
            if state.links[index].end == nil { state.links[index].end = .finished }
            defer { state.links[index].updateWaiter = nil }
            return (state.links[index].updateWaiter, state.links[index].scopeError)
        }
        for waiter in requestWaiters { waiter.resume(throwing: lost) }
        updateWaiter?.resume(returning: nil)
        changed.signal()
        return scopeError
    }

    /// The engine reads the next update: one the test yielded, else waits for one or the end.
    /// A cancelled reader gets the end of the stream, as `AsyncThrowingStream`'s does.
    private func nextUpdate(on index: Int) async throws -> BackendUpdate? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BackendUpdate?, any Error>) in
                let ready: Swift.Result<BackendUpdate?, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .success(nil) }
                    if !state.links[index].buffer.isEmpty { return .success(state.links[index].buffer.removeFirst()) }
                    switch state.links[index].end {
                    case .finished?: return .success(nil)
                    case .failed(let error)?:
                        state.links[index].end = .finished
                        return .failure(error)
                    case nil:
                        state.links[index].updateWaiter = continuation
                        return nil
                    }
                }
                if let ready {
                    continuation.resume(with: ready)
                    changed.signal()
                }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.links[index].updateWaiter = nil }
                return state.links[index].updateWaiter
            }
            waiter?.resume(returning: nil)
        }
    }

    func yield(_ update: BackendUpdate, on index: Int) {
        let waiter = state.withLock { state in
            guard let waiter = state.links[index].updateWaiter else {
                state.links[index].buffer.append(update)
                return CheckedContinuation<BackendUpdate?, any Error>?.none
            }
            state.links[index].updateWaiter = nil
            return waiter
        }
        waiter?.resume(returning: update)
        changed.signal()
    }

    func endUpdates(on index: Int, _ end: UpdatesEnd, scopeError: SwitchboardError?) {
        let waiter = state.withLock { state -> CheckedContinuation<BackendUpdate?, any Error>? in
            if let scopeError { state.links[index].scopeError = scopeError }
            guard state.links[index].end == nil else { return nil }
            guard let waiter = state.links[index].updateWaiter else {
                state.links[index].end = end
                return nil
            }
            state.links[index].updateWaiter = nil
            // The waiting reader gets the end now; it is then over.
            state.links[index].end = .finished
            return waiter
        }
        switch end {
        case .finished: waiter?.resume(returning: nil)
        case .failed(let error): waiter?.resume(throwing: error)
        }
        changed.signal()
    }

    func setScopeError(_ error: SwitchboardError, on index: Int) {
        state.withLock { $0.links[index].scopeError = error }
    }

    private func perform(_ request: BackendRequest, on link: Int) async throws -> BackendResponse {
        let (index, rules) = state.withLock { state in
            state.requests.append(RequestRecord(request: request, link: link))
            return (state.requests.count - 1, state.rules)
        }
        let pending = PendingRequest(
            backend: self,
            index: index,
            request: request,
            link: Link(backend: self, index: link, context: state.withLock { $0.links[link].context })
        )
        for rule in rules {
            guard let result = rule(pending) else { continue }
            state.withLock { state in
                state.requests[index].automatic = true
                if state.requests[index].outcome == nil {
                    let outcome: Outcome
                    switch result {
                    case .success(let response): outcome = .answered(response)
                    case .failure(let error): outcome = .failed(error)
                    }
                    state.requests[index].outcome = outcome
                    state.exchanges.append(Exchange(request: request, outcome: outcome, link: link + 1))
                }
            }
            changed.signal()
            return try result.get()
        }
        let outlive = requestsOutliveCancellation
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BackendResponse, any Error>) in
                let ready: Swift.Result<BackendResponse, any Error>? = state.withLock { state in
                    state.requests[index].visible = true
                    if let outcome = state.requests[index].outcome { return outcome.result }
                    if Task.isCancelled {
                        state.requests[index].cancelled = true
                        if !outlive {
                            state.requests[index].outcome = .abandoned(SwitchboardError(.cancelled, "the engine cancelled the request"))
                            state.exchanges.append(Exchange(request: request, outcome: state.requests[index].outcome!, link: link + 1))
                            return .failure(CancellationError())
                        }
                    }
                    if state.finished {
                        let lost = SwitchboardError(.connectionLost, "the test backend finished")
                        state.requests[index].outcome = .abandoned(lost)
                        state.exchanges.append(Exchange(request: request, outcome: .abandoned(lost), link: link + 1))
                        return .failure(lost)
                    }
                    state.requests[index].continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
                changed.signal()
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<BackendResponse, any Error>? in
                state.requests[index].cancelled = true
                guard !outlive, state.requests[index].outcome == nil, let waiter = state.requests[index].continuation else { return nil }
                state.requests[index].continuation = nil
                state.requests[index].outcome = .abandoned(SwitchboardError(.cancelled, "the engine cancelled the request"))
                state.exchanges.append(Exchange(request: request, outcome: state.requests[index].outcome!, link: link + 1))
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
            changed.signal()
        }
    }

    /// Ends a waiting request; `false` when it had ended already.
    func complete(_ index: Int, _ outcome: Outcome) -> Bool {
        let (completed, waiter) = state.withLock { state -> (Bool, CheckedContinuation<BackendResponse, any Error>?) in
            guard state.requests[index].outcome == nil else { return (false, nil) }
            state.requests[index].outcome = outcome
            state.exchanges.append(Exchange(request: state.requests[index].request, outcome: outcome, link: state.requests[index].link + 1))
            defer { state.requests[index].continuation = nil }
            return (true, state.requests[index].continuation)
        }
        if let waiter { waiter.resume(with: outcome.result) }
        changed.signal()
        return completed
    }
}

extension TestBackend.Outcome {
    var result: Result<BackendResponse, any Error> {
        switch self {
        case .answered(let response): .success(response)
        case .failed(let error): .failure(error)
        case .abandoned(let error): .failure(error.code == .cancelled ? CancellationError() : error)
        }
    }
}

extension TestBackend {
    /// One link: one call of ``TestBackend/withConnection(_:_:)``. Handles to the same link are
    /// interchangeable.
    public struct Link: Sendable {
        /// Where a link is.
        public enum State: Sendable, Hashable {
            /// The connect waits for the test (``ConnectPolicy/hold``).
            case connecting
            /// The engine has the link.
            case open
            /// The connect failed with this error.
            case refused(SwitchboardError)
            /// The engine cancelled the connect while it was held.
            case abandoned
            /// The link's scope ended.
            case closed
        }

        let backend: TestBackend
        let index: Int
        /// Counts the links from 1, in the order the engine asked for them.
        public var number: Int { index + 1 }
        /// What the engine passed to the connect: credentials, cursor, conversation sequences.
        public let context: ConnectionContext

        init(backend: TestBackend, index: Int, context: ConnectionContext) {
            self.backend = backend
            self.index = index
            self.context = context
        }

        /// Where the link is now.
        public var state: State { backend.state.withLock { $0.links[index].state } }

        /// Updates yielded on this link that the engine has not read yet.
        public var unreadUpdates: [BackendUpdate] { backend.state.withLock { $0.links[index].buffer } }

        /// Opens a held connect.
        ///
        /// - Returns: `false` when the link was not held (open, refused or abandoned already).
        @discardableResult
        public func open() -> Bool { backend.decide(index, .success(())) }

        /// Refuses a held connect: the connect throws `error`.
        ///
        /// - Parameter error: what the connect throws; its classification says what the engine
        ///   does next.
        /// - Returns: `false` when the link was not held (open, refused or abandoned already).
        @discardableResult
        public func refuse(with error: SwitchboardError) -> Bool { backend.decide(index, .failure(error)) }

        /// Queues an update for the engine, after those yielded before. An update yielded after
        /// the link ended is never read (``LeftOvers/updates``).
        ///
        /// - Parameter update: what the backend reports.
        public func yield(_ update: BackendUpdate) { backend.yield(update, on: index) }

        /// Ends the updates once the engine has read those queued: the server closed the link
        /// (the engine sees it lost).
        public func finishUpdates() { backend.endUpdates(on: index, .finished, scopeError: nil) }

        /// Ends the updates with `error` once the engine has read those queued: the link is
        /// lost.
        ///
        /// - Parameter error: what the updates throw (a `SwitchboardError` or any error the
        ///   engine classifies).
        public func fail(_ error: any Error) { backend.endUpdates(on: index, .failed(error), scopeError: nil) }

        /// Cuts the link: the updates end (with `error`, when given) and the link's scope throws
        /// `error` as it ends, as an adapter whose transport dropped does.
        ///
        /// - Parameter error: the failure; `nil` for a clean close (the updates finish and the
        ///   scope returns).
        public func close(throwing error: SwitchboardError? = nil) {
            if let error {
                backend.endUpdates(on: index, .failed(error), scopeError: error)
            } else {
                backend.endUpdates(on: index, .finished, scopeError: nil)
            }
        }

        /// Makes the link's scope throw `error` when the engine ends it, without touching the
        /// updates: an adapter whose long-poll was cut under it.
        ///
        /// - Parameter error: what ``TestBackend/withConnection(_:_:)`` throws as it ends.
        public func throwWhenClosed(_ error: SwitchboardError) { backend.setScopeError(error, on: index) }

        /// Waits for the next request on this link that no rule answered and the test has not
        /// taken yet.
        ///
        /// - Parameter timeout: how long to wait; the backend's patience when `nil`.
        /// - Returns: the request, waiting for the test's answer.
        /// - Throws: ``ConformanceFailure`` naming the wait when no request comes in time;
        ///   `CancellationError` when the waiting task is cancelled.
        public func nextRequest(timeout: Duration? = nil) async throws -> PendingRequest {
            try await backend.takeRequest(onLink: index, timeout: timeout)
        }

        /// Waits until the link's scope has ended (or its connect was refused or abandoned).
        ///
        /// - Parameter timeout: how long to wait; the backend's patience when `nil`.
        /// - Throws: ``ConformanceFailure`` when the link is still up in time;
        ///   `CancellationError` when the waiting task is cancelled.
        public func waitUntilClosed(timeout: Duration? = nil) async throws {
            try await backend.waitUntil("link \(number) to close", timeout: timeout) { _ in
                switch state {
                case .connecting, .open: false
                case .refused, .abandoned, .closed: true
                }
            }
        }
    }

    /// A request the engine performs, waiting for the test's answer. The engine's task waits
    /// until ``answer(_:)`` or ``fail(_:)``, or until it gives the request up (the link ended,
    /// the task was cancelled).
    public struct PendingRequest: Sendable {
        let backend: TestBackend
        let index: Int
        /// What the engine asked.
        public let request: BackendRequest
        /// The link it came on.
        public let link: Link

        init(backend: TestBackend, index: Int, request: BackendRequest, link: Link) {
            self.backend = backend
            self.index = index
            self.request = request
            self.link = link
        }

        /// Answers the request.
        ///
        /// - Parameter response: what the engine gets.
        /// - Returns: `false` when the request had ended already (abandoned, or answered).
        @discardableResult
        public func answer(_ response: BackendResponse) -> Bool { backend.complete(index, .answered(response)) }

        /// Fails the request.
        ///
        /// - Parameter error: what the engine's call throws.
        /// - Returns: `false` when the request had ended already (abandoned, or answered).
        @discardableResult
        public func fail(_ error: SwitchboardError) -> Bool { backend.complete(index, .failed(error)) }

        /// Answers a `BackendRequest.send(_:)` with the message as a server accepts it: the
        /// client's id and text, this server id, delivery state `sent`.
        ///
        /// - Parameters:
        ///   - serverID: the id the server gives the message.
        ///   - sequence: the conversation sequence, for sequenced backends.
        ///   - time: when the server accepted it.
        /// - Returns: `false` when the request had ended already (abandoned, or answered).
        @discardableResult
        public func acceptSend(serverID: MessageID, sequence: Int64? = nil, time: Date = Date(timeIntervalSince1970: 1_700_000_000)) -> Bool {
            guard case .send(let outgoing) = request else {
                preconditionFailure("acceptSend answers a send, not \(request.name)")
            }
            return answer(.message(TestBackend.accepted(outgoing, serverID: serverID, sequence: sequence, time: time)))
        }

        /// Answers a `BackendRequest.history(_:)` with a page of `messages`, as a server that
        /// pages them by time or by sequence does (``TestBackend/historyPage(of:answering:)``);
        /// fails it with `invalidArgument` when the query has an anchor such a server does not
        /// understand (a paging token).
        ///
        /// - Parameter messages: everything the server holds, oldest first; the page is cut from
        ///   those of the request's conversation.
        /// - Returns: `false` when the request had ended already (abandoned, or answered).
        @discardableResult
        public func answerHistory(from messages: [Message]) -> Bool {
            guard case .history(let query) = request else {
                preconditionFailure("answerHistory answers a history request, not \(request.name)")
            }
            switch TestBackend.historyPage(of: messages, answering: query) {
            case .success(let page): return answer(.history(page))
            case .failure(let error): return fail(error)
            }
        }

        /// How the request ended; `nil` while it waits.
        public var outcome: Outcome? { backend.state.withLock { $0.requests[index].outcome } }

        /// Whether the engine cancelled the request's task (with `requestsOutliveCancellation`,
        /// the request still waits for the test's answer).
        public var isCancelled: Bool { backend.state.withLock { $0.requests[index].cancelled } }

        /// Waits until the engine cancels the request's task.
        ///
        /// - Parameter timeout: how long to wait; the backend's patience when `nil`.
        /// - Throws: ``ConformanceFailure`` when it is not cancelled in time;
        ///   `CancellationError` when the waiting task is cancelled.
        public func waitUntilCancelled(timeout: Duration? = nil) async throws {
            try await backend.waitUntil("the \(request.name) request to be cancelled", timeout: timeout) { _ in isCancelled }
        }
    }

    /// The page a server that pages by time or by sequence answers `query` with: of the
    /// messages in the query's conversation, those older than its `before` anchor and newer than
    /// its `after` anchor, the newest `limit` of them, oldest first. `hasMore` says whether
    /// older ones within the bounds were left out; the page has no `nextAnchor`, so the engine
    /// asks for the next page before the oldest message it stored.
    ///
    /// A `.time` anchor compares `Message.time`; a `.sequence` anchor compares
    /// `Message.sequence`, and a message without one is outside it. Both bounds are exclusive.
    ///
    /// It returns a `Result`, as a rule of ``answerAutomatically(_:)`` does:
    ///
    /// ```swift
    /// backend.answerAutomatically { pending in
    ///     guard case .history(let query) = pending.request else { return nil }
    ///     return TestBackend.historyPage(of: messages, answering: query).map { .history($0) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - messages: everything the server holds, oldest first, of any conversation.
    ///   - query: what the engine asked.
    /// - Returns: the page, or `SwitchboardError` `invalidArgument` when an anchor is a paging
    ///   token, which only the backend that made it can read.
    public static func historyPage(of messages: [Message], answering query: HistoryQuery) -> Result<HistoryPage, SwitchboardError> {
        for case .token(let token)? in [query.before, query.after] {
            return .failure(SwitchboardError(.invalidArgument, "a test backend pages by time or by sequence, not by the token \(token)"))
        }
        /// Where `message` stands against `anchor`, by time or by sequence; `nil` when it has no
        /// sequence to compare.
        func order(of message: Message, against anchor: HistoryQuery.Anchor) -> ComparisonResult? {
            switch anchor {
            case .time(let time):
                return message.time.compare(time)
            case .sequence(let sequence):
                guard let own = message.sequence else { return nil }
                return own < sequence ? .orderedAscending : own > sequence ? .orderedDescending : .orderedSame
            case .token:
                return nil
            }
        }
        let within = messages.filter { message in
            guard message.conversationID == query.conversationID else { return false }
            if let before = query.before, order(of: message, against: before) != .orderedAscending { return false }
            if let after = query.after, order(of: message, against: after) != .orderedDescending { return false }
            return true
        }
        return .success(HistoryPage(messages: Array(within.suffix(max(query.limit, 0))), hasMore: within.count > query.limit))
    }

    /// The message a server makes of a send it accepts: the client's id and content, a server
    /// id, delivery state `sent`, sent by the customer.
    ///
    /// - Parameters:
    ///   - outgoing: what the engine sent.
    ///   - serverID: the id the server gives the message.
    ///   - sequence: the conversation sequence, for sequenced backends.
    ///   - time: when the server accepted it.
    /// - Returns: the accepted message.
    public static func accepted(_ outgoing: OutgoingMessage, serverID: MessageID, sequence: Int64? = nil, time: Date) -> Message {
        Message(
            serverID: serverID, clientID: outgoing.clientID, conversationID: outgoing.conversationID, sequence: sequence,
            senderRole: .customer, kind: outgoing.content.kind, text: outgoing.content.text,
            attachments: outgoing.content.attachments.map(\.withoutData), payload: outgoing.content.payload, time: time,
            quote: outgoing.content.quote, deliveryState: .sent
        )
    }
}
