public import Logging
public import Switchboard
public import SwitchboardTransport

/// The adapter for the real Webim mobile API (protocols/webim.md): `GET /l/v/m/init`, the
/// `/l/v/m/delta` long-poll, FIFO `POST /l/v/m/action`, `history`, `upload` — pointed at
/// `https://<account>.webim.ru` or at the emulator.
///
/// A visitor has one support conversation (``WebimBackend/conversationID``) whose state follows
/// the current chat; messages of earlier chats stay in it as history. Credentials (device id,
/// visitor, visit session, page id, auth token) are kept in the session's store.
public struct WebimBackend: ChatBackend {
    /// The id of the visitor's one conversation.
    public static let conversationID = WebimMapping.conversation

    public let configuration: WebimConfiguration
    public let descriptor: BackendDescriptor
    let transport: HTTPTransport

    /// - Throws: ``SwitchboardError/Code/invalidArgument`` for what SessionBuilder refuses.
    public init(configuration: WebimConfiguration, transport: HTTPTransport = HTTPTransport()) throws {
        try configuration.validate()
        self.configuration = configuration
        self.transport = transport
        self.descriptor = BackendDescriptor(
            name: "webim",
            capabilities: [
                .typing, .readMarkers, .historyPaging, .files, .conversationLifecycle, .agentRating, .customFields, .edit,
                .delete, .quotes, .vendorRequests,
            ],
            limits: BackendLimits(
                maxTextLength: 20_000,
                maxRetransmitBatch: 1,
                maxPayloadBytes: 64 * 1024,
                typingPolicy: .coalesce(interval: .seconds(1), autoStop: .seconds(5)),
                historyPageSize: 25
            )
        )
    }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let link = WebimLink(configuration: configuration, transport: transport, context: context)
        return try await link.run(body)
    }
}
