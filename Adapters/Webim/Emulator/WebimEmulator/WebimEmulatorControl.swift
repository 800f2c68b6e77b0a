@_spi(TestKit) public import Switchboard
@_spi(TestKit) public import SwitchboardTestKit
public import SwitchboardEmulation

/// ``EmulatorControl`` for the Webim emulator. The customer is a provided (identified) visitor, so
/// every backend made here is the same visitor; the client backend is injected, so the emulator
/// never depends on the adapter.
public struct WebimEmulatorControl: EmulatorControl {
    public let server: WebimServer
    public let baseURL: String
    /// The `visitor-ext` JSON of the customer.
    public let visitorFields: String
    /// The emulator's id of the customer.
    public let visitorID: String
    public let agent: WebimOperatorRobot
    /// The emulator's routes without a socket, when the backends reach it in the same process;
    /// `nil` on a socket.
    public let network: InProcessNetwork?
    /// The server's clock when it is reached in the same process on virtual time.
    public let virtualClock: TestClock?
    let makeBackend: @Sendable (_ baseURL: String, _ visitorFields: String) -> any ChatBackend

    public init(
        server: WebimServer,
        baseURL: String,
        customerID: String = "customer-1",
        network: InProcessNetwork? = nil,
        virtualClock: TestClock? = nil,
        makeBackend: @escaping @Sendable (_ baseURL: String, _ visitorFields: String) -> any ChatBackend
    ) {
        self.server = server
        self.baseURL = baseURL
        self.visitorFields = #"{"fields":{"id":"\#(customerID)","display_name":"Alice"}}"#
        self.visitorID = "provided-\(customerID)"
        self.agent = server.robot(id: 7, name: "Bob")
        self.network = network
        self.virtualClock = virtualClock
        self.makeBackend = makeBackend
    }

    /// Webim has no sequences: dropped, reordered or delayed deltas are not something a revision
    /// log can show, so those faults are not offered.
    public var supportedFaults: Set<EmulatorFault.Kind> {
        [.disconnect, .duplicateEvents, .failRequest, .rejectLogin, .malformedFrame, .rawFrame, .fatal]
    }

    public func makeCustomerBackend() async throws -> any ChatBackend {
        makeBackend(baseURL, visitorFields)
    }

    /// The visitor's fields as configured (sent as `visitor-ext`).
    public var customerSecrets: [String] { [visitorFields] }

    /// The visitor starts the chat; the robot operator takes it.
    public func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        let chat = try await session.startConversation(ConversationDraft())
        try agent.join(visitor: visitorID)
        return chat.id
    }

    public func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        for index in 1...max(1, count) { try agent.send("history \(index)", to: visitorID) }
    }

    public func agentSend(_ text: String, in conversation: ConversationID) async throws {
        try agent.send(text, to: visitorID)
    }

    public func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        try agent.typing(isTyping, visitor: visitorID)
    }

    public func agentMarkRead(in conversation: ConversationID) async throws {
        try agent.markRead(visitor: visitorID)
    }

    public func agentEnd(_ conversation: ConversationID) async throws {
        try agent.close(visitor: visitorID)
    }

    public func inject(_ fault: EmulatorFault) async throws {
        switch fault {
        case .disconnect:
            server.inject(.dropConnection, on: .delta)
        case .duplicateNext(let count):
            server.duplicateNextMessages(count)
        case .failNextRequest(let error, let name):
            let action = name.map(Self.actionName)
            switch error.code {
            case .messageRejected, .permissionDenied: server.inject(.error("not_allowed"), on: .action, action: action)
            case .connectionLost: server.inject(.dropConnection, on: .action, action: action)
            case .serverError, .timedOut: server.inject(.status(503), on: .action, action: action)
            default: server.inject(.error("wrong-argument-value"), on: .action, action: action)
            }
        case .rejectNextLogin(let error):
            server.inject(error.code == .authenticationFailed ? .error("provided-auth-token-not-found") : .status(502), on: .initialize)
        case .malformedFrame:
            server.inject(.malformed, on: .delta)
        case .rawFrame(let text):
            server.inject(.body(text), on: .delta)
        case .fatal:
            server.inject(.error("account-blocked"), on: .delta)
        case .dropNext, .reorderNext, .delayNext, .releaseDelayed:
            throw SwitchboardError(.unsupported, "the Webim emulator has no \(fault.kind) fault")
        }
    }

    /// The faults requests met, by what ``inject(_:)`` made of each: a dropped delta long-poll is a
    /// disconnect, a broken or raw delta answer a malformed or raw frame, `account-blocked` on the
    /// delta a fatal end, any action fault a failed request, an init fault a refused login; and
    /// the message deltas a client got twice.
    public var appliedFaults: AppliedFaults { server.appliedFaults(polling: .delta) }

    /// Webim `delta` answers, broken (the shapes of `protocols/webim.md`), at the visitor's
    /// current revision so the next poll goes on from it.
    public func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        let revision = JSONValue.int(Int64(server.revision(ofVisitor: visitorID)))
        let message: JSONValue = [
            "objectType": "CHAT_MESSAGE", "event": "add", "id": "bad-1",
            "data": ["id": "bad-1", "clientSideId": "bad-1", "kind": "operator", "text": "bad 1", "ts": 1_700_000_000.5, "authorId": 1, "name": "Operator"],
        ]
        func answer(_ item: JSONValue) -> JSONValue { ["revision": revision, "deltaList": [item]] }
        return [
            VendorBadInput("a delta list that is not a list", ["revision": revision, "deltaList": "CHAT_MESSAGE"], .reported),
            VendorBadInput("a revision that is an object", ["revision": ["at": 1], "deltaList": []], .reported),
            VendorBadInput("a revision out of range", ["revision": .double(1e300), "deltaList": []], .reported),
            VendorBadInput("a message delta whose data is a string", answer(message.setting("data", to: "bad 1")), .reported),
            VendorBadInput("a message delta without its text or kind", answer(message.setting("data", "text", to: nil).setting("data", "kind", to: nil)), .reported),
            VendorBadInput("a message whose time is text", answer(message.setting("data", "ts", to: "yesterday")), .reported),
            VendorBadInput("a delta of an unknown object type", answer(message.setting("objectType", to: "TELEPORT")), .surfaced),
            .oversized(
                "a delta answer over the 16 MB receive limit", prefix: #"{"revision":\#(revision.jsonString),"deltaList":[],"padding":""#, suffix: #""}"#,
                size: (16 << 20) + 1024
            ),
        ]
    }

    public func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        server.messages(ofVisitor: visitorID).map {
            ServerMessage(
                serverID: MessageID($0.id),
                clientID: ClientMessageID($0.clientSideId),
                text: $0.text,
                fromCustomer: $0.kind == "visitor" || $0.kind == "file_visitor",
                sequence: nil
            )
        }
    }

    public func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        try await waitForActivity(in: conversation, timeout: timeout, signal: server.changes, read: {
            CustomerActivity(
                typing: server.typingLog.filter { $0.visitor == visitorID }.map(\.typing),
                readMarkers: server.readLog.filter { $0.visitor == visitorID }.count
            )
        }, until: condition)
    }

    static func actionName(_ request: String) -> String {
        switch request {
        case "send", "edit": return "chat.message"
        case "delete": return "chat.delete_message"
        case "typing": return "chat.visitor_typing"
        case "markRead": return "chat.read_by_visitor"
        case "rateAgent": return "chat.operator_rate_select"
        case "startConversation": return "chat.start"
        case "closeConversation": return "chat.close"
        default: return request
        }
    }
}
