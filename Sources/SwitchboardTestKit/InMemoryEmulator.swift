@_spi(TestKit) public import Switchboard
import Foundation

/// ``EmulatorControl`` over an ``InMemoryServer``: how the conformance suite drives the
/// reference backend. It supports every fault.
public struct InMemoryEmulator: EmulatorControl {
    public let server: InMemoryServer
    public let customer: ParticipantID
    public let agent: InMemoryAgent
    public let capabilities: BackendCapabilities

    public init(
        server: InMemoryServer = InMemoryServer(),
        customer: ParticipantID = "customer",
        agent: ParticipantID = "agent",
        capabilities: BackendCapabilities = .all
    ) {
        self.server = server
        self.customer = customer
        self.agent = server.agent(agent, name: "Agent Smith")
        self.capabilities = capabilities
    }

    public var supportedFaults: Set<EmulatorFault.Kind> { Set(EmulatorFault.Kind.allCases) }

    public func makeCustomerBackend() async throws -> any ChatBackend {
        InMemoryBackend(server: server, user: customer, capabilities: capabilities)
    }

    public func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        let info = server.createConversation(
            title: "Support",
            participants: [Participant(id: customer, role: .customer, displayName: "Customer")]
        )
        try agent.join(info.id)
        return info.id
    }

    public func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        for index in 1...max(1, count) {
            try agent.send("history \(index)", in: conversation)
        }
    }

    public func agentSend(_ text: String, in conversation: ConversationID) async throws {
        try agent.send(text, in: conversation)
    }

    public func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        try agent.typing(isTyping, in: conversation)
    }

    public func agentMarkRead(in conversation: ConversationID) async throws {
        try agent.markRead(conversation)
    }

    public func agentEnd(_ conversation: ConversationID) async throws {
        try agent.close(conversation)
    }

    public func inject(_ fault: EmulatorFault) async throws {
        let target = InMemoryServer.FaultTarget.clientsOf(customer)
        switch fault {
        case .disconnect: server.disconnectAll()
        case .dropNext(let count): server.dropNext(count, for: target)
        case .duplicateNext(let count): server.duplicateNext(count, for: target)
        case .reorderNext(let count): server.reorderNext(count, for: target)
        case .delayNext(let count): server.delayNext(count, for: target)
        case .releaseDelayed: server.releaseDelayed()
        case .failNextRequest(let error, let name): server.failNextRequest(error, named: name)
        case .rejectNextLogin(let error): server.rejectNextLogin(error)
        case .malformedFrame: server.sendMalformedFrame()
        case .rawFrame(let text): server.sendRawFrame(text)
        case .fatal(let error): server.sendFatal(error)
        }
    }

    public var appliedFaults: AppliedFaults { server.appliedFaults }

    /// Frames of the in-memory wire (`InMemoryFrame`), broken; it has no size limit to refuse.
    public func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        func frame(_ text: String, in conversation: ConversationID, sequence: Int64?) throws -> JSONValue {
            let message = Message(serverID: MessageID("bad-\(text)"), conversationID: conversation, senderRole: .agent, text: text, time: Date())
            return try JSONValue(parsing: Data(InMemoryFrame.event(kind: .messageAdded(message, position: .newest), conversation: conversation, sequence: sequence, time: Date()).encoded().utf8))
        }
        let good = try frame("bad 1", in: conversation, sequence: 1_000)
        return [
            VendorBadInput("an event whose sequence is a string", good.setting("event", "sequence", to: "one thousand"), .reported),
            VendorBadInput("an event without its kind", good.setting("event", "kind", to: nil), .reported),
            VendorBadInput("an event of an unknown kind", good.setting("event", "kind", to: ["teleported": [:]]), .reported),
            VendorBadInput("an event whose time is text", good.setting("event", "time", to: "yesterday"), .reported),
            VendorBadInput("a message in a conversation the customer is not in", try frame("elsewhere", in: "not-the-customers", sequence: 1), .tolerated),
        ]
    }

    public func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        server.log(of: conversation, customer: customer)
    }

    public func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        try await waitForActivity(in: conversation, timeout: timeout, signal: server.changes, read: {
            var typing: [Bool] = []
            var markers = 0
            for record in server.records where record.conversation == conversation {
                switch record.kind {
                case .typing(let who, let isTyping) where who == customer: typing.append(isTyping)
                case .readMarker(let who, _) where who == customer: markers += 1
                default: break
                }
            }
            return CustomerActivity(typing: typing, readMarkers: markers)
        }, until: condition)
    }
}

/// A backend with some capabilities taken away: how the suite checks that the engine refuses
/// calls a backend cannot serve, before anything is sent.
public struct CapabilityMaskedBackend: ChatBackend {
    public let base: any ChatBackend
    public let descriptor: BackendDescriptor

    public init(_ base: any ChatBackend, removing removed: BackendCapabilities) {
        self.base = base
        var descriptor = base.descriptor
        descriptor.capabilities.subtract(removed)
        self.descriptor = descriptor
    }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        try await base.withConnection(context, body)
    }
}
