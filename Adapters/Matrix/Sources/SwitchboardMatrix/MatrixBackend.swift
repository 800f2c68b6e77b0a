public import Switchboard
public import SwitchboardTransport

/// The Matrix client-server API (v1.x) as a Switchboard backend: each joined room is a
/// conversation, `/sync` is the long-poll, `/messages` is history.
///
/// ```swift
/// let backend = try MatrixBackend(configuration: MatrixConfiguration(
///     homeserver: "https://matrix.example.org",
///     login: .password(user: "alice", password: secret)
/// ))
/// let session = ChatSession(backend: backend, store: store)
/// try await session.withRunning { session in
///     try await session.resume()
///     // …
/// }
/// ```
///
/// Not offered (each throws `unsupported`): threads, end-to-end encryption
/// (encrypted rooms' messages arrive as `matrix.m.room.encrypted` custom events), changing a
/// member's power level, presence. See `Adapters/Matrix/README.md`.
public struct MatrixBackend: ChatBackend {
    public let configuration: MatrixConfiguration
    public let descriptor: BackendDescriptor
    let transport: HTTPTransport

    public init(configuration: MatrixConfiguration, transport: HTTPTransport = HTTPTransport()) throws {
        try configuration.validate()
        self.configuration = configuration
        self.transport = transport.allowingPlainText(configuration.allowsPlainText)
        self.descriptor = BackendDescriptor(
            name: "matrix",
            capabilities: [
                .typing, .readMarkers, .historyPaging, .files, .edit, .delete, .quotes, .conversationLifecycle,
                .conversationUpdate, .participantsManagement, .vendorRequests,
            ],
            limits: BackendLimits(
                // An event is at most 65,536 bytes of JSON; the body is most of it.
                maxTextLength: 16_000,
                maxPayloadBytes: 60 * 1024,
                // The server forgets a typing notice after its timeout (30 s, sent with it).
                typingPolicy: .startEnd(autoStop: .seconds(30)),
                historyPageSize: 50
            ),
            // The first sync of a link is a window of each room's newest events (a `limited`
            // timeline says where its gap starts); older ones come by /messages.
            sync: .windowed(pageSize: 50)
        )
    }

    /// The user of a password login, as configured: each user on a device has their own rows.
    /// `nil` for an access-token login, whose user the server names only on connecting: give
    /// such sessions an `account` per user.
    public var storeUser: String? {
        if case .password(let user, _) = configuration.login { return user }
        return nil
    }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let link = MatrixLink(configuration: configuration, transport: transport, context: context)
        return try await link.run(body)
    }
}

/// Matrix calls the normalized model has no place for, on a session of a ``MatrixBackend``.
public struct MatrixRequests: Sendable {
    public let session: any Session

    public init(session: any Session) {
        self.session = session
    }

    /// Joins a room by id or alias (`#support:example.org`), or accepts an invitation. The room is
    /// a conversation of the session when this returns (its name, topic and members follow with
    /// the next sync). Returns the room id.
    @discardableResult
    public func join(_ roomIDOrAlias: String) async throws -> ConversationID {
        try await session.perform(Join(room: roomIDOrAlias))
    }

    struct Join: VendorRequest {
        var room: String
        var name: String { "join" }
        func perform(on connection: any BackendConnection) async throws -> VendorResult<ConversationID> {
            let (room, updates) = try await link(connection, as: MatrixLink.self).join(self.room)
            return VendorResult(room, updates: updates)
        }
    }
}
