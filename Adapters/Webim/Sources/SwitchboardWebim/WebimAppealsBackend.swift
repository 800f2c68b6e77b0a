public import Switchboard
public import SwitchboardTransport

/// What an offline appeals session needs: the account and location, and the stable user token
/// the appeals belong to (Mobile SDK 2.3's `WMOfflineSession`, protocols/webim.md §12a).
public struct WebimAppealsConfiguration: Sendable {
    /// `demo` (for `https://demo.webim.ru`) or a full base URL such as `http://127.0.0.1:8080`.
    public var accountName: String
    public var location: String
    /// The user's stable token (sent as `push-token`): the same token finds the same appeals from
    /// any device.
    public var userToken: String
    /// Identified visitor: the JSON of identification v1/v2, sent as `visitor-ext`.
    public var visitorFieldsJSON: String?
    public var pageTitle: String
    /// Extra HTTP headers on every request.
    public var requestHeaders: [String: String]
    public var requestTimeout: Duration
    /// Whether the server may be plain `http://` to a host that is not loopback.
    public var allowsPlainText: Bool

    public init(
        accountName: String,
        location: String = "mobile",
        userToken: String,
        visitorFieldsJSON: String? = nil,
        pageTitle: String = "iOS Client",
        requestHeaders: [String: String] = [:],
        requestTimeout: Duration = .seconds(30),
        allowsPlainText: Bool = false
    ) {
        self.accountName = accountName
        self.location = location
        self.userToken = userToken
        self.visitorFieldsJSON = visitorFieldsJSON
        self.pageTitle = pageTitle
        self.requestHeaders = requestHeaders
        self.requestTimeout = requestTimeout
        self.allowsPlainText = allowsPlainText
    }

    /// The server, by the same rule as ``WebimConfiguration/baseURL``.
    public var baseURL: String { WebimConfiguration.baseURL(ofAccount: accountName) }

    /// - Throws: `SwitchboardError.Code.invalidArgument` (a ``WebimBuilderError``) for an empty
    ///   account, location or user token, or visitor fields that are not JSON with an id.
    public func validate() throws {
        if accountName.isEmpty { throw WebimBuilderError.nilAccountName.error("the account name is empty") }
        if location.isEmpty { throw WebimBuilderError.nilLocation.error("the location is empty") }
        if userToken.isEmpty { throw WebimBuilderError.nilUserToken.error("an offline session needs the user's stable token") }
        try WebimBuilderError.checkVisitorFields(visitorFieldsJSON)
    }
}

/// Webim's offline appeals: when no operator is online, a visitor writes appeals — chats that are
/// answered later. Each appeal is a conversation of the session, so the bus, the store, the outbox
/// and timelines work as for any backend:
///
/// - `Session.startConversation(_:)` with a `ConversationDraft.firstMessage` writes a new
///   appeal (`chat.offline_message` without `chat-id`); `customFields["department-key"]` picks a
///   department, the draft's title is the subject;
/// - a send into an appeal is `chat.offline_message` with its `chat-id`; files are uploaded with
///   `chat-mode=offline` first;
/// - `Conversation.markRead(upTo:)` is `chat.read_by_visitor`, `Conversation.archive()` deletes
///   the appeal (`chat.delete`); a `chat-not-found` answer counts as done for both;
/// - answers are fetched, never pushed: the engine polls `history` (`BackendCapabilities.polling`)
///   on connect, every `SessionConfiguration.pollInterval` and on `Session.refresh(forced:)`;
///   a forced refresh re-reads every appeal and drops the ones the server no longer has.
///
/// A different visitor on init (another user token or visitor) drops the appeals stored for the
/// previous one. Closing an appeal is the operator's: `Conversation.close()` is unsupported.
public struct WebimAppealsBackend: ChatBackend {
    public let configuration: WebimAppealsConfiguration
    public let descriptor: BackendDescriptor
    let transport: HTTPTransport

    /// - Throws: `SwitchboardError.Code.invalidArgument` for a configuration ``WebimAppealsConfiguration/validate()`` refuses.
    public init(configuration: WebimAppealsConfiguration, transport: HTTPTransport = HTTPTransport()) throws {
        try configuration.validate()
        self.configuration = configuration
        self.transport = transport.allowingPlainText(configuration.allowsPlainText)
        self.descriptor = BackendDescriptor(
            name: "webim-appeals",
            capabilities: [.conversationLifecycle, .readMarkers, .files, .archive, .unreadCounts],
            limits: BackendLimits(maxTextLength: 20_000, maxPayloadBytes: 64 * 1024, historyPageSize: 25),
            // The offline API pushes nothing: the engine polls /l/v/history.
            sync: .polled
        )
    }

    /// The user token the appeals belong to, by its digest: each user on a device has their own
    /// rows.
    public var storeUser: String? { "token:" + WebimConfiguration.digest(configuration.userToken) }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let link = WebimAppealsLink(configuration: configuration, transport: transport, context: context)
        return try await link.run(body)
    }
}
