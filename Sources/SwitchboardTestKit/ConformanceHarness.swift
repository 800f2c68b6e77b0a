public import Logging
@_spi(TestKit) public import Switchboard

extension SessionConfiguration {
    /// Short delays for tests against local emulators: reconnect and resend within
    /// milliseconds, re-request gaps after 100 ms, poll a backend that pushes nothing every 20 ms.
    public static var fastForTests: SessionConfiguration {
        SessionConfiguration(
            reconnectBackoff: BackoffPolicy(initial: .milliseconds(5), maximum: .milliseconds(50)),
            outboxBackoff: BackoffPolicy(initial: .milliseconds(5), maximum: .milliseconds(50)),
            holdTimeout: .milliseconds(100),
            pollInterval: .milliseconds(20)
        )
    }

    /// No engine delay, for a session on a ``TestClock`` against an emulator in the same process
    /// (`SwitchboardEmulation`'s `InProcessNetwork`): reconnects, resends and gap requests happen
    /// at once, while everything timed with a duration (an adapter's request deadlines,
    /// heartbeats and pong deadlines, the typing throttle, polls, the window hold) waits for the
    /// test to move the clock. No deadline can pass because the machine is slow.
    public static var virtualTime: SessionConfiguration {
        SessionConfiguration(
            reconnectBackoff: BackoffPolicy(initial: .zero, maximum: .zero),
            outboxBackoff: BackoffPolicy(initial: .zero, maximum: .zero),
            holdTimeout: .zero
        )
    }
}

extension Logger {
    /// A logger that discards everything.
    public static var quiet: Logger { Logger(label: "switchboard.quiet", factory: { _ in SwiftLogNoOpLogHandler() }) }
}

/// What a conformance run needs: the emulator to drive and the session settings to use.
public struct ConformanceContext: Sendable {
    public var emulator: any EmulatorControl
    public var configuration: SessionConfiguration
    public var logger: Logger
    /// Makes the store of each session a case opens (unless the case brings its own): in memory
    /// by default; a durable store runs the suite on its own storage.
    public var makeStore: @Sendable () throws -> any ChatStore
    /// Makes each session's clock. The in-memory reference backend runs the suite on an
    /// ``ImmediateClock`` (every backoff, hold timeout and throttle passes at once); an emulator
    /// in the same process on its ``EmulatorControl/virtualClock``, which moves only when the
    /// test moves it; an emulator on a socket on the real clock.
    public var makeClock: @Sendable () -> SessionClock
    /// How long a case waits for what it expects before it fails as a hang (the recorders'
    /// ``EventRecorder/patience``): 30 s by default; more for a real server (PostgreSQL, Synapse)
    /// that shares a loaded machine with every other suite.
    public var patience: Duration

    /// - Parameters:
    ///   - emulator: the emulator the cases drive.
    ///   - configuration: the sessions' settings: by default `SessionConfiguration.virtualTime`
    ///     on an emulator with a ``EmulatorControl/virtualClock``, else
    ///     `SessionConfiguration.fastForTests`.
    ///   - logger: where the sessions log.
    ///   - makeStore: makes each session's store.
    ///   - makeClock: by default the emulator's virtual clock, else the real one.
    ///   - patience: how long a case waits for what it expects.
    public init(
        emulator: any EmulatorControl,
        configuration: SessionConfiguration? = nil,
        logger: Logger = .quiet,
        makeStore: @escaping @Sendable () throws -> any ChatStore = { InMemoryChatStore() },
        makeClock: (@Sendable () -> SessionClock)? = nil,
        patience: Duration = .seconds(30)
    ) {
        let virtualClock = emulator.virtualClock
        self.emulator = emulator
        self.configuration = configuration ?? (virtualClock == nil ? .fastForTests : .virtualTime)
        self.logger = logger
        self.makeStore = makeStore
        self.makeClock = makeClock ?? { virtualClock.map { SessionClock($0) } ?? .continuous }
        self.patience = patience
    }
}

