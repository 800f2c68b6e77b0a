import Foundation
import Switchboard
import SynapseHarness
import SwitchboardEmulation
import SwitchboardMatrix
import SwitchboardTestKit

/// `EmulatorControl` over a real Synapse: the "agent" is a second Matrix user driven through the
/// client-server API; the server's truth is what `/messages` returns to it. The customer's
/// backend talks to Synapse through a `FaultProxy`, which injects the faults.
struct SynapseControl: EmulatorControl {
    let server: SynapseServer
    let proxy: FaultProxy
    /// The proxy's URL: where the customer's backend connects.
    let proxyURL: String
    let agent: MatrixTestUser
    let customer: MatrixTestUser

    /// Matrix has no per-room event sequences to drop or reorder; a repeated `/sync` answer is
    /// its duplicate delivery.
    var supportedFaults: Set<EmulatorFault.Kind> {
        [.disconnect, .duplicateEvents, .failRequest, .rejectLogin, .malformedFrame, .rawFrame, .fatal]
    }

    var customerSecrets: [String] { [customer.password, customer.token] }

    func makeCustomerBackend() async throws -> any ChatBackend {
        try MatrixBackend(
            configuration: MatrixConfiguration(
                homeserver: proxyURL, login: .password(user: customer.localPart, password: customer.password),
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

    func agentEnd(_ conversation: ConversationID) async throws {
        try await agent.leave(conversation)
    }

    func agentMarkRead(in conversation: ConversationID) async throws {
        guard let newest = try await agent.messages(in: conversation).last?["event_id"]?.stringValue else { return }
        try await agent.markRead(MessageID(newest), in: conversation)
    }

    func inject(_ fault: EmulatorFault) async throws {
        // Each rule is labelled with its fault's kind, so the proxy counts the requests it
        // applied to: `appliedFaults`.
        let label = fault.kind.rawValue
        switch fault {
        case .disconnect:
            // The link is cut once: the requests in flight, or with none (between two syncs, as
            // it mostly is here) the next sync. Closing the idle kept-alive connections as well
            // broke the link in 3 of 4 runs only, when the client reused one before it saw it
            // closed, and then the next sync was cut too.
            if proxy.cutRequestsInFlight(label: label) == 0 {
                proxy.inject(.cut, label: label, where: { Self.isSync($0) })
            }
        case .failNextRequest(let error, let name):
            let action = Self.action(for: error, login: false)
            if let name {
                let fragment = Self.pathFragments[name] ?? "/\(name)"
                proxy.inject(action, label: label, where: { $0.path.contains(fragment) })
            } else {
                proxy.inject(action, label: label)
            }
        case .rejectNextLogin(let error):
            proxy.inject(Self.action(for: error, login: true), label: label, where: { $0.path.hasSuffix("/login") || $0.path.hasSuffix("/account/whoami") })
        case .malformedFrame:
            proxy.inject(.replaceAnswer(#"{"next_batch": "#), label: label, where: { Self.isSync($0) })
        case .rawFrame(let text):
            // `{{since}}` in a frame stands for the request's own cursor, so an answer the client
            // accepts leaves it where it was and nothing is skipped.
            proxy.inject(.rewriteAnswer({ request, _ in Data(text.replacingOccurrences(of: "{{since}}", with: Self.since(of: request)).utf8) }), label: label, where: { Self.isSync($0) })
        case .duplicateNext(let count):
            proxy.inject(.repeatAnswer, count: count, label: label, answerMatches: { String(decoding: $0, as: UTF8.self).contains("m.room.message") }, where: { Self.isSync($0) })
        case .fatal:
            // A deactivated account: every request from now on is refused, as Synapse refuses
            // them. One refusal was not enough: a sync that took it just before the cut below
            // lost its answer with the connection, and the next link went through.
            proxy.inject(.answer(status: 403, body: #"{"errcode":"M_USER_DEACTIVATED","error":"This account has been deactivated"}"#), count: .max, label: label)
            proxy.disconnectAll()
        case .dropNext, .reorderNext, .delayNext, .releaseDelayed:
            throw SwitchboardError(.unsupported, "Matrix has no per-room sequences to \(fault.kind)")
        }
    }

    /// What the proxy counted under each fault's label: requests a rule applied to (a request cut
    /// or refused, an answer broken or repeated) and requests in flight a disconnect cut.
    var appliedFaults: AppliedFaults {
        AppliedFaults(Dictionary(uniqueKeysWithValues: proxy.statistics.applied.compactMap { label, count in
            EmulatorFault.Kind(rawValue: label).map { ($0, count) }
        }))
    }

    /// Where each request the suite names goes.
    static let pathFragments = ["send": "/send/m.room.message/", "typing": "/typing/", "markRead": "/receipt/", "history": "/messages"]

    static func isSync(_ request: FaultProxy.Request) -> Bool { request.path.hasSuffix("/sync") }

    static func since(of request: FaultProxy.Request) -> String {
        URLComponents(string: request.uri)?.queryItems?.first { $0.name == "since" }?.value ?? ""
    }

    /// A failure as Synapse would answer it; a lost connection is the request cut.
    static func action(for error: SwitchboardError, login: Bool) -> FaultProxy.Action {
        switch error.code {
        case .connectionLost, .timedOut, .notConnected:
            return .cut
        case .authenticationFailed:
            return login ? .answer(status: 403, body: #"{"errcode":"M_FORBIDDEN","error":"Invalid username or password"}"#)
                : .answer(status: 401, body: #"{"errcode":"M_UNKNOWN_TOKEN","error":"Invalid access token passed."}"#)
        case .rateLimited:
            return .answer(status: 429, body: #"{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":50}"#)
        case .permissionDenied:
            return .answer(status: 403, body: #"{"errcode":"M_FORBIDDEN","error":"injected"}"#)
        case .serverError:
            return .answer(status: 500, body: #"{"errcode":"M_UNKNOWN","error":"Internal server error"}"#)
        default:
            return .answer(status: 400, body: #"{"errcode":"M_UNKNOWN","error":"injected"}"#)
        }
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

    /// `/sync` answers broken in Matrix's own shapes; each keeps the client's cursor
    /// (`{{since}}`), so the message after it comes with the next sync.
    func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        let room = conversation.rawValue
        func sync(_ roomBody: JSONValue) -> JSONValue { ["next_batch": "{{since}}", "rooms": ["join": .object([room: roomBody])]] }
        func timeline(_ events: JSONValue) -> JSONValue { sync(["timeline": ["events": events, "limited": false]]) }
        return [
            VendorBadInput("next_batch is a number", ["next_batch": 42, "rooms": [:]], .reported),
            VendorBadInput("no next_batch", ["rooms": ["join": [:]]], .reported),
            VendorBadInput("a joined room that is a string", sync("not a room"), .tolerated),
            VendorBadInput("a message without an event id", timeline([["type": "m.room.message", "sender": .string(agent.userID), "content": ["msgtype": "m.text", "body": "x"]]]), .surfaced),
            VendorBadInput("an event type nobody knows", timeline([["type": "org.example.unknown", "event_id": "$unknown", "sender": .string(agent.userID), "content": [:]]]), .surfaced),
            VendorBadInput("an event that is not an object", timeline([42, "text", .null]), .surfaced),
            VendorBadInput("typing user ids that are not a list", sync(["ephemeral": ["events": [["type": "m.typing", "content": ["user_ids": "x"]]]]]), .tolerated),
            VendorBadInput("a receipt of the wrong shape", sync(["ephemeral": ["events": [["type": "m.receipt", "content": [1, 2]]]]]), .tolerated),
            VendorBadInput("state events that are not a list", sync(["state": ["events": "x"]]), .tolerated),
            .oversized("an answer over 16 MB", prefix: #"{"next_batch":"{{since}}","padding":""#, suffix: #""}"#, size: 17 << 20),
        ]
    }
}
