import Foundation
public import Logging
public import PostgresNIO
import Switchboard

/// Which process runs which session, when several processes share a PostgreSQL database: each
/// session key (a backend and account, a `StoreScope`'s description) is held by exactly one process
/// at a time, through a PostgreSQL advisory lock on that process's own connection.
///
/// A process that dies lets go of all its sessions at once — the server drops its connection and
/// with it every lock — and the others take them over at their next look (``Configuration/interval``)
/// and resume them from the shared store: the stored cursor and outbox, so nothing is lost, and
/// sends keep their client ids, so a send the dead process had made goes to the server once. A
/// process that gives sessions back on purpose (its run ends, another process joined) says so
/// with a `NOTIFY`, and the others look at once instead of at their next interval.
///
/// Each process runs ``run(keys:_:)`` with the same keys. It takes its fair share — the keys
/// divided by the processes running, rounded up — of those nobody holds, and gives back what is
/// over its share when another process joins, so the sessions spread out. For each key it holds,
/// the body runs in a child task; the body is cancelled when the process gives the key back, and a
/// body that returns or throws gives the key back, unannounced (anyone may take it at their next
/// look, which keeps a session that fails at once from restarting faster than the interval).
///
/// ```swift
/// let ownership = try PostgresSessionOwnership(url: "postgres://gateway:secret@db:5432/chat", processName: "gateway-1")
/// await ownership.run(keys: accounts.map(\.key)) { key in
///     try await runSession(for: key)          // until cancelled
/// }
/// ```
///
/// Limits: the lock holds while the process's connection does. If that connection breaks while the
/// process lives (a network partition), the server frees the locks when it notices; the process
/// stops its sessions as soon as its side of the connection closes, but another process may start
/// one of them before that — the overlap is bounded by how fast each side notices, and the client
/// ids of sends keep it from sending twice where the backend de-duplicates by them (all four
/// adapters' backends do).
public final class PostgresSessionOwnership: Sendable {
    public struct Configuration: Sendable {
        /// How often a process looks for sessions nobody runs and for a changed number of
        /// processes: the longest a dead process's sessions wait for a taker.
        public var interval: Duration
        /// Keeps deployments that share a database apart: processes with different namespaces do
        /// not see each other's locks.
        public var namespace: String

        public init(interval: Duration = .seconds(1), namespace: String = "switchboard") {
            self.interval = interval
            self.namespace = namespace
        }
    }

    /// What a process did with its sessions, for logs, metrics and tests.
    public enum Change: Sendable, Hashable {
        /// The lock connection is open; `processes` processes share the keys.
        case connected(processes: Int)
        case took(String)
        /// The key was given back: over the fair share, its body ended, or the run is ending.
        case released(String)
        /// The lock connection broke: every session was stopped; the process reconnects.
        case lost(String)
    }

    let connection: PostgresConnection.Configuration
    public let processName: String
    public let configuration: Configuration
    let onChange: @Sendable (Change) -> Void
    let logger: Logger
    private let heldKeys = Locked<[String]>([])

