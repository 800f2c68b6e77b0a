import Foundation
import Logging
import PostgresNIO
@_spi(TestKit) import Switchboard
import SwitchboardPostgres
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// `PostgresEventBridge` between two buses, as between two processes: each bridge with its own
/// listener connection, both on one schema of a real PostgreSQL.
@Suite(PostgresServer.needed, .timeLimit(.minutes(5)))
struct PostgresEventBridgeTests {
    static func event(_ text: String, in conversation: String, sequence: Int64, session: String = "gateway-a-session") -> ChatEvent {
        let message = Message(serverID: MessageID("\(conversation)-\(sequence)"), conversationID: ConversationID(conversation), sequence: sequence, text: text, time: Date(timeIntervalSince1970: 1_700_000_000))
        return ChatEvent(
            origin: .init(session: SessionID(session), backend: "voximplant"), conversationID: ConversationID(conversation), time: message.time, sequence: sequence,
            kind: .messageAdded(message, position: .newest)
        )
    }

    @Test func eventsCrossInOrderSurviveABrokenListenerAndReportWhatIsGone() async throws {
        try await PostgresServer.withClient { client, schemas in
            let schema = schemas.fresh()
            // What bus b received and what the bridges reported, each with a signal to wait on.
            let record = Record()
            var listenB = try PostgresServer.connectionConfiguration()
            listenB.options.additionalStartupParameters = [("application_name", "bridge-b-\(schema)")]
            let busA = EventBus()
            let busB = EventBus()
            let quiet = Logger(label: "bridge", factory: { _ in SwiftLogNoOpLogHandler() })
            let bridgeA = PostgresEventBridge(
                store: try PostgresChatStore(client: client, schema: schema), listenConnection: try PostgresServer.connectionConfiguration(), bus: busA,
                logger: quiet, onChange: { record.changed("a", $0) }
            )
            // b's reconnect delay runs on a test clock: a broken listener connects again only when
            // the test moves it, after it has done what b must find on its return.
            let clockB = TestClock()
            let bridgeB = PostgresEventBridge(
                store: try PostgresChatStore(client: client, schema: schema), listenConnection: listenB, bus: busB,
                configuration: .init(reconnectDelay: .seconds(1)), clock: SessionClock(clockB), logger: quiet, onChange: { record.changed("b", $0) }
            )
            let received = busB.subscribe(filter: .all, buffering: .unbounded)
            /// The events b received after the first `skip`, once there are `count` of them.
            @Sendable func take(_ count: Int, after skip: Int) async throws -> [ChatEvent] {
                try await waitUntil("\(count) events on b", timeout: .seconds(180), signal: record.signal) { record.events.count >= skip + count }
                return Array(record.events[skip..<(skip + count)])
            }
            @Sendable func changes(of who: String) -> [PostgresEventBridge.Change] { record.changes.filter { $0.0 == who }.map(\.1) }

            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await bridgeA.run() }
                group.addTask { try await bridgeB.run() }
                group.addTask { for await event in received { record.received(event) } }
                // The test's own listener: it hears a's notifications, so it knows when a's rows
                // are in the table.
                group.addTask {
                    try await client.withConnection { connection in
                        try await connection.listen(on: "\(schema)_events") { notes in for try await note in notes { record.noted(note.payload) } }
                    }
                }
                defer { group.cancelAll() }
                try await waitUntil("both listening", timeout: .seconds(30), signal: record.signal) {
                    !changes(of: "a").isEmpty && !changes(of: "b").isEmpty
                }

                // 400 events over 4 conversations, and one too large for a notification. (CI, with
                // every suite running beside this one, bridged 24 events/s.)
                let clock = ContinuousClock()
                let started = clock.now
                let sent: [ChatEvent] = (0..<400).map { index in
                    Self.event("m\(index)", in: "c\(index % 4)", sequence: Int64(index / 4 + 1))
                } + [
                    ChatEvent(
                        origin: .init(session: "gateway-a-session", backend: "voximplant"), conversationID: "c0", time: Date(timeIntervalSince1970: 1_700_000_001),
                        kind: .custom(name: "big", payload: .string(String(repeating: "x", count: 20_000)))
                    )
                ]
                for event in sent { busA.publish(event) }
                let first = try await take(sent.count, after: 0)
                let elapsed = clock.now - started
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                #expect(first == sent, "every event, in the order published")
                print(
                    "bridge: \(sent.count) events a → b in \(elapsed) (\(Int(Double(sent.count) / seconds)) events/s), \(bridgeA.statistics.sentByReference) by reference, received \(first.count), in order \(first == sent)"
                )

                // b's listener connection ends; what a publishes meanwhile is read from the table.
                try await client.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \("bridge-b-\(schema)")")
                try await waitUntil("b's listener lost", timeout: .seconds(30), signal: record.signal) { changes(of: "b").count == 2 }
                let whileAway = (0..<100).map { Self.event("away \($0)", in: "c\($0 % 4)", sequence: Int64(1_000 + $0)) }
                for event in whileAway { busA.publish(event) }
                try await waitUntil("a's 100 in the table", timeout: .seconds(120), signal: record.signal) {
                    record.lastNoted >= Int64(sent.count + whileAway.count)
                }
                try await Self.letReconnect(clockB)
                try await waitUntil("b's listener back", timeout: .seconds(30), signal: record.signal) { changes(of: "b").count == 3 }
                let back = changes(of: "b")[2]
                let recovered = try await take(whileAway.count, after: sent.count)
                print("bridge: b's listener ended by the server while a published \(whileAway.count) events; back with \(back), received \(recovered.count), in order \(recovered == whileAway)")
                #expect(back == .listening(recovered: 100, dropped: 0), "the 100 were read from the table")
                #expect(recovered == whileAway, "nothing lost, in order")

                // Away again, and what a sent meanwhile is gone from the table: one gap event.
                try await client.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \("bridge-b-\(schema)")")
                try await waitUntil("b's listener lost again", timeout: .seconds(30), signal: record.signal) { changes(of: "b").count == 4 }
                for index in 0..<10 { busA.publish(Self.event("gone \(index)", in: "c0", sequence: Int64(2_000 + index))) }
                // The sends are in the table once b could have heard them; then they go.
                try await waitUntil("a's 10 in the table", timeout: .seconds(30), signal: record.signal) {
                    record.lastNoted >= Int64(sent.count + whileAway.count + 10)
                }
                try await client.run("DELETE FROM \(unescaped: schema).event WHERE sequence > \(Int64(sent.count + whileAway.count))")
                try await Self.letReconnect(clockB)
                try await waitUntil("b's listener back again", timeout: .seconds(30), signal: record.signal) { changes(of: "b").count == 5 }
                let again = changes(of: "b")[4]
                // The loss shows when a's next event arrives with a sequence past a hole the table
                // cannot fill: one gap event, then the event.
                busA.publish(Self.event("after", in: "c1", sequence: 3_000))
                let afterGap = try await take(2, after: sent.count + whileAway.count)
                print("bridge: b away while 10 events were sent and pruned: back with \(again); a's next event arrives as \(afterGap.map { $0.kind == .gap(dropped: 10) ? "gap(dropped: 10)" : "event \($0.sequence ?? 0)" })")
                #expect(again == .listening(recovered: 0, dropped: 0))
                #expect(afterGap.first?.kind == .gap(dropped: 10), "one gap event for the 10 the table no longer had")
                #expect(afterGap.last?.sequence == 3_000, "then the event after the gap")
                let after = [afterGap.last].compactMap { $0 }
                #expect(bridgeB.statistics.received == sent.count + whileAway.count + (after.isEmpty ? 0 : 1))
                // Nothing crossed back: a's bus saw only its own events.
                #expect(bridgeB.statistics.sent == 0, "b's bus had no local events, and a's events are not sent back")
            }
        }
    }
}

