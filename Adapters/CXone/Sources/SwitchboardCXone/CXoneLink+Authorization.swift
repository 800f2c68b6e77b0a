import Foundation
import Logging
import Switchboard
import SwitchboardTransport

// The link's authorization: the visitor record (H3), the transaction token of secured sessions
// (H6), `AuthorizeCustomer` or `ReconnectCustomer`, and the token refresh before a send
// (protocols/cxone.md §4.1–§4.4).
extension CXoneLink {
    /// H3: `PUT {chatHost}/web-analytics/1.0/tenants/{brand}/visitors/{visitor}` with the customer
    /// and the device fingerprint. The SDK ignores the answer; so does the link.
    static func putVisitor(configuration: CXoneConfiguration, transport: HTTPTransport, credentials: Credentials) async {
        guard let visitor = credentials["visitor-id"], let customer = credentials["customer-id"],
            let url = URL(string: "/web-analytics/1.0/tenants/\(configuration.brandID)/visitors/\(visitor)", relativeTo: URL(string: configuration.environment.chatURL))
        else { return }
        let body: JSONValue = [
            "customerIdentity": ["idOnExternalPlatform": .string(customer)],
            "browserFingerprint": fingerprint(configuration),
        ]
        _ = try? await transport.postJSON(url.absoluteString, body: body, method: "PUT", headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
    }

    /// The device fingerprint of visitor records and messages (§5.6: `DeviceFingerprintDTO`): the
    /// platform the app runs on and its version, the app's language and region, with the push
    /// token when there is one.
    static func fingerprint(_ configuration: CXoneConfiguration) -> JSONValue {
        let version = ProcessInfo.processInfo.operatingSystemVersion
        var fingerprint: [String: JSONValue] = [
            "applicationType": "native", "os": .string(platformName), "deviceType": .string(deviceType),
            "osVersion": .string("\(version.majorVersion).\(version.minorVersion)"),
        ]
        if let language = Locale.current.language.languageCode?.identifier { fingerprint["language"] = .string(language) }
        if let country = Locale.current.region?.identifier { fingerprint["country"] = .string(country) }
        if let token = configuration.deviceToken { fingerprint["deviceToken"] = .string(token) }
        return .object(fingerprint)
    }

    /// The system the app runs on, as `UIDevice.systemName` names it on Apple's platforms.
    static var platformName: String {
        #if os(iOS)
        "iOS"
        #elseif os(macOS)
        "macOS"
        #elseif os(tvOS)
        "tvOS"
        #elseif os(watchOS)
        "watchOS"
        #elseif os(visionOS)
        "visionOS"
        #elseif os(Android)
        "Android"
        #elseif os(Windows)
        "Windows"
        #else
        "Linux"
        #endif
    }

    /// `mobile` on a phone or tablet system, `desktop` elsewhere.
    static var deviceType: String {
        #if os(iOS) || os(watchOS) || os(Android)
        "mobile"
        #else
        "desktop"
        #endif
    }

    /// H6: `POST {tokenURL}oauth/token?channelId&brandId&visitorId`, unless the stored transaction
    /// token has more than 30 s left (§4.4). A third-party OAuth token that has expired needs a
    /// new authorization code: `authenticationFailed`, vendor code `transactionTokenExpired`.
    static func transactionToken(
        configuration: CXoneConfiguration,
        channel: CXoneChannelConfiguration,
        transport: HTTPTransport,
        credentials: inout Credentials,
        now: Date
    ) async throws -> String {
        if let stored = credentials["transaction-token"], let expiresAt = credentials["transaction-token-expires-at"].flatMap(Double.init) {
            if now.timeIntervalSince1970 + 30 < expiresAt { return stored }
            if channel.authenticationType == .thirdPartyOAuth {
                throw SwitchboardError(.authenticationFailed, "the transaction token has expired: authorize again", vendorCode: "transactionTokenExpired")
            }
        }
        let body: JSONValue
        switch channel.authenticationType {
        case .anonymous: body = ["type": "anonymous", "customerIdentity": ["idOnExternalPlatform": .string(credentials["customer-id"]!)]]
        case .securedCookie: body = [:]
        case .thirdPartyOAuth:
            guard let code = configuration.authorizationCode, let verifier = configuration.codeVerifier else {
                throw SwitchboardError(.authenticationFailed, "third-party OAuth needs an authorization code and a code verifier", vendorCode: "authorizationCode")
            }
            body = ["thirdParty": ["grant_type": "authorization_code", "authorization_code": .string(code), "code_verifier": .string(verifier)]]
        }
        let json = try await postToken(body, configuration: configuration, transport: transport, visitorID: credentials["visitor-id"]!, failure: "transactionTokenRequestFailed")
        return try CXoneHTTPAnswers.transactionToken(json, now: now, into: &credentials)
    }

    static func postToken(_ body: JSONValue, configuration: CXoneConfiguration, transport: HTTPTransport, visitorID: String, failure: String) async throws -> JSONValue {
        let tokenURL = configuration.environment.tokenURL
        guard !tokenURL.isEmpty else { throw SwitchboardError(.invalidArgument, "secured sessions need a token URL", vendorCode: "tokenServerUrl") }
        let query = "?channelId=\(configuration.channelID)&brandId=\(configuration.brandID)&visitorId=\(visitorID)"
        let response = try await transport.postJSON(tokenURL + "oauth/token" + query, body: body, headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
        return try CXoneHTTPAnswers.tokenAnswer(status: response.status, body: response.body, failure: failure)
    }

    /// What sign-out forgets.
    static let customerCredentials = [
        "customer-id", "visitor-id", "access-token", "access-token-expires-in", "access-token-expires-at", "thread-id",
        "visit-id", "visit-expires", "page-title", "page-url", "page-since",
        "transaction-token", "transaction-token-expires-at", "oauth-refresh-token",
        "local-thread",
    ] + welcomeCredentials

    static let authorizationEvents: Set<String> = ["AuthorizeCustomer", "ReconnectCustomer", "RefreshToken"]

    /// §4.4: before a send, a token within 30 s of its expiry is refreshed: legacy tokens with
    /// `RefreshToken` (`TokenRefreshed` brings the new one), third-party OAuth tokens with H7.
    /// One refresh at a time.
    func refreshTokenIfDue(_ socket: TextWebSocket) async throws {
        let secured = channel.isEnabled("securedSessions")
        guard !secured || channel.authenticationType == .thirdPartyOAuth else { return }
        let now = context.clock.date
        let due = state.withLock { state -> (token: String, refresh: String?)? in
            guard !state.refreshingToken, let token = state.credentials["access-token"], !token.isEmpty,
                let expiresAt = state.credentials["access-token-expires-at"].flatMap(Double.init), now.timeIntervalSince1970 + 30 >= expiresAt
            else { return nil }
            state.refreshingToken = true
            return (token, state.credentials["oauth-refresh-token"])
        }
        guard let due else { return }
        defer { state.withLock { $0.refreshingToken = false } }
        do {
            try await refresh(due, secured: secured, now: now, socket: socket)
        } catch let error as SwitchboardError where error.isAuthenticationFailure {
            // The SDK's `onTokenRefreshFailed`: the app hears it, typed, and the link ends so the
            // engine signs in again from scratch (it clears the stored tokens).
            let code = error.vendorCode ?? "TokenRefreshingFailed"
            output.yield(.event(CXoneTokenRefreshFailure.event(vendorCode: code, thirdPartyOAuth: secured)))
            end(SwitchboardError(.authenticationFailed, "the access token could not be refreshed", underlying: error, vendorCode: code))
            throw error
        }
    }

    private func refresh(_ due: (token: String, refresh: String?), secured: Bool, now: Date, socket: TextWebSocket) async throws {
        if secured {
            // H7: the third-party access token, refreshed over HTTP.
            guard let refresh = due.refresh, let visitor = state.withLock({ $0.credentials["visitor-id"] }) else {
                throw SwitchboardError(.authenticationFailed, "no refresh token", vendorCode: "refreshToken")
            }
            let json = try await Self.postToken(
                ["thirdParty": ["grant_type": "refresh_token", "refresh_token": .string(refresh)]],
                configuration: configuration, transport: transport, visitorID: visitor, failure: "tokenRefreshingFailed"
            )
            var kept = Credentials()
            CXoneHTTPAnswers.thirdPartyTokens(json, now: now, into: &kept)
            state.withLock { $0.credentials.values.merge(kept.values) { _, new in new } }
            output.yield(.credentials(kept))
            return
        }
        guard let reply = try await send("RefreshToken", data: ["accessToken": ["token": .string(due.token)]], awaitReply: true, socket: socket) else { return }
        await apply(reply.frame, type: reply.type)
    }

    /// The legacy flow: ReconnectCustomer with a stored token, else AuthorizeCustomer.
    func authorize(_ socket: TextWebSocket) async throws {
        if let token = state.withLock({ $0.credentials["access-token"] }) {
            do {
                try await send("ReconnectCustomer", data: ["accessToken": ["token": .string(token)]], awaitReply: true, socket: socket)
                return
            } catch let error as SwitchboardError where error.code == .authenticationFailed {
                state.withLock { $0.credentials["access-token"] = nil }
            }
        }
        var data: JSONValue = ["disableChannelInfo": true, "sdkPlatform": "ios", "sdkVersion": .string(CXoneWire.sdkVersion)]
        if configuration.authorizationCode != nil || configuration.codeVerifier != nil, case .object(var object) = data {
            object["authorization"] = ["authorizationCode": .string(configuration.authorizationCode ?? ""), "codeVerifier": .string(configuration.codeVerifier ?? "")]
            data = .object(object)
        }
        guard let reply = try await send("AuthorizeCustomer", data: data, awaitReply: true, socket: socket) else { return }
        await apply(reply.frame, type: reply.type)
    }
}
