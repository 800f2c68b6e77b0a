import SwitchboardCommandKit
import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import Switchboard
import SwitchboardGateway
import UnixSignals
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
    @Option(help: "Serve /health, /ready and /metrics (Prometheus) at HOST:PORT (port 0: a free one, printed); loopback unless you need otherwise, they have no authentication.")
    var http: String?
    @Option(
        name: .customLong("api-token-env"),
        help: "Serve the API for other programs (/v1, described at /openapi.yaml) on the --http address, with the bearer token in this environment variable. Turns --bridge on."
    )
    var apiTokenVariable: String?

    func validate() throws {
        if intervalMilliseconds < 10 { throw ValidationError("--interval-ms is at least 10") }
        if let http, Self.endpoint(http) == nil { throw ValidationError("--http is HOST:PORT, like 127.0.0.1:9090 (port 0 for a free one), not \(http)") }
        if send < 0 || sendIntervalMilliseconds < 0 { throw ValidationError("--send and --send-interval-ms are not negative") }
        if apiTokenVariable != nil, http == nil { throw ValidationError("--api-token-env serves the API on the --http address: give one") }
    }

    /// The API's token, read from the variable `--api-token-env` names.
    func apiToken(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String? {
        guard let apiTokenVariable else { return nil }
        guard let token = environment[apiTokenVariable], !token.isEmpty else {
            throw ValidationError("--api-token-env names \(apiTokenVariable), which is not set or empty")
        }
        return token
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

    /// The sessions of the file, each sending `--send` messages once it runs.
    static func sessions(in path: String, traffic: GatewayTraffic? = nil, registry: [AdapterEntry] = registry) throws -> [GatewaySession] {
        try GatewaySessionsFile.load(path, kinds: registry.map { $0.gatewayKind(traffic: traffic) })
    }

    private func serve(say: @escaping @Sendable (String) -> Void) async throws {
        let traffic = send > 0 ? GatewayTraffic(messages: send, interval: .milliseconds(sendIntervalMilliseconds)) : nil
        let sessions = try Self.sessions(in: self.sessions, traffic: traffic)
        let logger = Self.logger
        let gateway = try Gateway(
            configuration: .init(
                postgresURL: postgres, processName: name, schema: schema, lookInterval: .milliseconds(intervalMilliseconds), bridge: bridge,
                http: http.flatMap(Self.endpoint), apiToken: try apiToken()
            ),
            sessions: sessions,
            logger: logger,
            onChange: { [api = apiTokenVariable != nil] change in say(Self.line(for: change, api: api)) }
        )
        say("gateway \(name): \(sessions.count) sessions in the file")
        // SIGTERM (a process supervisor) and SIGINT (Ctrl-C) stop the gateway gracefully: it
        // releases its sessions at once for the other processes, then its store's client stops,
        // and the process exits 0.
        var configuration = ServiceGroupConfiguration(services: gateway.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(30)
        try await ServiceGroup(configuration: configuration).run()
    }

    /// `HOST:PORT` (an IPv6 host in brackets), or `nil`.
    static func endpoint(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    /// The gateway's line for a change: what the failover tests and operators read.
    static func line(for change: Gateway.Change, api: Bool = false) -> String {
        switch change {
        case .ownership(.connected(let processes)): "connected \(processes)"
        case .ownership(.took(let key)): "took \(key)"
        case .ownership(.released(let key)): "released \(key)"
        case .ownership(.lost(let reason)): "lost \(reason)"
        case .bridge(let change): "bridge \(change)"
        case .stopping(let sessions): "stopping: releasing \(sessions) sessions"
        case .stopped: "stopped"
        case .listening(let host, let port): "http \(host):\(port) (/health, /ready, /metrics" + (api ? ", /v1, /openapi.yaml)" : ")")
        }
    }

    /// Warnings and errors on standard error, beside the change lines.
    static var logger: Logger {
        var logger = Logger(label: "switchboard.gateway", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .warning
        return logger
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
