package import Foundation
package import Logging
package import PostgresNIO
package import Switchboard
package import SwitchboardEmulation
package import SwitchboardPostgres
package import SwitchboardTestKit
package import SwitchboardVoximplant
package import VoximplantEmulator

/// The PostgreSQL rows (`switchboard bench --postgres URL`): the store and the bridge against
/// PostgresNIO doing the same step on the same server, in the same run.
extension Bench {
    package func postgresRows(url: String) async throws -> [BenchRow] {
        let schema = "switchboard_bench_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        return try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
            do {
                let rows = [
                    try await postgresHistoryPage(store),
                    try await postgresInboundBatch(store),
                    try await bridgeRate(store, url: url),
                ] + (runs("voximplant") ? [try await postgresSessionMemory(store)] : [])
                try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
                return rows
            } catch {
                try? await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
                throw error
            }
        }
    }

    /// A page of 50 from the middle of a large conversation, against the same SELECT through
    /// PostgresNIO (rows read, not decoded).
    private func postgresHistoryPage(_ store: PostgresChatStore) async throws -> BenchRow {
        let table = store.schema + ".message"
        return try await historyPageRow(store, id: "postgres.history", label: "PostgreSQL history page", storeName: "PostgreSQL", baselineName: "raw PostgresNIO SELECT") { middle in
            let rows = try await store.client.query(
                """
                SELECT value FROM \(unescaped: table) WHERE backend = 'bench' AND account = 'a' AND user_id = '' AND conversation = 'c1'
                AND (pending, sequence, time, tie) < (\(middle.isPending), \(middle.sequence), \(middle.time.timeIntervalSinceReferenceDate), \(middle.tieBreaker))
                ORDER BY pending DESC, sequence DESC, time DESC, tie DESC LIMIT 50
                """
            )
            for try await _ in rows.decode(Data.self) {}
        }
    }

    /// An inbound batch of 64 new messages stored as the engine stores one (`apply`: the scope's
    /// lock, a lookup by server id, an insert each), against 64 plain INSERTs in one transaction.
    private func postgresInboundBatch(_ store: PostgresChatStore) async throws -> BenchRow {
        let scope = StoreScope(backend: "bench", account: "batch")
        let table = store.schema + ".message"
        let batches = max(1, sizes.pages / 4)
        // Each round's batches, made before anything is timed; every message is new.
        var next = 0
        func rounds() -> [[[Message]]] {
            (0..<sizes.rounds).map { _ in
                (0..<batches).map { _ in
                    defer { next += 64 }
                    return (next..<next + 64).map {
                        Message(serverID: MessageID("b\($0)"), conversationID: "c1", sequence: Int64($0 + 1), text: "inbound \($0)", time: Date(timeIntervalSince1970: Double($0)))
                    }
                }
            }
        }
        let ourRounds = rounds()
        let rawRounds = rounds()
        let rounds = try await timedRounds("PostgreSQL inbound batch", per: batches) { round in
            for messages in ourRounds[round - 1] { try await store.apply([.saveMessages(messages)], scope: scope) }
        } raw: { round in
            for messages in rawRounds[round - 1] {
                try await store.client.withTransaction(logger: .quiet) { connection in
                    for message in messages {
                        let value = try StoredValue.encode(message)
                        let rows = try await connection.query(
                            """
                            INSERT INTO \(unescaped: table) (backend, account, user_id, conversation, server_id, client_id, pending, sequence, time, tie, value)
                            VALUES ('bench', 'raw', '', 'c1', \(message.serverID?.rawValue), NULL, false, \(message.sequence ?? 0),
                            \(message.time.timeIntervalSinceReferenceDate), \(message.orderKey.tieBreaker), \(value))
                            """,
                            logger: .quiet
                        )
                        for try await _ in rows {}
                    }
                }
            }
        }
        return timeRow(id: "postgres.inbound-batch", "inbound batch of 64 new messages (PostgreSQL)", rounds, baselineName: "64 raw INSERTs in a transaction", goal: 3)
    }

    /// Events per second from one bus to another through two bridges, against the bridge's own
    /// statement (an INSERT and a NOTIFY) sent the same number of times and heard by a listener.
    private func bridgeRate(_ store: PostgresChatStore, url: String) async throws -> BenchRow {
        let count = max(20, sizes.events / 100)
        var ours: [Double] = []
        var raw: [Double] = []
        let sender = EventBus()
        let receiver = EventBus()
        let quiet = Logger.quiet
        let listening = AsyncStream.makeStream(of: Void.self)
        let bridgeA = try PostgresEventBridge(store: store, url: url, bus: sender, logger: quiet, onChange: { _ in listening.continuation.yield() })
        let bridgeB = try PostgresEventBridge(store: store, url: url, bus: receiver, logger: quiet, onChange: { _ in listening.continuation.yield() })
        let channel = store.schema + "_bench"
        let table = store.schema + ".bench_event"
        try await store.client.run(
            "CREATE TABLE \(unescaped: table) (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, instance text, sequence bigint, payload bytea)"
        )
        let connection = try PostgresChatStore.Endpoint(url: url).connectionConfiguration()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for bridge in [bridgeA, bridgeB] {
                group.addTask {
                    do {
                        try await bridge.run()
                    } catch {
                        // A bridge that fails ends the wait for both to listen.
                        listening.continuation.finish()
                        throw error
                    }
                }
            }
            defer { group.cancelAll() }
            var ready = 0
            for await _ in listening.stream {
                ready += 1
                if ready == 2 { break }
            }
            if ready < 2 { try await group.next() }
            var sent = 0
            for round in 1...sizes.rounds {
                progress.say("bridge: round \(round) of \(sizes.rounds)")
                let arrivals = receiver.subscribe(filter: .all, buffering: .unbounded)
                let start = ContinuousClock.now
                for index in 0..<count { sender.publish(Self.event(sent + index)) }
                sent += count
                var seen = 0
                for await _ in arrivals {
                    seen += 1
                    if seen == count { break }
                }
                ours.append(Double(count) / Self.seconds(since: start))

                // The same statement by hand, heard by a listener of its own.
                let payload = try JSONEncoder().encode(Self.event(0))
                let heard = try await PostgresConnection.connect(configuration: connection, id: 9, logger: quiet)
                let rawStart = try await heard.listen(on: channel) { notes -> ContinuousClock.Instant in
                    let rawStart = ContinuousClock.now
                    try await withThrowingTaskGroup(of: Void.self) { senders in
                        senders.addTask {
                            for index in 0..<count {
                                let note = "raw:\(index):" + String(decoding: payload, as: UTF8.self)
                                try await store.client.run(
                                    """
                                    WITH row AS (INSERT INTO \(unescaped: table) (instance, sequence, payload) VALUES ('raw', \(index), \(payload)) RETURNING id)
                                    SELECT pg_notify(\(channel), \(note)) FROM row
                                    """
                                )
                            }
                        }
                        var heardCount = 0
                        for try await _ in notes {
                            heardCount += 1
                            if heardCount == count { break }
                        }
                        try await senders.waitForAll()
                    }
                    return rawStart
                }
                raw.append(Double(count) / Self.seconds(since: rawStart))
                try await heard.close()
            }
        }
        return BenchRow(
            id: "postgres.bridge", name: "bus to bus through PostgreSQL, \(count) events", unit: "events/s", better: .higher,
            switchboard: median(ours), baselineName: "raw INSERT + NOTIFY, heard", baseline: median(raw), goal: .ratio(.atLeast, 0.5, "≥ 0.5×"),
            rounds: BenchRounds(switchboard: ours, baseline: raw)
        )
    }

    /// Sessions per process: resident memory per connected Voximplant-style session (each with a
    /// conversation it stores on connecting) whose store is PostgreSQL, against the same sessions
    /// on the in-memory store, in the same run — what the shared store costs a session.
    private func postgresSessionMemory(_ store: PostgresChatStore) async throws -> BenchRow {
        let count = sizes.idleSocketSessions
        progress.say("sessions on PostgreSQL: \(count) over WebSockets, against the in-memory store")
        let server = VoximplantServer()
        let agent = server.robot(server.addUser("agent", token: "agent-token", displayName: "Agent"))
        let users = try (0..<count).map { index in
            let user = server.addUser("user\(index)", token: "token-\(index)", displayName: "User \(index)")
            _ = try agent.createConversation(title: "Support \(index)", with: [user])
            return user
        }
        let (onPostgres, inMemory) = try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let backend = { (index: Int) -> any ChatBackend in
                VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: users[index], token: "token-\(index)"), logger: .quiet)
            }
            // The first round grows the heap, which the later ones reuse: whichever went first
            // paid 60–70 KB a session more. A warm-up round is measured by neither.
            _ = try await Self.heapPerSession(count, backend: backend)
            let onPostgres = try await Self.heapPerSession(count, store: store, backend: backend)
            return (onPostgres, try await Self.heapPerSession(count, backend: backend))
        }
        return BenchRow(
            id: "postgres.sessions", adapter: "voximplant",
            name: "sessions on the PostgreSQL store, Voximplant-style over WebSockets (emulator in process), \(count)", unit: "KB/session",
            better: .lower, switchboard: onPostgres / 1024, baselineName: "the same sessions on the in-memory store", baseline: inMemory / 1024,
            goal: .ratio(.atMost, 1.5, "≤ 1.5× the memory")
        )
    }
}
