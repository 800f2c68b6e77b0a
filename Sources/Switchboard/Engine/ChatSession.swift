import DequeModule
import Foundation
public import Logging
public import Tracing

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
/// **One loop, one machine.** ``run()`` is a single consumer of one input queue: every input — an
/// update from the link, an app command (a send, a typing keystroke, a read marker), the clock
/// reaching a deadline, a request's outcome, the link opening or closing — goes into it, and the
/// loop hands them one at a time to the session's state machine (`SessionStateMachine`, pure:
/// every rule of the engine lives there) and performs the effects it returns: store, announce,
/// hand a request to the link, start or end the link, answer the app. Each input's writes are
/// stored in one transaction, and its events announced and its callers answered once they are.
/// Requests go out in per-conversation lanes (FIFO per conversation, bounded concurrency across
/// conversations) as child tasks of the link, which end — and are forgotten — as soon as they
/// are done. The machine's earliest deadline is an action scheduled on the clock (a sleeper task
/// on a clock that cannot schedule, or for a deadline already due).
///
/// Commands given before ``run()`` starts wait for it; after the session has ended they throw
/// `sessionClosed`.
public actor ChatSession: Session {
    public nonisolated let id: SessionID
    public nonisolated let descriptor: BackendDescriptor
    public nonisolated let bus: EventBus
    public nonisolated let scope: StoreScope

    /// The adapter the session drives.
    public nonisolated let backend: any ChatBackend
    /// Where state persists. The loop reads and writes it through its open transaction
    /// (`ChatSession+Store.swift`); app reads go to it directly.
    /// The session's store, bound to its ``scope``: what the session stored, for an app that
    /// reads it directly (the ``Conversation`` and ``Session`` reads cover most needs).
    public nonisolated let store: ScopedChatStore
    /// The writes, events, answers and rows of the input the loop is handling.
    var openTransaction: OpenTransaction?
    /// What the backend last said of its service (``Session/availability``, ``Session/settings``).
    public internal(set) var availability: ChatEvent.Availability?
    public internal(set) var settings: JSONValue = [:]
    let configuration: SessionConfiguration
    /// Where the sends' spans go.
    nonisolated let tracer: any Tracer
    /// Whether the tracer records anything (not swift-distributed-tracing's no-op tracer).
    nonisolated let isTracing: Bool
    /// The traced sends the loop has queued and not yet seen answered.
    var sendTraces = SendTraces()
    let clock: SessionClock
    let logger: Logger
    var random: AnyRandomNumberGenerator
    /// The engine's rules and the state they keep. Only the loop changes it.
    var machine: SessionStateMachine

    nonisolated let inbox: EngineInbox<SessionStateMachine.Input>
    /// Wakes the sleeper task, where there is one, when an earlier deadline is set.
    nonisolated let timerWake = AsyncSignal()
    /// The jobs stream of the link the loop started, if any (at most one).
    var link: LinkHandles?
    /// The deadline the timer is armed for, and which timer that is (its ticks carry it).
    var armedDeadline: Duration?
    var sleeperGeneration = 0
    /// The tick scheduled on a ``SchedulingClock`` for ``armedDeadline``.
    var scheduledTick: ScheduledAction?
    /// Child tasks the loop decided on; started by the loop between inputs.
    var spawns: [Spawn] = []
    /// The link the loop is to abandon while it connects (``abortConnect``): the loop cancels
    /// its task between inputs.
    var abortLink: Int?
    var loopEnded = false
    /// Whether ``run()`` has returned, and the signal it gives then.
    var runEnded = false
    nonisolated let runEnd = AsyncSignal()
    var hasRun = false
    private var didLoadState = false

    /// What the app wants of the session: running, paused or closed.
    var lifecycle: LifecycleStateMachine { machine.connection.lifecycle }

    /// - Parameters:
    ///   - id: names the session on the bus; random when omitted.
    ///   - backend: the adapter.
    ///   - account: the store scope's account key, so several accounts of one backend can
    ///     share a store. The scope's user is the backend's ``ChatBackend/storeUser``.
    ///   - store: where state persists; in memory by default.
    ///   - bus: where events go; a private bus by default.
    ///   - configuration: backoff, hold timeout, typing, lane and limit settings.
    ///   - clock: every delay and timestamp; inject a test clock in tests.
    ///   - random: backoff jitter and client ids; inject a seeded generator in tests.
    ///   - logger: where the session logs; message bodies and tokens are never logged.
    ///   - tracer: where each send's span goes (swift-distributed-tracing): from the call to the
    ///     server's answer, with the store writes and the backend attempts as child spans. The
    ///     process's `InstrumentationSystem.tracer` when omitted (a no-op until bootstrapped).
    public init(
        id: SessionID? = nil,
        backend: any ChatBackend,
        account: String = "default",
        store: any ChatStore = InMemoryChatStore(),
        bus: EventBus = EventBus(),
        configuration: SessionConfiguration = SessionConfiguration(),
        clock: SessionClock = .continuous,
        random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        logger: Logger = Logger(label: "switchboard.session"),
        tracer: (any Tracer)? = nil
    ) {
        let tracer = tracer ?? InstrumentationSystem.tracer
        self.tracer = tracer
        self.isTracing = !(tracer is NoOpTracer)
        var random = AnyRandomNumberGenerator(base: random)
        self.id = id ?? SessionID(UUIDString.random(using: &random))
        self.backend = backend
        self.descriptor = backend.descriptor
        self.scope = StoreScope(backend: backend.descriptor.name, account: account, user: backend.storeUser)
        self.store = store.scoped(to: scope)
        self.bus = bus
        self.configuration = configuration
        self.clock = clock
        self.random = random
        var logger = logger
        logger[metadataKey: "session"] = "\(self.id)"
        logger[metadataKey: "backend"] = "\(backend.descriptor.name)"
        self.logger = logger
        self.machine = SessionStateMachine(settings: SessionStateMachine.Settings(descriptor: backend.descriptor, configuration: configuration, user: backend.user))
        self.inbox = EngineInbox(updateWindow: configuration.inboundWindow)
    }

    // MARK: Lifecycle

    /// Runs a lifecycle change on the loop, or at once when no loop runs (before ``run()``, or
    /// after it ended), so a session can be resumed before it runs and closed after.
    func lifecycleCommand(_ change: AppCommand.LifecycleChange) async throws {
        if !hasRun || loopEnded {
            let outcome = Locked<Result<Void, any Error>?>(nil)
            let command = AppCommand.lifecycle(change, Reply { result in outcome.withLock { $0 = result } })
            await inOneTransaction { await run(.command(command)) }
            try outcome.withLock { $0 }?.get()
            return
        }
        do {
            try await submit { .lifecycle(change, $0) }
        } catch let error as SwitchboardError where error.code == .sessionClosed && loopEnded {
            // The loop ended while the change waited for its turn: it still applies.
            try await lifecycleCommand(change)
        }
    }

    /// Runs the session until it is closed or the task is cancelled: connects while resumed,
    /// reconnects with backoff after failures, stops at a fatal error.
    ///
    /// - Throws: `invalidState` when called while it runs or after it ended: a session runs once.
    public func run() async throws {
        guard !hasRun else {
            throw SwitchboardError(.invalidState, "ChatSession.run() was called twice; a session runs once")
        }
        hasRun = true
        await inATaskOfItsOwn { await $0.loadState() }
        await withTaskCancellationHandler {
            // The links in a scope of their own (one at a time: a link starts once the one before
            // it has closed), so that abandoning a link that connects cancels it and nothing else.
            await ChildTasks.withScope { links in
                await ChildTasks.withScope { group in await loop(in: &group, links: &links) }
            }
        } onCancel: {
            inbox.interrupt(with: .cancelled)
        }
        await end()
    }

    /// Takes the inputs one at a time, each in a task of its own, and starts the child tasks they
    /// ask for, until the session is finished or the inbox is closed; then cancels the children.
    /// Its frame, small and out of line, is what the loop's task holds while it waits.
    @inline(never)
    private func loop(in group: inout ChildTasks, links: inout ChildTasks) async {
        await inATaskOfItsOwn { await $0.take(.started) }
        await startSpawns(in: &group, links: &links)
        while !isFinished, await takeNext() {
            await startSpawns(in: &group, links: &links)
        }
        group.cancelAll()
        links.cancelAll()
    }

    /// Waits for the next input and runs it in a task of its own; `false` once the inbox is
    /// closed. Out of line: the input is not kept in the loop's frame.
    @inline(never)
    private func takeNext() async -> Bool {
        guard let input = await inbox.next() else { return false }
        await inATaskOfItsOwn { await $0.take(input) }
        return true
    }

    @inline(never)
    private var isFinished: Bool { machine.connection.isFinished }

    /// What ``run()`` does once its loop has ended. Out of line, like the loop's steps: a task
    /// keeps its async frames at their deepest, and the caller of ``run()`` holds its frame for
    /// the session's life.
    @inline(never)
    private func end() async {
        loopEnded = true
        // Answer what never got its turn: commands throw `sessionClosed`, requests fail.
        for input in inbox.close() {
            if case .command(let command) = input { command.reply.fail(Self.ended) }
        }
        await take(.ended)
        disarmTimer()
        // Sends still queued go with the outbox to whoever runs the session next.
        // (A send of several messages is ended once: `end` is.)
        for trace in sendTraces.byClientID.values { trace.end(outcome: "queued") }
        sendTraces.byClientID.removeAll()
        runEnded = true
        runEnd.signal()
    }

    /// Runs `body` in a child task that starts at once on this actor and ends with it. What an
    /// input takes of a task's memory (its async frames, at their deepest: a task keeps the
    /// slabs it grew until it ends) goes back as the input is done, rather than staying with the
    /// loop's task for the session's life: the loop's task holds only the loop.
    @inline(never)
    private func inATaskOfItsOwn(_ body: @escaping @Sendable (isolated ChatSession) async -> Void) async {
        #if compiler(>=6.2)
        guard #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) else { return await body(self) }
        await withTaskGroup(of: Void.self) { group in
            group.addImmediateTask { await body(self) }
        }
        #else
        await body(self)
        #endif
    }

    /// Runs the session around `body`, then closes it and ends ``run()``.
    public nonisolated func withRunning<T: Sendable>(
        _ body: @Sendable (ChatSession) async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.run() }
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

    /// Reads what the session resumes from, and repairs what a crash could have left half done of
    /// the outbox (``SessionStateMachine/restoreOutbox(_:withMessage:pending:)``).
    private func loadState() async {
        guard !didLoadState else { return }
        didLoadState = true
        do {
            if backend.startsAsNewUser {
                try await store.apply([.removeEverything])
                logger.notice("forgot the stored user before starting")
            }
            machine.load(
                sequences: try await store.fetchSequences(),
                credentials: try await store.fetchCredentials(),
                cursor: try await store.fetchCursor()
            )
            let entries = try await store.fetchOutbox()
            var withMessage: Set<ClientMessageID> = []
            for entry in entries where try await store.fetchMessage(clientID: entry.clientID) != nil {
                withMessage.insert(entry.clientID)
            }
            let repairs = machine.restoreOutbox(entries, withMessage: withMessage, pending: try await store.fetchPendingMessages())
            if !repairs.isEmpty {
                try await store.apply(repairs)
                machine.statistics.repairedAtLoad = repairs.count
                logger.notice("repaired the stored outbox", metadata: ["repairs": "\(repairs.count)"])
            }
        } catch {
            report(SwitchboardError(.storageFailure, "could not load the session state", underlying: error))
        }
    }

    // MARK: The loop

    /// A child task the loop decided to start.
    enum Spawn: Sendable {
        case link(Int, ConnectionContext, AsyncStream<LinkJob>)
        case sleeper(generation: Int, deadline: Duration, wakeGeneration: Int)
    }

    /// Handles one input in one transaction. The updates that arrived together from the link are
    /// handled together, in one transaction.
    func take(_ input: SessionStateMachine.Input) async {
        // A traced send's outbox entries are stored under its trace.
        if case .command(.send(_, _, _, let trace?, _)) = input { sendTraces.current = trace }
        defer { sendTraces.current = nil }
        switch input {
        case .command(let command) where loopEnded:
            command.reply.fail(Self.ended)
        case .update(let id, _):
            inbox.updateTaken()
            var batched = 1
            await inOneTransaction {
                await run(input)
                while batched < configuration.maxUpdatesPerTransaction,
                    let next = inbox.nextIfBuffered(where: { input in
                        if case .update(id, _) = input { return true }
                        return false
                    })
                {
                    inbox.updateTaken()
                    await run(next)
                    batched += 1
                }
            }
            machine.statistics.batchedUpdates += batched
        case .tick(let sleeper) where !isCurrent(sleeper: sleeper):
            break
        case .cancelled:
            loopEnded = true
            await inOneTransaction { await run(input) }
        default:
            await inOneTransaction { await run(input) }
        }
        armTimer()
    }

    @inline(never)
    private func startSpawns(in group: inout ChildTasks, links: inout ChildTasks) async {
        if let id = abortLink {
            abortLink = nil
            // Only the link being abandoned can be in the scope: its connect is cancelled.
            if link?.id == id { links.cancelAll() }
        }
        guard !spawns.isEmpty else { return }
        let work = spawns
        // Spawns are rare (a link, a sleeper): an idle session keeps no buffer for them.
        spawns.removeAll()
        for spawn in work {
            inbox.taskStarted()
            switch spawn {
            case .link(let id, let context, let jobs):
                await links.addTask { [self] in
                    await self.runLink(id, context: context, jobs: jobs)
                    self.inbox.taskEnded()
                }
            case .sleeper(let generation, let deadline, let wakeGeneration):
                await group.addTask { [self] in
                    await self.sleep(until: deadline, unlessWokenSince: wakeGeneration)
                    self.inbox.yield(.tick(sleeper: generation))
                    self.inbox.taskEnded()
                }
            }
        }
    }

    // MARK: Commands

    static let ended = SwitchboardError(.sessionClosed, "the session has ended")

    /// Hands an app command to the loop and waits for its answer.
    ///
    /// - Throws: what the command fails with; `sessionClosed` when the loop has ended.
    nonisolated func submit<T: Sendable>(_ command: (Reply<T>) -> AppCommand) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let command = command(Reply(continuation: continuation))
            if !inbox.yield(.command(command)) { command.reply.fail(Self.ended) }
        }
    }

    // MARK: Publishing

    /// Publishes an event, or, while a transaction is open, keeps it until the transaction's
    /// writes are stored: nothing is announced that a crash could take back.
    func publish(_ kind: ChatEvent.Kind, conversation: ConversationID?, sequence: Int64? = nil, time: Date? = nil) {
        switch kind {
        case .availability(let value): availability = value
        case .settingsChanged(let changed): settings = settings.merging(changed)
        default: break
        }
        let event = ChatEvent(
            origin: ChatEvent.Origin(session: id, backend: descriptor.name),
            conversationID: conversation,
            time: time ?? clock.date,
            sequence: sequence,
            kind: kind
        )
        if openTransaction != nil && !kind.isControl {
            openTransaction!.events.append(event)
            return
        }
        machine.statistics.eventsPublished += 1
        bus.publish(event)
    }

    func report(_ error: SwitchboardError, conversation: ConversationID? = nil) {
        machine.statistics.problems += 1
        logger.warning("problem", metadata: ["error": "\(error)"])
        publish(.error(error), conversation: conversation)
    }
}
