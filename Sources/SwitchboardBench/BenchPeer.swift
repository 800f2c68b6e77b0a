package import Foundation
package import Logging
package import Switchboard
package import SwitchboardMatrix
package import SwitchboardSQLite
@_spi(TestKit) package import SwitchboardTestKit
package import SwitchboardLoadKit
package import SynapseHarness

/// The peer rows (#33): the Matrix adapter beside matrix-nio, the Python Matrix client library bot
/// and integration authors pick, on one local Synapse in one run, each in a process of its own
/// with its own idiomatic store (Switchboard's SQLite file; a sqlite3 file for nio, which keeps no
/// messages itself: `scripts/nio-bench.py`), one after the other, rounds alternating who goes
/// first. Skipped, saying so, where Synapse or matrix-nio is not installed
/// (`scripts/synapse.sh install` installs both).
extension Bench {
    /// What the peer's and Switchboard's processes print: `peer KEY VALUE` lines.
    package static let peerTag = "peer"

    /// Why the peer rows cannot run here, or `nil` when they can.
    package static func peerMissing() async -> String? {
        let python = Synapse.venv + "/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            return "Synapse is not installed (scripts/synapse.sh install)"
        }
        guard (try? await runInAProcessOfItsOwn([python, "-c", "import nio"], within: .seconds(60)))?.status == 0 else {
            return "matrix-nio is not installed beside Synapse (scripts/synapse.sh install)"
        }
        return nil
    }

    package func peerRows() async throws -> [BenchRow] {
        guard let clientProcess else { throw SwitchboardError(.unsupported, "the peer rows run each client in a process of its own") }
        let python = Synapse.venv + "/bin/python"
        let script = Synapse.repository.appendingPathComponent("scripts/nio-bench.py").path
        let limit: Duration = sizes.peerMissed < 100 ? .seconds(60) : .seconds(300)
        return try await Synapse.withServer { server in
            progress.say("peer: seeding Synapse")
            let agent = try await server.register("agent")
            let clients = [
                PeerClient(name: "Switchboard", user: try await server.register("switchboard"), limit: limit) { phase, user, store, room, count in
                    clientProcess + [
                        "--matrix-peer", phase, "--homeserver", server.baseURL, "--user", user.localPart, "--password", user.password,
                        "--store", store, "--room", room, "--count", "\(count)",
                    ]
                },
                PeerClient(name: "matrix-nio", user: try await server.register("nio"), limit: limit) { phase, user, store, room, count in
                    [python, script, phase, server.baseURL, user.localPart, user.password, store, room, "\(count)"]
                },
            ]
            var rooms: [ConversationID] = []
            for index in 0..<sizes.peerRooms {
                let room = try await agent.createRoom(name: "room \(index)", inviting: [], preset: "public_chat")
                for client in clients { try await client.user.join(room) }
                rooms.append(room)
            }
            for room in rooms {
                for index in 0..<sizes.peerMessagesPerRoom { try await agent.send("waiting \(index)", in: room) }
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-peer-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            var storeNumber = 0
            func freshStore() -> String {
                storeNumber += 1
                return directory.appendingPathComponent("store-\(storeNumber).sqlite").path
            }
            // Which client goes first in round `round`.
            func inTurn(_ round: Int) -> [PeerClient] { round.isMultiple(of: 2) ? clients : clients.reversed() }

            var firstMessage: [String: [Double]] = [:]
            for round in 0..<sizes.peerRounds {
                for client in inTurn(round) {
                    progress.say("peer: \(client.name), start → first message, round \(round + 1)")
                    let printed = try await client.run("first-message", store: freshStore(), room: rooms[0], count: 0)
                    firstMessage[client.name, default: []].append(try Self.number(printed, "first-message") * 1000)
                }
            }

            var echoes: [String: [[Double]]] = [:]
            // In four parts, each a round: enough rounds to judge a move by (`bench compare`).
            for round in 0..<4 {
                for client in inTurn(round) {
                    progress.say("peer: \(client.name), send → own echo, part \(round + 1) of 4")
                    let printed = try await client.run("echo", store: freshStore(), room: rooms[0], count: max(1, sizes.peerEchoes / 4))
                    echoes[client.name, default: []].append((printed["echo"] ?? "").split(separator: ",").compactMap { Double($0) })
                }
            }

            var catchUp: [String: [Double]] = [:]
            var resident: [String: [Double]] = [:]
            for round in 0..<sizes.peerRounds {
                // A room of its own per round, with a few messages the clients see before they go.
                let room = try await agent.createRoom(name: "catch-up \(round)", inviting: [], preset: "public_chat")
                for client in clients { try await client.user.join(room) }
                for index in 0..<5 { try await agent.send("before \(index)", in: room) }
                var stores: [String: String] = [:]
                for client in inTurn(round) {
                    progress.say("peer: \(client.name) goes offline, round \(round + 1)")
                    let store = freshStore()
                    _ = try await client.run("offline", store: store, room: room, count: 5)
                    stores[client.name] = store
                }
                progress.say("peer: \(sizes.peerMissed) messages while both are away, round \(round + 1)")
                for index in 0..<sizes.peerMissed { try await agent.send("missed \(index)", in: room) }
                for client in inTurn(round) {
                    progress.say("peer: \(client.name) catches up, round \(round + 1)")
                    let printed = try await client.run("catch-up", store: stores[client.name]!, room: room, count: sizes.peerMissed)
                    catchUp[client.name, default: []].append(try Self.number(printed, "catch-up") * 1000)
                    resident[client.name, default: []].append(try Self.number(printed, "rss") / 1_048_576)
                }
            }

            // At least as fast as the peer on every row, and smaller in memory (#33). Rounds by
            // their median, as the other rows; the echoes by the latency rows' percentiles, each
            // part a round.
            func row(_ id: String, _ name: String, unit: String, _ figures: [String: [[Double]]], smaller: Bool = false, statistic: ([Double]) -> Double) -> BenchRow {
                let ours = (figures["Switchboard"] ?? []).map(statistic)
                let peer = (figures["matrix-nio"] ?? []).map(statistic)
                func all(_ side: String) -> Double { statistic((figures[side] ?? []).flatMap { $0 }) }
                return BenchRow(
                    id: "peer.\(id)", adapter: "matrix", name: name, unit: unit, better: .lower, switchboard: all("Switchboard"), baselineName: "matrix-nio",
                    baseline: all("matrix-nio"), goal: smaller ? .ratio(.below, 1, "< 1× matrix-nio") : .ratio(.atMost, 1, "≤ 1× matrix-nio"),
                    rounds: BenchRounds(switchboard: ours, baseline: peer)
                )
            }
            // One value a round.
            func perRound(_ figures: [String: [Double]]) -> [String: [[Double]]] { figures.mapValues { $0.map { [$0] } } }
            let median = { (values: [Double]) in self.median(values) }
            var echoP50 = row("echo.p50", "Matrix on Synapse, send → own echo p50, \(sizes.peerEchoes) sequential", unit: "ms", echoes) {
                LatencySamples.percentile($0, 0.5)
            }
            echoP50.distribution = BenchDistribution((echoes["Switchboard"] ?? []).flatMap { $0 }, baseline: (echoes["matrix-nio"] ?? []).flatMap { $0 })
            return [
                row(
                    "first-message", "Matrix on Synapse, start → first message, \(sizes.peerRooms) rooms × \(sizes.peerMessagesPerRoom) waiting", unit: "ms",
                    perRound(firstMessage), statistic: median
                ),
                echoP50,
                row("echo.p99", "Matrix on Synapse, send → own echo p99, \(sizes.peerEchoes) sequential", unit: "ms", echoes) { LatencySamples.percentile($0, 0.99) },
                row("catch-up", "Matrix on Synapse, catch-up of \(sizes.peerMissed) missed messages", unit: "ms", perRound(catchUp), statistic: median),
                row("memory", "Matrix on Synapse, resident memory after the catch-up", unit: "MB", perRound(resident), smaller: true, statistic: median),
            ]
        }
    }

    /// The value `value` of a phase's output, as a number.
    private static func number(_ printed: [String: String], _ key: String) throws -> Double {
        guard let value = printed[key].flatMap(Double.init) else { throw SwitchboardError(.protocolViolation, "the client printed no \(key): \(printed)") }
        return value
    }

    /// Switchboard's side of one peer phase (`bench --matrix-peer PHASE`, a process of its own):
    /// what `scripts/nio-bench.py` does, through a `ChatSession` on `MatrixBackend` with a SQLite
    /// file. Returns the `KEY VALUE` pairs to print.
    package static func matrixPeerPhase(
        _ phase: String,
        homeserver: String,
        user: String,
        password: String,
        store path: String,
        room: ConversationID,
        count: Int
    ) async throws -> [(String, String)] {
        let started = ContinuousClock.now
        let backend = try MatrixBackend(
            configuration: MatrixConfiguration(homeserver: homeserver, login: .password(user: user, password: password), deviceName: "switchboard-bench", allowsPlainText: true)
        )
        let session = ChatSession(backend: backend, store: try SQLiteChatStore(path: path), logger: Logger(label: "bench.peer") { _ in SwiftLogNoOpLogHandler() })
        var events = session.bus.subscribe(filter: .all, buffering: .unbounded).makeAsyncIterator()
        func next(_ matches: (ChatEvent) -> Bool) async throws -> ChatEvent {
            while let event = await events.next() {
                if matches(event) { return event }
            }
            throw SwitchboardError(.connectionLost, "the session's events ended")
        }
        let added = { (event: ChatEvent) -> Message? in
            if case .messageAdded(let message, _) = event.kind { message } else { nil }
        }
        let seconds = { (start: ContinuousClock.Instant) -> String in
            let elapsed = (ContinuousClock.now - start).components
            return "\(Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)"
        }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await session.run() }
            defer { group.cancelAll() }
            try await session.resume()
            let printed = try await phaseBody()
            await session.close()
            return printed
        }
        func phaseBody() async throws -> [(String, String)] {
            switch phase {
            case "first-message":
                _ = try await next { added($0) != nil }
                return [("first-message", seconds(started))]
            case "echo":
                _ = try await next { $0.conversationID == room }
                let conversation = try await session.conversation(room)
                var samples: [String] = []
                for index in 0..<count {
                    let sentAt = ContinuousClock.now
                    let sent = try await conversation.send(MessageDraft(text: "echo \(index)"))
                    // The server's own copy, from /sync: the send's answer has no sender name.
                    _ = try await next { event in
                        let message: Message? = switch event.kind {
                        case .messageAdded(let message, _), .messageUpdated(let message): message
                        default: nil
                        }
                        return message?.clientID == sent.clientID && message?.serverID != nil && message?.senderName != nil
                    }
                    let elapsed = (ContinuousClock.now - sentAt).components
                    samples.append(String(format: "%.3f", Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15))
                }
                return [("echo", samples.joined(separator: ","))]
            case "offline":
                // The room's messages are stored with the sync that brought them; the sync's
                // cursor comes after them on the link, and the next process starts from it.
                _ = try await next { $0.conversationID == room && added($0) != nil }
                let deadline = ContinuousClock.now + .seconds(30)
                while try await session.store.fetchCursor() == nil {
                    guard ContinuousClock.now < deadline else { throw SwitchboardError(.timedOut, "the first sync's cursor was never stored") }
                    try await Task.sleep(for: .milliseconds(5))
                }
                return [("offline", "ready")]
            case "catch-up":
                var missed: Set<MessageID> = []
                while missed.count < count {
                    let message = try await next { $0.conversationID == room && added($0)?.text.hasPrefix("missed ") == true }
                    if let id = added(message)?.serverID { missed.insert(id) }
                }
                return [("catch-up", seconds(started)), ("rss", "\(try ProcessMemory.residentBytes())")]
            default:
                throw SwitchboardError(.invalidArgument, "no peer phase \(phase)")
            }
        }
    }
}

/// One client of the peer rows: its user and how to start its process for a phase.
private struct PeerClient: Sendable {
    let name: String
    let user: MatrixTestUser
    /// How long a phase may run (tiny sizes: a minute, so a phase that hangs fails with its
    /// output before the test's own limit).
    let limit: Duration
    /// The process's arguments for a phase, its user, store file, room and count.
    let arguments: @Sendable (_ phase: String, _ user: MatrixTestUser, _ store: String, _ room: String, _ count: Int) -> [String]

    /// Runs one phase in a process of its own and reads what it printed.
    func run(_ phase: String, store: String, room: ConversationID, count: Int) async throws -> [String: String] {
        let (status, printed) = try await Bench.runInAProcessOfItsOwn(arguments(phase, user, store, room.rawValue, count), within: limit)
        guard status == 0 else { throw SwitchboardError(.serverError, "\(name)'s \(phase) ended \(status): \(printed.suffix(800))") }
        var values: [String: String] = [:]
        for line in printed.split(whereSeparator: \.isNewline) where line.hasPrefix(Bench.peerTag + " ") {
            let parts = line.split(separator: " ", maxSplits: 2)
            if parts.count == 3 { values[String(parts[1])] = String(parts[2]) }
        }
        return values
    }
}
