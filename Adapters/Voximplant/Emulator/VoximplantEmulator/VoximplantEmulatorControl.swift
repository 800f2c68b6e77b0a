@_spi(TestKit) public import Switchboard
@_spi(TestKit) public import SwitchboardTestKit

/// ``EmulatorControl`` for the Voximplant-style emulator, as the conformance suite drives it.
/// The client backend is injected, so the emulator never depends on the adapter.
public struct VoximplantEmulatorControl: EmulatorControl {
    public let server: VoximplantServer
    public let url: String
    public let customer: String
    public let customerToken: String
    public let agent: VoximplantRobot
    /// The server's clock when it is reached in the same process on virtual time.
    public let virtualClock: TestClock?
    let makeBackend: @Sendable (_ url: String, _ user: String, _ token: String) -> any ChatBackend

    /// Adds a customer and an agent to `server`; several controls of one server (a load run) name
    /// their customers apart with `customerName`. `virtualClock` is the server's clock when the
    /// backends `makeBackend` makes reach it in the same process (`InProcessNetwork`).
    public init(
        server: VoximplantServer,
        url: String,
        customerName: String = "alice",
        virtualClock: TestClock? = nil,
        makeBackend: @escaping @Sendable (_ url: String, _ user: String, _ token: String) -> any ChatBackend
    ) {
        self.server = server
        self.url = url
        self.customerToken = "\(customerName)-token"
        self.customer = server.addUser(customerName, token: customerToken, displayName: "Alice")
        self.agent = server.robot(server.addUser("bob", token: "agent-token", displayName: "Bob"))
        self.virtualClock = virtualClock
        self.makeBackend = makeBackend
    }

    public var supportedFaults: Set<EmulatorFault.Kind> { Set(EmulatorFault.Kind.allCases) }

    public var customerSecrets: [String] { [customerToken] }

    public func makeCustomerBackend() async throws -> any ChatBackend {
        makeBackend(url, customer, customerToken)
    }

    /// A backend of another user of this server (one ``VoximplantServer/addUser(_:token:displayName:)``
    /// added), reaching it the way the customer's does.
    public func makeBackend(user: String, token: String) -> any ChatBackend {
        makeBackend(url, user, token)
    }

    public func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        ConversationID(try agent.createConversation(title: "Support", with: [customer]))
    }

    public func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        for index in 1...max(1, count) { try agent.send("history \(index)", in: conversation.rawValue) }
    }

    public func agentSend(_ text: String, in conversation: ConversationID) async throws {
        try agent.send(text, in: conversation.rawValue)
    }

    public func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        // The protocol has no "stopped typing": the far side lets it expire.
        if isTyping { try agent.typing(in: conversation.rawValue) }
    }

    public func agentEnd(_ conversation: ConversationID) async throws {
        try agent.leave(conversation.rawValue)
    }

    public func agentMarkRead(in conversation: ConversationID) async throws {
        try agent.markRead(in: conversation.rawValue)
    }

    public func inject(_ fault: EmulatorFault) async throws {
        switch fault {
        case .disconnect: server.disconnect(user: customer)
        case .dropNext(let count): server.dropNext(count, for: customer)
        case .duplicateNext(let count): server.duplicateNext(count, for: customer)
        case .reorderNext(let count): server.reorderNext(count, for: customer)
        case .delayNext(let count): server.delayNext(count, for: customer)
        case .releaseDelayed: server.releaseDelayed()
        case .failNextRequest(let error, let name):
            server.failNextRequest(code: Self.code(for: error), named: name.map(Self.requestName))
        case .rejectNextLogin(let error):
            server.rejectNextLogin(code: error.code == .authenticationFailed ? 3 : 30)
        case .malformedFrame: server.sendMalformedFrame(to: customer)
        case .rawFrame(let text): server.sendRawFrame(text, to: customer)
        case .fatal: server.revoke(customer)
        }
    }

    public var appliedFaults: AppliedFaults { server.appliedFaults }

    /// Voximplant-style frames, broken (the shapes of `protocols/voximplant.md`).
    public func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        let uuid = JSONValue.string(conversation.rawValue)
        let good: JSONValue = [
            "type": "event", "eventType": "sendMessage", "action": "sendMessage", "initiator": "agent@emulator", "conversation": uuid,
            "seq": 1_000_000, "timestamp": 1_700_000_000,
            "message": ["uuid": "bad-1", "conversation": uuid, "sequence": 1_000_000, "sender": "agent@emulator", "text": "bad 1", "payload": [], "timestamp": 1_700_000_000],
        ]
        return [
            VendorBadInput("a message event whose seq is a string", good.setting("seq", to: "five"), .reported),
            VendorBadInput("a message event without its message", good.setting("message", to: nil).setting("seq", to: nil), .surfaced),
            VendorBadInput("a message whose text is a number", good.setting("message", "text", to: 42), .reported),
            VendorBadInput("an event of an unknown type", good.setting("eventType", to: "teleport").setting("action", to: "teleport").setting("seq", to: nil), .surfaced),
            VendorBadInput("a seq out of range", good.setting("seq", to: .double(1e300)), .reported),
            VendorBadInput("a seq far past the conversation's", good.setting("seq", to: .int(Int64.max)), .reported),
            VendorBadInput("a frame without its type", good.setting("type", to: nil), .reported),
            VendorBadInput(
                "a message in a conversation the customer is not in",
                good.setting("conversation", to: "not-the-customers").setting("message", "conversation", to: "not-the-customers").setting("seq", to: 1),
                .tolerated
            ),
            .oversized("a frame over the 16 MiB receive limit", prefix: #"{"type":"event","eventType":"typing","padding":""#, suffix: #""}"#, size: (16 << 20) + 1024),
        ]
    }

    public func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        server.log(of: conversation.rawValue, customer: customer)
    }

    public func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        try await waitForActivity(in: conversation, timeout: timeout, signal: server.changes, read: {
            CustomerActivity(
                typing: server.typingLog.filter { $0.user == customer && $0.conversation == conversation.rawValue }.map { _ in true },
                readMarkers: server.readLog.filter { $0.user == customer && $0.conversation == conversation.rawValue }.count
            )
        }, until: condition)
    }

    /// The protocol code that makes the adapter see `error`'s kind of failure.
    static func code(for error: SwitchboardError) -> Int {
        switch error.code {
        case .messageRejected, .permissionDenied: return 12
        case .rateLimited: return 32
        case .payloadTooLarge: return 23
        case .connectionLost, .serverError, .timedOut: return 30
        default: return 0
        }
    }

    /// The protocol request behind a ``BackendRequest`` name.
    static func requestName(_ name: String) -> String {
        switch name {
        case "send": return "sendMessage"
        case "edit": return "editMessage"
        case "delete": return "removeMessage"
        case "markRead": return "read"
        case "retransmit", "history": return "retransmitEvents"
        default: return name
        }
    }
}
