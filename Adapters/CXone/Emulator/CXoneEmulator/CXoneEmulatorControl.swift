@_spi(TestKit) public import Switchboard
@_spi(TestKit) public import SwitchboardTestKit
public import SwitchboardEmulation

/// ``EmulatorControl`` for the CXone emulator; the client backend is injected.
public struct CXoneEmulatorControl: EmulatorControl {
    public let server: CXoneServer
    public let endpoints: CXoneEmulator.Endpoints
    public let customerID: String
    public let agent: CXoneAgentRobot
    /// How long ``prepareConversation(using:)`` waits for the thread and its first message before
    /// it fails as a hang: 30 s by default, above the adapter's 10 s reply timeout and a retry; a
    /// load run of many sessions on a busy machine gives more.
    public var patience: Duration
    /// The emulator's routes without a socket, when the backends reach it in the same process;
    /// `nil` on a socket.
    public let network: InProcessNetwork?
    /// The server's clock when it is reached in the same process on virtual time.
    public let virtualClock: TestClock?
    let makeBackend: @Sendable (_ endpoints: CXoneEmulator.Endpoints, _ customerID: String) -> any ChatBackend

    public init(
        server: CXoneServer,
        endpoints: CXoneEmulator.Endpoints,
        customerID: String = "customer-1",
        patience: Duration = .seconds(30),
        network: InProcessNetwork? = nil,
        virtualClock: TestClock? = nil,
        makeBackend: @escaping @Sendable (_ endpoints: CXoneEmulator.Endpoints, _ customerID: String) -> any ChatBackend
    ) {
        self.network = network
        self.virtualClock = virtualClock
        self.server = server
        self.endpoints = endpoints
        self.customerID = customerID
        self.agent = server.agent()
        self.patience = patience
        self.makeBackend = makeBackend
    }

    /// Threads have no sequences, so drops, reorders and delays are not offered.
    public var supportedFaults: Set<EmulatorFault.Kind> {
        [.disconnect, .duplicateEvents, .failRequest, .rejectLogin, .malformedFrame, .rawFrame, .fatal]
    }

    public func makeCustomerBackend() async throws -> any ChatBackend {
        makeBackend(endpoints, customerID)
    }

    /// The customer's thread (started when the channel has threads to start); its first message
    /// creates it on the server; the agent takes it.
    public func prepareConversation(using session: ChatSession) async throws -> ConversationID {
        let id: ConversationID
        if server.configuration.mode == .multi {
            id = try await session.startConversation(ConversationDraft(kind: .thread)).id
        } else {
            // The link makes the local thread itself, on connect.
            let events = session.events(filter: .all, buffering: .unbounded)
            id = try await watched("the session has its thread") {
                if let open = try await session.conversations().first(where: { !$0.state.isClosed }) { return open.id }
                for await event in events {
                    if case .conversationAdded(let info) = event.kind, !info.state.isClosed { return info.id }
                }
                throw CancellationError()
            }
        }
        if server.messages(inThread: id.rawValue).isEmpty {
            let events = session.events(filter: EventFilter(conversations: [id]), buffering: .unbounded)
            let first = try await session.conversation(id).send(text: "Hello")
            try await watched("the server to confirm the thread's first message") {
                for await event in events {
                    if case .messageUpdated(let message) = event.kind, message.clientID == first.clientID, message.serverID != nil { return }
                }
            }
        }
        agent.assign(id.rawValue)
        return id
    }

    /// Runs `body` with a real-time watchdog of ``patience``: a link that cannot settle fails the
    /// case with what it waited for, instead of hanging it.
    private func watched<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let patience = self.patience
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await ContinuousClock().sleep(for: patience)
                throw ConformanceFailure("timed out after \(patience) waiting for \(what)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    public func seedHistory(_ count: Int, in conversation: ConversationID) async throws {
        for index in 1...max(1, count) { agent.send("history \(index)", in: conversation.rawValue) }
    }

    public func agentSend(_ text: String, in conversation: ConversationID) async throws {
        agent.send(text, in: conversation.rawValue)
    }

    public func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws {
        agent.typing(isTyping, in: conversation.rawValue)
    }

    public func agentMarkRead(in conversation: ConversationID) async throws {
        agent.markRead(conversation.rawValue)
    }

