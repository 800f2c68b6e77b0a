import Logging
@_spi(TestKit) public import Switchboard
@_spi(TestKit) public import SwitchboardTestKit

/// A soak of one adapter against its emulator: the customer and the agent exchange messages in
/// one conversation while seeded faults the emulator supports hit the link, then the customer's
/// store is compared with the server's log.
///
/// Used by `switchboard soak` (thousands of messages, by hand) and by `swift test` (a few hundred).
public struct SoakRun: Sendable {
    /// What the run proves.
    public struct Figures: Sendable, Hashable, CustomStringConvertible {
        public var backend = ""
        /// Faults injected, by the soak's names.
        public var faults: [String: Int] = [:]
        /// What took effect, counted by the emulator when the client met it (a link cut, an
        /// event dropped, sent twice, reordered or held back, a request failed), over the run.
        public var applied = AppliedFaults()
        /// Every row of the customer's store against the server's log, both ways.
        public var audit = StoreAudit()
        /// Whether the client's store matched the server's log within the run's patience; when
        /// it did not, ``convergence`` says what the wait saw last.
        public var converged = true
        public var convergence = ""
        public var retransmits = 0
        public var connects = 0
        public var seconds = 0.0

        /// Messages on the server at the end (both ways).
        public var messages: Int { audit.messages }

        public var isClean: Bool { converged && audit.isClean }

        public var description: String {
            let faultList = faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return """
                \(backend): faults injected [\(faultList)], took effect [\(applied)], \(audit), catch-up requests \(retransmits), connects \(connects), \
                \(Int(seconds.rounded())) s\(converged ? "" : "; NOT CONVERGED: \(convergence)")
                """
        }
    }

    public var emulator: any EmulatorControl
    /// Messages each way.
    public var messages: Int
    public var seed: UInt64
    public var store: any ChatStore
    public var configuration: SessionConfiguration
    /// How long the client may take to converge after the faults stop.
    public var convergeTimeout: Duration
    public var progress: @Sendable (String) -> Void

    public init(
        emulator: any EmulatorControl,
        messages: Int,
        seed: UInt64,
        store: any ChatStore = InMemoryChatStore(),
        configuration: SessionConfiguration = .fastForTests,
        convergeTimeout: Duration = .seconds(120),
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.emulator = emulator
        self.messages = messages
        self.seed = seed
        self.store = store
        self.configuration = configuration
        self.convergeTimeout = convergeTimeout
        self.progress = progress
    }

    /// The faults a step may inject, with their weights in 100, among those the emulator supports.
    static func fault(_ roll: Int, count: Int, supported: Set<EmulatorFault.Kind>) -> (name: String, fault: EmulatorFault)? {
        let candidate: (String, EmulatorFault, EmulatorFault.Kind)
        switch roll {
        case 0..<2: candidate = ("disconnect", .disconnect, .disconnect)
        case 2..<5: candidate = ("drop", .dropNext(count), .dropEvents)
        case 5..<8: candidate = ("duplicate", .duplicateNext(count), .duplicateEvents)
        case 8..<11: candidate = ("reorder", .reorderNext(count + 1), .reorderEvents)
        case 11..<13: candidate = ("delay", .delayNext(count), .delayEvents)
        case 13..<14: candidate = ("release delayed", .releaseDelayed, .delayEvents)
        case 14..<16:
            candidate = ("failed send", .failNextRequest(SwitchboardError(.connectionLost, "soak"), named: "send"), .failRequest)
        default: return nil
        }
        return supported.contains(candidate.2) ? (candidate.0, candidate.1) : nil
    }

    /// Keeps faults that wait for their target apart, so each is one event (see ``run()``).
    struct FaultSpacing {
        /// Failed send attempts when the last send fault was injected.
        private var failedAttempts: Int?
        /// Confirmed sends when that fault was seen to have hit.
        private var sentAfterHit: Int?
        /// Links opened when the last disconnect was injected.
        private var connectsAtDisconnect: Int?

