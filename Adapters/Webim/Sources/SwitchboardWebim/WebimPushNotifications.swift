import Foundation
public import Switchboard

/// Webim remote notifications (protocols/webim.md §9), normalized.
public enum WebimPushNotifications {
    public enum Kind: String, Sendable, Hashable {
        case contactInformationRequest = "P.CR"
        case operatorAccepted = "P.OA"
        case operatorFile = "P.OF"
        case operatorMessage = "P.OM"
        case widget = "P.WM"
        case rateOperator = "P.RO"

        /// How many `loc-args` the kind carries (the SDK's visitor-id filter reads past them).
        var argumentCount: Int {
            switch self {
            case .operatorAccepted: return 1
            case .operatorFile, .operatorMessage: return 2
            default: return 0
            }
        }
    }

    public enum Event: String, Sendable, Hashable {
        case add
        case delete = "del"
    }

    public struct Notification: Sendable, Hashable {
        /// `nil` for a `loc-key` the SDK does not know (the notification is still returned).
        public var kind: Kind?
        public var event: Event?
        /// `loc-args`: the operator's name, then the text or file name.
        public var parameters: [String]
        public var location: String?
        public var unreadByVisitorMessageCount: Int?
    }

    /// Whether the payload came from Webim (`"webim": 1` or `true`).
    public static func isWebim(_ payload: JSONValue) -> Bool {
        switch payload["webim"] {
        case .bool(let flag)?: return flag
        case .int(let number)?: return number != 0
        case .string(let text)?: return text == "1" || text == "true"
        default: return false
        }
    }

    public static func isWebim(_ userInfo: [AnyHashable: Any]) -> Bool {
        json(userInfo).map(isWebim) ?? false
    }

    /// The notification in a payload, or `nil` when it has no `aps.alert` dictionary.
    ///
    /// With `visitorID == nil` a payload whose `loc-args` carry more than the kind's arguments (an
    /// extra visitor id: it is for another visitor of the device) is dropped, as the SDK does.
    public static func parse(_ payload: JSONValue, visitorID: String? = nil) -> Notification? {
        guard let alert = payload["aps"]?["alert"], alert.objectValue != nil else { return nil }
        let kind = alert["loc-key"]?.stringValue.flatMap(Kind.init(rawValue:))
        let parameters = alert["loc-args"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if visitorID == nil, parameters.count > (kind?.argumentCount ?? 0) { return nil }
        return Notification(
            kind: kind,
            event: alert["event"]?.stringValue.flatMap(Event.init(rawValue:)),
            parameters: parameters,
            location: payload["location"]?.stringValue,
            unreadByVisitorMessageCount: payload["unread_by_visitor_msg_cnt"]?.intValue.map(Int.init)
        )
    }

    public static func parse(_ userInfo: [AnyHashable: Any], visitorID: String? = nil) -> Notification? {
        json(userInfo).flatMap { parse($0, visitorID: visitorID) }
    }

    private static func json(_ userInfo: [AnyHashable: Any]) -> JSONValue? {
        let stringKeyed = Dictionary(uniqueKeysWithValues: userInfo.compactMap { key, value in (key as? String).map { ($0, value) } })
        guard JSONSerialization.isValidJSONObject(stringKeyed), let data = try? JSONSerialization.data(withJSONObject: stringKeyed) else {
            return nil
        }
        return try? JSONValue(parsing: data)
    }
}
