public import Logging
public import Switchboard
public import SwitchboardTransport

/// Which server and account an XMPP session uses.
public struct XMPPConfiguration: Sendable {
    /// The account's bare JID, `alice@example.org`.
    public var jid: String
    public var password: String
    /// The server's XMPP-over-WebSocket endpoint (RFC 7395), such as
    /// `wss://example.org:5281/xmpp-websocket` (Prosody's `mod_websocket`).
    public var url: String
    /// The resource to bind; the server makes one up when `nil`.
    public var resource: String?
    /// How long a request (an `iq`, the login's steps) may go unanswered.
    public var requestTimeout: Duration
    /// Silence after which the client pings the server (XEP-0199), and how long it waits.
    public var heartbeatInterval: Duration
    public var pongTimeout: Duration
    /// Whether `url` may be plain `ws://` to a host that is not loopback: keep this off anywhere
    /// but a test bench.
    public var allowsPlainText: Bool
    /// The multi-user chat service rooms are made on (XEP-0045); `conference.<domain>` when
    /// `nil`, as Prosody and ejabberd name it.
    public var roomService: String?
    /// The HTTP upload service files are put on (XEP-0363); found among the server's services
    /// (the first that offers uploads) when `nil`.
    public var uploadService: String?
    /// Whether the login may send the password itself (SASL PLAIN) to a server that offers no
    /// SCRAM, over `wss://` (only the server reads it) or to a loopback host, never over plain
    /// `ws://` to another. A server that offers SCRAM never gets it.
    public var allowsPlainLogin: Bool
    /// Whether a dropped link's stream is resumed by the next (XEP-0198) where the server keeps
    /// it: the same session goes on, rooms stay joined, and the server sends again what the
    /// dropped link missed. Off, every link logs in afresh and catches up from the archive.
    public var resumesStreams: Bool

    public init(
        jid: String,
        password: String,
        url: String,
        resource: String? = nil,
        requestTimeout: Duration = .seconds(15),
        heartbeatInterval: Duration = .seconds(30),
        pongTimeout: Duration = .seconds(10),
        allowsPlainText: Bool = false,
        allowsPlainLogin: Bool = true,
        roomService: String? = nil,
        uploadService: String? = nil,
        resumesStreams: Bool = true
    ) {
        self.resumesStreams = resumesStreams
        self.roomService = roomService
        self.uploadService = uploadService
        self.jid = jid
        self.password = password
        self.url = url
        self.resource = resource
        self.requestTimeout = requestTimeout
        self.heartbeatInterval = heartbeatInterval
        self.pongTimeout = pongTimeout
        self.allowsPlainText = allowsPlainText
        self.allowsPlainLogin = allowsPlainLogin
    }

    /// The bare JID as the server compares it.
    var bareJID: String { XMPPMapping.bare(jid) }
    var localPart: String { String(bareJID.prefix { $0 != "@" }) }
    var domain: String { String(bareJID.drop { $0 != "@" }.dropFirst()) }
    var mucService: String { roomService ?? "conference.\(domain)" }

    /// Refuses what cannot work, before anything is sent.
    public func validate() throws(SwitchboardError) {
        guard !localPart.isEmpty, !domain.isEmpty, !jid.contains("/") else {
            throw SwitchboardError(.invalidArgument, "the JID must be a bare user@domain")
        }
        guard !password.isEmpty else { throw SwitchboardError(.invalidArgument, "the password is empty") }
        guard url.hasPrefix("wss://") || url.hasPrefix("ws://") else {
            throw SwitchboardError(.invalidArgument, "the URL must be a ws(s):// XMPP-over-WebSocket endpoint")
        }
    }
}

