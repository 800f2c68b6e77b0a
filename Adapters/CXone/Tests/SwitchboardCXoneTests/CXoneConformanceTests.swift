import Logging
import Switchboard
import SwitchboardCXone
import SwitchboardTestKit
import SwitchboardEmulation
import Testing
import CXoneEmulator

/// Runs `body` with a fresh CXone emulator in `mode` on 127.0.0.1 port 0.
func withCXoneEmulator<T: Sendable>(
    _ configuration: CXoneServer.Configuration,
    _ body: @Sendable (CXoneEmulatorControl) async throws -> T
) async throws -> T {
    let server = CXoneServer(configuration: configuration)
    return try await CXoneEmulator(server: server, logger: .quiet).withRunning { endpoints in
        let channel = try CXoneChannelConfiguration(json: server.channelConfiguration)
        let control = CXoneEmulatorControl(server: server, endpoints: endpoints) { endpoints, customer in
            CXoneBackend(
                configuration: CXoneConfiguration(
                    environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                    brandID: configuration.brandID,
                    channelID: configuration.channelID,
                    customerID: customer
                ),
                channel: channel
            )
        }
        return try await body(control)
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
        try await withCXoneEmulator(CXoneServer.Configuration(mode: mode)) { control in
            try await conformanceCase.run(
                ConformanceContext(emulator: control),
                expectingSkips: Self.expectedSkips(mode),
                label: "cxone \(mode)"
            )
        }
    }
}
