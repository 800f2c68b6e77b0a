import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardWebim
import Testing
import WebimEmulator

/// The conformance suite on Webim's offline appeals, as far as their capabilities go.
@Suite(.timeLimit(.minutes(3)))
struct WebimAppealsConformanceTests {
    /// An appeal has no typing, no history paging (a poll brings every message), no edits, no
    /// sequences; a user token is not refused the way a login is.
    static let expectedSkips: Set<String> = [
        "typing from the agent", "typing ends when the agent ends the chat", "typing to the agent", "history paging", "gap fill after dropped events",
        "out-of-order events held back", "edit and delete", "failed logins are retried once credentials allow",
    ]

    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        let server = WebimServer(configuration: .init(deltaHold: .seconds(2)))
        try await WebimEmulator(server: server, logger: .quiet).withRunning { baseURL in
            let control = WebimAppealsEmulatorControl(server: server, baseURL: baseURL) { baseURL, token in
                // The configuration is valid by construction; a failure here is a test bug.
                try! WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: baseURL, userToken: token))
            }
            try await conformanceCase.run(ConformanceContext(emulator: control), expectingSkips: Self.expectedSkips, label: "webim-appeals")
        }
    }
}
