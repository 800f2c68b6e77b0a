public import Switchboard

/// Which homeserver and account a Matrix session uses.
public struct MatrixConfiguration: Sendable {
    /// How the session logs in.
    public enum Login: Sendable, Hashable {
        /// `m.login.password` with a user id (`@alice:example.org`) or a local part (`alice`). The
        /// access token it returns is kept with the session's credentials, so a restart does not
        /// log in again; a token the server forgets (`M_UNKNOWN_TOKEN`) logs in once more.
        case password(user: String, password: String)
        /// An access token the app already has (from its own login or SSO).
        case accessToken(String)
    }

    /// The homeserver's base URL, such as `https://matrix.example.org` (no `/_matrix`).
    public var homeserver: String
    public var login: Login
    /// The device to log in as; the server makes one up when `nil`. Keep it stable per install:
    /// the server ties transaction ids (and so idempotent sends) to the device.
    public var deviceID: String?
    /// The device's name others see.
    public var deviceName: String
    /// How long the server holds a `/sync` long-poll open when nothing happens.
    public var syncTimeout: Duration
    /// The HTTP deadline of every other request.
    public var requestTimeout: Duration
    /// How many recent events a sync returns per room (the filter's timeline limit); older ones
    /// come from history.
    public var timelineLimit: Int
    /// Whether the homeserver may be plain `http://` on a host that is not loopback.
    public var allowsPlainText: Bool

    public init(
        homeserver: String,
        login: Login,
        deviceID: String? = nil,
        deviceName: String = "Switchboard",
        syncTimeout: Duration = .seconds(30),
        requestTimeout: Duration = .seconds(30),
        timelineLimit: Int = 20,
        allowsPlainText: Bool = false
    ) {
        self.homeserver = homeserver
        self.login = login
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.syncTimeout = syncTimeout
        self.requestTimeout = requestTimeout
        self.timelineLimit = timelineLimit
        self.allowsPlainText = allowsPlainText
    }

    /// The base URL without a trailing slash.
    var base: String { homeserver.hasSuffix("/") ? String(homeserver.dropLast()) : homeserver }

    /// Refuses what cannot work, before anything is sent.
    public func validate() throws(SwitchboardError) {
        guard homeserver.hasPrefix("https://") || homeserver.hasPrefix("http://") else {
            throw SwitchboardError(.invalidArgument, "the homeserver must be an http(s) URL")
        }
        switch login {
        case .password(let user, let password):
            guard !user.isEmpty, !password.isEmpty else { throw SwitchboardError(.invalidArgument, "a password login needs a user and a password") }
        case .accessToken(let token):
            guard !token.isEmpty else { throw SwitchboardError(.invalidArgument, "the access token is empty") }
        }
        guard timelineLimit > 0 else { throw SwitchboardError(.invalidArgument, "the timeline limit must be positive") }
    }
}
