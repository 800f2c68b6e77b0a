public import Switchboard
public import SwitchboardTransport

/// Who the customer is and which brand and channel they talk to.
public struct CXoneConfiguration: Sendable {
    public var environment: CXoneEnvironment
    public var brandID: Int
    public var channelID: String
    /// The customer's id; a new one is made (and kept in the store) when `nil`.
    public var customerID: String?
    public var firstName: String?
    public var lastName: String?
    /// Third-party OAuth (secured sessions): the authorization code and PKCE code verifier.
    public var authorizationCode: String?
    public var codeVerifier: String?
    /// The push device token (hex), sent in the device fingerprint as the SDK's
    /// `customer.setDeviceToken` does.
    public var deviceToken: String?
    public var heartbeatInterval: Duration
    public var pongTimeout: Duration
    public var replyTimeout: Duration
    /// Whether the environment's URLs may be plain `http://` / `ws://` to a host that is not
    /// loopback (they may always be to loopback, where the emulator runs). Off: tokens and
    /// messages travel encrypted.
    public var allowsPlainText: Bool

    public init(
        environment: CXoneEnvironment,
        brandID: Int,
        channelID: String,
        customerID: String? = nil,
        firstName: String? = nil,
        lastName: String? = nil,
        authorizationCode: String? = nil,
        codeVerifier: String? = nil,
        deviceToken: String? = nil,
        heartbeatInterval: Duration = .seconds(10),
        pongTimeout: Duration = .seconds(5),
        replyTimeout: Duration = .seconds(10),
        allowsPlainText: Bool = false
    ) {
        self.environment = environment
        self.brandID = brandID
        self.channelID = channelID
        self.customerID = customerID
        self.firstName = firstName
        self.lastName = lastName
        self.authorizationCode = authorizationCode
        self.codeVerifier = codeVerifier
        self.deviceToken = deviceToken
        self.heartbeatInterval = heartbeatInterval
        self.pongTimeout = pongTimeout
        self.replyTimeout = replyTimeout
        self.allowsPlainText = allowsPlainText
    }
}

/// The adapter for CXone Digital First chat (protocols/cxone.md): HTTP channel configuration plus
/// the WebSocket event protocol, in single-thread, multi-thread and live-chat modes.
///
/// Make it with ``make(configuration:transport:webSockets:)``, which reads the channel configuration first:
/// the mode decides the capabilities (threads, archive and rename in multi-thread; ending the
/// contact in live chat).
public struct CXoneBackend: ChatBackend {
    public let configuration: CXoneConfiguration
    public let channel: CXoneChannelConfiguration
    public let descriptor: BackendDescriptor
    let transport: HTTPTransport
    let webSockets: WebSocketTransport
    /// The configuration ``make(configuration:transport:webSockets:)`` just read, for the first connection
    /// to use instead of reading it again.
    private let unusedChannel = UnusedChannel()

    private final class UnusedChannel: Sendable {
        private let value = Locked<CXoneChannelConfiguration?>(nil)
        func put(_ channel: CXoneChannelConfiguration) { value.withLock { $0 = channel } }
        func take() -> CXoneChannelConfiguration? {
            value.withLock { channel in
                defer { channel = nil }
                return channel
            }
        }
    }

    /// Analytics, with or without a connection (the visitor the socket connects as).
    public let analytics: CXoneAnalytics
    /// The customer's name, device token and authorization code as the app sets them while it
    /// runs, over ``configuration``.
    public let customer = CXoneCustomer()