    /// - Parameters:
    ///   - connection: Where the locks are held; a connection of its own, outside any pool.
    ///   - processName: This process in logs (several processes may share a name).
    ///   - configuration: The look interval and the namespace.
    ///   - logger: Where takes, releases and lost connections are logged.
    ///   - onChange: Called, on the ownership's own task, for every change.
    public init(
        connection: PostgresConnection.Configuration,
        processName: String,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "switchboard.ownership"),
        onChange: @escaping @Sendable (Change) -> Void = { _ in }
    ) {
        self.connection = connection
        self.processName = processName
        self.configuration = configuration
        self.logger = logger
        self.onChange = onChange
    }

    /// Ownership with its lock connection to the database at `url`
    /// (`postgres://user:password@host:port/database`, as ``PostgresChatStore/configuration(url:)``).
    /// - Throws: `invalidArgument` (`SwitchboardError.Code`) for a bad URL.
    public convenience init(
        url: String,
        processName: String,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "switchboard.ownership"),
        onChange: @escaping @Sendable (Change) -> Void = { _ in }
    ) throws {
        let connection = try PostgresChatStore.Endpoint(url: url).connectionConfiguration()
        self.init(connection: connection, processName: processName, configuration: configuration, logger: logger, onChange: onChange)
    }

    /// The second half of the advisory lock a key is held by (the first is the namespace's):
    /// what an operator finds it by in `pg_locks` (`objid`, as an unsigned 32-bit number).
    public static func lockKey(_ key: String) -> Int32 { Int32(bitPattern: FNV1a.hash(key)) }

    /// The first half of the advisory lock of every session key of `namespace`.
    static func sessionSpace(_ namespace: String) -> Int32 {
        Int32(bitPattern: FNV1a.hash(namespace + ".sessions") & 0x7fff_ffff)
    }

    /// The keys this process holds now.
    public var held: [String] { heldKeys.withLock { $0 } }

    /// Which process (its ``processName``) holds each of `keys` now, among every process of the
    /// namespace, as the server's lock table says; a key nobody holds is absent. Read through
    /// `client`, any connection to the database.
    public func holders(of keys: [String], client: PostgresClient) async throws -> [String: String] {
        let space = Int64(Self.sessionSpace(configuration.namespace))
        var byLock: [Int64: [String]] = [:]
        for key in keys { byLock[Int64(UInt32(bitPattern: Self.lockKey(key))), default: []].append(key) }
        var holders: [String: String] = [:]
        do {
            let rows = try await client.query(
                """
                SELECT l.objid::bigint, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid::bigint = \(space)
                """,
                logger: logger
            )
            for try await (lock, process) in rows.decode((Int64, String).self) {
                // Two keys may share a lock: each is held by whoever holds it.
                for key in byLock[lock] ?? [] { holders[key] = process }
            }
        } catch {
            throw PostgresChatStore.classify(error, what: "reading who holds the sessions")
        }
        return holders
    }

    fileprivate enum Input: Sendable {
        case look
        case ended(String)
        /// The task listening for released sessions ended (its connection closed).
        case listenerEnded
        /// The lock connection of that generation closed.
        case connectionClosed(Int)
    }

    /// Runs until cancelled, holding a fair share of `keys` and running `body` for each key held.
    /// Returns when cancelled, after every body has ended; the locks are released (and the other
    /// processes told) only then, so no other process starts a session before this one has
    /// stopped it.
    public func run(keys: [String], _ body: @escaping @Sendable (String) async throws -> Void) async {
        let (inputs, input) = AsyncStream.makeStream(of: Input.self)
        var loop = Loop(ownership: self, keys: Array(Set(keys)).sorted(), input: input, body: body)
        let looks = loop.looks
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // The look timer.
                while !Task.isCancelled {
                    looks.request()
                    try? await Task.sleep(for: self.configuration.interval)
                }
            }
            for await event in inputs {
                await loop.handle(event, group: &group)
            }
            // Cancelled: every body is cancelled with the group, and the group waits for them.
            group.cancelAll()
            await group.waitForAll()
        }
        let released = loop.held
        loop.held = []
        loop.publishHeld()
        if let connection = loop.lockConnection {
            // Every lock at once, this process's mark among them, then the word to the others:
            // they look now instead of at their next interval.
            try? await loop.bounded {
                try await connection.run("SELECT pg_advisory_unlock_all()", logger: logger)
            }
            await loop.announceRelease(on: connection)
            try? await connection.close()
        }
        // Released (or gone with the connection): every session still held is free now.
        for key in released { onChange(.released(key)) }
    }

    /// The state of one run, changed only by its loop.
    private struct Loop {
        let ownership: PostgresSessionOwnership
        let keys: [String]
        let input: AsyncStream<Input>.Continuation
        let body: @Sendable (String) async throws -> Void
        let sessionSpace: Int32
        let processSpace: Int32
        /// Where a process that released sessions tells the others to look now: named from the
        /// namespace's hash, so any namespace makes a short, plain channel name.
        let channel: String
        /// Asks the loop for a look, once however often it is asked before the look runs.
        let looks: LookRequests
        var lockConnection: PostgresConnection?
        var generation = 0
        /// Keys whose bodies run, oldest first, and how to stop each.
        var held: [String] = []
        var stops: [String: AsyncStream<Void>.Continuation] = [:]
        /// Bodies told to stop that have not ended yet.
        var stopping: Set<String> = []

        init(ownership: PostgresSessionOwnership, keys: [String], input: AsyncStream<Input>.Continuation, body: @escaping @Sendable (String) async throws -> Void) {
            self.ownership = ownership
            self.keys = keys
            self.input = input
            self.body = body
            self.sessionSpace = PostgresSessionOwnership.sessionSpace(ownership.configuration.namespace)
            self.processSpace = Int32(bitPattern: FNV1a.hash(ownership.configuration.namespace + ".processes") & 0x7fff_ffff)
            self.channel = "switchboard_released_\(UInt32(bitPattern: sessionSpace))"
            self.looks = LookRequests(input: input)
        }

        var logger: Logger { ownership.logger }

        mutating func handle(_ event: Input, group: inout TaskGroup<Void>) async {
            switch event {
            case .look:
                looks.taken()
                do {
                    try await look(group: &group)
                    logger.trace("looked for sessions", metadata: ["process": "\(ownership.processName)", "held": "\(held.count)"])
                } catch {
                    await lost(PostgresChatStore.classify(error, what: "the lock connection").message)
                }
            case .ended(let key):
                // Collect the finished child (it yielded this just before it ended), so a
                // long run does not keep every ended body.
                _ = await group.next()
                // Given back on purpose (over the share): the others are told. A body that ended
                // on its own is not announced: a session that fails at once would otherwise be
                // taken again, here or elsewhere, as fast as the database answers.
                let announced = stopping.remove(key) != nil
                stops[key] = nil
                held.removeAll { $0 == key }
                publishHeld()
                guard let connection = lockConnection else {
                    ownership.onChange(.released(key))
                    return
                }
                let lock = PostgresSessionOwnership.lockKey(key)
                do {
                    try await bounded {
                        try await connection.run("SELECT pg_advisory_unlock(\(sessionSpace), \(lock))", logger: logger)
                    }
                    if announced { await announceRelease(on: connection) }
                    ownership.onChange(.released(key))
                } catch {
                    ownership.onChange(.released(key))
                    await lost(PostgresChatStore.classify(error, what: "the lock connection").message)
                }
            case .listenerEnded:
                // Collect the finished child, as for a body.
                _ = await group.next()
            case .connectionClosed(let closed):
                guard closed == generation, lockConnection != nil else { return }
                await lost("the server closed the lock connection")
            }
        }



        /// Connects if needed, counts the processes, takes up to the fair share of the free keys
        /// and gives back what is over it.
        mutating func look(group: inout TaskGroup<Void>) async throws {
            if lockConnection == nil, !held.isEmpty {
                // Sessions stopped after a lost connection are still ending: none is taken, here
                // or anywhere this process decides, until they have.
                return
            }
            let connection = try await connect(group: &group)
            let processes = try await countProcesses(on: connection)
            let share = (keys.count + processes - 1) / processes
            // Over the share (a process joined): give back the newest once their bodies end.
            let active = held.filter { !stopping.contains($0) }
            if active.count > share {
                for key in active.suffix(active.count - share) { stop(key) }
                return
            }
            guard active.count < share else { return }
            // The takes are two statements however many keys there are: which locks the other
            // processes hold, then one try for each free key up to the share. (A look that tried
            // each key in turn spent a round trip per key; with 300 keys, a process busy starting
            // sessions took seconds to look.)
            let taken = try await otherProcessesLocks(on: connection)
            // Start where this process's name hashes to, so processes do not all race for the
            // same keys first.
            let first = keys.isEmpty ? 0 : Int(FNV1a.hash(ownership.processName) % UInt32(keys.count))
            var candidates: [String] = []
            for offset in 0..<keys.count where candidates.count < share - active.count {
                let key = keys[(first + offset) % keys.count]
                guard !held.contains(key), !taken.contains(PostgresSessionOwnership.lockKey(key)) else { continue }
                candidates.append(key)
            }
            guard !candidates.isEmpty else { return }
            // Another process may take some of them between the two statements: those are not
            // locked here, and the next look goes on from the rest.
            let locked = try await tryLocks(candidates.map(PostgresSessionOwnership.lockKey), on: connection)
            for key in candidates where locked.contains(PostgresSessionOwnership.lockKey(key)) {
                start(key, group: &group)
            }
        }

        /// Tells the other processes that sessions were released, so they look now. A statement of
        /// its own: a notification that fails (PostgreSQL's queue is full) costs them only the
        /// wait for their next look, never this process its locks.
        func announceRelease(on connection: PostgresConnection) async {
            do {
                try await bounded {
                    try await connection.run("SELECT pg_notify(\(channel), \(looks.token))", logger: logger)
                }
            } catch {
                logger.warning("could not tell the other processes of a release; they find it at their next look", metadata: ["error": "\(error)"])
            }
        }

        /// The session locks of the namespace that other processes hold. (Those of this one are
        /// left out: a free key that shares its lock with a key held here is this process's to take.)
        func otherProcessesLocks(on connection: PostgresConnection) async throws -> Set<Int32> {
            try await bounded {
                var locks = Set<Int32>()
                let rows = try await connection.query(
                    """
                    SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted
                    AND classid::bigint = \(Int64(sessionSpace)) AND objsubid = 2 AND pid <> pg_backend_pid()
                    """,
                    logger: logger
                )
                for try await objid in rows.decode(Int64.self) { locks.insert(Int32(truncatingIfNeeded: objid)) }
                return locks
            }
        }

        /// Tries each of `locks` on this connection in one statement; returns those it took. (A
        /// lock two keys share is taken twice: advisory locks stack within a connection, and the
        /// second key's release leaves the first's.)
        func tryLocks(_ locks: [Int32], on connection: PostgresConnection) async throws -> Set<Int32> {
            try await bounded {
                var taken = Set<Int32>()
                let rows = try await connection.query(
                    "SELECT lock, pg_try_advisory_lock(\(sessionSpace), lock) FROM unnest(\(locks)::int4[]) AS lock",
                    logger: logger
                )
                for try await (lock, isTaken) in rows.decode((Int32, Bool).self) where isTaken { taken.insert(lock) }
                return taken
            }
        }

        func countProcesses(on connection: PostgresConnection) async throws -> Int {
            try await bounded {
                var processes = 1
                let rows = try await connection.query(
                    """
                    SELECT count(DISTINCT pid)::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted
                    AND classid::bigint = \(Int64(processSpace)) AND objid::bigint = 0 AND objsubid = 2
                    """,
                    logger: logger
                )
                for try await value in rows.decode(Int64.self) { processes = max(1, Int(value)) }
                return processes
            }
        }

        /// A statement on the lock connection, unless that connection has closed: PostgresNIO
        /// drops a statement written to a closed channel without ever answering it, and a loop
        /// waiting for that answer would never notice that its locks are gone (seen under load:
        /// the owner whose connection the server ended kept its sessions for over a minute).
        func bounded<T>(_ statement: () async throws -> T) async throws -> T {
            if lockConnection?.isClosed == true { throw SwitchboardError(.connectionLost, "the lock connection is closed") }
            return try await statement()
        }

        /// The lock connection, opened (with this process's mark in the process space) when
        /// there is none.
        mutating func connect(group: inout TaskGroup<Void>) async throws -> PostgresConnection {
            if let lockConnection { return lockConnection }
            let connection = try await PostgresConnection.connect(configuration: ownership.connection, id: generation + 1, logger: logger)
            do {
                // The process's name on its lock connection: how ``holders(of:client:)`` tells who
                // holds what.
                try await connection.run("SELECT set_config('application_name', \(ownership.processName), false)", logger: logger)
                try await connection.run("SELECT pg_advisory_lock_shared(\(processSpace), 0)", logger: logger)
            } catch {
                try? await connection.close()
                throw error
            }
            generation += 1
            lockConnection = connection
            let input = self.input
            let generation = self.generation
            // The connection closing (the server ended it, the network broke) is noticed at once,
            // not at the next look: the sessions stop before another process is likely to take them.
            connection.closeFuture.whenComplete { _ in input.yield(.connectionClosed(generation)) }
            // Another process released sessions: look at once. (Ends with the connection.) The
            // first look waits until the server listens, so no release after it goes unheard.
            let (channel, logger, looks) = (self.channel, self.logger, self.looks)
            let (listening, markListening) = AsyncStream.makeStream(of: Void.self)
            group.addTask {
                do {
                    try await connection.listen(on: channel) { notifications in
                        markListening.finish()
                        // This process's own releases are not news to it.
                        for try await notification in notifications where notification.payload != looks.token { looks.request() }
                    }
                } catch {
                    if !connection.isClosed, !Task.isCancelled {
                        logger.warning("stopped listening for released sessions; they are found at each look", metadata: ["error": "\(error)"])
                    }
                }
                markListening.finish()
                input.yield(.listenerEnded)
            }
            for await _ in listening {}
            let processes = try await countProcesses(on: connection)
            logger.info("ownership connected", metadata: ["process": "\(ownership.processName)", "processes": "\(processes)"])
            ownership.onChange(.connected(processes: processes))
            return connection
        }

        mutating func start(_ key: String, group: inout TaskGroup<Void>) {
            let (stopped, stop) = AsyncStream.makeStream(of: Void.self)
            stops[key] = stop
            held.append(key)
            publishHeld()
            logger.debug("took a session", metadata: ["process": "\(ownership.processName)", "key": "\(key)"])
            ownership.onChange(.took(key))
            let input = self.input
            let logger = self.logger
            let body = self.body
            group.addTask {
                await withTaskGroup(of: Void.self) { session in
                    session.addTask {
                        do {
                            try await body(key)
                        } catch is CancellationError {
                        } catch {
                            logger.warning("a session ended with an error", metadata: ["key": "\(key)", "error": "\(error)"])
                        }
                    }
                    session.addTask { for await _ in stopped {} }
                    await session.next()
                    session.cancelAll()
                }
                input.yield(.ended(key))
            }
        }

        mutating func stop(_ key: String) {
            guard let stop = stops[key], !stopping.contains(key) else { return }
            stopping.insert(key)
            stop.finish()
        }

        /// The lock connection broke: its locks are gone on the server, so every body is stopped;
        /// the next look reconnects once they have ended.
        mutating func lost(_ reason: String) async {
            let connection = lockConnection
            lockConnection = nil
            try? await connection?.close()
            for key in held { stop(key) }
            ownership.onChange(.lost(reason))
            logger.warning("ownership lost its lock connection; stopping every session", metadata: ["reason": "\(reason)", "sessions": "\(held.count)"])
        }

        func publishHeld() {
            let keys = held
            ownership.heldKeys.withLock { $0 = keys }
        }
    }
}

/// The looks a run's loop is asked for: a request while one is queued adds nothing, so a burst of
/// releases (a process joined, the others gave back many sessions) costs one look, not one each.
private final class LookRequests: Sendable {
    private let queued = Locked(false)
    private let input: AsyncStream<PostgresSessionOwnership.Input>.Continuation
    /// This run's mark on its notifications.
    let token = UUID().uuidString

    init(input: AsyncStream<PostgresSessionOwnership.Input>.Continuation) {
        self.input = input
    }

    func request() {
        let isNew = queued.withLock { queued in
            defer { queued = true }
            return !queued
        }
        if isNew { input.yield(.look) }
    }

    /// The loop took the queued look: the next request queues another.
    func taken() {
        queued.withLock { $0 = false }
    }
}

/// 32-bit FNV-1a: a hash every process computes the same (Swift's `Hasher` is seeded per process).
enum FNV1a {
    static func hash(_ text: String) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in text.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }
}
