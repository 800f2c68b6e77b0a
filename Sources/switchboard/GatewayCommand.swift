import SwitchboardCommandKit
import ArgumentParser
import Foundation
import Logging
import Switchboard
import SwitchboardPostgres

struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the sessions of a file as one of several processes that share a PostgreSQL database.",
        discussion: """
            Every process started with the same database and file runs its fair share of the \
            sessions; each session runs in exactly one process at a time, and the sessions of a \
            process that dies (even by kill -9) move to the others, which resume them from the \
            shared store. Prints one line per change on standard error: took KEY, released KEY, \
            connected N (processes), lost REASON. With --bridge, every session's events also go \
            to the other processes' buses through the database (`switchboard events` prints them).

            The file is a JSON array of sessions, one object each, as its backend takes it:

            """ + registry.map(\.gatewayExample).joined(separator: "\n")
    )

    @Option(help: "The PostgreSQL database: postgres://user:password@host:port/database (add ?sslmode=disable for plain TCP on loopback).")
    var postgres: String
    @Option(help: "The JSON file of sessions.") var sessions: String
    @Option(help: "This process's name in its lines and in the server's lock counts.") var name = "gateway-\(getpid())"
    @Option(help: "The PostgreSQL schema of the store.") var schema = "switchboard"
    @Option(name: .customLong("interval-ms"), help: "How often to look for sessions nobody runs, in milliseconds.") var intervalMilliseconds = 1000
    @Option(help: "Messages each session sends into its conversation (\"ACCOUNT 1\", \"ACCOUNT 2\", …) for load and failover runs; one already stored is not sent again.")
    var send = 0
    @Option(name: .customLong("send-interval-ms"), help: "Milliseconds between a session's sends.") var sendIntervalMilliseconds = 100
    @Flag(help: "Carry every session's events to the buses of the other processes sharing the database (PostgresEventBridge).")
    var bridge = false

    func validate() throws {
        if intervalMilliseconds < 10 { throw ValidationError("--interval-ms is at least 10") }
        if send < 0 || sendIntervalMilliseconds < 0 { throw ValidationError("--send and --send-interval-ms are not negative") }
    }

    /// One line on standard error: the gateway's and `events`' own lines, beside the log.
    static let say: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }

    func run() async throws {
        let say = Self.say
        do {
            try await serve(say: say)
        } catch let error as SwitchboardError {
            say("error: \(error.message)")
            throw ExitCode(1)
        }
    }

    private func serve(say: @escaping @Sendable (String) -> Void) async throws {
        let specs = try GatewaySession.load(sessions)
        let bySpec = Dictionary(specs.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let logger = Self.logger
        let ownership = try PostgresSessionOwnership(
            url: postgres, processName: name,
            configuration: .init(interval: .milliseconds(intervalMilliseconds), namespace: schema),
            logger: logger,
            onChange: { change in
                switch change {
                case .connected(let processes): say("connected \(processes)")
                case .took(let key): say("took \(key)")
                case .released(let key): say("released \(key)")
                case .lost(let reason): say("lost \(reason)")
                }
            }
        )
        let traffic = Traffic(messages: send, interval: .milliseconds(sendIntervalMilliseconds))
        // One bus for every session of the process: what the bridge carries.
        let bus = EventBus()
        try await PostgresChatStore.withStore(url: postgres, schema: schema, logger: logger) { store in
            say("gateway \(name): \(bySpec.count) sessions in the file")
            try await withThrowingTaskGroup(of: Void.self) { group in
                if bridge {
                    let bridge = try PostgresEventBridge(store: store, url: postgres, bus: bus, logger: logger) { change in
                        say("bridge \(change)")
                    }
                    group.addTask { try await bridge.run() }
                }
                group.addTask {
                    await ownership.run(keys: Array(bySpec.keys)) { key in
                        guard let spec = bySpec[key] else { return }
                        try await spec.run(store: store, bus: bus, traffic: traffic, logger: logger)
                    }
                }
                // Both run until the process ends; a bridge that fails ends it.
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// Warnings and errors on standard error, beside the change lines.
    static var logger: Logger {
        var logger = Logger(label: "switchboard.gateway", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .warning
        return logger
    }

    struct Traffic: Sendable {
        var messages: Int
        var interval: Duration
    }
}

/// One session of a gateway's file: its backend's registry entry reads the rest of its entry.
struct GatewaySession: Sendable {
    var backend: String
    var setup: GatewaySessionSetup

    var account: String { setup.account }

    /// The session's key among the processes: its store scope.
    var key: String { "\(backend)/\(account)" }

    /// Reads a sessions file: a JSON array of objects, each with its `"backend"` (a registry
    /// entry's name) and what that backend takes.
    ///
    /// - Throws: `invalidArgument` with the reason.
    static func load(_ path: String, registry: [AdapterEntry] = registry) throws -> [GatewaySession] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw SwitchboardError(.invalidArgument, "cannot read \(path): \(error.localizedDescription)")
        }
        let entries: [JSONValue]
        do {
            // A byte-order mark (an editor's UTF-8 "with BOM") is not part of the JSON.
            let text = data.starts(with: [0xEF, 0xBB, 0xBF]) ? data.dropFirst(3) : data[...]
            guard let array = try JSONValue(parsing: Data(text)).arrayValue else { throw SwitchboardError(.invalidArgument, "not an array") }
            entries = array
        } catch {
            throw SwitchboardError(.invalidArgument, "\(path) is not a JSON array of sessions: \(error)")
        }
        let names = registry.map(\.name)
        let known = names.count > 1 ? names.dropLast().joined(separator: ", ") + " and " + names.last! : names.joined()
        return try entries.enumerated().map { index, entry in
            let place = "\(path), session \(index + 1)"
            guard let backend = entry["backend"]?.stringValue else {
                throw SwitchboardError(.invalidArgument, "\(place) names no \"backend\"")
            }
            guard let adapter = registry.first(where: { $0.name == backend }) else {
                throw SwitchboardError(.invalidArgument, "\(place): gateway runs \(known) sessions; not \(backend)")
            }
            do {
                return GatewaySession(backend: backend, setup: try adapter.gatewaySession(entry))
            } catch {
                throw SwitchboardError(.invalidArgument, "\(place): \(SwitchboardError.classify(error).message)")
            }
        }
    }

    /// Runs the session on the shared store until cancelled; with traffic, sends what the store
    /// does not have yet (a process that took the session over does not send again what the
    /// last one stored: its outbox sends that).
    func run(store: PostgresChatStore, bus: EventBus, traffic: GatewayCommand.Traffic, logger: Logger) async throws {
        let session = ChatSession(id: SessionID(key), backend: try await setup.makeBackend(logger), account: account, store: store, bus: bus, logger: logger)
        let events = session.events(filter: .all, buffering: .unbounded)
        // A fencing token before the session reads the store: should this process lose the
        // session without noticing (a partition), its writes are refused once another takes it.
        try await store.takeOver(session.scope)
        defer { store.endTakeOver(session.scope) }
        try await session.withRunning { session in
            try await session.resume()
            if traffic.messages > 0, let chat = try await setup.trafficConversation(session, events) {
                let stored = Set(try await chat.storedMessages(before: nil, limit: .max).map(\.text))
                for index in 1...traffic.messages where !stored.contains("\(account) \(index)") {
                    _ = try await chat.send(text: "\(account) \(index)")
                    try await Task.sleep(for: traffic.interval)
                }
            }
            // Runs until the ownership stops it.
            for await _ in events {}
        }
    }
}

/// `switchboard events`: the events of every session of the processes sharing a database, as the
/// gateways started with `--bridge` publish them.
struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print the events of every process sharing a PostgreSQL database (gateways started with --bridge).",
        discussion: """
            Runs a PostgresEventBridge on a bus of its own and prints each event the other \
            processes publish, from now on (a bus has no history: the store has), one line each. \
            A listener connection that breaks is opened again and what it missed read back from \
            the database; what the database no longer holds is printed as a gap.
            """
    )

    @Option(help: "The PostgreSQL database: postgres://user:password@host:port/database (add ?sslmode=disable for plain TCP on loopback).")
    var postgres: String
    @Option(help: "The PostgreSQL schema of the store.") var schema = "switchboard"
    @Flag(help: "Print events as JSON lines.") var jsonl = false
    @Option(help: "Stop after this many events (for scripts); until interrupted without it.") var count: Int?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count is at least 1") }
    }

    func run() async throws {
        let say = GatewayCommand.say
        let jsonl = self.jsonl
        let output = StandardOutput()
        let bus = EventBus()
        let events = bus.subscribe(filter: .all, buffering: .unbounded)
        do {
            try await PostgresChatStore.withStore(url: postgres, schema: schema, logger: GatewayCommand.logger) { store in
                let bridge = try PostgresEventBridge(store: store, url: postgres, bus: bus, logger: GatewayCommand.logger) { change in
                    if case .listening = change { say("listening on \(schema)") } else { say("bridge \(change)") }
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await bridge.run() }
                    group.addTask {
                        var printed = 0
                        var formatter = EventFormatter(format: jsonl ? .jsonLines : .timeline, start: Date())
                        for await event in events {
                            if let line = formatter.line(for: event, receivedAt: Date()) { output.write(line) }
                            printed += 1
                            if let count, printed >= count { return }
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch let error as SwitchboardError {
            say("error: \(error.message)")
            throw ExitCode(1)
        }
    }
}