extension PostgresEventBridgeTests {
    /// Moves a bridge's test clock past its reconnect delay once its listener sleeps on it (beside
    /// the pruning loop, which always does).
    static func letReconnect(_ clock: TestClock) async throws {
        guard await clock.waitForSleepers(2) else { throw ConformanceFailure("the listener never slept on its reconnect delay") }
        clock.advance(by: .seconds(1))
    }
}

/// What the bridge test observed, with a signal for each change.
private final class Record: Sendable {
    let signal = AsyncSignal()
    private let state = Locked((events: [ChatEvent](), changes: [(String, PostgresEventBridge.Change)](), lastNoted: Int64(0)))

    var events: [ChatEvent] { state.withLock { $0.events } }
    var changes: [(String, PostgresEventBridge.Change)] { state.withLock { $0.changes } }

    func received(_ event: ChatEvent) {
        state.withLock { $0.events.append(event) }
        signal.signal()
    }

    /// The highest sequence the test's own listener heard of.
    var lastNoted: Int64 { state.withLock { $0.lastNoted } }

    func noted(_ payload: String) {
        let sequence = payload.split(separator: ":").dropFirst().first.flatMap { Int64($0) } ?? 0
        state.withLock { $0.lastNoted = max($0.lastNoted, sequence) }
        signal.signal()
    }

    func changed(_ who: String, _ change: PostgresEventBridge.Change) {
        state.withLock { $0.changes.append((who, change)) }
        signal.signal()
    }
}

