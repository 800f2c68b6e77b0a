package import Switchboard
package import SwitchboardEmulation
package import SwitchboardTestKit

/// What an adapter's part of `switchboard demo` works with: the demo's bus and recorder (every
/// session publishes into one timeline), its session settings and seed, and the checks each part
/// ends with. An adapter's registry entry gives its part (``AdapterEntry/demo``); the demo runs
/// them in the registry's order after the in-memory reference backend's.
package struct DemoStage: Sendable {
    package let bus: EventBus
    package let events: EventRecorder
    package let configuration: SessionConfiguration
    package let seed: UInt64
    /// Starts a step of the script: its heading, after what came before is printed.
    package let narrate: @Sendable (String) -> Void
    /// With `demo --console`: each emulator serves its agent console while its part runs.
    package let console: DemoConsole?
    /// Prints the events recorded so far (before the demo waits on a console).
    package let flush: @Sendable () -> Void

    package init(
        bus: EventBus,
        events: EventRecorder,
        configuration: SessionConfiguration,
        seed: UInt64,
        console: DemoConsole? = nil,
        flush: @escaping @Sendable () -> Void = {},
        narrate: @escaping @Sendable (String) -> Void
    ) {
        self.bus = bus
        self.events = events
        self.configuration = configuration
        self.seed = seed
        self.console = console
        self.flush = flush
        self.narrate = narrate
    }

    /// Runs `emulator` around a part's `body`; with ``console``, with its agent console beside
    /// it (the desk is made only then), announced as it starts and held open after the part (its
    /// events printed) until ``DemoConsole/hold`` returns.
    package func running<Emulator: HostedEmulator, Result: Sendable>(
        _ emulator: Emulator,
        desk: @Sendable () -> any AgentDesk,
        _ body: @Sendable (Emulator.Endpoints) async throws -> Result
    ) async throws -> Result {
        guard let console else { return try await emulator.withRunning(body) }
        let withConsole = AgentWebConsole(emulator, desk: desk(), key: console.key)
        return try await withConsole.withRunning { endpoints in
            narrate("The \(withConsole.desk.vendor) emulator's agent console: \(endpoints.console)")
            console.opened(withConsole.desk.vendor, endpoints.console)
            let result = try await body(endpoints.emulator)
            flush()
            await console.hold(withConsole.desk.vendor, endpoints.console)
            return result
        }
    }

    /// Each session draws from its own seeded generator: the same seed for two sessions would
    /// give them the same client ids.
    package func randomness(for session: SessionID) -> SeededRandomNumberGenerator {
        Self.randomness(seed, for: session)
    }

    package static func randomness(_ seed: UInt64, for session: SessionID) -> SeededRandomNumberGenerator {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in session.rawValue.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return SeededRandomNumberGenerator(seed: seed ^ hash)
    }

    /// Waits until `session`'s link is down because the app paused or closed it.
    package func disconnectedByTheApp(_ session: SessionID, _ what: String) async throws {
        try await events.first(what) { $0.origin.session == session && $0.kind == .connection(.disconnected, reason: .userInitiated) }
    }

    /// Waits until the server has confirmed `message` (its client id is unique per session, not
    /// across sessions, so the session is part of the match).
    package func confirmed(_ message: Message, in session: SessionID) async throws {
        let clientID = message.clientID
        try await events.first("\"\(message.text)\" is confirmed") { event in
            event.origin.session == session && (event.updatedMessage.map { $0.clientID == clientID && $0.serverID != nil } ?? false)
        }
    }

    /// One session's row of the summary: its store against the server's log.
    package static func summarize(
        _ session: ChatSession,
        store: InMemoryChatStore,
        conversation: ConversationID,
        truth: [MessageID]
    ) async throws -> DemoSessionSummary {
        let stored = await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: session.scope)
        let ids = stored.compactMap(\.serverID)
        return DemoSessionSummary(
            backend: session.descriptor.name,
            session: session.id,
            statistics: await session.statistics,
            storedMessages: stored.count,
            lost: Set(truth).subtracting(ids).count,
            duplicated: ids.count - Set(ids).count,
            outOfOrder: zip(ids, truth).filter { $0 != $1 }.count
        )
    }
}

/// One session of the demo against its server's log.
package struct DemoSessionSummary: Sendable {
    package var backend: BackendName
    package var session: SessionID
    package var statistics: SessionStatistics
    package var storedMessages: Int
    package var lost: Int
    package var duplicated: Int
    package var outOfOrder: Int
}

/// `switchboard demo --console`: the key of the agent consoles the demo's emulators serve, what
/// to do when one opens (besides the timeline's heading), and what to do once a part is done
/// while its emulator still runs (the command waits for Enter). Both get the emulator's vendor
/// and its console's URL.
package struct DemoConsole: Sendable {
    package var key: String
    package var opened: @Sendable (_ vendor: String, _ url: String) -> Void
    package var hold: @Sendable (_ vendor: String, _ url: String) async -> Void

    package init(
        key: String,
        opened: @escaping @Sendable (_ vendor: String, _ url: String) -> Void = { _, _ in },
        hold: @escaping @Sendable (_ vendor: String, _ url: String) async -> Void
    ) {
        self.key = key
        self.opened = opened
        self.hold = hold
    }
}

/// A part of the demo's result: one session's summary and how many messages its server logged.
package typealias DemoOutcome = (summary: DemoSessionSummary, serverMessages: Int)

/// An adapter's part of the demo: its sessions on its embedded emulator, narrated into the
/// stage's timeline, each checked against the server's log.
package typealias DemoScript = @Sendable (DemoStage) async throws -> [DemoOutcome]
