@_spi(TestKit) public import Switchboard
@_spi(TestKit) public import SwitchboardTestKit
public import SwitchboardEmulation

/// ``EmulatorControl`` for the Webim emulator's offline appeals (protocols/webim.md §12a). The
/// customer is the user of one stable token; each conversation is an appeal the customer starts
/// with a first message; the agent is an operator robot whose answers the customer's session
/// finds on its next poll. The client backend is injected, so the emulator never depends on the
/// adapter.
public struct WebimAppealsEmulatorControl: EmulatorControl {
    public let server: WebimServer
    public let baseURL: String
    /// The customer's stable user token (sent as `push-token`).
    public let userToken: String
    public let agent: WebimOperatorRobot
    /// The emulator's routes without a socket, when the backends reach it in the same process;
    /// `nil` on a socket.
    public let network: InProcessNetwork?
    /// The server's clock when it is reached in the same process on virtual time.
    public let virtualClock: TestClock?
    let makeBackend: @Sendable (_ baseURL: String, _ userToken: String) -> any ChatBackend

    public init(
        server: WebimServer,
        baseURL: String,
        userToken: String = "appeals-user-1",
        network: InProcessNetwork? = nil,
        virtualClock: TestClock? = nil,
        makeBackend: @escaping @Sendable (_ baseURL: String, _ userToken: String) -> any ChatBackend
    ) {
        self.server = server
        self.baseURL = baseURL
        self.userToken = userToken
        self.agent = server.robot(id: 9, name: "Olga")
        self.network = network
        self.virtualClock = virtualClock
        self.makeBackend = makeBackend
    }

    /// Nothing is pushed, so there is no event order to drop, reorder or delay; a login is not
    /// refused the way a token can be.
    public var supportedFaults: Set<EmulatorFault.Kind> {
        [.disconnect, .duplicateEvents, .failRequest, .malformedFrame, .rawFrame, .fatal]
    }

    public func makeCustomerBackend() async throws -> any ChatBackend {
        makeBackend(baseURL, userToken)
    }

    public var customerSecrets: [String] { [userToken] }

    /// The visitor's id on the emulator, once the customer's first init made it.
    func visitorID() throws -> String {
        guard let visitor = server.visitor(ofUserToken: userToken) else {
            throw WebimEmulatorError(description: "no visitor has the user token yet")
        }
        return visitor
    }

    func chatID(_ conversation: ConversationID) throws -> Int {
        guard let id = Int(conversation.rawValue) else { throw WebimEmulatorError(description: "\(conversation) is not an appeal id") }
        return id
    }

    /// The customer writes a new appeal.
    public func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "an appeal"))).id
    }

    public func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        for index in 1...max(1, count) { try agent.answerAppeal(try chatID(conversation), of: try visitorID(), text: "history \(index)") }
    }

    public func agentSend(_ text: String, in conversation: ConversationID) async throws {
        try agent.answerAppeal(try chatID(conversation), of: try visitorID(), text: text)
    }

    public func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        throw SwitchboardError(.unsupported, "an appeal has no typing")
    }

    public func agentEnd(_ conversation: ConversationID) async throws {
        throw SwitchboardError(.unsupported, "an operator answers an appeal; nothing ends it")
    }

    public func agentMarkRead(in conversation: ConversationID) async throws {
        try agent.readAppeal(try chatID(conversation), of: try visitorID())
    }

    public func inject(_ fault: EmulatorFault) async throws {
        switch fault {
        case .disconnect:
            server.inject(.dropConnection, on: .history)
        case .duplicateNext(let count):
            server.duplicateNextMessages(count)
        case .failNextRequest(let error, let name):
            let action = name.map(Self.actionName)
            switch error.code {
            case .messageRejected, .permissionDenied: server.inject(.error("message_empty"), on: .action, action: action)
            case .connectionLost: server.inject(.dropConnection, on: .action, action: action)
            case .serverError, .timedOut: server.inject(.status(503), on: .action, action: action)
            default: server.inject(.error("wrong-argument-value"), on: .action, action: action)
            }
        case .malformedFrame:
            server.inject(.malformed, on: .history)
        case .rawFrame(let text):
            server.inject(.body(text), on: .history)
        case .fatal:
            server.inject(.error("account-blocked"), on: .history)
        case .rejectNextLogin, .dropNext, .reorderNext, .delayNext, .releaseDelayed:
            throw SwitchboardError(.unsupported, "the Webim appeals emulator has no \(fault.kind) fault")
        }
    }

    /// The faults requests met, by what ``inject(_:)`` made of each: a dropped offline history
    /// request is a disconnect (the poll's link), a broken or raw history answer a malformed or
    /// raw frame, `account-blocked` on it a fatal end, any action fault a failed request; and the
    /// appeal messages a history answer listed twice.
    public var appliedFaults: AppliedFaults { server.appliedFaults(polling: .history) }

    /// Offline `history` answers, broken (the shapes of protocols/webim.md §12a).
    public func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        let message: JSONValue = [
            "id": "bad-1", "clientSideId": "bad-1", "kind": "operator", "text": "bad 1", "ts": 1_700_000_000.5, "authorId": 1,
            "name": "Operator", "chatId": .string(conversation.rawValue),
        ]
        let since = JSONValue.int(1)
        return [
            VendorBadInput("a chat list that is not a list", ["chats": "all of them", "messages": [], "lastChangeTs": since], .reported),
            VendorBadInput("a chat without an id", ["chats": [["state": "queue", "messages": []]], "messages": [], "lastChangeTs": since], .reported),
            VendorBadInput("a message without its chat", ["chats": [], "messages": [message.setting("chatId", to: nil)], "lastChangeTs": since], .reported),
            VendorBadInput("a message without its text", ["chats": [], "messages": [message.setting("text", to: nil)], "lastChangeTs": since], .reported),
            VendorBadInput("a message whose time is text", ["chats": [], "messages": [message.setting("ts", to: "yesterday")], "lastChangeTs": since], .reported),
            VendorBadInput("an answer that is a list", [["chats": []]], .reported),
        ]
    }

    public func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        let id = try chatID(conversation)
        return server.appealMessages(ofVisitor: try visitorID(), chatID: id).map {
            ServerMessage(
                serverID: MessageID($0.id), clientID: ClientMessageID($0.clientSideId), text: $0.text,
                fromCustomer: $0.kind == "visitor" || $0.kind == "file_visitor", sequence: nil
            )
        }
    }

    public func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        let chat = conversation.rawValue
        return try await waitForActivity(in: conversation, timeout: timeout, signal: server.changes, read: {
            CustomerActivity(typing: [], readMarkers: server.readLog.filter { $0.messageID == chat }.count)
        }, until: condition)
    }

    static func actionName(_ request: String) -> String {
        switch request {
        case "send", "startConversation": return "chat.offline_message"
        case "markRead": return "chat.read_by_visitor"
        case "archiveConversation", "closeConversation": return "chat.delete"
        default: return request
        }
    }
}