        mutating func allows(_ fault: EmulatorFault, statistics: SessionStatistics) -> Bool {
            switch fault {
            case .failNextRequest:
                if let failedAttempts {
                    guard let sentAfterHit else {
                        if statistics.sendAttemptsFailed > failedAttempts { sentAfterHit = statistics.messagesSent }
                        return false
                    }
                    guard statistics.messagesSent > sentAfterHit else { return false }
                }
                failedAttempts = statistics.sendAttemptsFailed
                sentAfterHit = nil
                return true
            case .disconnect:
                // The next disconnect once the link it cut is back.
                if let connectsAtDisconnect, statistics.connects <= connectsAtDisconnect { return false }
                connectsAtDisconnect = statistics.connects
                return true
            default:
                return true
            }
        }
    }

    public func run() async throws -> Figures {
        let started = ContinuousClock.now
        let backend = try await emulator.makeCustomerBackend()
        let session = ChatSession(
            id: SessionID("soak"), backend: backend, store: store, configuration: configuration,
            random: SeededRandomNumberGenerator(seed: seed), logger: .quiet
        )
        var random = SeededRandomNumberGenerator(seed: seed)
        var figures = Figures(backend: backend.descriptor.name.rawValue)
        let supported = emulator.supportedFaults
        let emulator = self.emulator
        let messages = self.messages
        let sent = (0..<messages).map { "customer \($0)" }
        let progress = self.progress

        let (conversation, truth) = try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("connected", timeout: .seconds(30)) { $0.isConnected }
            let conversation = try await emulator.prepareConversation(using: session)
            try await recorder.first("the conversation", timeout: .seconds(30)) { $0.conversationID == conversation }
            let chat = try await session.conversation(conversation)
            // A fault is one event. A failed send hits the next send, and a Webim disconnect the next
            // poll, even when injected while no link is up: queued back to back, they would all
            // hit the outbox's head on link after link, which then looks like a message that kills
            // the link every time and fails by rule (`maxLinkLossesPerSend`). So the next failed
            // send waits until the last has hit and a later send has gone through, and the next
            // disconnect until the link it cut is back.
            var spacing = FaultSpacing()
            let appliedBefore = try await emulator.appliedFaults
            for step in 0..<messages {
                if step % 100 == 0 { progress("\(figures.backend): \(step) of \(messages) each way") }
                _ = try await chat.send(text: "customer \(step)")
                try await emulator.agentSend("agent \(step)", in: conversation)
                let roll = Int.random(in: 0..<100, using: &random)
                let count = Int.random(in: 1...3, using: &random)
                if let (name, fault) = Self.fault(roll, count: count, supported: supported),
                    await spacing.allows(fault, statistics: session.statistics)
                {
                    try await emulator.inject(fault)
                    figures.faults[name, default: 0] += 1
                }
                // Let the link breathe now and then, as traffic does.
                if step % 10 == 0 { await Task.yield() }
            }
            progress("\(figures.backend): healing and converging")
            if supported.contains(.delayEvents) { try await emulator.inject(.releaseDelayed) }
            // One more link, so whatever the faults hid is caught up.
            if supported.contains(.disconnect) { try await emulator.inject(.disconnect) }
            do {
                try await recorder.waitUntil("the client converges on the server's log", timeout: convergeTimeout) {
                    try await StoreAudit.converged(chat, on: emulator, expected: 2 * messages, sent: sent)
                }
            } catch let failure as ConformanceFailure {
                // Not converged: the run fails, and the audit below says what is wrong.
                figures.converged = false
                figures.convergence = "\(failure)"
                progress("\(figures.backend): \(failure)")
            }
            figures.applied = try await emulator.appliedFaults.since(appliedBefore)
            return (conversation, try await emulator.serverMessages(in: conversation))
        }

        // Every row the store holds for the conversation, of every state.
        let stored = try await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: session.scope)
        figures.audit = StoreAudit.compare(server: truth, stored: stored, sent: sent)
        let statistics = await session.statistics
        figures.retransmits = statistics.retransmitRequests + statistics.backfillRequests
        figures.connects = statistics.connects
        figures.seconds = started.duration(to: .now).seconds
        return figures
    }
}
