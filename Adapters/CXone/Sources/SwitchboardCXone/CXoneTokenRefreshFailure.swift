public import Switchboard

/// The access token could not be refreshed (the SDK's `onTokenRefreshFailed()`): `RefreshToken`
/// answered `TokenRefreshingFailed`, or the third-party OAuth refresh (H7) was refused. The session
/// announces it as `custom(name: "cxone.TokenRefreshFailed", payload:)`, then ends the link with
/// `authenticationFailed`: the engine signs the customer in again at once, from scratch. With
/// third-party OAuth that needs a new authorization code: give it with
/// `CXoneRequests.setAuthorizationCode(_:codeVerifier:)` when this event arrives.
public struct CXoneTokenRefreshFailure: Sendable, Hashable {
    /// The event name the session uses.
    public static let eventName = "cxone.TokenRefreshFailed"

    /// The server's error code (`TokenRefreshingFailed`, `invalid_grant`, …).
    public var vendorCode: String
    /// Whether the token was a third-party OAuth one (a new authorization code is needed).
    public var isThirdPartyOAuth: Bool

    /// The failure an event announces, or `nil` for any other event.
    public init?(_ event: ChatEvent) {
        guard case .custom(let name, let payload) = event.kind, name == Self.eventName else { return nil }
        self.vendorCode = payload["vendorCode"]?.stringValue ?? "TokenRefreshingFailed"
        self.isThirdPartyOAuth = payload["thirdPartyOAuth"]?.boolValue ?? false
    }

    static func event(vendorCode: String, thirdPartyOAuth: Bool) -> BackendEvent {
        BackendEvent(.custom(name: eventName, payload: ["vendorCode": .string(vendorCode), "thirdPartyOAuth": .bool(thirdPartyOAuth)]))
    }
}
