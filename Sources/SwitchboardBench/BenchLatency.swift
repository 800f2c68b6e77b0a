package import Foundation
package import Logging
package import Switchboard
package import SwitchboardCommandKit
package import SwitchboardSQLite
package import SwitchboardTestKit

/// Loopback latency per adapter: a send until the server's confirmation is in the store, and an
/// agent's message until it is on the bus, each against a raw client (WSClient, or
/// AsyncHTTPClient for Webim) doing the same exchange with the same emulator.
///
/// Each round runs the session (SQLite file store) for its samples, pauses it, then runs the raw
/// client as the same customer for as many; the first exchange of each phase warms up and is not
/// counted (a resumed session first catches up on what the raw client did).
extension Bench {
    package func latencyRows() async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        for store in LatencyStore.allCases {
            for (name, rig) in rigs where runs(name) {
                rows += try await rig.withRig { try await latencyRows(adapter: name, title: rig.title, store: store, $0) }
            }
        }
        return rows
    }

    /// The session's store: in memory shows what the engine and the adapter add to the wire; the
    /// SQLite file adds the durable writes (the outbox before a send, the confirmation after).
    package enum LatencyStore: String, CaseIterable, Sendable {
        case memory = "in-memory store"
        case sqliteFile = "SQLite file"

        /// Its part of a row's id.
        var key: String {
            switch self {
            case .memory: "memory"
            case .sqliteFile: "sqlite"
            }
        }
    }

    private func latencyRows(adapter: String, title: String, store kind: LatencyStore, _ rig: EmulatorRig) async throws -> [BenchRow] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any ChatStore =
            switch kind {
            case .memory: InMemoryChatStore()
            case .sqliteFile: try SQLiteChatStore(path: directory.appendingPathComponent("latency.sqlite").path)
            }
        let session = ChatSession(
            id: SessionID("bench-\(title)"), backend: try await rig.control.makeCustomerBackend(), store: store, bus: EventBus(), logger: Logger.quiet
        )
        let perRound = max(1, sizes.latencySamples / sizes.rounds)
        let samples = try await session.withRunning { session in
            var samples = LatencySamples()
            let events = session.events(filter: .all, buffering: .unbounded)
            var iterator = events.makeAsyncIterator()
            try await session.resume()
            try await Self.next(&iterator, "connected") { $0.isConnected }
            let conversation = try await rig.control.prepareConversation(using: session)
            // A conversation the agent made reaches the session as an event.
            while (try? await session.conversation(conversation)) == nil {
                try await Self.next(&iterator, "the conversation") { $0.conversationID == conversation }
            }
            let chat = try await session.conversation(conversation)
            let raw = rig.raw(conversation)
            for round in 1...sizes.rounds {
                progress.say("\(title) latency: round \(round) of \(sizes.rounds)")
                if round > 1 {
                    try await session.resume()
                    try await Self.next(&iterator, "reconnected") { $0.isConnected }
                }
                samples.startRound()
                for index in 0...perRound {
                    let text = "sb \(round).\(index)"
                    let elapsed = try await Self.seconds {
                        let sent = try await chat.send(text: text)
                        try await Self.next(&iterator, "\(text) confirmed") { event in
                            event.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false
                        }
                    }
                    if index > 0 { samples.send[round - 1].append(elapsed) }
                    let answer = "agent to sb \(round).\(index)"
                    let received = try await Self.seconds {
                        try await rig.control.agentSend(answer, in: conversation)
                        try await Self.next(&iterator, answer) { $0.addedMessage?.text == answer }
                    }
                    if index > 0 { samples.agent[round - 1].append(received) }
                }
                try await session.pause()
                try await Self.next(&iterator, "paused") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
                let measured = try await raw.measure(round: round, exchanges: perRound + 1) { text in
                    try await rig.control.agentSend(text, in: conversation)
                }
                samples.rawSend[round - 1] += measured.sends.dropFirst()
                samples.rawAgent[round - 1] += measured.agents.dropFirst()
            }
            return samples
        }
        return samples.rows(adapter: adapter, title: title, store: kind)
    }

    /// Waits for the first event matching `predicate` (no watchdog: a hang is the test's time limit's).
    package static func next(_ iterator: inout EventStream.AsyncIterator, _ what: String, _ predicate: (ChatEvent) -> Bool) async throws {
        while let event = await iterator.next() {
            if predicate(event) { return }
        }
        throw SwitchboardError(.connectionLost, "bench: the event stream ended waiting for \(what)")
    }
}

/// The samples of one adapter, in seconds, round by round.
package struct LatencySamples {
    package var send: [[Double]] = []
    package var agent: [[Double]] = []
    package var rawSend: [[Double]] = []
    package var rawAgent: [[Double]] = []

    package init() {}

    /// Opens the next round's samples.
    package mutating func startRound() {
        send.append([])
        agent.append([])
        rawSend.append([])
        rawAgent.append([])
    }

    /// The nearest-rank percentile.
    package static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        BenchDistribution.percentile(sorted: values.sorted(), fraction)
    }

    /// The four rows of an adapter on a store: send → confirmed and agent message → app, p50
    /// (with the distribution of the samples) and p99, each round's percentile the row's rounds.
    package func rows(adapter: String, title: String, store: Bench.LatencyStore) -> [BenchRow] {
        func row(_ way: String, _ figure: String, ours: [[Double]], raw: [[Double]], _ fraction: Double, goal: BenchGoal) -> BenchRow {
            let all = ours.flatMap { $0 }
            let allRaw = raw.flatMap { $0 }
            let percentile = fraction == 0.5 ? "p50" : "p99"
            return BenchRow(
                id: "latency.\(adapter).\(store.key).\(way).\(percentile)", adapter: adapter,
                name: "\(figure), \(title), \(store.rawValue), \(percentile) of \(all.count)", unit: "ms", better: .lower,
                switchboard: Self.percentile(all, fraction) * 1000, baselineName: "raw client", baseline: Self.percentile(allRaw, fraction) * 1000,
                goal: goal,
                rounds: BenchRounds(
                    switchboard: ours.map { Self.percentile($0, fraction) * 1000 }, baseline: raw.map { Self.percentile($0, fraction) * 1000 }
                ),
                distribution: fraction == 0.5 ? BenchDistribution(all, baseline: allRaw, scale: 1000) : nil
            )
        }
        return [
            row("send", "send → confirmed", ours: send, raw: rawSend, 0.5, goal: .ratio(.atMost, 1.3, "≤ 1.3× the time")),
            row("send", "send → confirmed", ours: send, raw: rawSend, 0.99, goal: .figure(.atMost, 2, "≤ 2 ms")),
            row("agent", "agent message → app", ours: agent, raw: rawAgent, 0.5, goal: .ratio(.atMost, 1.5, "≤ 1.5× the time")),
            row("agent", "agent message → app", ours: agent, raw: rawAgent, 0.99, goal: .reported),
        ]
    }
}