    public func agentEnd(_ conversation: ConversationID) async throws {
        agent.close(conversation.rawValue)
    }

    public func inject(_ fault: EmulatorFault) async throws {
        switch fault {
        case .disconnect: server.inject(.closeSocket)
        case .duplicateNext(let count): server.inject(.duplicateMessages(count))
        case .failNextRequest(let error, let name):
            let eventType = name.map { $0 == "send" ? "SendMessage" : $0 }
            if error.isTransient {
                server.inject(.dropOnNext(eventType: eventType))
            } else {
                server.inject(.operationError(code: "InconsistentData", eventType: eventType))
            }
        case .rejectNextLogin(let error):
            if error.code == .authenticationFailed {
                server.inject(.operationError(code: "CustomerAuthorizationFailed", eventType: "AuthorizeCustomer"))
            } else {
                server.inject(.failHandshake)
            }
        case .malformedFrame: server.inject(.malformedFrame)
        case .rawFrame(let text): server.inject(.rawFrame(text))
        case .fatal: server.inject(.sdkVersionNotSupported)
        case .dropNext, .reorderNext, .delayNext, .releaseDelayed:
            throw SwitchboardError(.unsupported, "the CXone emulator has no \(fault.kind) fault")
        }
    }

    public var appliedFaults: AppliedFaults { server.appliedFaults }

    /// CXone events, broken (the envelopes of `protocols/cxone.md`).
    public func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput] {
        let thread = JSONValue.string(conversation.rawValue)
        let good: JSONValue = [
            "eventId": "bad-event-1", "eventObject": "Message", "eventType": "MessageCreated", "createdAt": "2026-11-23T10:00:00Z",
            "data": [
                "brand": ["id": .int(Int64(server.configuration.brandID))], "channel": ["id": .string(server.configuration.channelID)],
                "thread": ["idOnExternalPlatform": thread, "threadName": ""],
                "message": [
                    "idOnExternalPlatform": "bad-1", "threadIdOnExternalPlatform": thread, "direction": "outbound",
                    "messageContent": ["type": "TEXT", "payload": ["text": "bad 1"]], "createdAt": "2026-11-23T10:00:00Z", "attachments": [],
                    "authorUser": ["id": 1, "firstName": "Agent", "surname": "Emulator"],
                ],
            ],
        ]
        return [
            VendorBadInput("a message whose id is a number", good.setting("data", "message", "idOnExternalPlatform", to: 7), .reported),
            VendorBadInput("a MessageCreated without its message", good.setting("data", "message", to: nil), .reported),
            VendorBadInput("a message whose text is an object", good.setting("data", "message", "messageContent", "payload", "text", to: ["a": 1]), .reported),
            VendorBadInput("a message whose createdAt is not a date", good.setting("data", "message", "createdAt", to: "yesterday"), .reported),
            VendorBadInput("an event of an unknown type", good.setting("eventType", to: "Teleported"), .surfaced),
            VendorBadInput("an event without its type", good.setting("eventType", to: nil), .reported),
            VendorBadInput(
                "a message in a thread the customer does not have",
                good.setting("data", "thread", "idOnExternalPlatform", to: "not-the-customers").setting("data", "message", "threadIdOnExternalPlatform", to: "not-the-customers"),
                .tolerated
            ),
            .oversized("a frame over the 1 MB receive limit", prefix: #"{"eventId":"x","eventType":"SenderTypingStarted","padding":""#, suffix: #""}"#, size: (1 << 20) + 1024),
        ]
    }

    public func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage] {
        server.messages(inThread: conversation.rawValue).map {
            ServerMessage(serverID: MessageID($0.id), clientID: $0.fromCustomer ? ClientMessageID($0.id) : nil, text: $0.text, fromCustomer: $0.fromCustomer, sequence: nil)
        }
    }

    public func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity {
        try await waitForActivity(in: conversation, timeout: timeout, signal: server.changes, read: {
            let received = server.received.filter { $0.data["thread"]?["idOnExternalPlatform"]?.stringValue?.lowercased() == conversation.rawValue }
            return CustomerActivity(
                typing: received.compactMap { $0.eventType == "SenderTypingStarted" ? true : ($0.eventType == "SenderTypingEnded" ? false : nil) },
                readMarkers: received.filter { $0.eventType == "MessageSeenByCustomer" }.count
            )
        }, until: condition)
    }
}
