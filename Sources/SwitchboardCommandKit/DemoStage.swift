package import Switchboard
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

    package init(bus: EventBus, events: EventRecorder, configuration: SessionConfiguration, seed: UInt64, narrate: @escaping @Sendable (String) -> Void) {
        self.bus = bus
        self.events = events
        self.configuration = configuration
        self.seed = seed
        self.narrate = narrate
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

/// A part of the demo's result: one session's summary and how many messages its server logged.
package typealias DemoOutcome = (summary: DemoSessionSummary, serverMessages: Int)

/// An adapter's part of the demo: its sessions on its embedded emulator, narrated into the
/// stage's timeline, each checked against the server's log.
package typealias DemoScript = @Sendable (DemoStage) async throws -> [DemoOutcome]
