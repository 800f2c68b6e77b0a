package import ArgumentParser
package import DequeModule
package import Foundation
package import GRDB
package import Switchboard
package import SwitchboardSQLite
package import SwitchboardCommandKit

/// Progress on standard error, only when it is a terminal.
package struct BenchProgress: Sendable {
    package let enabled: Bool
    package init(enabled: Bool) { self.enabled = enabled }
    package func say(_ text: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\u{1B}[2K\r\(text)".utf8))
    }
    /// A line on standard error whether it is a terminal or not: what a run left out, and why.
    package func note(_ text: String) {
        FileHandle.standardError.write(Data("\(enabled ? "\u{1B}[2K\r" : "")\(text)\n".utf8))
    }
}

/// The measurements. Each row runs its step and its baseline alternately, several rounds, and
/// keeps the median of each, so a noisy moment on a shared machine moves both.
package struct Bench: Sendable {
    package struct Sizes: Sendable {
        package var events: Int
        package var rounds: Int
        package var storedMessages: Int
        package var pages: Int
        /// Frames decoded per round, per adapter (passes over its recorded frames).
        package var decodedFrames: Int
        /// Loopback exchanges per adapter, over all rounds (each way, each side).
        package var latencySamples: Int
        /// Events missed while offline, per catch-up round.
        package var catchUpEvents: Int
        /// Idle sessions held at once: on the in-memory backend, and over real sockets.
        package var idleSessions: Int
        package var idleSocketSessions: Int
        /// The peer rows (Matrix beside matrix-nio): rooms and messages waiting at the start,
        /// sends timed to their echo, messages missed while offline, rounds of the first and last.
        package var peerRooms: Int
        package var peerMessagesPerRoom: Int
        package var peerEchoes: Int
        package var peerMissed: Int
        package var peerRounds: Int

        package static let full = Sizes(
            events: 200_000, rounds: 7, storedMessages: 100_000, pages: 200, decodedFrames: 20_000, latencySamples: 350, catchUpEvents: 10_000,
            idleSessions: 10_000, idleSocketSessions: 1_000, peerRooms: 20, peerMessagesPerRoom: 50, peerEchoes: 200, peerMissed: 1_000, peerRounds: 3
        )
        package static let quick = Sizes(
            events: 500, rounds: 2, storedMessages: 300, pages: 5, decodedFrames: 20, latencySamples: 4, catchUpEvents: 150, idleSessions: 50,
            idleSocketSessions: 10, peerRooms: 2, peerMessagesPerRoom: 3, peerEchoes: 4, peerMissed: 30, peerRounds: 1
        )
    }

    /// The groups of rows.
    package enum Figure: String, CaseIterable, Sendable, ExpressibleByArgument {
        case bus, history, decode, latency
        case catchUp = "catch-up"
        case memory
        /// Only with a database (`--postgres`).
        case postgres
        /// Matrix beside matrix-nio on a local Synapse; skipped, saying so, where either is missing.
        case peer
    }

    package let sizes: Sizes
    package let progress: BenchProgress
    /// The adapters' emulators for the latency rows, by registry name, in the registry's order.
    package let rigs: [(name: String, rig: any EmulatorRigRunner)]

    package init(
        sizes: Sizes,
        progress: BenchProgress,
        rigs: [(name: String, rig: any EmulatorRigRunner)],
        figures: Set<Figure> = [],
        adapters: Set<String> = []
    ) {
        self.sizes = sizes
        self.progress = progress
        self.rigs = rigs
        self.figures = figures
        self.adapters = adapters
    }
    /// The groups to run; empty: all.
    package var figures: Set<Figure> = []
    /// The adapters whose rows to run, by registry name; empty: all.
    package var adapters: Set<String> = []
    /// The database of the PostgreSQL rows; they run only with one.
    package var postgresURL: String?
    /// How to start this executable's `bench` in a process of its own (its path and `bench`), for
    /// the rows that measure a client alone; `nil`: in this process.
    package var clientProcess: [String]?

    package func runs(_ figure: Figure) -> Bool { figures.isEmpty || figures.contains(figure) }
    package func runs(_ adapter: String) -> Bool { adapters.isEmpty || adapters.contains(adapter) }

    package func run() async throws -> [BenchRow] {
        try await measure().rows
    }

    /// Every row chosen, each tagged with its group, and the groups skipped with the reason.
    package func measure() async throws -> (rows: [BenchRow], skipped: [BenchSkip]) {
        var rows: [BenchRow] = []
        var skipped: [BenchSkip] = []
        func add(_ figure: Figure, _ measured: [BenchRow]) {
            rows += measured.map { row in
                var row = row
                row.figure = figure.rawValue
                return row
            }
        }
        func skip(_ figure: Figure, _ reason: String) {
            progress.note("the \(figure.rawValue) rows are skipped: \(reason)")
            skipped.append(BenchSkip(figure: figure.rawValue, reason: reason))
        }
        if runs(.bus) {
            for subscribers in [1, 8] {
                add(.bus, try await busFanOut(subscribers: subscribers))
            }
        }
        if runs(.history) { add(.history, [try await historyPage()]) }
        if runs(.decode) { add(.decode, decodeRows(try RecordedFrames.load())) }
        if runs(.latency) { add(.latency, try await latencyRows()) }
        if runs(.catchUp), runs("voximplant") { add(.catchUp, [try await catchUpRow()]) }
        if runs(.memory) { add(.memory, try await idleMemoryRows()) }
        if runs(.postgres) {
            if let postgresURL {
                add(.postgres, try await postgresRows(url: postgresURL))
            } else {
                skip(.postgres, "they measure a PostgreSQL server, and none was given (--postgres URL)")
            }
        }
        if runs(.peer) {
            if let missing = await Self.peerMissing() {
                skip(.peer, missing)
            } else if clientProcess == nil {
                skip(.peer, "they run each client in a process of its own (switchboard bench)")
            } else {
                add(.peer, try await peerRows())
            }
        }
        progress.say("")
        return (rows, skipped)
    }

    /// The commit of the git working copy in the current directory, with `-dirty` when it has
    /// changes; `nil` outside one (or without git).
    package static func workingCopyCommit() async -> String? {
        guard let (status, printed) = try? await runInAProcessOfItsOwn(["/usr/bin/env", "git", "rev-parse", "--short=12", "HEAD"], within: .seconds(30)),
            status == 0
        else { return nil }
        let commit = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !commit.isEmpty, commit.allSatisfy(\.isHexDigit) else { return nil }
        let changes = try? await runInAProcessOfItsOwn(["/usr/bin/env", "git", "status", "--porcelain", "--untracked-files=no"], within: .seconds(30))
        let dirty = changes.map { $0.status == 0 && !$0.printed.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty } ?? false
        return dirty ? commit + "-dirty" : commit
    }

    // MARK: Bus fan-out

    /// Events per second delivered to `subscribers` consumers that iterate, through the bus,
    /// through one `AsyncStream` each, and through a bare `Locked<Deque>` + continuation channel
    /// (the limit of the bus's own design).
    package func busFanOut(subscribers: Int) async throws -> [BenchRow] {
        let count = sizes.events
        var bus: [Double] = []
        var stream: [Double] = []
        var bare: [Double] = []
        for round in 1...sizes.rounds {
            progress.say("bus fan-out to \(subscribers): round \(round) of \(sizes.rounds)")
            bus.append(await Self.rate(count) { await Self.throughBus(count, subscribers: subscribers) })
            stream.append(await Self.rate(count) { await Self.throughAsyncStream(count, subscribers: subscribers) })
            bare.append(await Self.rate(count) { await Self.throughBareChannel(count, subscribers: subscribers) })
        }
        let name = "bus fan-out, \(subscribers) subscriber\(subscribers == 1 ? "" : "s")"
        return [
            BenchRow(
                id: "bus.\(subscribers).async-stream", name: name, unit: "events/s", better: .higher, switchboard: median(bus),
                baselineName: "AsyncStream", baseline: median(stream), goal: .ratio(.atLeast, 2, "≥ 2×"),
                rounds: BenchRounds(switchboard: bus, baseline: stream)
            ),
            BenchRow(
                id: "bus.\(subscribers).bare-channel", name: name, unit: "events/s", better: .higher, switchboard: median(bus),
                baselineName: "bare channel", baseline: median(bare), goal: .ratio(.atLeast, 0.8, "≥ 0.8×"),
                rounds: BenchRounds(switchboard: bus, baseline: bare)
            ),
        ]
    }

    package static func event(_ index: Int) -> ChatEvent {
        ChatEvent(
            origin: ChatEvent.Origin(session: "bench", backend: "bench"),
            conversationID: "c1",
            time: Date(timeIntervalSince1970: 0),
            sequence: Int64(index),
            kind: .typing("agent", isTyping: index % 2 == 0, draft: nil)
        )
    }

    package static func throughBus(_ count: Int, subscribers: Int) async {
        let bus = EventBus()
        let streams = (0..<subscribers).map { _ in bus.subscribe(buffering: .unbounded) }
        await fanOut(count, to: streams.map { stream in { await take(count, from: stream) } }) { bus.publish($0) }
    }

    package static func throughAsyncStream(_ count: Int, subscribers: Int) async {
        let pairs = (0..<subscribers).map { _ in AsyncStream.makeStream(of: ChatEvent.self) }
        await fanOut(count, to: pairs.map { stream, _ in { await take(count, from: stream) } }) { event in
            for (_, continuation) in pairs { continuation.yield(event) }
        }
    }

    package static func throughBareChannel(_ count: Int, subscribers: Int) async {
        let channels = (0..<subscribers).map { _ in BareChannel() }
        let consumers: [@Sendable () async -> Void] = channels.map { channel in
            {
                var seen = 0
                while seen < count, await channel.next() != nil { seen += 1 }
            }
        }
        await fanOut(count, to: consumers) { event in
            for channel in channels { channel.send(event) }
        }
    }

    /// Runs each consumer as a child task while `publish` sends `count` events, and waits for all.
    private static func fanOut(
        _ count: Int,
        to consumers: [@Sendable () async -> Void],
        publish: (ChatEvent) -> Void
    ) async {
        await withTaskGroup(of: Void.self) { group in
            for consumer in consumers { group.addTask { await consumer() } }
            for index in 0..<count { publish(event(index)) }
            await group.waitForAll()
        }
    }

    /// Iterates `sequence` for `count` events, or until it ends.
    private static func take<S: AsyncSequence & Sendable>(_ count: Int, from sequence: S) async where S.Failure == Never {
        var seen = 0
        for await _ in sequence {
            seen += 1
            if seen == count { return }
        }
    }

    // MARK: History page

    /// A page of 50 from the middle of a large SQLite store, against the raw indexed SELECT of
    /// the same rows (no decoding).
    package func historyPage() async throws -> BenchRow {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteChatStore(path: directory.appendingPathComponent("bench.sqlite").path)
        return try await historyPageRow(store, id: "history.sqlite", label: "history page", storeName: "SQLite file", baselineName: "raw indexed SELECT") { middle in
            // GRDB's callback read, the path the store's reads take.
            _ = try await Self.asyncRead(store.database) { db in
                // A prepared statement kept for the next page, as the store keeps its own.
                try Data.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT value FROM message WHERE backend = ? AND account = ? AND userID = '' AND conversation = ?
                            AND (pending, sequence, time, tie) < (?, ?, ?, ?)
                            ORDER BY pending DESC, sequence DESC, time DESC, tie DESC LIMIT 50
                            """
                    ),
                    arguments: [
                        "bench", "a", "c1", middle.isPending, middle.sequence, middle.time.timeIntervalSinceReferenceDate,
                        middle.tieBreaker,
                    ]
                )
            }
        }
    }

    /// One read through GRDB's `asyncRead`, as `SQLiteChatStore` reads.
    package static func asyncRead<T: Sendable>(_ database: some DatabaseReader, _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            database.asyncRead { result in continuation.resume(with: Result { try body(try result.get()) }) }
        }
    }

    /// A history-page row for any store: `sizes.storedMessages` messages stored in conversation
    /// `c1` of scope `bench`/`a`, then a page of 50 before the middle read through the store
    /// against `rawPage` reading the same rows (from the same key) without decoding them.
    package func historyPageRow(
        _ store: some ChatStore,
        id: String,
        label: String,
        storeName: String,
        baselineName: String,
        rawPage: (_ before: MessageOrderKey) async throws -> Void
    ) async throws -> BenchRow {
        let scope = StoreScope(backend: "bench", account: "a")
        let conversation = ConversationID("c1")
        let total = sizes.storedMessages
        for start in stride(from: 0, to: total, by: 5_000) {
            progress.say("\(label): storing \(start) of \(total) messages")
            try await store.apply([.saveMessages(Self.historyMessages(start..<min(total, start + 5_000), in: conversation))], scope: scope)
        }
        let middle = Self.historyMiddle(of: total)
        let pages = sizes.pages
        let rounds = try await timedRounds(label, per: pages) { _ in
            for _ in 0..<pages { _ = try await store.fetchMessages(in: conversation, before: middle, limit: 50, scope: scope) }
        } raw: { _ in
            for _ in 0..<pages { try await rawPage(middle) }
        }
        return timeRow(
            id: id, "history page of 50 from \(BenchRow.format(Double(total))) (\(storeName))", rounds, baselineName: baselineName, goal: 2
        )
    }

    /// The stored history the history-page rows read: agent messages with sequences, a second
    /// apart.
    package static func historyMessages(_ range: Range<Int>, in conversation: ConversationID) -> [Message] {
        range.map {
            Message(
                serverID: MessageID("s\($0)"), conversationID: conversation, sequence: Int64($0 + 1), senderRole: .agent,
                text: "message \($0) with a sentence of ordinary length", time: Date(timeIntervalSince1970: 1_700_000_000 + Double($0))
            )
        }
    }

    /// The key in the middle of `total` history messages: where the measured page starts.
    package static func historyMiddle(of total: Int) -> MessageOrderKey {
        MessageOrderKey(
            isPending: false, sequence: Int64(total / 2), time: Date(timeIntervalSince1970: 1_700_000_000 + Double(total / 2 - 1)),
            tieBreaker: "s\(total / 2 - 1)"
        )
    }

    // MARK: Timing

    /// `ours` and `raw` timed in turn for each of `sizes.rounds` rounds, each time divided by the
    /// `count` steps a round makes: each round's seconds a step.
    package func timedRounds(
        _ label: String,
        per count: Int,
        ours: (_ round: Int) async throws -> Void,
        raw: (_ round: Int) async throws -> Void
    ) async throws -> BenchRounds {
        var oursTimes: [Double] = []
        var rawTimes: [Double] = []
        for round in 1...sizes.rounds {
            progress.say("\(label): round \(round) of \(sizes.rounds)")
            oursTimes.append(try await Self.seconds { try await ours(round) } / Double(count))
            rawTimes.append(try await Self.seconds { try await raw(round) } / Double(count))
        }
        return BenchRounds(switchboard: oursTimes, baseline: rawTimes)
    }

    /// A row of times from rounds in seconds, in milliseconds: lower is better, so the ratio is
    /// the medians', ours over the baseline's, met at `goal` times or less.
    package func timeRow(id: String, _ name: String, _ rounds: BenchRounds, baselineName: String, goal: Int) -> BenchRow {
        BenchRow(
            id: id, name: name, unit: "ms", better: .lower, switchboard: median(rounds.switchboard) * 1000, baselineName: baselineName,
            baseline: median(rounds.baseline) * 1000, goal: .ratio(.atMost, Double(goal), "≤ \(goal)× the time"),
            rounds: BenchRounds(switchboard: rounds.switchboard.map { $0 * 1000 }, baseline: rounds.baseline.map { $0 * 1000 })
        )
    }

    package static func seconds(_ body: () async throws -> Void) async rethrows -> Double {
        let start = ContinuousClock.now
        try await body()
        return seconds(since: start)
    }

    /// Seconds from `start` to now: the one conversion every figure goes through.
    package static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = start.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    package static func rate(_ count: Int, _ body: () async -> Void) async -> Double {
        let elapsed = await seconds(body)
        return Double(count) / max(elapsed, 1e-9)
    }

    package func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}

/// The least a single-consumer channel can be: a locked deque and one waiting continuation.
/// The lock guards both.
package final class BareChannel: Sendable {
    private struct State {
        var buffer: Deque<ChatEvent> = []
        var waiter: CheckedContinuation<ChatEvent?, Never>?
    }

    private let state = Locked(State())

    package func send(_ event: ChatEvent) {
        let waiter: CheckedContinuation<ChatEvent?, Never>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.buffer.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    package func next() async -> ChatEvent? {
        await withCheckedContinuation { continuation in
            let ready: ChatEvent? = state.withLock { state in
                if let event = state.buffer.popFirst() { return event }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
