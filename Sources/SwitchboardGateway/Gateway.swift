import CoreMetrics
public import Logging
public import PostgresNIO
public import Prometheus
public import ServiceLifecycle
@_spi(TestKit) public import Switchboard
public import SwitchboardPostgres

/// Runs its share of a file of sessions as one of several processes sharing a PostgreSQL
/// database: each session in exactly one process at a time, resumed from the shared store when it
/// moves (`PostgresSessionOwnership`).
///
/// A swift-service-lifecycle `Service`. Its store's PostgreSQL client (``client``) is a service
/// too, which must outlive it: run both in one `ServiceGroup`, the client first (``services``), so
/// that a graceful shutdown — the group's SIGTERM or SIGINT — reaches the gateway first, and the
/// client only once the gateway has stopped. The gateway then stops taking sessions, stops each of
/// its own — a send in flight stays in the shared outbox, and whoever runs the session next sends
/// it under the same client id, which the backend recognizes — and releases them all at once when
/// the last has stopped, and tells the other processes, which take them at once instead of at
/// their next look; then ``run()`` returns.
///
/// ```swift
/// let gateway = try Gateway(configuration: .init(postgresURL: url, processName: "gw-1"), sessions: sessions)
/// let group = ServiceGroup(configuration: .init(services: gateway.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()
/// ```
public final class Gateway: Service, Sendable {
    public struct Configuration: Sendable {
        /// `postgres://user:password@host:port/database` (`?sslmode=disable` for plain TCP on
        /// loopback).
        public var postgresURL: String
        /// This process in logs, changes and the server's lock counts.
        public var processName: String
        /// The PostgreSQL schema of the store; processes with different schemas are separate
        /// fleets.
        public var schema: String
        /// How often the process looks for sessions nobody runs: the longest a released or
        /// orphaned session waits for a taker.
        public var lookInterval: Duration
        /// Carry every session's events to the buses of the other processes (`PostgresEventBridge`).
        public var bridge: Bool
        /// Where `/health`, `/ready` and `/metrics` are served; none without it. Port 0 takes a
        /// free one (``Change/listening(host:port:)`` says which). Keep it on loopback unless a
        /// scraper elsewhere needs it: the endpoints have no authentication.
        public var http: (host: String, port: Int)?
        /// With a token, the ``http`` address also serves the API for other programs under `/v1`
        /// (and its OpenAPI document at `/openapi.yaml`), each request with
        /// `Authorization: Bearer <token>`; without one, there is no API. The API streams the
        /// events every gateway's bridge writes, so a token turns the ``bridge`` on: give every
        /// gateway of a fleet the token (or the bridge). The token is never logged.
        public var apiToken: String?

        public init(
            postgresURL: String,
            processName: String,
            schema: String = "switchboard",
            lookInterval: Duration = .seconds(1),
            bridge: Bool = false,
            http: (host: String, port: Int)? = nil,
            apiToken: String? = nil
        ) {
            self.postgresURL = postgresURL
            self.processName = processName
            self.schema = schema
            self.lookInterval = lookInterval
            self.bridge = bridge
            self.http = http
            self.apiToken = apiToken
        }

        /// Whether the gateway writes its sessions' events for the others (``bridge``, or the API).
        var bridges: Bool { bridge || apiToken != nil }
    }

    /// What the gateway did, for its lines, logs and tests.
    public enum Change: Sendable, Hashable {
        case ownership(PostgresSessionOwnership.Change)
        case bridge(PostgresEventBridge.Change)
        /// A graceful shutdown began: the gateway stops its `sessions`.
        case stopping(sessions: Int)
        /// Every session stopped and was released.
        case stopped
        /// The HTTP endpoints listen here (``Configuration/http``).
        case listening(host: String, port: Int)
    }

