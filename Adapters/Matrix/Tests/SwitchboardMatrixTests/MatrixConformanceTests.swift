import Switchboard
import SynapseHarness
import SwitchboardEmulation
import SwitchboardTestKit
import Testing

/// The conformance suite against a real Synapse, one homeserver per case.
@Suite(.serialized, Synapse.needed, .timeLimit(.minutes(3)))
struct MatrixConformanceTests {
    /// Matrix has no gap-free per-room sequences: the cases about them are skipped.
    static let expectedSkips: Set<String> = ["gap fill after dropped events", "out-of-order events held back"]

    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        try await Synapse.withUsers(customer: "customer") { server, agent, customer in
            try await FaultProxy.withRunning(upstream: server.baseURL, logger: .quiet) { proxy, url in
                let control = SynapseControl(server: server, proxy: proxy, proxyURL: url, agent: agent, customer: customer)
                try await conformanceCase.run(ConformanceContext(emulator: control, patience: .seconds(45)), expectingSkips: Self.expectedSkips, label: "matrix")
                let figures = proxy.statistics
                let applied = try await control.appliedFaults
                print(
                    "matrix: \(conformanceCase.name): the proxy forwarded \(figures.forwarded) requests; faults that took effect: \(applied) "
                        + "(\(figures.faults) requests met a rule, \(figures.requestsCut) requests cut in flight)"
                )
            }
        }
    }
}
