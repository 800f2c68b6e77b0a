import Foundation
public import Switchboard

/// The CXone WebSocket envelope (protocols/cxone.md §2): outgoing `EventDTO`s and the shapes an
/// inbound frame can take.
@_spi(WireReaders) public enum CXoneWire {
    public static let sdkVersion = "3.3.1"
    static let httpHeaders = [("x-sdk-platform", "ios"), ("x-sdk-version", sdkVersion)]

    /// Who the events are about.
    public struct Identity: Sendable, Hashable {
        public var brandID: Int
        public var channelID: String
        public var customerID: String
        public var firstName: String?
        public var lastName: String?
        public var visitorID: String?

        public init(brandID: Int, channelID: String, customerID: String, firstName: String? = nil, lastName: String? = nil, visitorID: String? = nil) {
            self.brandID = brandID
            self.channelID = channelID
            self.customerID = customerID
            self.firstName = firstName
            self.lastName = lastName
            self.visitorID = visitorID
        }
    }

    /// Events whose identity key is `consumerIdentity`; every other uses `customerIdentity`.
    static let consumerIdentityEvents: Set<String> = ["ReconnectCustomer", "RefreshToken", "SendOutbound", "EndContact", "SendTranscript"]

    /// One outgoing event: `{"action", "eventId", "payload": {brand, channel, identity, eventType, data, visitor}}`.
    public static func event(_ eventType: String, eventID: String, identity: Identity, data: JSONValue? = nil, destination: String? = nil) -> JSONValue {
        var person: [String: JSONValue] = ["idOnExternalPlatform": .string(identity.customerID)]
        if let first = identity.firstName { person["firstName"] = .string(first) }
        if let last = identity.lastName { person["lastName"] = .string(last) }
        var payload: [String: JSONValue] = [
            "brand": ["id": .int(Int64(identity.brandID))], "channel": ["id": .string(identity.channelID)],
            (consumerIdentityEvents.contains(eventType) ? "consumerIdentity" : "customerIdentity"): .object(person),
            "eventType": .string(eventType),
        ]
        if let data { payload["data"] = data }
        if let visitor = identity.visitorID { payload["visitor"] = ["id": .string(visitor)] }
        // `ExecuteTrigger`'s own envelope names the destination (protocols/cxone.md §3.14).
        if let destination { payload["destination"] = ["id": .string(destination)] }
        return [
            "action": .string(eventType == "AuthorizeCustomer" ? "register" : "chatWindowEvent"),
            "eventId": .string(eventID.lowercased()),
            "payload": .object(payload),
        ]
    }

    /// The heartbeat frame; the server answers with the text `"pong"`.
    public static let heartbeat: JSONValue = ["action": "heartbeat"]

    /// What an inbound text frame is.
    public enum Inbound: Sendable, Hashable {
        case pong
        /// `{"message","connectionId","requestId"}`: the SDK drops it (a pending request times out).
        case serverError(String)
        /// An `OperationError` for the request with `eventID`.
        case operationError(eventID: String, SwitchboardError)
        /// An event or a reply: its id, its real type (`eventType ?? postback.eventType`) and the frame.
        case event(eventID: String, type: String?, frame: JSONValue)
        /// Not a frame the SDK accepts (no event id, not JSON).
        case unrecognized(String)
    }

    public static func classify(_ text: String) -> Inbound {
        // A heartbeat answer is a few bytes; anything longer is not one.
        if text.utf8.count < 16 {
            let trimmed = text.filter { !$0.isWhitespace }
            if trimmed == "\"pong\"" || trimmed == "pong" { return .pong }
        }
        guard let frame = try? JSONValue(parsing: text), frame.objectValue != nil else {
            return .unrecognized("not a JSON object (\(text.utf8.count) bytes)")
        }
        if let message = frame["message"]?.stringValue, !message.isEmpty, frame["connectionId"] != nil { return .serverError(message) }
        if let eventID = frame["eventId"]?.stringValue, let error = frame["error"]?.objectValue {
            let code = error["errorCode"]?.stringValue ?? "Unknown"
            return .operationError(eventID: eventID.lowercased(), operationError(code: code, message: error["errorMessage"]?.stringValue ?? code))
        }
        guard let eventID = frame["eventId"]?.stringValue else { return .unrecognized("a frame without an eventId") }
        return .event(eventID: eventID.lowercased(), type: frame["eventType"]?.stringValue ?? frame["postback"]?["eventType"]?.stringValue, frame: frame)
    }

    /// An `OperationError` code (§6.2) as a classified error with the code as vendor code.
    public static func operationError(code: String, message: String) -> SwitchboardError {
        switch code {
        case "CustomerAuthorizationFailed", "ConsumerAuthorizationFailed", "CustomerReconnectionFailed", "ConsumerReconnectionFailed", "TokenRefreshingFailed":
            return SwitchboardError(.authenticationFailed, message, vendorCode: code)
        case "RecoveringThreadFailed", "RecoveringLivechatFailed", "RecordNotFound":
            return SwitchboardError(.conversationNotFound, message, vendorCode: code)
        case "SendingTranscriptFailed", "InconsistentData":
            // The request itself is at fault: sending it again would fail again.
            return SwitchboardError(.messageRejected, message, vendorCode: code)
        default:
            return SwitchboardError(.protocolViolation, message, vendorCode: code)
        }
    }

    /// Any HTTP body `{"error":{"errorCode":"SdkVersionNotSupported"}}` ends everything.
    static func checkSDKVersion(_ json: JSONValue) throws {
        if json["error"]?["errorCode"]?.stringValue == "SdkVersionNotSupported" {
            throw SwitchboardError(.fatal, json["error"]?["errorMessage"]?.stringValue ?? "SDK version not supported", vendorCode: "SdkVersionNotSupported")
        }
    }
}
