package import Foundation
package import Logging
package import Switchboard
@_spi(TestKit) package import SwitchboardTestKit
package import SwitchboardLoadKit
package import SwitchboardVoximplant
package import SwitchboardEmulation
package import VoximplantEmulator

/// Memory per idle, connected session: `sessions` sessions with one shared store and bus, each
/// connected and waiting; the process's resident memory (Linux `/proc/self/statm`) before and
/// after, divided by the count. The sessions run in a process of their own (this executable
/// again, `bench --idle-in-memory` or `--idle-clients`), a fresh one each round, so no round
/// reuses the heap another grew; over real sockets the emulator runs in this one: the figure is
/// the client's alone, as a gateway's would be. The row's figure is the rounds' median.
extension Bench {
    /// The goals (#33): 10,000 sessions of a gateway in about 1 GB with room to work.
    static let idleGoal = 32.0 * 1024
    static let idleOverSocketsGoal = 64.0 * 1024

    /// Rounds of each memory row: each a process of its own, all its sessions connecting at once.
    var memoryRoundCount: Int { min(sizes.rounds, 3) }

    /// A memory row's rounds, each measured by `measure` in a fresh process of its own (given
    /// how to start one) or, where there is none or one fails, every round in this process: a
    /// row's rounds are all measured one way, which its name says. Returns the bytes a session of
    /// each round and whether they were measured alone.
    private func memoryRounds(_ what: String, measure: (_ clientProcess: [String]?) async throws -> Double) async throws -> ([Double], Bool) {
        if let clientProcess {
            do {
                var rounds: [Double] = []
                for round in 1...memoryRoundCount {
                    progress.say("\(what), in a process of their own, round \(round) of \(memoryRoundCount)")
                    rounds.append(try await measure(clientProcess))
                }
                return (rounds, true)
            } catch {
                progress.note("a process of idle sessions failed (\(error)); measuring every round in this process")
            }
        }
        var rounds: [Double] = []
        for round in 1...memoryRoundCount {
            progress.say("\(what), in this process, round \(round) of \(memoryRoundCount)")
            rounds.append(try await measure(nil))
        }
        return (rounds, false)
    }

