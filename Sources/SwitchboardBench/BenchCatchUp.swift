package import Foundation
package import GRDB
package import Logging
package import Switchboard
package import SwitchboardSQLite
package import SwitchboardTestKit
package import SwitchboardVoximplant
package import VoximplantEmulator
package import WSClient
package import SwitchboardCommandKit
package import VoximplantCommands

/// Catch-up after an offline period (Voximplant-style): the agent writes `catchUpEvents` messages
/// while the session is paused; the figure is the time from `resume()` until the last of them is
/// stored and published. The baseline is the least the same work can cost: the raw client's
/// retransmits of 100 events each to the same emulator, then one SQLite transaction inserting
/// the same rows.
extension Bench {
    package func catchUpRow() async throws -> BenchRow {
        let count = sizes.catchUpEvents
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let rounds = min(sizes.rounds, 3)
        let (ours, raw) = try await VoximplantRig().withRig { rig in
            let store = try SQLiteChatStore(path: directory.appendingPathComponent("catch-up.sqlite").path)
            let session = ChatSession(id: "bench-catch-up", backend: try await rig.control.makeCustomerBackend(), store: store, bus: EventBus(), logger: Logger.quiet)
            return try await session.withRunning { session in
                let events = session.events(filter: .all, buffering: .unbounded)
                var iterator = events.makeAsyncIterator()
                try await session.resume()
                try await Self.next(&iterator, "connected") { $0.isConnected }
                let conversation = try await rig.control.prepareConversation(using: session)
                try await Self.next(&iterator, "the conversation") { $0.conversationID == conversation }
                guard let raw = rig.raw(conversation) as? RawVoximplantClient else { throw SwitchboardError(.invalidState, "bench: not a Voximplant rig") }
                var ours: [Double] = []
                var baseline: [Double] = []
                for round in 1...rounds {
                    try await session.pause()
                    try await Self.next(&iterator, "paused") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
                    for index in 1...count {
                        if index % 1000 == 0 { progress.say("catch-up, round \(round) of \(rounds): the agent writes \(index) of \(count)") }
                        try await rig.control.agentSend("missed \(round).\(index)", in: conversation)
                    }
                    progress.say("catch-up, round \(round) of \(rounds): Switchboard catches up \(count) events")
                    let last = "missed \(round).\(count)"
                    ours.append(
                        try await Self.seconds {
                            try await session.resume()
                            try await Self.next(&iterator, "the last missed message") { $0.addedMessage?.text == last }
                        }
                    )
                    progress.say("catch-up, round \(round) of \(rounds): the raw client fetches and stores \(count) events")
                    baseline.append(try await raw.catchUp(count, into: directory.appendingPathComponent("raw-\(round).sqlite").path))
                }
                return (ours, baseline)
            }
        }
        return BenchRow(
            id: "catch-up.voximplant", adapter: "voximplant", name: "catch-up of \(count) missed events, Voximplant-style (SQLite file)", unit: "s",
            better: .lower, switchboard: median(ours), baselineName: "raw retransmits + one INSERT transaction", baseline: median(raw),
            goal: .ratio(.atMost, 1.5, "≤ 1.5× the time"), rounds: BenchRounds(switchboard: ours, baseline: raw)
        )
    }
}

extension RawVoximplantClient {
    /// Fetches the conversation's newest `count` events with retransmits of ≤ 100, one at a time
    /// as the engine's lane for the conversation sends them (the tracker plans up to
    /// `maxRetransmitsInFlight` ranges; the lane keeps one request of a conversation in flight),
    /// and inserts them into a new SQLite file in one transaction; returns the seconds it took.
    package func catchUp(_ count: Int, into path: String) async throws -> Double {
        let database = try DatabaseQueue(path: path)
        try await database.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE message (conversation TEXT NOT NULL, serverID TEXT NOT NULL, sequence INTEGER NOT NULL, value BLOB NOT NULL,
                    PRIMARY KEY (conversation, serverID))
                    """
            )
        }
        let started = ContinuousClock.now
        let fetched = Locked<[(String, Int64, Data)]>([])
        try await RawSocket.connect(url) { @concurrent inbound, outbound in
            try await login(&inbound, outbound)
            try await RawSocket.send(["type": "request", "id": "head", "name": "getConversations", "params": ["conversations": [conversation]]], on: outbound)
            var head: Int64 = 0
            try await RawSocket.next(&inbound) { object in
                guard object["id"] as? String == "head" else { return false }
                let conversations = (object["result"] as? [String: Any])?["conversations"] as? [[String: Any]]
                head = (conversations?.first?["lastSequence"] as? NSNumber)?.int64Value ?? 0
                return true
            }
            var from = max(1, head - Int64(count) + 1)
            while from <= head {
                let to = min(head, from + 99)
                let id = "retransmit-\(from)"
                try await RawSocket.send(
                    ["type": "request", "id": id, "name": "retransmitEvents", "params": ["conversation": conversation, "eventsFrom": from, "eventsTo": to]],
                    on: outbound
                )
                try await RawSocket.next(&inbound) { object in
                    guard object["id"] as? String == id else { return false }
                    let events = (object["result"] as? [String: Any])?["events"] as? [[String: Any]] ?? []
                    var rows: [(String, Int64, Data)] = []
                    for event in events {
                        guard let message = event["message"] as? [String: Any], let uuid = message["uuid"] as? String,
                            let data = try? JSONSerialization.data(withJSONObject: message)
                        else { continue }
                        rows.append((uuid, (event["seq"] as? NSNumber)?.int64Value ?? 0, data))
                    }
                    fetched.withLock { $0 += rows }
                    return true
                }
                from = to + 1
            }
        }
        let rows = fetched.withLock { $0 }
        guard rows.count == count else {
            throw SwitchboardError(.protocolViolation, "bench: the raw client fetched \(rows.count) of \(count) missed events")
        }
        let id = conversation
        try await database.write { db in
            let insert = try db.makeStatement(sql: "INSERT OR REPLACE INTO message (conversation, serverID, sequence, value) VALUES (?, ?, ?, ?)")
            for (serverID, sequence, value) in rows { try insert.execute(arguments: [id, serverID, sequence, value]) }
        }
        return Bench.seconds(since: started)
    }
}
