import Foundation
import Switchboard
import SwitchboardTestKit
import SwitchboardXMPP

/// `EmulatorControl` over a real Prosody: the customer is `customer@localhost`, each conversation
/// a 1:1 chat with another agent account (`agent1`, `agent2`, … in turn), and the server's truth
/// the customer's own archive (XEP-0313), whose ids the adapter uses as server ids.
///
/// Every action is a short connection of its own through ``XMPPTestClient``: the agent's, or the
/// customer's under the resources `control` and `truth`, which send no presence, so the server
/// routes nothing to them and they flush nothing kept offline.
///
/// Faults: a disconnect is the server closing the customer's sessions from its admin shell; the
/// others come from the relay the customer's socket goes through (``XMPPFaults``).
struct ProsodyControl: EmulatorControl {
    let server: ProsodyServer
    private let state = ControlState()
    let faults = XMPPFaults()

    init(server: ProsodyServer) {
        self.server = server
    }

    var customer: String { server.jid("customer") }

    /// The accounts that play agents: every registered one but the customer's.
    var agents: [String] { server.accounts.filter { $0 != "customer" } }

    var supportedFaults: Set<EmulatorFault.Kind> { [.disconnect, .failRequest, .rejectLogin, .malformedFrame, .rawFrame, .fatal, .duplicateEvents] }

    var customerSecrets: [String] { [server.password(of: "customer")] }

    func makeCustomerBackend() async throws -> any ChatBackend {
        try XMPPBackend(
            configuration: XMPPConfiguration(
                jid: customer, password: server.password(of: "customer"), url: server.url, requestTimeout: .seconds(10), allowsPlainText: true,
                // The relay hands the client frames the server never sent (forged, repeated): a
                // stream count would take them for the server's, and Prosody ends a stream whose
                // client says it handled more than was sent. Resumption has tests of its own.
                resumesStreams: false
            ),
            webSockets: faults.transport
        )
    }

