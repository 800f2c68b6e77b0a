import Foundation
import Switchboard
import SwitchboardMatrix
import SwitchboardTestKit

/// `EmulatorControl` over a real Synapse: the "agent" is a second Matrix user driven through the
/// client-server API; the server's truth is what `/messages` returns to it. Faults need a proxy
/// between client and server, which this control does not put there yet: it supports none, and
/// the cases that need one are skipped (each listed in `MatrixConformanceTests`).
struct SynapseControl: EmulatorControl {
    let server: SynapseServer
    let agent: MatrixTestUser
    let customer: MatrixTestUser

    var supportedFaults: Set<EmulatorFault.Kind> { [] }

    var customerSecrets: [String] { [customer.password, customer.token] }

    func makeCustomerBackend() async throws -> any ChatBackend {
        try MatrixBackend(
            configuration: MatrixConfiguration(
                homeserver: server.baseURL, login: .password(user: customer.localPart, password: customer.password),
                syncTimeout: .seconds(5), requestTimeout: .seconds(10), allowsPlainText: true
            )
        )
    }

    /// A public room of the agent's that the customer joins (no invitation, so the session sees
    /// it once, joined).
    func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        let answer = try await agent.call("POST", "/_matrix/client/v3/createRoom", body: ["name": "Support", "preset": "public_chat"])
        let room = ConversationID(answer["room_id"]?.stringValue ?? "")
        try await customer.join(room)
        return room
    }

    func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        for index in 0..<count { try await agent.send("history \(index)", in: conversation) }
    }

    func agentSend(_ text: String, in conversation: ConversationID) async throws {
        try await agent.send(text, in: conversation)
    }

    func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        try await agent.typing(isTyping, in: conversation)
    }

    func agentMarkRead(in conversation: ConversationID) async throws {
        guard let newest = try await agent.messages(in: conversation).last?["event_id"]?.stringValue else { return }
        try await agent.markRead(MessageID(newest), in: conversation)
    }

    func inject(_ fault: EmulatorFault) async throws {
        throw SwitchboardError(.unsupported, "no fault proxy between the client and Synapse yet: \(fault.kind)")
    }

    /// The room's messages as the agent reads them, oldest first; edits are not messages.
    func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        try await agent.messages(in: conversation).compactMap { event in
            guard event["content"]?["m.relates_to"]?["rel_type"]?.stringValue != "m.replace",
                event["unsigned"]?["redacted_because"] == nil,
                let id = event["event_id"]?.stringValue, let text = event["content"]?["body"]?.stringValue
            else { return nil }
            return ServerMessage(serverID: MessageID(id), clientID: nil, text: text, fromCustomer: event["sender"]?.stringValue == customer.userID, sequence: nil)
        }
    }

    /// What the agent sees the customer do in the room: typing notices and read receipts, read
    /// from the agent's own syncs.
    func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        var activity = CustomerActivity(typing: [], readMarkers: 0)
        try await agent.waitForSync("the customer's activity in \(conversation)", timeout: timeout) { sync in
            for event in sync["rooms"]?["join"]?[conversation.rawValue]?["ephemeral"]?["events"]?.arrayValue ?? [] {
                switch event["type"]?.stringValue {
                case "m.typing":
                    activity.typing.append((event["content"]?["user_ids"]?.arrayValue ?? []).contains(.string(customer.userID)))
                case "m.receipt":
                    for receipts in (event["content"]?.objectValue ?? [:]).values where receipts["m.read"]?[customer.userID] != nil {
                        activity.readMarkers += 1
                    }
                default:
                    break
                }
            }
            return condition(activity)
        }
        return activity
    }

    func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] { [] }
}