    /// - Parameters:
    ///   - configuration: the environment, brand, channel and customer.
    ///   - channel: the channel configuration read for them (``make(configuration:transport:webSockets:)`` reads it).
    ///   - transport: HTTP (the channel configuration, tokens, uploads, analytics).
    ///   - webSockets: the event socket: the network, or an emulator in the same process.
    public init(
        configuration: CXoneConfiguration,
        channel: CXoneChannelConfiguration,
        transport: HTTPTransport = HTTPTransport(),
        webSockets: WebSocketTransport = .network
    ) {
        self.configuration = configuration
        self.channel = channel
        self.transport = transport.allowingPlainText(configuration.allowsPlainText)
        self.webSockets = webSockets
        self.analytics = CXoneAnalytics(configuration: configuration, transport: transport)
        var capabilities: BackendCapabilities = [.typing, .readMarkers, .historyPaging, .customFields, .vendorRequests, .analytics]
        if channel.fileRestrictions.isAttachmentsEnabled { capabilities.insert(.files) }
        switch channel.mode {
        case .multiThread: capabilities.formUnion([.threads, .conversationLifecycle, .archive, .conversationUpdate])
        case .liveChat: capabilities.insert(.conversationLifecycle)
        // With a pre-chat form the thread waits for the app's start with the answers (the SDK's
        // create(with:)); closing it is a multi-thread move, refused as `unsupported`.
        case .singleThread: if !channel.preChatFields.isEmpty { capabilities.insert(.conversationLifecycle) }
        }
        self.descriptor = BackendDescriptor(
            name: "cxone",
            capabilities: capabilities,
            limits: BackendLimits(
                maxTextLength: 10_000,
                maxPayloadBytes: 64 * 1024,
                typingPolicy: .startEnd(autoStop: .seconds(5)),
                historyPageSize: 20
            ),
            // Each link recovers the threads' newest messages; older ones come by LoadMoreMessages.
            sync: .windowed(pageSize: 20)
        )
    }

    /// Reads the channel configuration (H1) and makes the backend for its mode.
    ///
    /// - Throws: `SwitchboardError` (`fatal` with vendor code `SdkVersionNotSupported`, or what
    ///   the HTTP request or the decoding failed with).
    public static func make(
        configuration: CXoneConfiguration,
        transport: HTTPTransport = HTTPTransport(),
        webSockets: WebSocketTransport = .network
    ) async throws -> CXoneBackend {
        let transport = transport.allowingPlainText(configuration.allowsPlainText)
        let channel = try await CXoneChannelConfiguration.fetch(
            environment: configuration.environment, brandID: configuration.brandID, channelID: configuration.channelID, transport: transport
        )
        let backend = CXoneBackend(configuration: configuration, channel: channel, transport: transport, webSockets: webSockets)
        backend.unusedChannel.put(channel)
        return backend
    }

    /// The vendor SDK's reconnect schedule (§4.5) for apps that want it:
    /// `min(1.3^min(n, 10) + jitter, 30)` seconds, 20 attempts. Pass it as
    /// `SessionConfiguration.reconnectBackoff`. Unlike the SDK, the engine starts counting again
    /// after a successful connection, and a failed handshake is an attempt like any other (the
    /// SDK can stay stuck in `connecting` after one).
    public static let vendorReconnectBackoff = BackoffPolicy(
        initial: .seconds(1),
        multiplier: 1.3,
        maximum: .milliseconds(13_785),
        maxAttempts: 20
    )

    /// Live-chat availability (H2): `true` only when the channel answers `"online"`.
    public static func isLiveChatAvailable(
        environment: CXoneEnvironment,
        brandID: Int,
        channelID: String,
        transport: HTTPTransport = HTTPTransport(),
        timeout: Duration = .seconds(10)
    ) async throws -> Bool {
        let response = try await transport.get(
            environment.channelConfigurationURL(brandID: brandID, channelID: channelID) + "/availability",
            headers: CXoneWire.httpHeaders,
            timeout: timeout
        )
        return try CXoneHTTPAnswers.liveChatAvailability(status: response.status, body: response.body)
    }

    /// The configured customer (``CXoneConfiguration/customerID``): each customer on a device has
    /// their own rows. `nil` for the customer the adapter makes up, one per store scope.
    public var storeUser: String? { configuration.customerID }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        // The configuration is read again on every reconnect: the server may have refused this SDK
        // version since (a fatal answer), or changed the channel. The first connection after
        // make() uses what make() read.
        let current: CXoneChannelConfiguration
        if let fresh = unusedChannel.take() {
            current = fresh
        } else {
            current = try await CXoneChannelConfiguration.fetch(
                environment: configuration.environment, brandID: configuration.brandID, channelID: configuration.channelID, transport: transport
            )
        }
        if current.mode == .liveChat {
            let online = try await Self.isLiveChatAvailable(
                environment: configuration.environment, brandID: configuration.brandID, channelID: configuration.channelID, transport: transport
            )
            // As the SDK: an offline live chat opens no socket. The engine tries again after its backoff.
            guard online else { throw SwitchboardError(.notConnected, "the live chat is offline", vendorCode: "offline") }
        }
        let link = try await CXoneLink.open(
            configuration: configuration, customer: customer, channel: current, transport: transport, webSockets: webSockets, context: context, analytics: analytics
        )
        return try await link.run(body)
    }
}