    /// The next agent becomes a contact of the customer's: the roster push reaches the session
    /// (which asked for the roster), and the adapter announces the conversation.
    func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        let name = try state.nextAgent(of: agents)
        let agent = server.jid(name)
        let label = name.replacingOccurrences(of: "agent", with: "Agent ")
        try await XMPPTestClient.withClient(server, user: "customer", resource: "control") { control in
            try await control.addToRoster(agent, name: label)
        }
        return ConversationID(agent)
    }

    func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        let customer = self.customer
        try await server.asUser(agentName(conversation)) { agent in
            for index in 0..<count { try await agent.send("history \(index)", to: customer) }
        }
    }

    func agentSend(_ text: String, in conversation: ConversationID) async throws {
        let customer = self.customer
        try await server.asUser(agentName(conversation)) { agent in
            try await agent.send(text, to: customer)
        }
    }

    func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        let customer = self.customer
        try await server.asUser(agentName(conversation)) { agent in
            try await agent.chatState(isTyping ? "composing" : "paused", to: customer)
        }
    }

    /// A 1:1 chat does not close: the agent leaves it (chat state `gone`, XEP-0085).
    func agentEnd(_ conversation: ConversationID) async throws {
        let customer = self.customer
        try await server.asUser(agentName(conversation)) { agent in
            try await agent.chatState("gone", to: customer)
        }
    }

    /// The agent marks the customer's newest message displayed (XEP-0333), naming it by the
    /// customer's own id for it, as the agent's client got it.
    func agentMarkRead(in conversation: ConversationID) async throws {
        let customer = self.customer
        let newest = try await server.archive(of: "customer", with: conversation.rawValue).last { $0.isMessage && $0.from == customer }
        guard let id = newest?.originID else { return }
        try await server.asUser(agentName(conversation)) { agent in
            try await agent.displayed(id, to: customer)
        }
    }

    func inject(_ fault: EmulatorFault) async throws {
        switch fault {
        case .disconnect:
            let cut = try await server.cutClientSessions(of: customer)
            state.countCuts(cut)
        case .failNextRequest(let error, let name):
            faults.failNext(name, with: error)
        case .rejectNextLogin(let error):
            faults.rejectNextLogin(error)
        case .malformedFrame:
            faults.inject("<message xmlns='jabber:client' type='chat'><body>cut off", as: .malformedFrame)
        case .rawFrame(let text):
            faults.inject(text, as: .rawFrame)
        case .duplicateNext(let count):
            faults.duplicateNext(count)
        case .fatal:
            faults.disable()
        case .dropNext, .reorderNext, .delayNext, .releaseDelayed:
            throw SwitchboardError(.unsupported, "XMPP has no sequences to \(fault.kind.rawValue)")
        }
    }

    /// Disconnects: the customer's sessions the server closed; the rest: what the relay counted.
    var appliedFaults: AppliedFaults {
        var counts = faults.applied
        counts[.disconnect] = state.cuts
        return AppliedFaults(counts)
    }

    /// The chat as the customer's archive has it, oldest first: messages with a body, neither
    /// corrections nor retractions, and none retracted. The customer's own carry their origin id,
    /// which is the adapter's client id.
    func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        let archive = try await server.archive(of: "customer", with: conversation.rawValue)
        let retracted = Set(archive.compactMap(\.retracts))
        return archive.filter { $0.isMessage && !retracted.contains($0.originID ?? "") }.map { message in
            let fromCustomer = message.from == customer
            return ServerMessage(
                serverID: MessageID(message.archiveID),
                clientID: fromCustomer ? message.originID.map { ClientMessageID($0) } : nil,
                text: message.body ?? "",
                fromCustomer: fromCustomer,
                sequence: nil
            )
        }
    }

    /// What the agent's client sees the customer do: chat states and displayed markers, read on
    /// a connection of the agent's with presence. What the customer sent while no agent client
    /// was available the server kept offline, and sends first.
    func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        let customer = self.customer
        return try await XMPPTestClient.withClient(server, user: agentName(conversation), resource: "watch", presence: true) { agent in
            let stanzas = try await agent.waitUntil("the customer's activity in \(conversation)", timeout: timeout) { stanzas in
                condition(Self.activity(in: stanzas, of: customer))
            }
            return Self.activity(in: stanzas, of: customer)
        }
    }

    /// Stanzas in XMPP's own shapes, broken or forged, as the relay hands them to the customer.
    func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        let agent = "\(conversation.rawValue)/desk"
        let customer = self.customer
        return [
            VendorBadInput("an element XMPP does not have", "<html xmlns='http://www.w3.org/1999/xhtml'><body>502 Bad Gateway</body></html>", .reported),
            VendorBadInput("an entity XMPP does not allow", "<message xmlns='jabber:client' type='chat' from='\(agent)'><body>&nbsp;</body></message>", .reported),
            VendorBadInput("a DOCTYPE with an entity", "<!DOCTYPE message [<!ENTITY a 'aaaa'>]><message xmlns='jabber:client'><body>&a;</body></message>", .reported),
            VendorBadInput("an undeclared prefix", "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>", .reported),
            VendorBadInput("nesting 10,000 deep", String(repeating: "<x xmlns='y'>", count: 10_000) + String(repeating: "</x>", count: 10_000), .reported),
            VendorBadInput(
                "an archive result nobody asked for",
                "<message xmlns='jabber:client' to='\(customer)'><result xmlns='urn:xmpp:mam:2' queryid='nobody' id='forged-1'><forwarded xmlns='urn:xmpp:forward:0'>"
                    + "<message xmlns='jabber:client' type='chat' from='\(agent)' to='\(customer)'><body>forged</body></message></forwarded></result></message>",
                .reported
            ),
            VendorBadInput(
                "a correction of a message nobody sent",
                "<message xmlns='jabber:client' type='chat' from='\(agent)' to='\(customer)'><body>x</body><replace xmlns='urn:xmpp:message-correct:0' id='unknown'/></message>",
                .reported
            ),
            VendorBadInput("an iq answer from someone else", "<iq xmlns='jabber:client' type='result' id='mam-1' from='\(agent)'/>", .reported),
            VendorBadInput("a message without a body", "<message xmlns='jabber:client' type='chat' from='\(agent)' to='\(customer)'/>", .tolerated),
            VendorBadInput(
                "a roster push from someone else",
                "<iq xmlns='jabber:client' type='set' id='push-1' from='\(agent)'><query xmlns='jabber:iq:roster'><item jid='intruder@localhost'/></query></iq>",
                .tolerated
            ),
            VendorBadInput(
                "a carbon from someone else",
                "<message xmlns='jabber:client' from='\(agent)' to='\(customer)'><sent xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'>"
                    + "<message xmlns='jabber:client' type='chat' from='\(customer)/phone' to='\(conversation.rawValue)'><body>spoofed</body></message></forwarded></sent></message>",
                .tolerated
            ),
        ]
    }

    /// Typing from the chat states (composing is typing; paused, active, inactive and gone are
    /// not), read markers from the displayed markers, of the customer's messages in `stanzas`.
    static func activity(in stanzas: [XMPPTestClient.Element], of customer: String) -> CustomerActivity {
        var activity = CustomerActivity(typing: [], readMarkers: 0)
        for stanza in stanzas where stanza.name == "message" && stanza["type"] != "error" && XMPPTestClient.bare(stanza["from"] ?? "") == customer {
            for child in stanza.children {
                if child.namespace == XMPPTestClient.Namespace.chatStates {
                    activity.typing.append(child.name == "composing")
                } else if child.namespace == XMPPTestClient.Namespace.markers, child.name == "displayed" {
                    activity.readMarkers += 1
                }
            }
        }
        return activity
    }

    /// The conversation's agent account: the local part of its JID.
    private func agentName(_ conversation: ConversationID) -> String {
        String(conversation.rawValue.prefix { $0 != "@" })
    }
}

/// What the control counts across calls: agents handed out and sessions cut. The lock guards
/// both.
private final class ControlState: Sendable {
    private struct Counts {
        var agentsTaken = 0
        var cuts = 0
    }

    private let counts = Locked(Counts())

    /// The next agent account; throws once every one has a conversation.
    func nextAgent(of agents: [String]) throws -> String {
        let index = counts.withLock { counts in
            defer { counts.agentsTaken += 1 }
            return counts.agentsTaken
        }
        guard index < agents.count else {
            throw SwitchboardError(.invalidState, "every agent (\(agents)) has a conversation already: register more with withServer(accounts:)")
        }
        return agents[index]
    }

    func countCuts(_ sessions: Int) {
        counts.withLock { $0.cuts += sessions }
    }

    var cuts: Int { counts.withLock { $0.cuts } }
}
