import Logging
import Switchboard
import SwitchboardTestKit
import SwitchboardWebim
import SwitchboardEmulation
import Testing
import WebimEmulator

/// Runs `body` with a fresh emulator on 127.0.0.1 port 0 and a control for it. Long-polls are held
/// for 2 s so that closing a test's sessions never waits long.
func withWebimEmulator<T: Sendable>(
    configuration: WebimServer.Configuration = .init(deltaHold: .seconds(2)),
    sdkVersion: WebimSDKVersion = .v4_0,
    _ body: @Sendable (WebimEmulatorControl) async throws -> T
) async throws -> T {
    let server = WebimServer(configuration: configuration)
    return try await WebimEmulator(server: server, logger: .quiet).withRunning { baseURL in
        let control = WebimEmulatorControl(server: server, baseURL: baseURL) { baseURL, visitorFields in
            // The configuration is valid by construction; a failure here is a test bug.
            try! WebimBackend(configuration: WebimConfiguration(accountName: baseURL, visitorFieldsJSON: visitorFields, sdkVersion: sdkVersion))
        }
        return try await body(control)
    }
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
        try await withWebimEmulator(sdkVersion: version) { control in
            try await conformanceCase.run(ConformanceContext(emulator: control), expectingSkips: Self.expectedSkips, label: "webim")
        }
    }
}
