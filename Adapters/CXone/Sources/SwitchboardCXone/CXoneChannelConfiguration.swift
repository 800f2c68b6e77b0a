public import Switchboard
public import SwitchboardTransport

/// A channel's configuration (H1, protocols/cxone.md §1.3): what mode the chat runs in, how
/// customers authenticate, file limits, feature toggles and the pre-chat survey.
public struct CXoneChannelConfiguration: Sendable, Hashable {
    public enum ChatMode: String, Sendable, Hashable {
        case singleThread, multiThread, liveChat
    }

    public enum AuthenticationType: String, Sendable, Hashable {
        case anonymous, securedCookie, thirdPartyOAuth
    }

    public struct FileRestrictions: Sendable, Hashable {
        public var allowedFileSizeMegabytes: Int32
        public var allowedMIMETypes: [String]
        public var isAttachmentsEnabled: Bool
    }

    /// A pre-chat field: text (or e-mail), a selector of options, or a tree of options.
    public struct PreChatField: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            case text(isEmail: Bool)
            /// Option identifier → label.
            case selector([String: String])
            /// Option identifier → (label, parent identifier).
            case tree([String: (label: String, parent: String?)])

            public static func == (lhs: Kind, rhs: Kind) -> Bool { "\(lhs)" == "\(rhs)" }
            public func hash(into hasher: inout Hasher) { hasher.combine("\(self)") }
        }

        public var ident: String
        public var label: String
        public var isRequired: Bool
        public var kind: Kind
    }

    public var mode: ChatMode
    public var authenticationType: AuthenticationType
    public var isProactiveChatEnabled: Bool
    public var isSendTranscriptEnabled: Bool
    public var fileRestrictions: FileRestrictions
    /// Feature toggles; a missing key counts as enabled.
    public var features: [String: Bool]
    public var preChatFields: [PreChatField]
    /// The customer's custom fields as the channel defines them (`endUserCustomFields`).
    public var customerFieldDefinitions: [PreChatField]
    /// A contact's (thread's) custom fields as the channel defines them (`caseCustomFields`).
    public var contactFieldDefinitions: [PreChatField]

    public func isEnabled(_ feature: String) -> Bool { features[feature] ?? true }

    /// Decodes an H1 answer.
    ///
    /// - Throws: `SwitchboardError` with vendor code `SdkVersionNotSupported` for that answer,
    ///   `SwitchboardError.Code.protocolViolation` naming the key for anything the SDK refuses.
    public init(json: JSONValue) throws {
        try CXoneWire.checkSDKVersion(json)
        func required<T>(_ value: T?, _ key: String) throws -> T {
            guard let value else { throw SwitchboardError(.protocolViolation, "channel configuration: missing or bad \(key)") }
            return value
        }
        let settings = try required(json["settings"]?.objectValue, "settings")
        let isLiveChat = try required(json["isLiveChat"]?.boolValue, "isLiveChat")
        let isAuthorization = try required(json["isAuthorizationEnabled"]?.boolValue, "isAuthorizationEnabled")
        let multiple = try required(settings["hasMultipleThreadsPerEndUser"]?.boolValue, "settings.hasMultipleThreadsPerEndUser")
        mode = isLiveChat ? .liveChat : (multiple ? .multiThread : .singleThread)
        authenticationType = json["isSecuredCookieEnabled"]?.boolValue == true ? .securedCookie : (isAuthorization ? .thirdPartyOAuth : .anonymous)
        isProactiveChatEnabled = try required(settings["isProactiveChatEnabled"]?.boolValue, "settings.isProactiveChatEnabled")
        isSendTranscriptEnabled = settings["liveChatAllowTranscript"]?.boolValue ?? false
        let restrictions = try required(settings["fileRestrictions"], "settings.fileRestrictions")
        let size = try required(restrictions["allowedFileSize"]?.stringValue.flatMap(Int32.init) ?? restrictions["allowedFileSize"]?.intValue.map(Int32.init), "allowedFileSize")
        fileRestrictions = FileRestrictions(
            allowedFileSizeMegabytes: size,
            allowedMIMETypes: (restrictions["allowedFileTypes"]?.arrayValue ?? []).compactMap { $0["mimeType"]?.stringValue },
            isAttachmentsEnabled: try required(restrictions["isAttachmentsEnabled"]?.boolValue, "isAttachmentsEnabled")
        )
        let rawFeatures = try required(settings["features"]?.objectValue, "settings.features")
        features = try rawFeatures.mapValues { try required($0.boolValue, "settings.features values") }
        preChatFields = try (json["preContactForm"]?["customFields"]?.arrayValue ?? []).map { field in
            try Self.field(try required(field["definition"], "customFields.definition"), isRequired: field["isRequired"]?.boolValue ?? false)
        }
        customerFieldDefinitions = try (json["endUserCustomFields"]?.arrayValue ?? []).map { try Self.field($0, isRequired: $0["required"]?.boolValue ?? false) }
        contactFieldDefinitions = try (json["caseCustomFields"]?.arrayValue ?? []).map { try Self.field($0, isRequired: $0["required"]?.boolValue ?? false) }
    }

    /// A field definition (`text`, `email`, `list` with its options, `tree` with its nodes).
    static func field(_ definition: JSONValue, isRequired: Bool) throws -> PreChatField {
        let values = definition["values"]?.arrayValue ?? []
        let kind: PreChatField.Kind
        switch definition["type"]?.stringValue {
        case "text": kind = .text(isEmail: false)
        case "email": kind = .text(isEmail: true)
        case "list":
            kind = .selector(Dictionary(values.compactMap { value in value["name"]?.stringValue.map { ($0, value["value"]?.stringValue ?? $0) } }, uniquingKeysWith: { first, _ in first }))
        case "tree":
            kind = .tree(Dictionary(values.compactMap { value in
                value["name"]?.stringValue.map { ($0, (label: value["value"]?.stringValue ?? $0, parent: value["parentId"]?.stringValue)) }
            }, uniquingKeysWith: { first, _ in first }))
        case let other:
            throw SwitchboardError(.protocolViolation, "channel configuration: unknown custom field type \(other ?? "none")")
        }
        guard let ident = definition["ident"]?.stringValue else { throw SwitchboardError(.protocolViolation, "channel configuration: missing or bad definition.ident") }
        return PreChatField(ident: ident, label: definition["label"]?.stringValue ?? "", isRequired: isRequired, kind: kind)
    }

    /// The customer's fields typed (the SDK's `customerCustomFields.get()` list): each definition
    /// with its value in `values`, if any.
    public func customerFields(_ values: [String: String]) -> [CXoneCustomField] {
        customerFieldDefinitions.map { CXoneCustomField(definition: $0, value: values[$0.ident]) }
    }

    /// A thread's fields typed (the SDK's `threads.customFields.get(for:)`): each definition with
    /// its value in `values` (`CXoneRequests.customFields(ofThread:)`, which reads the store).
    public func contactFields(_ values: [String: String]) -> [CXoneCustomField] {
        contactFieldDefinitions.map { CXoneCustomField(definition: $0, value: values[$0.ident]) }
    }

    /// Checks pre-chat answers against the survey.
    ///
    /// - Throws: `SwitchboardError.Code.invalidArgument` naming the missing required fields or the
    ///   values that are not options (vendor code `missingPreChatCustomFields`).
    public func validatePreChat(_ answers: [String: String]) throws {
        let missing = preChatFields.filter { $0.isRequired && (answers[$0.ident] ?? "").isEmpty }.map(\.ident)
        if !missing.isEmpty {
            throw SwitchboardError(.invalidArgument, "missing pre-chat fields: \(missing.sorted().joined(separator: ", "))", vendorCode: "missingPreChatCustomFields")
        }
        for field in preChatFields {
            guard let answer = answers[field.ident] else { continue }
            switch field.kind {
            case .selector(let options) where options[answer] == nil:
                throw SwitchboardError(.invalidArgument, "\(answer) is not an option of \(field.ident)")
            case .tree(let options) where options[answer] == nil:
                throw SwitchboardError(.invalidArgument, "\(answer) is not an option of \(field.ident)")
            case .text(isEmail: true) where !answer.contains("@"):
                throw SwitchboardError(.invalidArgument, "\(field.ident) needs an e-mail address")
            default:
                break
            }
        }
    }

    /// `getChannelConfiguration` without connecting: H1 with the SDK's headers.
    ///
    /// - Throws: `SwitchboardError` with code `invalidArgument` when the service has no such
    ///   brand or channel (HTTP 404: a typo in either; not transient), `fatal` (vendor code
    ///   `SdkVersionNotSupported`) when the SDK version is refused, `protocolViolation` for an
    ///   answer that is not a channel configuration, and the transport's errors.
    public static func fetch(
        environment: CXoneEnvironment,
        brandID: Int,
        channelID: String,
        transport: HTTPTransport = HTTPTransport(),
        timeout: Duration = .seconds(10)
    ) async throws -> CXoneChannelConfiguration {
        let response = try await transport.get(
            environment.channelConfigurationURL(brandID: brandID, channelID: channelID),
            headers: CXoneWire.httpHeaders,
            timeout: timeout
        )
        let json = try? JSONValue(parsing: response.body)
        if let json { try CXoneWire.checkSDKVersion(json) }
        try checkStatus(response.status, json: json, brandID: brandID, channelID: channelID)
        guard let json else {
            throw SwitchboardError(.protocolViolation, "channel configuration: HTTP \(response.status), not JSON")
        }
        return try CXoneChannelConfiguration(json: json)
    }

    /// H1's status: the SDK reads the body whatever the status, and a refusal then fails to
    /// decode as a configuration, which says nothing of the cause. A 404 names the brand and
    /// channel asked for, the usual cause being a typo in one of them; other statuses are read
    /// as the SDK reads them.
    static func checkStatus(_ status: Int, json: JSONValue?, brandID: Int, channelID: String) throws {
        guard status == 404 else { return }
        throw SwitchboardError(
            .invalidArgument, "brand \(brandID) has no channel \(channelID) (HTTP 404): check the brand and channel ids",
            vendorCode: json?["error"]?["errorCode"]?.stringValue
        )
    }
}

/// A custom field with its definition (the SDK's `CustomFieldType`: a text or e-mail field, a
/// selector with its options, a hierarchical field with its tree) and its value.
public struct CXoneCustomField: Sendable, Hashable {
    public var definition: CXoneChannelConfiguration.PreChatField
    /// The value set, `nil` when none is.
    public var value: String?

    public var ident: String { definition.ident }
    public var label: String { definition.label }
    /// For a selector or a tree: the label of the option the value names.
    public var valueLabel: String? {
        guard let value else { return nil }
        switch definition.kind {
        case .selector(let options): return options[value]
        case .tree(let nodes): return nodes[value]?.label
        case .text: return value
        }
    }
}
