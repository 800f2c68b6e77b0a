import Logging
import Switchboard
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardEmulation
import Testing
import VoximplantEmulator

/// Runs `body` with a fresh emulator and a control for it: in the same process on a test clock by
/// default, or on 127.0.0.1 port 0.
func withVoximplantEmulator<T: Sendable>(
    configuration: VoximplantServer.Configuration = .init(),
    network: EmulatorNetwork = .inProcess,
    _ body: @Sendable (VoximplantEmulatorControl) async throws -> T
) async throws -> T {
    switch network {
    case .sockets:
        let server = VoximplantServer(configuration: configuration)
        return try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let control = VoximplantEmulatorControl(server: server, url: url) { url, user, token in
                VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token), logger: .quiet)
            }
            return try await body(control)
        }
    case .inProcess:
        let clock = TestClock()
        let server = VoximplantServer(configuration: configuration, clock: SessionClock(clock))
        let (url, network) = VoximplantEmulator(server: server, logger: .quiet).inProcess()
        let control = VoximplantEmulatorControl(server: server, url: url, virtualClock: clock) { url, user, token in
            VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token), logger: .quiet, webSockets: network.webSockets)
        }
        return try await body(control)
    }
}

@Suite(.timeLimit(.minutes(3)))
struct VoximplantConformanceTests {
    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        // The Voximplant-style adapter has every capability the suite asks for: nothing is skipped.
        try await withVoximplantEmulator(network: .sockets) { control in
            try await conformanceCase.run(ConformanceContext(emulator: control), expectingSkips: [], label: "voximplant")
        }
    }
}
