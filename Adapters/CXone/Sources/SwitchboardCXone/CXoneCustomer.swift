public import Foundation
public import Switchboard

/// The customer's details an app sets while it runs (the SDK's `customer.setName`,
/// `setDeviceToken`, `setAuthorizationCode`, `setCodeVerifier`), over the backend's
/// ``CXoneConfiguration``: every link of the backend reads them at its next use — a name and a
/// device token with the next event, an authorization code at the next sign-in. Shared by every
/// copy of the ``CXoneBackend`` (``CXoneBackend/customer``), and kept in memory only: configure
/// them again at the next launch, as with the SDK.
public final class CXoneCustomer: Sendable {
    private struct Settings {
        var firstName: String??
        var lastName: String??
        var deviceToken: String??
        var authorizationCode: String??
        var codeVerifier: String??
    }

    private let settings = Locked(Settings())

    init() {}

    /// The customer's name, sent with their identity on each event from now on.
    public func setName(firstName: String?, lastName: String?) {
        settings.withLock {
            $0.firstName = .some(firstName)
            $0.lastName = .some(lastName)
        }
    }

    /// The APNs device token as the system hands it over (`Data`), sent as lowercase hex in the
    /// device fingerprint from the next event on; `nil` removes it.
    public func setDeviceToken(_ token: Data?) {
        setDeviceToken(hex: token.map { $0.map { String(format: "%02x", $0) }.joined() })
    }

    /// The push device token already in hex (FCM, or an APNs token kept as text); `nil` removes it.
    public func setDeviceToken(hex token: String?) {
        settings.withLock { $0.deviceToken = .some(token) }
    }

    /// Third-party OAuth: the authorization code and PKCE verifier the next sign-in exchanges
    /// (after ``CXoneTokenRefreshFailure``, or before the first `resume()`).
    public func setAuthorizationCode(_ code: String?, codeVerifier: String?) {
        settings.withLock {
            $0.authorizationCode = .some(code)
            $0.codeVerifier = .some(codeVerifier)
        }
    }

    /// `configuration` with what the app set since.
    func applied(to configuration: CXoneConfiguration) -> CXoneConfiguration {
        let settings = settings.withLock { $0 }
        var configuration = configuration
        if let firstName = settings.firstName { configuration.firstName = firstName }
        if let lastName = settings.lastName { configuration.lastName = lastName }
        if let token = settings.deviceToken { configuration.deviceToken = token }
        if let code = settings.authorizationCode { configuration.authorizationCode = code }
        if let verifier = settings.codeVerifier { configuration.codeVerifier = verifier }
        return configuration
    }
}
