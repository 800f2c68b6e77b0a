public import Logging
public import Switchboard
public import SwitchboardTransport

/// How to reach a Voximplant-style service and as whom.
public struct VoximplantConfiguration: Sendable {
    /// The WebSocket URL, such as `ws://127.0.0.1:8080/ws`.
    public var url: String
    /// The full user id, `username@application.account`.
    public var user: String
    public var token: String
    /// How long a request may go unanswered (the SDK's 10 s, error 10002).
    public var requestTimeout: Duration
    /// The largest frame a client sends (§1); the engine's payload limits keep sends below it.
    public static let maxClientFrameBytes = 64 * 1024
    /// A conversation's `customData` is at most 5 KB of JSON (§1.14); larger is refused before
    /// it is sent (the server answers error 0).
    public static let maxCustomDataBytes = 5 * 1024
    /// The largest frame a client accepts from the server (§1).
    public static let maxServerFrameBytes = 16 << 20

    /// Silence after which the client pings, and how long it waits for the pong.
    public var heartbeatInterval: Duration
    public var pongTimeout: Duration
    /// Whether `url` may be plain `ws://` to a host that is not loopback (it may always be to
    /// loopback, where the emulator runs). Off: tokens and messages travel encrypted.
    public var allowsPlainText: Bool

    public init(
        url: String,
        user: String,
        token: String,
        requestTimeout: Duration = .seconds(10),
        heartbeatInterval: Duration = .seconds(30),
        pongTimeout: Duration = .seconds(10),
        allowsPlainText: Bool = false
    ) {
        self.url = url
        self.user = user
        self.token = token
        self.requestTimeout = requestTimeout
        self.heartbeatInterval = heartbeatInterval
        self.pongTimeout = pongTimeout
        self.allowsPlainText = allowsPlainText
    }
}

/// The adapter for Voximplant-style messaging (Docs/Protocols/voximplant-style.md): many
/// conversations per user, per-conversation sequences with retransmit, read markers,
/// participants and permissions, direct/uber/public conversations.
///
/// It translates; the engine tracks sequences, fills gaps, throttles typing (10 s) and keeps
/// the outbox. User-level calls (users, presence, subscriptions, public conversations, join)
/// go through ``VoximplantRequests``.
public struct VoximplantBackend: ChatBackend {
    public let configuration: VoximplantConfiguration
    public let descriptor: BackendDescriptor
    let logger: Logger
    let webSockets: WebSocketTransport

    /// The configured user: its messages from another device are the user's own.
    public var user: ParticipantID? { ParticipantID(configuration.user) }

    /// - Parameters:
    ///   - configuration: where the service is and as whom to log in.
    ///   - logger: where the adapter logs (names and codes, never message text or tokens).
    ///   - webSockets: where the socket goes: the network, or an emulator in the same process
    ///     (adapter tests on a test clock).
    public init(
        configuration: VoximplantConfiguration,
        logger: Logger = Logger(label: "switchboard.voximplant"),
        webSockets: WebSocketTransport = .network
    ) {
        self.configuration = configuration
        self.logger = logger
        self.webSockets = webSockets
        self.descriptor = BackendDescriptor(
            name: "voximplant",
            capabilities: [
                .typing, .readMarkers, .historyPaging, .participantsManagement, .conversationUpdate,
                .conversationLifecycle, .edit, .delete, .vendorRequests,
            ],
            limits: BackendLimits(
                maxTextLength: 5000,
                // No limit is documented for a message's payload (§1.8): the frame's 64 KiB is
                // the bound (checked per request); 5 KB is customData's.
                maxPayloadBytes: 60 * 1024,
                typingPolicy: .minimumInterval(.seconds(10)),
                historyPageSize: 100,
                readMarkersMayMoveBack: true
            ),
            // Per-conversation event sequences; retransmitEvents takes at most 100 a call.
            sync: .sequenced(batchLimit: 100)
        )
    }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        try await webSockets.withTextWebSocket(
            url: configuration.url,
            // §1: the server's frames are not bound by the 64 KiB of a client's (a retransmit page of
            // 100 long messages is ~0.5 MB); a client takes up to 16 MiB.
            configuration: .init(maxMessageSize: VoximplantConfiguration.maxServerFrameBytes, allowsPlainText: configuration.allowsPlainText),
            logger: context.logger
        ) { socket in
            let link = VoximplantLink(socket: socket, configuration: configuration, clock: context.clock, logger: context.logger, credentials: context.credentials)
            return try await link.run(body)
        }
    }
}

