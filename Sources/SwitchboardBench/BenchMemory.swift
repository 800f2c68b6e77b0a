package import Foundation
package import Logging
package import Switchboard
package import SwitchboardTestKit
package import SwitchboardLoadKit
package import SwitchboardVoximplant
package import SwitchboardEmulation
package import VoximplantEmulator

/// Memory per idle, connected session: `sessions` sessions with one shared store and bus, each
/// connected and waiting; the process's resident memory (Linux `/proc/self/statm`) before and
/// after, divided by the count. Over real sockets the emulator runs in the same process, so its
/// side of each connection is counted too.
extension Bench {
    package func idleMemoryRows() async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        let inMemory = sizes.idleSessions
        progress.say("idle sessions: \(inMemory) on the in-memory backend")
        let server = InMemoryServer()
        let perSession = try await Self.heapPerSession(inMemory) { index in
            InMemoryBackend(server: server, user: ParticipantID("user-\(index)"))
        }
        rows.append(Self.memoryRow("idle sessions, in-memory backend, \(inMemory)", perSession))
        if runs("voximplant") {
            let overSockets = sizes.idleSocketSessions
            progress.say("idle sessions: \(overSockets) over WebSockets to the Voximplant-style emulator")
            let voximplant = VoximplantServer()
            let users = (0..<overSockets).map { voximplant.addUser("user\($0)", token: "token-\($0)", displayName: "User \($0)") }
            let perSocketSession = try await VoximplantEmulator(server: voximplant, logger: Logger.quiet).withRunning { url in
                try await Self.heapPerSession(overSockets) { index in
                    VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: users[index], token: "token-\(index)"), logger: Logger.quiet)
                }
            }
            rows.append(Self.memoryRow("idle sessions, Voximplant-style over WebSockets (emulator in process), \(overSockets)", perSocketSession))
        }
        return rows
    }

    private static func memoryRow(_ name: String, _ bytes: Double) -> BenchRow {
        let goal = 50.0 * 1024
        return BenchRow(
            name: name, unit: "KB/session", switchboard: bytes / 1024, baselineName: "goal", baseline: goal / 1024, ratio: bytes / goal,
            goal: "≤ 50 KB", met: bytes <= goal
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
            let after = try ProcessMemory.residentBytes()
            group.cancelAll()
            return Double(after - before) / Double(count)
        }
    }
}