    public let configuration: Configuration
    public let sessions: [GatewaySession]
    /// The bus of every session of the process: what the bridge carries.
    public let bus: EventBus
    let logger: Logger
    let onChange: @Sendable (Change) -> Void
    let ownership: PostgresSessionOwnership
    /// The PostgreSQL client of the gateway's store: a service to run before the gateway, in the
    /// same group (``services``), and to stop after it.
    public let client: PostgresClient
    let store: PostgresChatStore
    /// Where the gateway's metrics are kept: what `/metrics` exports.
    public let metricsRegistry: PrometheusCollectorRegistry
    let metrics: GatewayMetrics
    /// Whether the lock connection is up (`/ready`).
    private let ownershipConnected: Locked<Bool>
    private let http: (any Service)?
    /// The API's requests for the sessions this process runs (whichever gateway took them).
    let commands: GatewayCommands
    let directory: GatewayDirectory
    /// Signalled when events reach the shared log: the API's event streams look again.
    let stored: AsyncSignal
    /// What the HTTP address serves, `METHOD /path` (the WebSocket's upgrade among them).
    let routes: [String]

    /// The client, the HTTP endpoints when configured, then the gateway: what a `ServiceGroup`
    /// runs, in that order, so that a graceful shutdown stops the gateway first.
    public var services: [any Service] { [client] + (http.map { [$0] } ?? []) + [self] }

    /// - Throws: `invalidArgument` for a bad database URL, for two sessions with one key, or for an
    ///   API token that is empty or has no ``Configuration/http`` address to be served on.
    public init(
        configuration: Configuration,
        sessions: [GatewaySession],
        bus: EventBus = EventBus(),
        logger: Logger = Logger(label: "switchboard.gateway"),
        onChange: @escaping @Sendable (Change) -> Void = { _ in }
    ) throws {
        var seen = Set<String>()
        for session in sessions where !seen.insert(session.key).inserted {
            throw SwitchboardError(.invalidArgument, "two sessions are \(session.key); each account runs once")
        }
        if let token = configuration.apiToken {
            guard !token.isEmpty, !token.contains(where: \.isWhitespace) else {
                throw SwitchboardError(.invalidArgument, "the API token is empty or has white space")
            }
            guard configuration.http != nil else {
                throw SwitchboardError(.invalidArgument, "the API is served on the HTTP address: give one (http, --http HOST:PORT)")
            }
        }
        self.configuration = configuration
        self.sessions = sessions
        self.bus = bus
        self.logger = logger
        self.onChange = onChange
        let registry = PrometheusCollectorRegistry()
        let metrics = GatewayMetrics(factory: PrometheusMetricsFactory(registry: registry))
        self.metricsRegistry = registry
        self.metrics = metrics
        self.client = PostgresClient(configuration: try PostgresChatStore.configuration(url: configuration.postgresURL), backgroundLogger: logger)
        self.store = try PostgresChatStore(client: client, schema: configuration.schema, logger: logger) { duration in
            let (seconds, attoseconds) = duration.components
            metrics.storeWrites.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        }
        let connected = Locked(false)
        self.ownershipConnected = connected
        self.ownership = try PostgresSessionOwnership(
            url: configuration.postgresURL,
            processName: configuration.processName,
            configuration: .init(interval: configuration.lookInterval, namespace: configuration.schema),
            logger: logger,
            onChange: { change in
                switch change {
                case .connected: connected.withLock { $0 = true }
                case .lost: connected.withLock { $0 = false }
                case .took, .released: break
                }
                onChange(.ownership(change))
            }
        )
        let (client, ownership, store) = (self.client, self.ownership, self.store)
        let commands = try GatewayCommands(store: store, url: configuration.postgresURL, sweepInterval: Self.requestSweep, logger: logger)
        let directory = GatewayDirectory(store: store, logger: logger)
        let stored = AsyncSignal()
        self.commands = commands
        self.directory = directory
        self.stored = stored
        let api = configuration.apiToken.map { token in
            GatewayAPI(
                token: token, store: store, sessions: Dictionary(uniqueKeysWithValues: sessions.map { ($0.key, $0) }), ownership: ownership,
                commands: commands, directory: directory, log: PostgresEventLog(store: store, logger: logger), stored: stored,
                streamPollInterval: .milliseconds(250), logger: logger
            )
        }
        let http = configuration.http.map { http in
            GatewayHTTP.application(
                host: http.host, port: http.port, metrics: metrics, registry: registry, logger: logger,
                readiness: { await Self.readiness(connected: connected, client: client, ownership: ownership) },
                api: api,
                onListening: { onChange(.listening(host: http.host, port: $0)) }
            )
        }
        self.http = http?.service
        self.routes = http?.routes ?? []
    }