/// XMPP (RFC 6120) over WebSocket (RFC 7395) as a Switchboard backend: each contact a one-to-one
/// conversation, the server's message archive (XEP-0313) the history and the catch-up.
///
/// ```swift
/// let backend = try XMPPBackend(configuration: XMPPConfiguration(
///     jid: "alice@example.org", password: secret, url: "wss://example.org:5281/xmpp-websocket"
/// ))
/// ```
///
/// One-to-one chats, sends recognized by their origin id (XEP-0359), MAM catch-up and history,
/// typing (XEP-0085), read markers (XEP-0333), edits (XEP-0308) and retractions (XEP-0424); rooms
/// (XEP-0045) as group conversations, started with `startConversation`, joined with
/// ``XMPPRequests/join(_:)``, left with `close()`; files through the server's HTTP upload service
/// (XEP-0363). See `Adapters/XMPP/README.md`.
public struct XMPPBackend: ChatBackend {
    public let configuration: XMPPConfiguration
    public let descriptor: BackendDescriptor
    let logger: Logger
    let webSockets: WebSocketTransport
    /// File uploads (XEP-0363 slots take a `PUT`).
    let http: HTTPTransport
    /// The streams of sessions whose link dropped, for their next link to resume.
    let suspendedStreams = XMPPSuspendedStreams()

    /// The account: its messages from another device are the user's own.
    public var user: ParticipantID? { ParticipantID(configuration.bareJID) }

    /// The largest frame the client takes from the server (Prosody's stanza limit is 256 KiB).
    public static let maxServerFrameBytes = 1 << 20

    public init(
        configuration: XMPPConfiguration,
        logger: Logger = Logger(label: "switchboard.xmpp"),
        webSockets: WebSocketTransport = .network,
        http: HTTPTransport = HTTPTransport()
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        self.webSockets = webSockets
        self.http = http.allowingPlainText(configuration.allowsPlainText)
        self.descriptor = BackendDescriptor(
            name: "xmpp",
            capabilities: [.typing, .readMarkers, .historyPaging, .edit, .delete, .conversationLifecycle, .vendorRequests, .files],
            limits: BackendLimits(
                // Prosody's stanza limit is 256 KiB (`c2s_stanza_size_limit`); text well below it.
                maxTextLength: 10_000,
                maxPayloadBytes: 64 * 1024,
                typingPolicy: .startEnd(autoStop: .seconds(30)),
                historyPageSize: 50,
                // A file is a message of its own: its address is the body.
                attachmentsPerMessage: 1
            ),
            // The archive has no sequences: a link catches up from the last archive id, or takes
            // the newest page as a window.
            sync: .windowed(pageSize: 50)
        )
    }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        try await webSockets.withTextWebSocket(
            url: configuration.url,
            // RFC 7395 §3.1: the server refuses an upgrade without the `xmpp` subprotocol.
            configuration: .init(
                maxMessageSize: Self.maxServerFrameBytes, headers: ["Sec-WebSocket-Protocol": "xmpp"],
                allowsPlainText: configuration.allowsPlainText
            ),
            logger: context.logger
        ) { socket in
            let streams = configuration.resumesStreams ? suspendedStreams : nil
            let link = XMPPLink(
                socket: socket, http: http, configuration: configuration, context: context,
                resuming: streams?.take(context.session, now: context.clock.date), suspended: streams
            )
            return try await link.run(body)
        }
    }
}

/// XMPP calls the normalized model has no place for, on a session of an ``XMPPBackend``.
///
/// ```swift
/// let room = try await XMPPRequests(session: session).join("support@conference.example.org")
/// ```
public struct XMPPRequests: Sendable {
    public let session: any Session

    public init(session: any Session) {
        self.session = session
    }

    /// Joins a room (XEP-0045) by its bare JID: a group conversation of the session when this
    /// returns, with its occupants and the newest page of the room's archive. Later links join it
    /// again until it is closed.
    @discardableResult
    public func join(_ room: String) async throws -> ConversationID {
        try await session.perform(Join(room: room))
    }

    struct Join: VendorRequest {
        var room: String
        var name: String { "join" }
        func perform(on connection: any BackendConnection) async throws -> VendorResult<ConversationID> {
            VendorResult(try await link(connection, as: XMPPLink.self).join(room))
        }
    }
}