/// Typed Voximplant calls the normalized API does not cover, built on vendor requests. Each
/// returns the protocol's `result` object (Docs/Protocols/voximplant-style.md §5).
public struct VoximplantRequests: Sendable {
    public let session: any Session

    public init(session: any Session) {
        self.session = session
    }

    public func getUser(_ user: String) async throws -> JSONValue { try await call("getUser", ["user": .string(user)]) }
    public func getUser(imId: Int64) async throws -> JSONValue { try await call("getUser", ["imId": .int(imId)]) }
    public func getUsers(_ users: [String]) async throws -> JSONValue {
        try await call("getUsers", ["users": .array(users.map(JSONValue.string))])
    }
    public func editUser(customData: JSONValue?, privateCustomData: JSONValue?) async throws -> JSONValue {
        try await call("editUser", ["customData": customData ?? .null, "privateCustomData": privateCustomData ?? .null])
    }
    public func setStatus(online: Bool) async throws -> JSONValue { try await call("setStatus", ["online": .bool(online)]) }
    public func subscribe(_ users: [String]) async throws -> JSONValue {
        try await call("subscribe", ["users": .array(users.map(JSONValue.string))])
    }
    public func unsubscribe(_ users: [String]) async throws -> JSONValue {
        try await call("unsubscribe", ["users": .array(users.map(JSONValue.string))])
    }
    public func getSubscriptions() async throws -> JSONValue { try await call("getSubscriptions", [:]) }
    public func getConversation(_ conversation: ConversationID) async throws -> JSONValue {
        try await call("getConversation", ["conversation": .string(conversation.rawValue)])
    }
    public func getConversations(_ conversations: [ConversationID]) async throws -> JSONValue {
        try await call("getConversations", ["conversations": .array(conversations.map { .string($0.rawValue) })])
    }
    /// The public conversations anyone may join (`getPublicConversations`).
    public func publicConversations() async throws -> [ConversationID] {
        try await call("getPublicConversations", [:])["conversations"]?.arrayValue?.compactMap(\.stringValue).map(ConversationID.init) ?? []
    }

    /// Joins a public conversation; it is in the session's store when this returns.
    ///
    /// - Throws: the server's refusal: 15 (not public), 13 (already in), 39 (direct).
    public func joinConversation(_ conversation: ConversationID) async throws -> any Conversation {
        try await session.perform(Join(conversation: conversation))
        return try await session.conversation(conversation)
    }

    /// `retransmitEventsFrom:to:`, `from:count:` and `to:count:` in one call: pass exactly two
    /// of the bounds (the server answers 36 or 41 otherwise), at most 100 events. The session's
    /// own gap fill does not need this; it is for apps that read the log themselves. Returns the
    /// events the caller may see, typed and in sequence order (each with its `sequence`), as the
    /// engine's gap fill gets them; they are not applied to the store.
    public func retransmitEvents(
        in conversation: ConversationID,
        from: Int64? = nil,
        to: Int64? = nil,
        count: Int? = nil
    ) async throws -> [BackendEvent] {
        var params: [String: JSONValue] = ["conversation": .string(conversation.rawValue)]
        if let from { params["eventsFrom"] = .int(from) }
        if let to { params["eventsTo"] = .int(to) }
        if let count { params["count"] = .int(Int64(count)) }
        return try await session.perform(RetransmitEvents(conversation: conversation, bounds: params))
    }

    func call(_ name: String, _ params: [String: JSONValue]) async throws -> JSONValue {
        try await session.perform(VoximplantCall(name, params: .object(params)))
    }

    struct Join: VendorRequest {
        var conversation: ConversationID
        var name: String { "joinConversation" }
        func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
            VendorResult((), updates: try await link(connection, as: VoximplantLink.self).join(conversation))
        }
    }

    struct RetransmitEvents: VendorRequest {
        var conversation: ConversationID
        var bounds: [String: JSONValue]
        var name: String { "retransmitEvents" }
        func perform(on connection: any BackendConnection) async throws -> VendorResult<[BackendEvent]> {
            VendorResult(try await link(connection, as: VoximplantLink.self).retransmitEvents(in: conversation, bounds: bounds))
        }
    }
}

/// One call of the protocol by its method name and parameters (Docs/Protocols/voximplant-style.md
/// §5), answered with the server's `result` object: what ``VoximplantRequests`` is built on, for
/// a method it has no function for.
public struct VoximplantCall: VendorRequest {
    public var name: String
    public var params: JSONValue

    public init(_ name: String, params: JSONValue) {
        self.name = name
        self.params = params
    }

    public func perform(on connection: any BackendConnection) async throws -> VendorResult<JSONValue> {
        VendorResult(try await link(connection, as: VoximplantLink.self).request(name, params))
    }
}
