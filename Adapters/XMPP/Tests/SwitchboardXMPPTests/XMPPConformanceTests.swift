import Switchboard
import SwitchboardTestKit
import Testing

/// The conformance suite against a real Prosody, one server per case.
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPConformanceTests {
    /// What the adapter cannot show yet, and why. It offers typing, read markers, history, edit
    /// and delete, syncs `.windowed(pageSize: 50)`, and the control injects only `.disconnect`.
    static let expectedSkips: Set<String> = [
        // Rooms (XEP-0045) are not offered yet.
        "start and close (or leave) a conversation",
        // No sequences, for good: archive ids are random and a chat has no gap-free counter
        // (as for Matrix).
        "gap fill after dropped events",
        "out-of-order events held back",
        // Faults the control cannot inject yet: failing a request, refusing a login, duplicating
        // events and sending the customer frames of its own need a socket between the adapter
        // and Prosody; the admin shell only cuts sessions.
        "marking read clears the unread count, also after a failed send",
        "duplicates dropped",
        "outbox across a disconnect",
        "a rejected send becomes failed",
        "malformed inbound data does not kill the session",
        "a fatal error ends the session",
        "failed logins are retried once credentials allow",
        "nothing secret in the logs at trace level",
        "bad input is reported, never a crash or a loss",
        "the vendor's own shapes, broken, are reported and lose nothing",
    ]

    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        try await Prosody.withServer { server in
            let control = ProsodyControl(server: server)
            try await conformanceCase.run(
                ConformanceContext(emulator: control, patience: .seconds(30)), expectingSkips: Self.expectedSkips, label: "xmpp"
            )
            let applied = try await control.appliedFaults
            print("xmpp: \(conformanceCase.name): faults that took effect: \(applied)")
        }
    }
}
