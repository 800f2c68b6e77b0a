import Switchboard
import SwitchboardTestKit
import Testing

/// The conformance suite against a real Prosody, one server per case.
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPConformanceTests {
    /// What the adapter cannot show, and why. It offers typing, read markers, history, edit,
    /// delete, rooms (start and leave) and files, syncs `.windowed(pageSize: 50)`; the control injects every fault but those about
    /// sequences (a disconnect from the server's admin shell, the rest from ``XMPPFaults``).
    static let expectedSkips: Set<String> = [
        // No sequences, for good: archive ids are random and a chat has no gap-free counter
        // (as for Matrix).
        "gap fill after dropped events",
        "out-of-order events held back",
    ]

    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        try await Prosody.withServer { server in
            let control = ProsodyControl(server: server)
            try await conformanceCase.run(
                ConformanceContext(emulator: control, patience: .seconds(30)), expectingSkips: Self.expectedSkips, label: "xmpp"
            )
            let applied = control.appliedFaults
            print("xmpp: \(conformanceCase.name): faults that took effect: \(applied)")
        }
    }
}