    /// How often a session looks for API requests nobody told it of (a notification missed while
    /// the listener reconnected; reconnecting looks at once too).
    static let requestSweep: Duration = .seconds(30)

    /// The keys of the sessions this process runs now.
    public var held: [String] { ownership.held }

    /// Runs until cancelled, a graceful shutdown, or the bridge failing (which throws). The
    /// ``client`` must run meanwhile (``services``).
    ///
    /// - Throws: `storageFailure` when the database cannot be reached or its schema migrated.
    public func run() async throws {
        try await PostgresChatStore.checkConnection(url: configuration.postgresURL, logger: logger)
        try await store.migrate()
        let (stop, stopper) = AsyncStream.makeStream(of: Void.self)
        try await withGracefulShutdownHandler {
            try await self.serve(until: stop)
        } onGracefulShutdown: {
            stopper.finish()
        }
    }

    private func serve(until stop: AsyncStream<Void>) async throws {
        let bySession = Dictionary(uniqueKeysWithValues: sessions.map { ($0.key, $0) })
        let (bus, logger, onChange, ownership, store, metrics) = (self.bus, self.logger, self.onChange, self.ownership, self.store, self.metrics)
        let (commands, stored) = (self.commands, self.stored)
        let fleet = GatewaySession.Fleet(process: configuration.processName, directory: directory, commands: commands)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            if configuration.bridges {
                let bridge = try PostgresEventBridge(
                    store: store, url: configuration.postgresURL, bus: bus, logger: logger, onChange: { onChange(.bridge($0)) }, onStored: { stored.signal() }
                )
                group.addTask {
                    try await bridge.run()
                    return false
                }
            }
            group.addTask {
                await commands.listen()
                return false
            }
            group.addTask {
                await commands.pruneRefused()
                return false
            }
            group.addTask {
                await ownership.run(keys: Array(bySession.keys)) { key in
                    try await bySession[key]?.run(store: store, bus: bus, logger: logger, metrics: metrics, fleet: fleet)
                }
                return false
            }
            group.addTask {
                // Finished by a graceful shutdown; a cancelled iteration ends too.
                for await _ in stop {}
                return !Task.isCancelled
            }
            // The ownership and the bridge run until cancelled; a bridge that fails ends the
            // gateway with its error.
            let stopping = try await group.next() ?? false
            // Not ready from here on: the sessions are going.
            ownershipConnected.withLock { $0 = false }
            if stopping { onChange(.stopping(sessions: ownership.held.count)) }
            // The ownership returns once every session has stopped (their writes finished: the
            // client is still running), then lets go of its locks. Every child is waited for,
            // whatever the others threw (a cancelled bridge throws).
            group.cancelAll()
            while !group.isEmpty { _ = try? await group.next() }
            if stopping { onChange(.stopped) }
        }
    }

    /// Whether the gateway is ready, and why (not): it holds its lock connection (so it runs its
    /// share of the sessions; not while it stops) and the database answers a `SELECT 1`. A
    /// database that does not answer at all keeps the request waiting: PostgresNIO does not
    /// cancel a statement it has written, so a probe's own timeout is what bounds it.
    static func readiness(connected: Locked<Bool>, client: PostgresClient, ownership: PostgresSessionOwnership) async -> (Bool, String) {
        guard connected.withLock({ $0 }) else { return (false, "not ready: no lock connection to the database, or stopping") }
        do {
            _ = try await client.query("SELECT 1")
        } catch {
            return (false, "not ready: the database did not answer: \(SwitchboardError.classify(error).message)")
        }
        return (true, "ready: \(ownership.held.count) sessions held")
    }
}
