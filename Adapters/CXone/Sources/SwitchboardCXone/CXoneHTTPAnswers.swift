public import Foundation
public import Switchboard

/// The CXone HTTP answers the adapter reads, other than the channel configuration
/// (``CXoneChannelConfiguration/init(json:)``): live-chat availability (H2), the token server's
/// (H6, H7) and the attachment upload's. The backend and the link read every one of them through
/// these functions, which the fuzz target `FuzzCXone` drives on any bytes, without a connection;
/// they are in the `TestKit` SPI for it. Nothing here traps: what cannot be read is a typed error.
@_spi(TestKit) public enum CXoneHTTPAnswers {
    /// H2, `GET …/availability`: `true` only when the channel answers `"online"`.
    ///
    /// - Throws: `SwitchboardError.Code.serverError` when the status is not 2xx or the body is
    ///   not JSON.
    public static func liveChatAvailability(status: Int, body: Data) throws -> Bool {
        guard (200..<300).contains(status), let json = try? JSONValue(parsing: body) else {
            throw SwitchboardError(.serverError, "live-chat availability: HTTP \(status)")
        }
        return json["status"]?.stringValue == "online"
    }

    /// H6 and H7, `POST {tokenURL}oauth/token`: the answer's JSON. `failure` is the vendor code
    /// of the error (the SDK's: `transactionTokenRequestFailed`, `tokenRefreshingFailed`).
    ///
    /// - Throws: `SwitchboardError.Code.serverError` for a 5xx (the token server failed, not the
    ///   credentials: the engine's backoff retries); `authenticationFailed` for another status
    ///   that is not 2xx, or a body that is not JSON.
    public static func tokenAnswer(status: Int, body: Data, failure: String) throws -> JSONValue {
        if status >= 500 {
            throw SwitchboardError(.serverError, "oauth/token: HTTP \(status)", vendorCode: failure)
        }
        guard (200..<300).contains(status), let json = try? JSONValue(parsing: body) else {
            throw SwitchboardError(.authenticationFailed, "oauth/token: HTTP \(status)", vendorCode: failure)
        }
        return json
    }

    /// H6: the transaction token of a token answer, kept in `credentials` with its expiry (a
    /// date: `expiresIn` seconds after `now`), the customer's id when the answer names one, and
    /// the third party's tokens (``thirdPartyTokens(_:now:into:)``).
    ///
    /// - Throws: `SwitchboardError.Code.authenticationFailed` (vendor code
    ///   `transactionTokenRequestFailed`) when the answer has no `accessToken`.
    public static func transactionToken(_ json: JSONValue, now: Date, into credentials: inout Credentials) throws -> String {
        guard let token = json["accessToken"]?.stringValue else {
            throw SwitchboardError(.authenticationFailed, "transaction token: no accessToken", vendorCode: "transactionTokenRequestFailed")
        }
        credentials["transaction-token"] = token
        credentials["transaction-token-expires-at"] = String(now.timeIntervalSince1970 + Double(json["expiresIn"]?.intValue ?? 0))
        if let customer = json["customerIdentity"]?["idOnExternalPlatform"]?.stringValue { credentials["customer-id"] = customer }
        if let thirdParty = json["thirdParty"]?.nonNull { thirdPartyTokens(thirdParty, now: now, into: &credentials) }
        return token
    }

    /// The third-party access token (sent as `accessToken.token`), its refresh token and its
    /// expiry (a date), for H7: what the answer has of them, kept in `credentials`.
    public static func thirdPartyTokens(_ json: JSONValue, now: Date, into credentials: inout Credentials) {
        if let access = json["access_token"]?.stringValue { credentials["access-token"] = access }
        if let refresh = json["refresh_token"]?.stringValue { credentials["oauth-refresh-token"] = refresh }
        if let lifetime = json["expires_in"]?.intValue { credentials["access-token-expires-at"] = String(now.timeIntervalSince1970 + Double(lifetime)) }
    }

    /// `POST {chatHost}/1.0/brand/{brand}/channel/{channel}/attachment`: the uploaded file's URL.
    ///
    /// - Throws: `SwitchboardError.Code.serverError` when the status is not 2xx or the body is
    ///   not JSON; `messageRejected` (vendor code `invalidFileSize`, as the SDK) when the server
    ///   sent no `fileUrl`, its refusal of the file `name`.
    public static func uploadedFileURL(status: Int, body: Data, name: String) throws -> String {
        guard (200..<300).contains(status), let json = try? JSONValue(parsing: body) else {
            throw SwitchboardError(.serverError, "attachment upload: HTTP \(status)")
        }
        guard let fileURL = json["fileUrl"]?.stringValue else {
            throw SwitchboardError(.messageRejected, "the server refused \(name)", vendorCode: "invalidFileSize")
        }
        return fileURL
    }
}
