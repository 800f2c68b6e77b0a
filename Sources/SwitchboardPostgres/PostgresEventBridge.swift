import Foundation
public import Logging
public import PostgresNIO
public import Switchboard

/// Carries the events of one process's `EventBus` to the buses of the other processes that
/// share the PostgreSQL database, so a subscriber anywhere sees every session's events.
///
/// Each event a local session publishes is written to the `event` table of the store's schema and
/// announced with `NOTIFY`; the notification carries the event itself when it fits under
/// PostgreSQL's 8,000-byte limit, and only its key otherwise (the listeners read the row). Every
/// bridge numbers its own events (an instance id and a sequence), and a listener hands each
/// instance's events to its bus in that order — so per conversation, which one process runs at a
/// time, in the order its session published them.
///
/// A listener whose connection broke reads what it missed from the table when it is back; what
/// the table no longer holds (older than ``Configuration/retention``) reaches its bus as one
/// `gap(dropped:)` event, which tells subscribers to re-read from the store, as the bus does for a
/// subscriber that fell behind. Events from before a bridge started are not replayed: a bus has no
/// history (the store has).
///
/// ```swift
/// let bridge = try PostgresEventBridge(store: store, url: url, bus: bus)
/// try await withThrowingTaskGroup(of: Void.self) { group in
///     group.addTask { try await bridge.run() }
///     …
/// }
/// ```
public final class PostgresEventBridge: Sendable {
    public struct Configuration: Sendable {
        /// How long events stay in the table for listeners that were away.
        public var retention: Duration
        /// How long a listener waits before it connects again after its connection broke.
        public var reconnectDelay: Duration
        /// Which local events go to the other processes (`gap` events never do: they are local).
        public var filter: EventFilter

        public init(retention: Duration = .seconds(600), reconnectDelay: Duration = .seconds(1), filter: EventFilter = .all) {
            self.retention = retention
            self.reconnectDelay = reconnectDelay
            self.filter = filter
        }
    }

    /// What a bridge has carried, for logs, metrics and tests.
    public struct Statistics: Sendable, Hashable {
        /// Local events written for the others.
        public var sent = 0
        /// Of those, events too large for a notification (the listeners read the row).
        public var sentByReference = 0
        /// Remote events published on the local bus.
        public var received = 0
        /// Remote events read from the table after a listener connection broke.
        public var recovered = 0
        /// Remote events lost for good (older than the retention), each reported in a gap event.
        public var dropped = 0
        /// Times the listener connection was opened.
        public var listens = 0
    }

    /// What the listener did, for logs and tests.
    public enum Change: Sendable, Hashable {
        /// Listening (again); with the events read from the table after a broken connection and
        /// those it no longer had.
        case listening(recovered: Int, dropped: Int)
        /// The listener connection broke; it connects again after the reconnect delay.
        case lost(String)
    }

    let onChange: @Sendable (Change) -> Void
    let onStored: @Sendable () -> Void
    let store: PostgresChatStore
    let listenConnection: PostgresConnection.Configuration
    let bus: EventBus
    public let configuration: Configuration
    /// What the listener's reconnect delay and the pruning interval are slept on.
    let clock: SessionClock
    let logger: Logger
    /// This bridge's events are keyed by it and a sequence.
    public let instance: String
    private let state = Locked(State())

    private struct State {
        var statistics = Statistics()
        /// Remote events this bridge published on the bus, which its own forwarder must not send
        /// back: each is skipped once when the forwarder sees it.
        var echoes: [ChatEvent: Int] = [:]
    }

    /// A bridge for `bus`, writing to the `event` table of `store`'s schema through its client and
    /// listening on a connection of its own to the database at `url`.
    /// - Throws: `invalidArgument` (`SwitchboardError.Code`) for a bad URL.
    public convenience init(
        store: PostgresChatStore,
        url: String,
        bus: EventBus,
        configuration: Configuration = Configuration(),
        clock: SessionClock = SessionClock(ContinuousClock()),
        logger: Logger = Logger(label: "switchboard.bridge"),
        onChange: @escaping @Sendable (Change) -> Void = { _ in },
        onStored: @escaping @Sendable () -> Void = {}
    ) throws {
        try self.init(
            store: store, listenConnection: PostgresChatStore.Endpoint(url: url).connectionConfiguration(), bus: bus, configuration: configuration,
            clock: clock, logger: logger, onChange: onChange, onStored: onStored
        )
    }

