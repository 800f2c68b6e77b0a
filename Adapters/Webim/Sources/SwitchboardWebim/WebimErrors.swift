public import Switchboard

/// Why a Webim session ended for good: the SDK's `FatalErrorType`, read from a
/// `SwitchboardError` of code `SwitchboardError.Code.fatal` (its vendor code is the server's
/// string, protocols/webim.md §4.2).
///
/// ```swift
/// if case .fatal(let error) = event.kind, let reason = WebimFatalError(error) {
///     switch reason { case .visitorBanned: showBanned(); default: showRetryLater() }
/// }
/// ```
public enum WebimFatalError: Sendable, Hashable {
    /// `account-blocked`.
    case accountBlocked
    /// `visitor_banned`.
    case visitorBanned
    /// `wrong-provided-visitor-hash-value`: the visitor fields' hash does not match.
    case wrongProvidedVisitorHash
    /// `provided-visitor-expired`: the visitor fields' `expires` has passed.
    case providedVisitorFieldsExpired
    /// `wrong-init`: the server's answer to init was not JSON.
    case initializationFailed
    /// Any other fatal string, as the server sent it.
    case unknown(String)

    /// The reason of a fatal error, or `nil` when `error` is not a fatal Webim error.
    public init?(_ error: SwitchboardError) {
        guard error.code == .fatal, let code = error.vendorCode else { return nil }
        switch code {
        case "account-blocked": self = .accountBlocked
        case "visitor_banned": self = .visitorBanned
        case "wrong-provided-visitor-hash-value": self = .wrongProvidedVisitorHash
        case "provided-visitor-expired": self = .providedVisitorFieldsExpired
        case "wrong-init": self = .initializationFailed
        default: self = .unknown(code)
        }
    }
}

/// Why a Webim configuration was refused (the SDK's `SessionBuilder.SessionBuilderError`), read
/// from the `SwitchboardError.Code.invalidArgument` that ``WebimConfiguration/validate()`` and
/// ``WebimAppealsConfiguration/validate()`` throw.
public enum WebimBuilderError: String, Sendable, Hashable, CaseIterable {
    case nilAccountName
    case nilLocation
    /// A device token without a push system.
    case invalidRemoteNotificationConfiguration
    /// Visitor fields and a provided authorization token together.
    case invalidAuthentificatorParameters
    /// Visitor fields that are not JSON with an `id`.
    case invalidVisitorFields
    /// An offline appeals session without the user's token.
    case nilUserToken

    /// The reason of a refused configuration, or `nil` when `error` is not one.
    public init?(_ error: SwitchboardError) {
        guard error.code == .invalidArgument, let code = error.vendorCode, let reason = Self(rawValue: code) else { return nil }
        self = reason
    }

    /// Visitor fields (identification v1 or v2) are JSON with `fields.id` or `id`.
    static func checkVisitorFields(_ json: String?) throws {
        guard let json else { return }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: json)
        } catch {
            throw WebimBuilderError.invalidVisitorFields.error("visitor fields are not JSON: \(SwitchboardError.classify(error).message)")
        }
        guard value.objectValue != nil else {
            throw WebimBuilderError.invalidVisitorFields.error(#"visitor fields are a JSON object, {"fields":{"id":"…"}}, not \#(json.prefix(40))"#)
        }
        guard visitorID(in: value) != nil else {
            throw WebimBuilderError.invalidVisitorFields.error(#"visitor fields have no "id" string: {"fields":{"id":"…",…}} (or "id" beside "fields" in the v1 form)"#)
        }
    }

    /// The visitor's id in identification fields: `fields.id`, or `id` beside `fields` (v1).
    static func visitorID(in fields: JSONValue) -> String? {
        (fields["fields"]?["id"] ?? fields["id"])?.stringValue
    }

    /// The error ``WebimConfiguration/validate()`` throws for this reason.
    func error(_ message: String) -> SwitchboardError {
        SwitchboardError(.invalidArgument, "\(rawValue): \(message)", vendorCode: rawValue)
    }
}
