// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "switchboard",
    platforms: [.macOS(.v14), .iOS(.v16)],
    products: [
        .library(name: "Switchboard", targets: ["Switchboard"]),
        .library(name: "SwitchboardTestKit", targets: ["SwitchboardTestKit"]),
        .library(name: "SwitchboardSQLite", targets: ["SwitchboardSQLite"]),
        .library(name: "SwitchboardPostgres", targets: ["SwitchboardPostgres"]),
        .library(name: "SwitchboardGateway", targets: ["SwitchboardGateway"]),
        .library(name: "SwitchboardTransport", targets: ["SwitchboardTransport"]),
        .library(name: "SwitchboardEmulation", targets: ["SwitchboardEmulation"]),
        .library(name: "SwitchboardVoximplant", targets: ["SwitchboardVoximplant"]),
        .library(name: "VoximplantEmulator", targets: ["VoximplantEmulator"]),
        .library(name: "SwitchboardWebim", targets: ["SwitchboardWebim"]),
        .library(name: "WebimEmulator", targets: ["WebimEmulator"]),
        .library(name: "SwitchboardCXone", targets: ["SwitchboardCXone"]),
        .library(name: "CXoneEmulator", targets: ["CXoneEmulator"]),
        .library(name: "SwitchboardMatrix", targets: ["SwitchboardMatrix"]),
        .library(name: "SwitchboardXMPP", targets: ["SwitchboardXMPP"]),
        .executable(name: "switchboard", targets: ["switchboard"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // TLS for the WebSocket client (already in the graph through AsyncHTTPClient).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        // Already in the graph through Hummingbird; named so `switchboard emulate` can bound its
        // graceful shutdown on a signal.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.8.0"),
        // The gateway's /metrics: swift-metrics (already in the graph through Hummingbird),
        // exported in Prometheus's text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // A send's span from the app's call to the server's answer (the core; a no-op tracer
        // unless the app bootstraps one). Already in the graph through Hummingbird.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // `swift package generate-documentation` for the DocC catalogs (checked in CI, Docs/CONTRIBUTING.md).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The core: value types, the backend seam, the session engine, the event bus, the pure
        // sync state machines and the in-memory store. No networking, no SQLite.
        .target(
            name: "Switchboard",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // What adapter authors and app tests use: the reference in-memory backend, test clocks,
        // the emulator-control protocol and the conformance suite.
        .target(
            name: "SwitchboardTestKit",
            dependencies: [
                "Switchboard",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // The durable store: SQLite through GRDB (WAL, migrations, one transaction per call, on the
        // caller's thread; checkpoints on a connection of their own).
        .target(
            name: "SwitchboardSQLite",
            dependencies: [
                "Switchboard",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the WAL hook that takes checkpoints off the writer's path.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // The shared store for several processes: PostgreSQL through PostgresNIO (migrations, one
        // transaction per call, a schema per deployment).
        .target(
            name: "SwitchboardPostgres",
            dependencies: [
                "Switchboard",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The gateway as a service: a file of sessions run by a fleet of processes sharing
        // PostgreSQL, a swift-service-lifecycle `Service` with a graceful shutdown.
        .target(
            name: "SwitchboardGateway",
            dependencies: [
                "Switchboard",
                "SwitchboardPostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // /health, /ready and /metrics, and the API for other programs (HTTP and a
                // WebSocket event stream).
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // Network clients shared by adapters: a WebSocket client on SwiftNIO's channel handlers,
        // HTTP on AsyncHTTPClient.
        .target(
            name: "SwitchboardTransport",
            dependencies: [
                "Switchboard",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ]
        ),
        // Scaffolding for emulators: hosting on 127.0.0.1 port 0, fault scripts.
        .target(
            name: "SwitchboardEmulation",
            dependencies: [
                "Switchboard",
                "SwitchboardTestKit",
                // The in-process network: an emulator's routes behind the adapters' transports.
                "SwitchboardTransport",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                // The fault proxy: a loopback HTTP server (NIO) forwarding with AsyncHTTPClient.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ]
        ),
        .target(
            name: "SwitchboardVoximplant",
            dependencies: [
                "Switchboard",
                "SwitchboardTransport",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Adapters/Voximplant/Sources/SwitchboardVoximplant"
        ),
        .target(
            name: "VoximplantEmulator",
            dependencies: [
                "Switchboard",
                "SwitchboardTestKit",
                "SwitchboardEmulation",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            path: "Adapters/Voximplant/Emulator/VoximplantEmulator"
        ),
        .target(
            name: "SwitchboardWebim",
            dependencies: [
                "Switchboard",
                "SwitchboardTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Adapters/Webim/Sources/SwitchboardWebim"
        ),
        .target(
            name: "WebimEmulator",
            dependencies: [
                "Switchboard",
                "SwitchboardTestKit",
                "SwitchboardEmulation",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            path: "Adapters/Webim/Emulator/WebimEmulator"
        ),
        .target(
            name: "SwitchboardCXone",
            dependencies: [
                "Switchboard",
                "SwitchboardTransport",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Adapters/CXone/Sources/SwitchboardCXone"
        ),
        .target(
            name: "CXoneEmulator",
            dependencies: [
                "Switchboard",
                "SwitchboardTestKit",
                "SwitchboardEmulation",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            path: "Adapters/CXone/Emulator/CXoneEmulator"
        ),
        .testTarget(
            name: "SwitchboardCXoneTests",
            dependencies: ["Switchboard", "SwitchboardTestKit", "SwitchboardCXone", "CXoneEmulator", "SwitchboardEmulation", "SwitchboardTransport"],
            path: "Adapters/CXone/Tests/SwitchboardCXoneTests"
        ),
        // Matrix: an open protocol, tested against a real Synapse homeserver (issue #16).
        .target(
            name: "SwitchboardMatrix",
            dependencies: [
                "Switchboard",
                "SwitchboardTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            path: "Adapters/Matrix/Sources/SwitchboardMatrix"
        ),
        .testTarget(
            name: "SwitchboardMatrixTests",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardMatrix", "SwitchboardSQLite", "SwitchboardTransport", "SwitchboardEmulation", "SynapseHarness",
                // MatrixGatewayTests: the gateway's Matrix sessions on a PostgreSQL store.
                "MatrixCommands", "SwitchboardCommandKit", "SwitchboardGateway", "SwitchboardPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                // FaultProxyTests' small upstream.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            ],
            path: "Adapters/Matrix/Tests/SwitchboardMatrixTests"
        ),
        // A real Synapse on loopback, started and seeded: the live tests' and the bench's peer
        // rows' (package-only; the adapter never depends on it).
        .target(
            name: "SynapseHarness",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardTransport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Adapters/Matrix/Harness/SynapseHarness"
        ),
        // XMPP: an open standard, tested against a real Prosody server (issue #34).
        .target(
            name: "SwitchboardXMPP",
            dependencies: [
                "Switchboard",
                "SwitchboardTransport",
                .product(name: "Logging", package: "swift-log"),
                // SCRAM logins: SHA-1, SHA-256, HMAC and PBKDF2.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            path: "Adapters/XMPP/Sources/SwitchboardXMPP"
        ),
        .testTarget(
            name: "SwitchboardXMPPTests",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardXMPP", "SwitchboardSQLite", "SwitchboardTransport", "SwitchboardEmulation",
                // `connect xmpp` and a gateway's xmpp session, against Prosody.
                "XMPPCommands", "SwitchboardCommandKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Adapters/XMPP/Tests/SwitchboardXMPPTests"
        ),
        .testTarget(
            name: "SwitchboardWebimTests",
            dependencies: ["Switchboard", "SwitchboardTestKit", "SwitchboardWebim", "WebimEmulator", "SwitchboardSQLite", "SwitchboardEmulation", "SwitchboardTransport"],
            path: "Adapters/Webim/Tests/SwitchboardWebimTests"
        ),
        .testTarget(
            name: "SwitchboardVoximplantTests",
            dependencies: ["Switchboard", "SwitchboardTestKit", "SwitchboardVoximplant", "VoximplantEmulator", "SwitchboardEmulation"],
            path: "Adapters/Voximplant/Tests/SwitchboardVoximplantTests"
        ),
        // A command-line chat app on the public API only, as an app uses it (Examples/README.md).
        .executableTarget(
            name: "SupportChat",
            dependencies: ["Switchboard", "SwitchboardVoximplant", .product(name: "Logging", package: "swift-log")],
            path: "Examples/SupportChat"
        ),
        // What the command-line tool's commands share, and what each adapter's commands build on:
        // the console client, the event timeline, the agent console of an emulator. Not a
        // product: `package` access, for this package's targets only.
        .target(
            name: "SwitchboardCommandKit",
            dependencies: [
                "Switchboard",
                "SwitchboardSQLite",
                "SwitchboardTransport",
                "SwitchboardEmulation",
                "SwitchboardTestKit",
                // A registry entry's sessions for the gateway.
                "SwitchboardGateway",
                // The raw WebSocket the benchmark's raw clients read inline.
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The soak and load harnesses of `switchboard soak` and `switchboard load`: many sessions
        // against an emulator, every stored row compared with the server's log. Out of the test
        // kit, which apps link; not a product.
        .target(
            name: "SwitchboardLoadKit",
            dependencies: ["Switchboard", "SwitchboardTestKit", .product(name: "Logging", package: "swift-log")]
        ),
        // `switchboard bench`: every figure beside a baseline measured in the same run, with the
        // baselines (SQLite, PostgreSQL, the catch-up's raw retransmits); the latency rows run each
        // registry entry's rig with its raw client.
        .target(
            name: "SwitchboardBench",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardLoadKit", "SwitchboardSQLite", "SwitchboardPostgres", "SwitchboardTransport", "SwitchboardEmulation",
                "SwitchboardCommandKit", "VoximplantCommands",
                // The adapter-specific rows: decode (the three wire readers), catch-up, memory and
                // PostgreSQL (the Voximplant-style emulator).
                "SwitchboardVoximplant", "VoximplantEmulator", "SwitchboardWebim", "SwitchboardCXone",
                // The peer rows: Matrix beside matrix-nio on a local Synapse.
                "SwitchboardMatrix", "SynapseHarness",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "WSClient", package: "swift-websocket"),
            ]
        ),
        // Each adapter's commands (`connect`, `emulate`), its gateway sessions, its emulator rig and
        // its demo part: the registry's entry, one per adapter folder.
        commandsTarget("Voximplant", adapter: "SwitchboardVoximplant", emulator: "VoximplantEmulator"),
        commandsTarget("Webim", adapter: "SwitchboardWebim", emulator: "WebimEmulator"),
        commandsTarget("CXone", adapter: "SwitchboardCXone", emulator: "CXoneEmulator"),
        commandsTarget("Matrix", adapter: "SwitchboardMatrix", emulator: nil),
        commandsTarget("XMPP", adapter: "SwitchboardXMPP", emulator: nil),
        .executableTarget(
            name: "switchboard",
            dependencies: [
                // The registry: each adapter's commands, with the adapter and its emulator.
                "VoximplantCommands",
                "WebimCommands",
                "CXoneCommands",
                "MatrixCommands",
                "XMPPCommands",
                "SwitchboardCommandKit",
                "Switchboard",
                // The demo's in-memory reference backend; the soak's SQLite file; the gateway's
                // PostgreSQL; the bench and the soak and load harnesses.
                "SwitchboardTestKit",
                "SwitchboardSQLite",
                "SwitchboardPostgres",
                "SwitchboardGateway",
                "SwitchboardBench",
                "SwitchboardLoadKit",
                // `demo --console`: the agent consoles' key.
                "SwitchboardEmulation",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // Instruction-count probes of the core's hot paths, run under callgrind by
        // scripts/instruction-counts.sh (issue #33).
        .executableTarget(name: "switchboard-probes", dependencies: ["Switchboard"], path: "Sources/SwitchboardProbes"),
        // Bounds how many test cases run at once in the test bundle (Tests/SwitchboardTestRunWidth).
        .target(name: "SwitchboardTestRunWidth", path: "Tests/SwitchboardTestRunWidth"),
        .testTarget(
            name: "SwitchboardTests",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardTestRunWidth",
                // The send's span tree, checked with an in-memory tracer.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "SwitchboardSQLiteTests",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "SwitchboardPostgresTests",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "SwitchboardTestKitTests",
            dependencies: [
                "Switchboard", "SwitchboardTestKit", "SwitchboardSQLite", "SwitchboardTransport", "SwitchboardEmulation",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                // A scripted WebSocket server, frame by frame, for the transport's own client, and
                // canned handshakes (SHA-1 for the accept key).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "SwitchboardCLITests",
            dependencies: [
                "switchboard", "switchboard-probes", "SwitchboardCommandKit", "SwitchboardBench", "SwitchboardLoadKit", "VoximplantCommands", "WebimCommands", "CXoneCommands", "MatrixCommands", "XMPPCommands", "SupportChat", "Switchboard", "SwitchboardTestKit", "SwitchboardVoximplant", "VoximplantEmulator",
                "SwitchboardWebim", "WebimEmulator", "SwitchboardCXone", "CXoneEmulator", "SwitchboardSQLite", "SwitchboardEmulation",
                "SwitchboardPostgres", "SwitchboardMatrix", "SwitchboardGateway", "SynapseHarness",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // Scraping the gateway's /metrics; the agent console's page and socket.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
    ]
)

// Language settings for every target (the swift-log pattern): Swift 6 mode plus the upcoming
// features that make API boundaries and isolation explicit.
for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(contentsOf: [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
        .enableUpcomingFeature("InternalImportsByDefault"),
        .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
    ])
    target.swiftSettings = settings
}

/// An adapter's commands target, `<Vendor>Commands` in `Adapters/<Vendor>/Commands`: its registry
/// entry (the `connect` and `emulate` commands, its gateway sessions) over its adapter and, where
/// it has one, its emulator.
func commandsTarget(_ vendor: String, adapter: String, emulator: String?) -> Target {
    // With an emulator: its rig for `bench`, `soak` and `load`, and the raw client of the vendor's
    // protocol that `bench` measures the adapter against.
    let emulation: [Target.Dependency] = emulator.map {
        [
            .target(name: $0), "SwitchboardEmulation",
            .product(name: "WSClient", package: "swift-websocket"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOFoundationCompat", package: "swift-nio"),
        ]
    } ?? []
    return .target(
        name: "\(vendor)Commands",
        dependencies: ["SwitchboardCommandKit", "Switchboard", .target(name: adapter)] + emulation + [
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ],
        path: "Adapters/\(vendor)/Commands"
    )
}