    /// A bridge whose listener uses `listenConnection`. The reconnect delay and the pruning
    /// interval are slept on `clock`: a test clock lets a test say when a broken listener
    /// connects again. `onStored` is called whenever new events are in the table — after this
    /// bridge wrote some, and when it hears of another's — for readers of the table
    /// (`PostgresEventLog`) to look again.
    public init(
        store: PostgresChatStore,
        listenConnection: PostgresConnection.Configuration,
        bus: EventBus,
        configuration: Configuration = Configuration(),
        clock: SessionClock = SessionClock(ContinuousClock()),
        logger: Logger = Logger(label: "switchboard.bridge"),
        onChange: @escaping @Sendable (Change) -> Void = { _ in },
        onStored: @escaping @Sendable () -> Void = {}
    ) {
        self.onStored = onStored
        self.onChange = onChange
        self.store = store
        self.listenConnection = listenConnection
        self.bus = bus
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.instance = UUID().uuidString.lowercased()
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// The notification channel of the store's schema.
    var channel: String { "\(store.schema)_events" }

    /// The largest event sent inside its notification; PostgreSQL refuses payloads of 8,000 bytes
    /// and more, and the key goes in front.
    static let inlineLimit = 7_000

    /// Runs until cancelled: forwards the bus's local events and publishes the others' on it.
    public func run() async throws {
        // The store's migration (under its advisory lock) makes the event table: bridges that
        // start together must not race to create it.
        try await store.migrate()
        // Subscribed before the listener starts, so nothing published meanwhile is missed.
        let local = bus.subscribe(filter: configuration.filter, buffering: .unbounded)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.forward(local) }
            group.addTask { await self.listen() }
            group.addTask { try await self.prune() }
            try await group.next()
            group.cancelAll()
        }
    }

    // MARK: Sending

    /// The most events one statement writes.
    static let maxBatch = 128

    /// Local events queue while a write is out, and the next write takes all of them (up to
    /// ``maxBatch``) in one statement: one event a statement at a low rate, many under load,
    /// where one round trip per event bounded a bridge at about 2,500 events a second.
    private func forward(_ events: EventStream) async throws {
        let queue = Locked(ForwardQueue())
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await event in events {
                    if case .gap = event.kind { continue }
                    let isEcho = self.state.withLock { state -> Bool in
                        guard let count = state.echoes[event] else { return false }
                        state.echoes[event] = count > 1 ? count - 1 : nil
                        return true
                    }
                    if isEcho { continue }
                    queue.withLock { $0.events.append(event) }
                    wake.yield()
                }
                wake.finish()
            }
            group.addTask {
                var sequence: Int64 = 0
                for await _ in wakes {
                    while true {
                        let batch = queue.withLock { queue in
                            let batch = Array(queue.events.prefix(Self.maxBatch))
                            queue.events.removeFirst(batch.count)
                            return batch
                        }
                        if batch.isEmpty { break }
                        await self.write(batch, after: &sequence)
                    }
                }
            }
        }
    }

    private struct ForwardQueue {
        var events: [ChatEvent] = []
    }

    /// Writes `batch` numbered after `sequence`: the rows and their notifications in one
    /// statement, so listeners are told only once the rows are there.
    private func write(_ batch: [ChatEvent], after sequence: inout Int64) async {
        var sequences: [Int64] = []
        var payloads: [ByteBuffer] = []
        var notes: [String] = []
        var sessions: [String] = []
        // No conversation is '' here and NULL in the table.
        var conversations: [String] = []
        var byReference = 0
        let encoder = JSONEncoder()
        for event in batch {
            let payload: Data
            do {
                payload = try encoder.encode(event)
            } catch {
                // An event that does not encode (a non-finite number in a vendor payload) stays
                // local; the others go on.
                logger.warning("an event that does not encode was not bridged", metadata: ["error": "\(error)"])
                continue
            }
            sequence += 1
            let inline = payload.count <= Self.inlineLimit
            if !inline { byReference += 1 }
            sequences.append(sequence)
            payloads.append(ByteBuffer(bytes: payload))
            sessions.append(event.origin.session.rawValue)
            conversations.append(event.conversationID?.rawValue ?? "")
            notes.append("\(instance):\(sequence):" + (inline ? String(decoding: payload, as: UTF8.self) : ""))
        }
        guard !sequences.isEmpty else { return }
        do {
            // A data-modifying WITH runs once and to completion whatever reads it; the
            // notifications go out in the array's order when the statement commits.
            let rows = try await store.client.query(
                """
                WITH written AS (
                    INSERT INTO \(unescaped: store.table("event")) (instance, sequence, payload, session, conversation)
                    SELECT \(instance), s, p, se, NULLIF(c, '')
                    FROM unnest(\(sequences)::bigint[], \(payloads)::bytea[], \(sessions)::text[], \(conversations)::text[]) AS t(s, p, se, c))
                SELECT pg_notify(\(channel), note) FROM unnest(\(notes)::text[]) AS n(note)
                """,
                logger: logger
            )
            // Read to the end: the statement has run (and committed) only then.
            for try await _ in rows {}
        } catch {
            // A bus never blocks its publishers; events the database would not take are logged
            // and the others go on (listeners see a gap in this instance's sequence).
            logger.warning(
                "events could not be bridged",
                metadata: ["events": "\(sequences.count)", "error": "\(PostgresChatStore.classify(error, what: "bridging events").message)"]
            )
            return
        }
        state.withLock { state in
            state.statistics.sent += sequences.count
            state.statistics.sentByReference += byReference
        }
        onStored()
    }

    /// Deletes the events older than the retention, every tenth of it: every bridge's, so those of
    /// a process that died go too.
    private func prune() async throws {
        let seconds = Double(configuration.retention.components.seconds) + Double(configuration.retention.components.attoseconds) / 1e18
        while true {
            try await clock.sleep(for: configuration.retention / 10)
            do {
                // The newest position deleted moves the horizon readers of the log check against
                // (`PostgresEventLog.keepsEverything(after:)`); it only ever moves forward.
                try await store.client.run(
                    """
                    WITH gone AS (
                        DELETE FROM \(unescaped: store.table("event")) WHERE created < now() - make_interval(secs => \(seconds))
                        RETURNING tx, id),
                    newest AS (SELECT tx, id FROM gone ORDER BY tx DESC, id DESC LIMIT 1)
                    UPDATE \(unescaped: store.table("event_horizon")) h SET tx = newest.tx, id = newest.id FROM newest WHERE (newest.tx, newest.id) > (h.tx, h.id)
                    """,
                    logger: logger
                )
            } catch {
                logger.warning("pruning bridged events failed", metadata: ["error": "\(PostgresChatStore.classify(error, what: "pruning").message)"])
            }
        }
    }

    // MARK: Receiving

    /// Listens, reconnecting after a broken connection and reading what was missed meanwhile.
    private func listen() async {
        var receiver = Receiver(instance: instance)
        var firstListen = true
        while !Task.isCancelled {
            var connection: PostgresConnection?
            do {
                let listening = try await PostgresConnection.connect(configuration: listenConnection, id: 2, logger: logger)
                connection = listening
                // Cancelled, the connection is closed at once: that fails whatever waits on it
                // (PostgresNIO leaves a request written to a closing channel unanswered, so
                // nothing may wait on this connection past the bridge's end).
                try await withTaskCancellationHandler {
                    try await listening.listen(on: channel) { notifications in
                        self.state.withLock { $0.statistics.listens += 1 }
                        var recovery = (recovered: 0, dropped: 0)
                        if !firstListen {
                            // Away for a while: what the others sent meanwhile is in the table.
                            recovery = try await self.recover(&receiver)
                        }
                        firstListen = false
                        self.onChange(.listening(recovered: recovery.recovered, dropped: recovery.dropped))
                        for try await notification in notifications {
                            try await self.receive(notification.payload, into: &receiver)
                        }
                    }
                } onCancel: {
                    let _: EventLoopFuture<Void> = listening.close()
                }
            } catch {
                if !Task.isCancelled {
                    let reason = PostgresChatStore.classify(error, what: "listening").message
                    logger.warning("the event listener lost its connection", metadata: ["error": "\(reason)"])
                    onChange(.lost(reason))
                }
            }
            try? await connection?.close()
            try? await clock.sleep(for: configuration.reconnectDelay)
        }
    }

    /// Where each other instance is: the sequence of the last event published from it.
    private struct Receiver {
        let instance: String
        var last: [String: Int64] = [:]
        /// When the listener last heard anything: recovery reads the rows since then.
        var heardAt = Date()
    }

    private func receive(_ note: String, into receiver: inout Receiver) async throws {
        let parts = note.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let sequence = Int64(parts[1]) else {
            logger.warning("a bridge notification of an unknown shape was ignored")
            return
        }
        let from = String(parts[0])
        onStored()
        guard from != receiver.instance else { return }
        receiver.heardAt = Date()
        let last = receiver.last[from]
        if let last, sequence <= last { return }
        if let last, sequence > last + 1 {
            // Notifications of one sender arrive in order; a hole means the sender failed to
            // write some. Read what the table has.
            try await fetch(from: from, after: last, upTo: sequence - 1, into: &receiver)
        }
        let event: ChatEvent
        if parts[2].isEmpty {
            guard let row = try await rows(from: from, after: sequence - 1, upTo: sequence).first else { return }
            event = row
        } else {
            event = try JSONDecoder().decode(ChatEvent.self, from: Data(parts[2].utf8))
        }
        deliver(event)
        receiver.last[from] = sequence
    }

    /// After a broken connection: every instance's rows past what was delivered, and the rows of
    /// instances first seen since.
    private func recover(_ receiver: inout Receiver) async throws -> (recovered: Int, dropped: Int) {
        let since = receiver.heardAt.addingTimeInterval(-5)
        var found: [(String, Int64, Data)] = []
        let rows = try await store.client.query(
            """
            SELECT instance, sequence, payload FROM \(unescaped: store.table("event"))
            WHERE instance <> \(receiver.instance) AND (created >= \(since) OR instance = ANY(\(Array(receiver.last.keys))))
            ORDER BY instance, sequence
            """,
            logger: logger
        )
        for try await (instance, sequence, payload) in rows.decode((String, Int64, Data).self) { found.append((instance, sequence, payload)) }
        var byInstance: [String: [(Int64, Data)]] = [:]
        for (instance, sequence, payload) in found { byInstance[instance, default: []].append((sequence, payload)) }
        var recovered = 0
        var dropped = 0
        for (instance, events) in byInstance {
            // A known instance continues after its last delivered event (a hole is what the table
            // no longer has); one first heard of now starts where its rows since then start.
            var last = receiver.last[instance]
            for (sequence, payload) in events {
                if let known = last, sequence <= known { continue }
                if let known = last, sequence > known + 1 { dropped += Int(sequence - known - 1) }
                deliver(try JSONDecoder().decode(ChatEvent.self, from: payload))
                recovered += 1
                last = sequence
            }
            receiver.last[instance] = last
        }
        receiver.heardAt = Date()
        if dropped > 0 { reportGap(dropped) }
        state.withLock {
            $0.statistics.recovered += recovered
            $0.statistics.dropped += dropped
        }
        logger.info("the event listener is back", metadata: ["recovered": "\(recovered)", "dropped": "\(dropped)"])
        return (recovered, dropped)
    }

    /// Reads the events `from` sent after `after` up to `upTo`; a part the table no longer has is
    /// reported as a gap.
    private func fetch(from: String, after: Int64, upTo: Int64, into receiver: inout Receiver) async throws {
        let found = try await rowsWithSequences(from: from, after: after, upTo: upTo)
        var expected = after + 1
        var dropped = 0
        for (sequence, event) in found {
            dropped += Int(sequence - expected)
            deliver(event)
            expected = sequence + 1
        }
        dropped += Int(upTo + 1 - expected)
        if dropped > 0 {
            reportGap(dropped)
            state.withLock { $0.statistics.dropped += dropped }
        }
        receiver.last[from] = upTo
    }

    private func rows(from: String, after: Int64, upTo: Int64) async throws -> [ChatEvent] {
        try await rowsWithSequences(from: from, after: after, upTo: upTo).map(\.1)
    }

    private func rowsWithSequences(from: String, after: Int64, upTo: Int64) async throws -> [(Int64, ChatEvent)] {
        var found: [(Int64, ChatEvent)] = []
        let rows = try await store.client.query(
            """
            SELECT sequence, payload FROM \(unescaped: store.table("event"))
            WHERE instance = \(from) AND sequence > \(after) AND sequence <= \(upTo) ORDER BY sequence
            """,
            logger: logger
        )
        for try await (sequence, payload) in rows.decode((Int64, Data).self) {
            found.append((sequence, try JSONDecoder().decode(ChatEvent.self, from: payload)))
        }
        return found
    }

    /// Publishes a remote event on the local bus, marked so the forwarder does not send it back.
    private func deliver(_ event: ChatEvent) {
        let forwarded = configuration.filter.matches(event)
        state.withLock { state in
            if forwarded { state.echoes[event, default: 0] += 1 }
            state.statistics.received += 1
        }
        bus.publish(event)
    }

    private func reportGap(_ dropped: Int) {
        logger.warning("bridged events were lost while the listener was away", metadata: ["dropped": "\(dropped)"])
        // A gap is never forwarded, so it needs no echo mark.
        bus.publish(
            ChatEvent(origin: .init(session: SessionID("bridge-\(instance)"), backend: "postgres"), conversationID: nil, time: Date(), kind: .gap(dropped: dropped))
        )
    }
}
