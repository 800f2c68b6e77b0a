import Logging
import Switchboard
import SwitchboardCXone
import SwitchboardTestKit
import SwitchboardEmulation
import SwitchboardTransport
import Testing
import CXoneEmulator

/// Runs `body` with a fresh CXone emulator configured so: in the same process on a test clock by
/// default, or on 127.0.0.1 port 0.
func withCXoneEmulator<T: Sendable>(
    _ configuration: CXoneServer.Configuration,
    network: EmulatorNetwork = .inProcess,
    _ body: @Sendable (CXoneEmulatorControl) async throws -> T
) async throws -> T {
    let channel = try CXoneChannelConfiguration(json: CXoneServer(configuration: configuration).channelConfiguration)
    let makeBackend: @Sendable (InProcessNetwork?) -> @Sendable (CXoneEmulator.Endpoints, String) -> any ChatBackend = { network in
        { endpoints, customer in
            CXoneBackend(
                configuration: CXoneConfiguration(
                    environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                    brandID: configuration.brandID,
                    channelID: configuration.channelID,
                    customerID: customer
                ),
                channel: channel,
                transport: network?.http ?? HTTPTransport(),
                webSockets: network?.webSockets ?? .network
            )
        }
    }
    switch network {
    case .sockets:
        let server = CXoneServer(configuration: configuration)
        return try await CXoneEmulator(server: server, logger: .quiet).withRunning { endpoints in
            try await body(CXoneEmulatorControl(server: server, endpoints: endpoints, makeBackend: makeBackend(nil)))
        }
    case .inProcess:
        let clock = TestClock()
        let server = CXoneServer(configuration: configuration, clock: SessionClock(clock))
        let (endpoints, network) = CXoneEmulator(server: server, logger: .quiet).inProcess()
        return try await body(CXoneEmulatorControl(server: server, endpoints: endpoints, network: network, virtualClock: clock, makeBackend: makeBackend(network)))
    }
}

extension CXoneEmulatorControl {
    /// The HTTP transport that reaches this emulator.
    var transport: HTTPTransport { network?.http ?? HTTPTransport() }
    /// The WebSocket transport that reaches this emulator.
    var webSockets: WebSocketTransport { network?.webSockets ?? .network }
    /// The environment of this emulator's endpoints.
    var environment: CXoneEnvironment {
        CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL)
    }
}

@Suite(.timeLimit(.minutes(3)))
struct CXoneConformanceTests {
    /// CXone has no event sequences and no edit or delete; a single-thread channel has no
    /// conversation lifecycle (its one thread is always there).
    static func expectedSkips(_ mode: CXoneServer.Mode) -> Set<String> {
        var skips: Set<String> = ["edit and delete", "gap fill after dropped events", "out-of-order events held back"]
        if mode == .single { skips.insert("start and close (or leave) a conversation") }
        // One thread per customer: nothing to order by activity.
        if mode != .multi { skips.insert("conversations follow their last activity") }
        return skips
    }

    @Test(arguments: CXoneServer.Mode.allCases, ConformanceSuite.cases)
    func conformance(_ mode: CXoneServer.Mode, _ conformanceCase: ConformanceCase) async throws {
        try await withCXoneEmulator(CXoneServer.Configuration(mode: mode), network: .sockets) { control in
            try await conformanceCase.run(
                ConformanceContext(emulator: control),
                expectingSkips: Self.expectedSkips(mode),
                label: "cxone \(mode)"
            )
        }
    }
}
