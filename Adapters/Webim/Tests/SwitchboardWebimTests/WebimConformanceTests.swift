import Logging
import Switchboard
import SwitchboardTestKit
import SwitchboardWebim
import SwitchboardEmulation
import SwitchboardTransport
import Testing
import WebimEmulator

/// Runs `body` with a fresh emulator on 127.0.0.1 port 0 and a control for it. Long-polls are held
/// for 2 s so that closing a test's sessions never waits long.
func withWebimEmulator<T: Sendable>(
    configuration: WebimServer.Configuration = .init(deltaHold: .seconds(2)),
    sdkVersion: WebimSDKVersion = .v4_0,
    network: EmulatorNetwork = .inProcess,
    _ body: @Sendable (WebimEmulatorControl) async throws -> T
) async throws -> T {
    let makeBackend: @Sendable (HTTPTransport) -> @Sendable (String, String) -> any ChatBackend = { transport in
        { baseURL, visitorFields in
            // The configuration is valid by construction; a failure here is a test bug.
            try! WebimBackend(configuration: WebimConfiguration(accountName: baseURL, visitorFieldsJSON: visitorFields, sdkVersion: sdkVersion), transport: transport)
        }
    }
    switch network {
    case .sockets:
        let server = WebimServer(configuration: configuration)
        return try await WebimEmulator(server: server, logger: .quiet).withRunning { baseURL in
            try await body(WebimEmulatorControl(server: server, baseURL: baseURL, makeBackend: makeBackend(HTTPTransport())))
        }
    case .inProcess:
        let clock = TestClock()
        let server = WebimServer(configuration: configuration, clock: SessionClock(clock))
        let (baseURL, network) = WebimEmulator(server: server, logger: .quiet).inProcess()
        return try await body(WebimEmulatorControl(server: server, baseURL: baseURL, network: network, virtualClock: clock, makeBackend: makeBackend(network.http)))
    }
}

extension WebimEmulatorControl {
    /// The HTTP transport that reaches this emulator.
    var transport: HTTPTransport { network?.http ?? HTTPTransport() }
}

@Suite(.timeLimit(.minutes(3)))
struct WebimConformanceTests {
    /// Webim has no per-conversation event sequences: the cases about them are skipped; a visitor
    /// has one conversation, so there is nothing to order by activity.
    static let expectedSkips: Set<String> = ["gap fill after dropped events", "out-of-order events held back", "conversations follow their last activity"]

    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        // 4.0 has no `chat.close`: the one case that closes a chat speaks 3.43, whose visitor may
        // (WebimScenarioTests checks that 4.0 refuses it before sending).
        let version: WebimSDKVersion = conformanceCase.name.hasPrefix("start and close") ? .v3_43 : .v4_0
        try await withWebimEmulator(sdkVersion: version, network: .sockets) { control in
            try await conformanceCase.run(ConformanceContext(emulator: control), expectingSkips: Self.expectedSkips, label: "webim")
        }
    }
}
