import Switchboard

/// Which Webim Mobile SDK's wire the adapter speaks where the versions differ
/// (protocols/webim.md §12).
public enum WebimSDKVersion: String, Sendable, Hashable, CaseIterable {
    /// 3.43: the visitor may close a chat (`chat.close`); `chat.start` names its fields `custom_fields`.
    case v3_43 = "3.43"
    /// 4.0 (the default): `chat.close` is gone, so `Conversation.close()` throws
    /// `SwitchboardError.Code.unsupported` before anything is sent; `chat.start` names its fields
    /// `visitor-fields`.
    case v4_0 = "4.0"
}

/// Webim's SessionBuilder as a value: which account and location, who the visitor is, and how the
/// client presents itself.
public struct WebimConfiguration: Sendable {
    public enum PushSystem: String, Sendable {
        case apns
        case fcm
    }

    /// `demo` (for `https://demo.webim.ru`) or a full base URL such as `http://127.0.0.1:8080`.
    public var accountName: String
    public var location: String
    public var appVersion: String?
    /// Identified visitor: the JSON of identification v1/v2 (`{"fields":{…},"expires":…,"hash":…}`),
    /// sent as `visitor-ext`. Anonymous when `nil`.
    public var visitorFieldsJSON: String?
    /// A token the app registered server-to-server instead of visitor fields.
    public var providedAuthorizationToken: String?
    public var pageTitle: String
    public var deviceToken: String?
    public var pushSystem: PushSystem?
    /// Extra HTTP headers on every request.
    public var requestHeaders: [String: String]
    /// Forget the stored visitor, session and tokens on the first connect.
    public var clearVisitorData: Bool
    /// The HTTP deadline of one long-poll (the server holds it for less).
    public var pollTimeout: Duration
    /// The HTTP deadline of every other request.
    public var requestTimeout: Duration
    /// Whether the server may be plain `http://` to a host that is not loopback (it may always
    /// be to loopback, where the emulator runs). Off: tokens and messages travel encrypted.
    public var allowsPlainText: Bool
    /// The SDK whose wire the adapter speaks where versions differ; 4.0 by default.
    public var sdkVersion: WebimSDKVersion
    /// How often to ask `get-online-status` while connected (the SDK's
    /// `onlineStatusRequestFrequencyInMillis`); `nil` (the default) relies on the full update and
    /// the visit session state alone.
    public var onlineStatusPollInterval: Duration?

    public init(
        accountName: String,
        location: String = "mobile",
        appVersion: String? = nil,
        visitorFieldsJSON: String? = nil,
        providedAuthorizationToken: String? = nil,
        pageTitle: String = "iOS Client",
        deviceToken: String? = nil,
        pushSystem: PushSystem? = nil,
        requestHeaders: [String: String] = [:],
        clearVisitorData: Bool = false,
        pollTimeout: Duration = .seconds(60),
        requestTimeout: Duration = .seconds(30),
        allowsPlainText: Bool = false,
        sdkVersion: WebimSDKVersion = .v4_0,
        onlineStatusPollInterval: Duration? = nil
    ) {
        self.accountName = accountName
        self.location = location
        self.appVersion = appVersion
        self.visitorFieldsJSON = visitorFieldsJSON
        self.providedAuthorizationToken = providedAuthorizationToken
        self.pageTitle = pageTitle
        self.deviceToken = deviceToken
        self.pushSystem = pushSystem
        self.requestHeaders = requestHeaders
        self.clearVisitorData = clearVisitorData
        self.pollTimeout = pollTimeout
        self.requestTimeout = requestTimeout
        self.allowsPlainText = allowsPlainText
        self.sdkVersion = sdkVersion
        self.onlineStatusPollInterval = onlineStatusPollInterval
    }

    /// The server: `accountName` verbatim when it has a scheme, else `https://<account>.webim.ru`.
    public var baseURL: String { Self.baseURL(ofAccount: accountName) }

    /// `accountName` verbatim when it has a scheme (one trailing `/` dropped), else
    /// `https://<account>.webim.ru`.
    public static func baseURL(ofAccount accountName: String) -> String {
        if accountName.contains("://") {
            return accountName.hasSuffix("/") ? String(accountName.dropLast()) : accountName
        }
        return "https://\(accountName).webim.ru"
    }

    /// Checks what SessionBuilder checks.
    ///
    /// - Throws: `SwitchboardError.Code.invalidArgument` whose vendor code is a
    ///   ``WebimBuilderError`` (read it with ``WebimBuilderError/init(_:)``).
    public func validate() throws {
        if accountName.isEmpty { throw WebimBuilderError.nilAccountName.error("the account name is empty") }
        if location.isEmpty { throw WebimBuilderError.nilLocation.error("the location is empty") }
        if deviceToken != nil, pushSystem == nil {
            throw WebimBuilderError.invalidRemoteNotificationConfiguration.error("a device token needs a push system")
        }
        if visitorFieldsJSON != nil, providedAuthorizationToken != nil {
            throw WebimBuilderError.invalidAuthentificatorParameters.error("visitor fields and a provided token exclude each other")
        }
        try WebimBuilderError.checkVisitorFields(visitorFieldsJSON)
    }
}

extension WebimConfiguration {
    /// Whose rows the session's store holds (``WebimBackend/storeUser``): the identified
    /// visitor's id, else the provided authorization token by its digest (a token is never a
    /// key in the clear), else `nil` for the anonymous visitor. The SDK keys its stored visitor
    /// the same way (`visitor.<visitorId|anonymous>`).
    var visitorKey: String? {
        if let json = visitorFieldsJSON, let fields = try? JSONValue(parsing: json), let id = WebimBuilderError.visitorID(in: fields) {
            return "visitor:" + id
        }
        return providedAuthorizationToken.map { "token:" + Self.digest($0) }
    }

    /// 64-bit FNV-1a, in hex: tells the tokens of one device apart without writing a token into
    /// the store's keys and the logs.
    static func digest(_ token: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in token.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}