    package func idleMemoryRows() async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        let inMemory = sizes.idleSessions
        let (inMemoryRounds, alone) = try await memoryRounds("\(inMemory) idle sessions on the in-memory backend") { clientProcess in
            if let clientProcess { try await Self.inProcessOfTheirOwn(clientProcess + ["--idle-in-memory", "\(inMemory)"]) }
            else { try await Self.idleInMemorySessions(count: inMemory) }
        }
        let whose = alone ? "a process of their own" : "in this process"
        rows.append(memoryRow("memory.idle.in-memory", nil, "idle sessions, in-memory backend (\(whose)), \(inMemory)", inMemoryRounds, goal: Self.idleGoal))
        if runs("voximplant") {
            let overSockets = sizes.idleSocketSessions
            let voximplant = VoximplantServer()
            let users = (0..<overSockets).map { voximplant.addUser("user\($0)", token: "token-\($0)", displayName: "User \($0)") }
            let domain = String(users.first?.drop { $0 != "@" }.dropFirst() ?? "")
            let (rounds, alone) = try await VoximplantEmulator(server: voximplant, logger: Logger.quiet).withRunning { url in
                try await memoryRounds("\(overSockets) idle sessions over WebSockets to the Voximplant-style emulator") { clientProcess in
                    if let clientProcess {
                        try await Self.inProcessOfTheirOwn(clientProcess + ["--idle-clients", url, "--count", "\(overSockets)", "--domain", domain])
                    } else {
                        try await Self.idleVoximplantClients(url: url, count: overSockets, domain: domain)
                    }
                }
            }
            let whose = alone ? "the client's process alone" : "emulator in process"
            rows.append(
                memoryRow(
                    "memory.idle.websockets", "voximplant", "idle sessions, Voximplant-style over WebSockets (\(whose)), \(overSockets)", rounds,
                    goal: Self.idleOverSocketsGoal
                )
            )
        }
        return rows
    }

    /// Resident bytes per session of `count` idle sessions on the in-memory backend: what
    /// `bench --idle-in-memory` measures in a process of its own. Ten sessions go first, so what
    /// the first session starts once per process is not counted per session.
    package static func idleInMemorySessions(count: Int) async throws -> Double {
        let server = InMemoryServer()
        let backend = { (index: Int) in InMemoryBackend(server: server, user: ParticipantID("user-\(index)")) }
        _ = try await heapPerSession(min(count, 10), backend: backend)
        return try await heapPerSession(count, backend: backend)
    }

    /// Resident bytes per session of `count` Voximplant-style sessions connected to `url` as
    /// `user0@<domain>`… (token `token-<n>`) and idle: what `bench --idle-clients` measures in a
    /// process of its own. Ten sessions connect and go first, so what the first connection starts
    /// once per process (the event loops' threads and their allocator arenas) is not counted
    /// per session.
    package static func idleVoximplantClients(url: String, count: Int, domain: String) async throws -> Double {
        let backend = { (index: Int) in
            VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: "user\(index)@\(domain)", token: "token-\(index)"), logger: Logger.quiet)
        }
        _ = try await heapPerSession(min(count, 10), backend: backend)
        return try await heapPerSession(count, backend: backend)
    }

    /// How the idle clients' process prints its figure: a tagged line, whatever else its output
    /// holds (its standard error goes to the same file).
    package static let idleClientsTag = "idle-bytes-per-session"

    /// Runs `arguments` (this executable's `bench --idle-clients`) and reads the bytes per
    /// session it printed; bounded by 5 minutes.
    private static func inProcessOfTheirOwn(_ arguments: [String]) async throws -> Double {
        let (status, printed) = try await runInAProcessOfItsOwn(arguments, within: .seconds(300))
        let figure = printed.split(whereSeparator: \.isNewline).last { $0.hasPrefix(idleClientsTag + " ") }
        guard status == 0, let bytes = figure.flatMap({ Double($0.dropFirst(idleClientsTag.count + 1)) }) else {
            throw SwitchboardError(.serverError, "the idle clients' process ended \(status): \(printed.suffix(500))")
        }
        return bytes
    }

    /// Runs `arguments` in a process of its own (killed after `limit`) and returns its exit
    /// status and what it printed (standard output and error).
    package static func runInAProcessOfItsOwn(_ arguments: [String], within limit: Duration) async throws -> (status: Int32, printed: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-bench-child-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let child = try SpawnedChild(arguments, output: output)
        defer { child.kill() }
        let status = try await child.waitForExit(within: limit)
        return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    /// A memory row from each round's bytes a session: the median against the goal.
    private func memoryRow(_ id: String, _ adapter: String?, _ name: String, _ rounds: [Double], goal: Double) -> BenchRow {
        BenchRow(
            id: id, adapter: adapter, name: name, unit: "KB/session", better: .lower, switchboard: median(rounds) / 1024, baselineName: "goal",
            baseline: goal / 1024, goal: .figure(.atMost, goal / 1024, "≤ \(Int(goal / 1024)) KB"),
            rounds: BenchRounds(switchboard: rounds.map { $0 / 1024 }, baseline: rounds.map { _ in goal / 1024 })
        )
    }

    /// Resident bytes per session with `count` sessions connected and idle, sharing `store`.
    package static func heapPerSession(
        _ count: Int,
        store: any ChatStore = InMemoryChatStore(),
        backend: (Int) -> any ChatBackend
    ) async throws -> Double {
        let bus = EventBus()
        let connected = bus.subscribe(filter: .all, buffering: .unbounded)
        ProcessMemory.releaseFreed()
        let before = try ProcessMemory.residentBytes()
        let sessions = (0..<count).map { index in
            ChatSession(id: SessionID("idle-\(index)"), backend: backend(index), account: "user-\(index)", store: store, bus: bus, logger: Logger.quiet)
        }
        return try await withThrowingDiscardingTaskGroup { group in
            for session in sessions {
                group.addTask { try await session.run() }
                try await session.resume()
            }
            var up = 0
            for await event in connected where event.isConnected {
                up += 1
                if up == count { break }
            }
            // Idle: each loop has handled what came before a command that waits its turn (a
            // second `resume` changes nothing), and what the work in flight freed is handed back.
            for session in sessions { try await session.resume() }
            ProcessMemory.releaseFreed()
            let after = try ProcessMemory.residentBytes()
            group.cancelAll()
            return Double(after - before) / Double(count)
        }
    }
}