extension PostgresEventBridgeTests {
    /// `PostgresEventLog` reads what two bridges wrote — two processes' sessions — in one order that
    /// keeps each session's, filters by session and conversation, goes on from any position it
    /// gave, and says when a reader's position is behind what pruning deleted.
    @Test func theEventLogReadsEveryProcesssEventsInOrderAndSaysWhenAReaderFellBehind() async throws {
        try await PostgresServer.withClient { client, schemas in
            let schema = schemas.fresh()
            let store = try PostgresChatStore(client: client, schema: schema)
            let log = PostgresEventLog(store: store)
            let stored = AsyncSignal()
            let quiet = Logger(label: "bridge", factory: { _ in SwiftLogNoOpLogHandler() })
            let (busA, busB) = (EventBus(), EventBus())
            // The pruning runs on test clocks: only when the test moves them. A bridge sleeping on
            // its clock has subscribed to its bus.
            let (clockA, clockB) = (TestClock(), TestClock())
            let bridgeA = PostgresEventBridge(
                store: store, listenConnection: try PostgresServer.connectionConfiguration(), bus: busA,
                configuration: .init(retention: .seconds(60)), clock: SessionClock(clockA), logger: quiet, onStored: { stored.signal() }
            )
            let bridgeB = PostgresEventBridge(
                store: try PostgresChatStore(client: client, schema: schema), listenConnection: try PostgresServer.connectionConfiguration(), bus: busB,
                clock: SessionClock(clockB), logger: quiet, onStored: { stored.signal() }
            )
            let start = try await log.now()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await bridgeA.run() }
                group.addTask { try await bridgeB.run() }
                defer { group.cancelAll() }
                #expect(await clockA.waitForSleepers(1), "A runs")
                #expect(await clockB.waitForSleepers(1), "B runs")
                // Two sessions in two processes, interleaved.
                for index in 0..<60 {
                    busA.publish(Self.event("a\(index)", in: "ca", sequence: Int64(index + 1), session: "sa"))
                    busB.publish(Self.event("b\(index)", in: "cb", sequence: Int64(index + 1), session: "sb"))
                }
                // The log gives a row once no older transaction is open anywhere in the cluster:
                // the other suites' transactions, which nothing here hears end, can hold the last
                // rows back after the last bridge signal. A tick looks again meanwhile (it asserts
                // nothing about time).
                group.addTask {
                    while !Task.isCancelled {
                        try await Task.sleep(for: .milliseconds(100))
                        stored.signal()
                    }
                }
                try await waitUntil("120 events in the log", timeout: .seconds(120), signal: stored) {
                    try await log.read(after: start, limit: 500).entries.count == 120
                }
                let all = try await log.read(after: start, limit: 500)
                func texts(_ entries: [PostgresEventLog.Entry]) -> [String] {
                    entries.compactMap { if case .messageAdded(let message, _) = $0.event.kind { message.text } else { nil } }
                }
                let positions = all.entries.map(\.position)
                let sessionA = texts(all.entries.filter { $0.event.origin.session == "sa" })
                print("event log: \(all.entries.count) events from two bridges, \(Set(positions).count) positions, first \(positions.first!), last \(positions.last!)")
                #expect(zip(positions, positions.dropFirst()).allSatisfy { $0 < $1 }, "positions only grow")
                #expect(sessionA == (0..<60).map { "a\($0)" }, "a session's events in the order it published them")
                #expect(texts(all.entries.filter { $0.event.origin.session == "sb" }) == (0..<60).map { "b\($0)" })
                #expect(all.end >= positions.last! && !all.isFull, "a page that is not full ends past everything stored")
                // Filters, pages and going on from a position.
                #expect(texts(try await log.read(after: start, session: "sa").entries) == sessionA)
                #expect(texts(try await log.read(after: start, conversation: "cb").entries) == (0..<60).map { "b\($0)" })
                let page = try await log.read(after: start, limit: 10)
                #expect(page.entries == Array(all.entries.prefix(10)) && page.end == positions[9] && page.isFull)
                #expect(try await log.read(after: positions[39], limit: 500).entries == Array(all.entries.dropFirst(40)))
                #expect(try await log.read(after: positions.last!).entries.isEmpty)
                #expect(PostgresEventLog.Position(positions[5].description) == positions[5])
                #expect(PostgresEventLog.Position("12") == nil && PostgresEventLog.Position("a-1") == nil)

                // A's rows age past the retention and A prunes them: a reader from before them is
                // told it fell behind; one from after them is not.
                #expect(try await log.keepsEverything(after: start))
                try await client.run("UPDATE \(unescaped: schema).event SET created = created - interval '1 hour' WHERE session = 'sa'")
                clockA.advance(by: .seconds(6))
                #expect(await clockA.waitForSleepers(1), "A pruned and sleeps again")
                let left = try await log.read(after: start, limit: 500).entries
                #expect(left.allSatisfy { $0.event.origin.session == "sb" } && left.count == 60, "A's rows are gone, B's are kept")
                let lastOfA = all.entries.last { $0.event.origin.session == "sa" }!.position
                #expect(try await log.keepsEverything(after: start) == false, "behind the pruned rows")
                #expect(try await log.read(after: start).keptEverything == false && all.keptEverything, "a read says so too")
                #expect(try await log.keepsEverything(after: lastOfA), "nothing after the newest pruned row is gone")
                print("event log: pruned A's 60 rows; a reader at the start fell behind, one at \(lastOfA) did not")
            }
            try await client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
        }
    }
}
