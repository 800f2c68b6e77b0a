import Switchboard
import Testing

/// The harness on its own, without the adapter: a server starts, two test clients log in, a
/// message reaches the other side live and in its archive, and a cut from the admin shell ends
/// the stream as the `.disconnect` fault says.
@Suite(Prosody.needed, .timeLimit(.minutes(1)))
struct ProsodySmokeTests {
    @Test func anAgentsMessageReachesTheCustomerAndTheArchive() async throws {
        try await Prosody.withServer { server in
            let agent = server.jid("agent1")
            try await XMPPTestClient.withClient(server, user: "customer", resource: "phone", presence: true) { customer in
                #expect(customer.jid == "customer@localhost/phone")
                let text = "hello & <welcome>, it's \"me\""
                let id = try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk") { desk in
                    let id = try await desk.send(text, to: customer.bareJID)
                    try await desk.sync()
                    return id
                }

                let live = try await customer.waitForStanza("the agent's message") { $0.name == "message" && $0["id"] == id }
                #expect(live.child("body", XMPPTestClient.Namespace.client)?.text == text)
                #expect(XMPPTestClient.bare(live["from"] ?? "") == agent)

                let archive = try await customer.archive(with: agent)
                #expect(archive.count == 1)
                let archived = try #require(archive.first)
                #expect(archived.isMessage && archived.body == text)
                #expect(archived.from == agent && archived.to == "customer@localhost")
                #expect(archived.originID == id)
                #expect(!archived.archiveID.isEmpty && !archived.stamp.isEmpty)

                let cut = try await server.cutClientSessions(of: customer.bareJID)
                #expect(cut == 1)
                let end = try await customer.waitForStreamEnd(timeout: .seconds(10))
                #expect(end.vendorCode == "system-shutdown")
            }
        }
    }
}