/// Opens sessions against the emulator on one shared bus for a conformance case.
public struct ConformanceHarness: Sendable {
    public let context: ConformanceContext
    public let bus = EventBus()
    /// Numbers the sessions a case opens, so each has its own id on the shared bus (the seeded
    /// random source would give them all the same one).
    private let sessionNumbers = SessionNumbers()

    public init(context: ConformanceContext) {
        self.context = context
    }

    public var emulator: any EmulatorControl { context.emulator }

    /// Runs a session (on a new customer backend unless one is given) for the duration of
    /// `body`: resumed and connected first unless `resume` is `false`, closed afterwards. It logs
    /// to the context's logger unless one is given.
    public func withSession<T: Sendable>(
        backend given: (any ChatBackend)? = nil,
        store givenStore: (any ChatStore)? = nil,
        logger givenLogger: Logger? = nil,
        resume: Bool = true,
        _ body: @Sendable (SessionProbe) async throws -> T
    ) async throws -> T {
        let backend: any ChatBackend
        if let given { backend = given } else { backend = try await emulator.makeCustomerBackend() }
        let store = try givenStore ?? context.makeStore()
        let session = ChatSession(
            id: SessionID("probe-\(sessionNumbers.next())"),
            backend: backend,
            store: store,
            bus: bus,
            configuration: context.configuration,
            clock: context.makeClock(),
            random: SeededRandomNumberGenerator(seed: 0x5EED),
            logger: givenLogger ?? context.logger
        )
        let recorder = EventRecorder(session.events(filter: .all, buffering: .unbounded), patience: context.patience)
        let probe = SessionProbe(session: session, recorder: recorder, emulator: emulator)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await session.run() }
            group.addTask { await recorder.run() }
            do {
                if resume {
                    try await session.resume()
                    try await probe.waitForConnection()
                }
                let result = try await body(probe)
                await session.close()
                recorder.finish()
                try await group.waitForAll()
                return result
            } catch {
                await session.close()
                recorder.finish()
                group.cancelAll()
                throw error
            }
        }
    }
}

/// A running session under test with everything it published.
public struct SessionProbe: Sendable {
    public let session: ChatSession
    public let recorder: EventRecorder
    public let emulator: any EmulatorControl

    /// Has the emulator prepare a conversation and waits until the session knows it.
    public func openConversation() async throws -> any Conversation {
        let id = try await emulator.prepareConversation(using: session)
        try await recorder.first("the session learns conversation \(id)") { event in
            event.conversationID == id && event.kind.category == .conversation
        }
        return try await session.conversation(id)
    }

    /// Waits until the session reports a connected link (counting from now when `fresh`).
    public func waitForConnection(after index: Int = 0) async throws {
        try await recorder.waitUntil("connected") { events in
            events.dropFirst(index).contains { $0.isConnected }
        }
    }

    /// Waits until the session's store holds messages with each of `texts`.
    public func waitForMessages(_ texts: [String], in conversation: any Conversation) async throws {
        let wanted = Set(texts)
        try await recorder.waitUntil("messages \(texts.prefix(3))… in \(conversation.id)") { events in
            let seen = Set(events.compactMap { $0.conversationID == conversation.id ? $0.addedMessage?.text : nil })
            return wanted.isSubset(of: seen)
        }
    }
}

extension ChatEvent {
    public var addedMessage: Message? {
        if case .messageAdded(let message, _) = kind { return message }
        return nil
    }

    public var updatedMessage: Message? {
        if case .messageUpdated(let message) = kind { return message }
        return nil
    }

    public var isConnected: Bool {
        if case .connection(.connected, _) = kind { return true }
        return false
    }
}

/// Hands out 1, 2, 3… The lock guards the last number.
private final class SessionNumbers: Sendable {
    private let last = Locked(0)

    func next() -> Int {
        last.withLock { last in
            last += 1
            return last
        }
    }
}
