import Foundation
public import Logging

/// The session engine: drives one ``ChatBackend`` and gives it every guarantee of the core —
/// lifecycle, reconnect with backoff, snapshot diffing, gap fill, de-duplication, the outbox,
/// typing throttles, history paging — and publishes normalized events into an ``EventBus``.
///
/// The engine does its long-running work in ``run()``, which the owner scopes (a task group,
/// a service group, or ``withRunning(_:)``). It starts paused: call ``resume()`` to connect.
///
/// ```swift
/// let session = ChatSession(backend: backend, bus: bus)
/// try await session.withRunning { session in
///     try await session.resume()
///     let chat = try await session.conversation("chat-1")
///     try await chat.send(text: "Hello")
/// }
/// ```
///
/// All decisions are made by pure state machines (``LifecycleStateMachine``,
/// ``ReconnectStateMachine``, ``SequenceTrackerStateMachine``, ``OutboxStateMachine``,
/// ``TypingThrottleStateMachine``, ``SnapshotDiff``, ``MessageReconciler``); this actor performs
/// their actions. Inbound updates and outcomes are applied one at a time through a FIFO gate,
/// so events are published in the order the state machines release them.
public actor ChatSession: Session {
    public nonisolated let id: SessionID
    public nonisolated let descriptor: BackendDescriptor
    public nonisolated let bus: EventBus
    public nonisolated let scope: StoreScope

    let backend: any ChatBackend
    let store: any ChatStore
    let configuration: SessionConfiguration
    let clock: SessionClock
    let logger: Logger
    var random: AnyRandomNumberGenerator

    var lifecycle = LifecycleStateMachine()
    var reconnect: ReconnectStateMachine
    var outbox: OutboxStateMachine
    var trackers: [ConversationID: SequenceTrackerStateMachine<BackendEvent>] = [:]
    var storedSequences: [ConversationID: Int64] = [:]
    var typing: [ConversationID: TypingThrottleStateMachine] = [:]
    var pendingReadMarkers: [ConversationID: ChatEvent.ReadMarker] = [:]
    var historyAnchors: [ConversationID: HistoryQuery.Anchor] = [:]
    var historyExhausted: Set<ConversationID> = []
    /// Conversations the app started that no snapshot has listed yet: a complete snapshot may
    /// predate them (it was read while they were being made), so it does not remove them.
    var startedLocally: Set<ConversationID> = []
    var credentials = Credentials()
    var cursor: SyncCursor?

    var connection: (any BackendConnection)?
    var jobs: AsyncStream<Job>.Continuation?
    var sawFirstUpdate = false
    public private(set) var connectionState: ConnectionState = .disconnected
    var statisticsValue = SessionStatistics()
    private var isRunLoopActive = false
    private var didLoadState = false
    let lifecycleSignal = AsyncSignal()

    private let gate = AsyncGate()

    /// - Parameters:
    ///   - id: names the session on the bus; random when omitted.
    ///   - backend: the adapter.
    ///   - account: the store scope's account key, so several accounts of one backend can
    ///     share a store.
    ///   - store: where state persists; in memory by default.
    ///   - bus: where events go; a private bus by default.
    ///   - configuration: backoff, hold timeout and typing overrides.
    ///   - clock: every delay and timestamp; inject a test clock in tests.
    ///   - random: backoff jitter and client ids; inject a seeded generator in tests.
    ///   - logger: where the session logs; message bodies and tokens are never logged.
    public init(
        id: SessionID? = nil,
        backend: any ChatBackend,
        account: String = "default",
        store: any ChatStore = InMemoryChatStore(),
        bus: EventBus = EventBus(),
        configuration: SessionConfiguration = SessionConfiguration(),
        clock: SessionClock = .continuous,
        random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        logger: Logger = Logger(label: "switchboard.session")
    ) {
        var random = AnyRandomNumberGenerator(base: random)
        self.id = id ?? SessionID(UUIDString.random(using: &random))
        self.backend = backend
        self.descriptor = backend.descriptor
        self.scope = StoreScope(backend: backend.descriptor.name, account: account)
        self.store = store
        self.bus = bus
        self.configuration = configuration
        self.clock = clock
        self.random = random
        var logger = logger
        logger[metadataKey: "session"] = "\(self.id)"
        logger[metadataKey: "backend"] = "\(backend.descriptor.name)"
        self.logger = logger
        self.reconnect = ReconnectStateMachine(policy: configuration.reconnectBackoff)
        self.outbox = OutboxStateMachine(backoff: configuration.outboxBackoff)
    }

    /// What the engine has done so far.
    public var statistics: SessionStatistics { statisticsValue }

    // MARK: Lifecycle

    public func resume() async throws {
        if try lifecycle.resume() == .connect { lifecycleSignal.signal() }
    }

    public func pause() async throws {
        if try lifecycle.pause() == .disconnect {
            jobs?.yield(.stop)
            lifecycleSignal.signal()
        }
    }

    public func close() async {
        guard lifecycle.close() == .shutDown else { return }
        jobs?.yield(.stop)
        lifecycleSignal.signal()
    }

    /// `true` once the session is closed, by the app or by a fatal error.
    public var isClosed: Bool { lifecycle.state == .closed }

    /// Runs the session until it is closed or the task is cancelled: connects while resumed,
    /// reconnects with backoff after failures, stops at a fatal error. Call it once.
    public func run() async {
        precondition(!isRunLoopActive, "ChatSession.run() must be called once")
        isRunLoopActive = true
        defer { isRunLoopActive = false }
        await loadState()
        while !Task.isCancelled {
            switch lifecycle.state {
            case .closed:
                setConnectionState(.disconnected, reason: .userInitiated)
                return
            case .created, .paused:
                setConnectionState(.disconnected, reason: .userInitiated)
                await lifecycleSignal.wait(since: lifecycleSignal.generation)
                continue
            case .running:
                break
            }
            guard let failure = await connectAndServe() else { continue }
            if failure.code == .cancelled && Task.isCancelled { return }
            statisticsValue.connectionFailures += 1
            switch reconnect.failed(failure, using: &random) {
            case .retry(let delay, let clearCredentials):
                logger.debug("link failed, retrying", metadata: ["error": "\(failure)", "delay": "\(delay)"])
                if clearCredentials {
                    credentials = Credentials()
                    try? await store.saveCredentials(credentials, scope: scope)
                }
                setConnectionState(.waitingToReconnect, reason: .connectionLost(failure))
                await sleepUnlessLifecycleChanges(delay)
            case .giveUp(let error):
                logger.error("session ended", metadata: ["error": "\(error)"])
                publish(.fatal(error), conversation: nil)
                _ = lifecycle.close()
                setConnectionState(.disconnected, reason: .fatal(error))
                return
            }
        }
    }

    /// Runs the session around `body`, then closes it and ends ``run()``.
    public nonisolated func withRunning<T: Sendable>(
        _ body: @Sendable (ChatSession) async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            do {
                let result = try await body(self)
                await self.close()
                try await group.waitForAll()
                return result
            } catch {
                await self.close()
                group.cancelAll()
                throw error
            }
        }
    }

    // MARK: Connection

    enum Job: Sendable {
        case stop
        case linkEnded(SwitchboardError)
        case work(@Sendable (any BackendConnection) async -> Void)
        case timer(after: Duration, TimerEvent)
    }

    enum TimerEvent: Sendable, Hashable {
        case hold(ConversationID)
        case outboxRetry(ConversationID)
        case typing(ConversationID)
    }

    private func loadState() async {
        guard !didLoadState else { return }
        didLoadState = true
        do {
            storedSequences = try await store.fetchSequences(scope: scope)
            credentials = try await store.fetchCredentials(scope: scope)
            cursor = try await store.fetchCursor(scope: scope)
            outbox.restore(try await store.fetchOutbox(scope: scope))
        } catch {
            report(SwitchboardError(.storageFailure, "could not load the session state", underlying: error))
        }
    }

    /// One link: connect, serve until it ends; `nil` when stopped on purpose.
    private func connectAndServe() async -> SwitchboardError? {
        reconnect.connecting()
        setConnectionState(.connecting, reason: nil)
        let context = ConnectionContext(
            session: id,
            credentials: credentials,
            cursor: cursor,
            conversationSequences: trackers.mapValues(\.delivered).merging(storedSequences) { live, _ in live },
            clock: clock,
            logger: logger
        )
        do {
            return try await backend.withConnection(context) { connection in
                await self.serve(connection)
            }
        } catch {
            return SwitchboardError.classify(error)
        }
    }

    /// Serves one open link until it ends (`failure`) or the session stops using it (`nil`).
    private func serve(_ connection: any BackendConnection) async -> SwitchboardError? {
        guard lifecycle.wantsConnection, !Task.isCancelled else { return nil }
        statisticsValue.connects += 1
        let (jobStream, jobs) = AsyncStream.makeStream(of: Job.self)
        self.jobs = jobs
        self.connection = connection
        self.sawFirstUpdate = false
        setConnectionState(.connected, reason: nil)
        await gated { await self.linkEstablished() }

        let failure: SwitchboardError? = await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await update in connection.updates {
                        await self.apply(update)
                    }
                    await self.linkEnded(SwitchboardError(.connectionLost, "the backend closed the link"))
                } catch {
                    await self.linkEnded(SwitchboardError.classify(error))
                }
            }
            for await job in jobStream {
                switch job {
                case .stop:
                    group.cancelAll()
                    return nil
                case .linkEnded(let error):
                    group.cancelAll()
                    return error
                case .work(let work):
                    group.addTask { await work(connection) }
                case .timer(let delay, let event):
                    group.addTask {
                        do { try await self.clock.sleep(for: delay) } catch { return }
                        await self.timerFired(event)
                    }
                }
            }
            group.cancelAll()
            return nil
        }
        jobs.finish()
        self.jobs = nil
        self.connection = nil
        await gated { self.linkDropped() }
        return failure
    }

    private func linkEnded(_ error: SwitchboardError) {
        guard !Task.isCancelled else { return }
        jobs?.yield(.linkEnded(error))
    }

    private func sleepUnlessLifecycleChanges(_ delay: Duration) async {
        let generation = lifecycleSignal.generation
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await self.clock.sleep(for: delay) }
            group.addTask { await self.lifecycleSignal.wait(since: generation) }
            await group.next()
            group.cancelAll()
        }
    }

    func setConnectionState(_ state: ConnectionState, reason: DisconnectReason?) {
        guard state != connectionState else { return }
        connectionState = state
        publish(.connection(state, reason: reason), conversation: nil)
    }

    /// Runs a job on the current link; dropped when there is none.
    func schedule(_ work: @escaping @Sendable (any BackendConnection) async -> Void) {
        jobs?.yield(.work(work))
    }

    func scheduleTimer(_ event: TimerEvent, after delay: Duration) {
        jobs?.yield(.timer(after: max(.zero, delay), event))
    }

    // MARK: The gate

    /// Runs `body` with exclusive access to the engine's state machines and the store, in
    /// arrival order. Bodies never perform network requests (those run as jobs or in the
    /// caller's task) and never nest.
    func gated<T>(_ body: () async throws -> T) async rethrows -> T {
        try await gate.withGate(body)
    }

    // MARK: Publishing

    func publish(_ kind: ChatEvent.Kind, conversation: ConversationID?, sequence: Int64? = nil, time: Date? = nil) {
        statisticsValue.eventsPublished += 1
        bus.publish(
            ChatEvent(
                origin: ChatEvent.Origin(session: id, backend: descriptor.name),
                conversationID: conversation,
                time: time ?? clock.date,
                sequence: sequence,
                kind: kind
            )
        )
    }

    func report(_ error: SwitchboardError, conversation: ConversationID? = nil) {
        statisticsValue.problems += 1
        logger.warning("problem", metadata: ["error": "\(error)"])
        publish(.error(error), conversation: conversation)
    }

    public nonisolated func events(filter: EventFilter, buffering: EventBus.BufferingPolicy) -> EventStream {
        bus.subscribe(filter: filter.intersection(EventFilter(sessions: [id])), buffering: buffering)
    }

    func requireCapability(_ capability: BackendCapabilities?) throws {
        try lifecycle.checkOpen()
        if let capability, !descriptor.capabilities.contains(capability) {
            throw SwitchboardError.unsupported(capability, backend: descriptor.name)
        }
    }

    /// Performs a request on the live link in the caller's task.
    func performNow(_ request: BackendRequest) async throws -> BackendResponse {
        try requireCapability(request.requiredCapability)
        guard let connection else {
            throw SwitchboardError(.notConnected, "\(request.name) needs a connection")
        }
        return try await connection.perform(request)
    }
}
