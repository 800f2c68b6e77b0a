import Switchboard

/// The emulator's server-side model. Objects are kept as Swift values and rendered to the
/// protocol's JSON (Docs/Protocols/voximplant-style.md §4) by the `json` properties.
struct VoxUser {
    var id: String
    var imId: Int
    var token: String
    var displayName: String
    var customData: JSONValue = [:]
    var privateCustomData: JSONValue = [:]
    var conversations: [String] = []
    var left: [String] = []
    var subscriptions: Set<String> = []
    var online = false
    var isDeleted = false
    /// §5.1: the notifications the user asked for (`onSendMessage`, `onEditMessage`).
    var notifications: Set<String> = []
    /// §5.1: the user's registered push tokens and their platforms, in registration order.
    var pushTokens: [(token: String, platform: String)] = []

    func json(forSelf: Bool) -> JSONValue {
        var object: [String: JSONValue] = [
            "userId": .string(id), "imId": .int(Int64(imId)), "displayName": .string(displayName),
            "customData": customData, "isDeleted": .bool(isDeleted),
        ]
        if forSelf {
            object["privateCustomData"] = privateCustomData
            object["conversationList"] = .array(conversations.map(JSONValue.string))
            object["leaveConversationList"] = .array(left.map(JSONValue.string))
            object["notifications"] = .array(notifications.sorted().map(JSONValue.string))
        }
        return .object(object)
    }
}

struct VoxMember {
    var userId: String
    var canWrite = true
    var canEdit = true
    var canEditAll = false
    var canRemove = true
    var canRemoveAll = false
    var canManageParticipants = false
    var isOwner = false
    var lastReadSequence: Int64 = 0

    static func owner(_ userId: String) -> VoxMember {
        VoxMember(userId: userId, canEditAll: true, canRemoveAll: true, canManageParticipants: true, isOwner: true)
    }

    /// Reads a participant object; absent permissions take the defaults of §4.2.
    init(userId: String, canWrite: Bool = true, canEdit: Bool = true, canEditAll: Bool = false, canRemove: Bool = true,
         canRemoveAll: Bool = false, canManageParticipants: Bool = false, isOwner: Bool = false) {
        self.userId = userId
        self.canWrite = canWrite
        self.canEdit = canEdit
        self.canEditAll = canEditAll
        self.canRemove = canRemove
        self.canRemoveAll = canRemoveAll
        self.canManageParticipants = canManageParticipants
        self.isOwner = isOwner
    }

    init?(json: JSONValue) {
        guard let userId = json["userId"]?.stringValue else { return nil }
        self.init(
            userId: userId,
            canWrite: json["canWrite"]?.boolValue ?? true,
            canEdit: json["canEdit"]?.boolValue ?? true,
            canEditAll: json["canEditAll"]?.boolValue ?? false,
            canRemove: json["canRemove"]?.boolValue ?? true,
            canRemoveAll: json["canRemoveAll"]?.boolValue ?? false,
            canManageParticipants: json["canManageParticipants"]?.boolValue ?? false,
            isOwner: json["isOwner"]?.boolValue ?? false
        )
    }

    var json: JSONValue {
        [
            "userId": .string(userId), "canWrite": .bool(canWrite), "canEdit": .bool(canEdit),
            "canEditAll": .bool(canEditAll), "canRemove": .bool(canRemove), "canRemoveAll": .bool(canRemoveAll),
            "canManageParticipants": .bool(canManageParticipants), "isOwner": .bool(isOwner),
            "lastReadSequence": .int(lastReadSequence),
        ]
    }
}

struct VoxMessage {
    var uuid: String
    var conversation: String
    var sequence: Int64
    var sender: String
    var text: String
    var payload: JSONValue
    var clientMessageId: String?
    var timestamp: Int64

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "uuid": .string(uuid), "conversation": .string(conversation), "sequence": .int(sequence),
            "sender": .string(sender), "text": .string(text), "payload": payload, "timestamp": .int(timestamp),
        ]
        if let clientMessageId { object["clientMessageId"] = .string(clientMessageId) }
        return .object(object)
    }
}

struct VoxConversation {
    var uuid: String
    var title: String?
    var direct: Bool
    var uber: Bool
    var publicJoin: Bool
    var customData: JSONValue
    var createdTime: Int64
    var lastUpdateTime: Int64
    var members: [VoxMember]
    /// The immutable log: logged events (without `type`), index = sequence − 1.
    var log: [JSONValue] = []
    var messages: [String: VoxMessage] = [:]
    var messageOrder: [String] = []
    var clientMessageIDs: [String: String] = [:]
    /// Uber conversations: sequences each user may not see (logged while they were away).
    var hidden: [String: [ClosedRange<Int64>]] = [:]
    var awaySince: [String: Int64] = [:]

    var lastSequence: Int64 { Int64(log.count) }

    func member(_ userId: String) -> VoxMember? { members.first { $0.userId == userId } }

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "uuid": .string(uuid), "direct": .bool(direct), "uber": .bool(uber), "publicJoin": .bool(publicJoin),
            "customData": customData, "createdTime": .int(createdTime), "lastUpdateTime": .int(lastUpdateTime),
            "lastSequence": .int(lastSequence), "participants": .array(members.map(\.json)),
        ]
        if let title { object["title"] = .string(title) }
        return .object(object)
    }

    func canSee(_ userId: String, sequence: Int64) -> Bool {
        !(hidden[userId] ?? []).contains { $0.contains(sequence) }
    }
}

/// A protocol error as the server sends it: a code of §7 and its text.
public struct VoximplantProtocolError: Error, Sendable, CustomStringConvertible {
    public var code: Int
    /// The limit in the text of 32 and 33 (§7: `N` is filled in).
    public var limit: Int?
    public var description: String {
        let text = Self.texts[code] ?? "Something went wrong. Check input"
        guard let limit, text.hasPrefix("N ") else { return text }
        return "\(limit)" + text.dropFirst(1)
    }

    public init(_ code: Int, limit: Int? = nil) {
        self.code = code
        self.limit = limit
    }

    static let texts: [Int: String] = [
        0: "Something went wrong. Check input", 1: "Transport message structure is wrong",
        2: "Event name is unknown", 3: "User is not authorized", 8: "Conversation does not exist",
        10: "Message with this UUID does not exist in the conversation", 11: "Message with this UUID is deleted",
        12: "ACL error", 13: "User is already in the participants list",
        15: "Public join is not available in this conversation", 16: "Conversation with this UUID is deleted",
        18: "User validation error", 19: "User is not in the participants list",
        21: "Number of requested objects is 0 or larger than allowed",
        22: "Number of requested objects is larger than allowed",
        23: "Message size exceeds the limit of 5000 symbols",
        24: "The 'seq' parameter value is greater than currently possible", 25: "User not found",
        26: "The notification event is incorrect",
        28: "The 'from' field value is greater than the 'to' field value",
        30: "IM service is not available. Try again later",
        32: "N messages per second limit reached. Try again later",
        33: "N messages per minute limit reached. Try again later",
        34: "Direct conversation cannot be public or uber", 35: "Direct conversation is allowed between two users only",
        36: "Passing the 'eventsFrom', 'eventsTo' and 'count' parameters simultaneously is not allowed",
        37: "Adding participant to direct conversation is not allowed",
        38: "Removing participant from direct conversation is not allowed",
        39: "Joining direct conversation is not allowed", 40: "Leaving direct conversation is not allowed",
        41: "Specify at least two parameters: eventsFrom, eventsTo, count", 500: "Internal error",
    ]

    func frame(id: String?) -> JSONValue {
        ["type": "error", "id": id.map(JSONValue.string) ?? .null, "code": .int(Int64(code)), "description": .string(description)]
    }
}

/// A push the service sent to an offline user's device (Docs/Protocols/voximplant-style.md §5.1):
/// what the vendor's push service would carry to APNs or FCM.
public struct VoximplantPush: Sendable, Hashable {
    public var user: String
    public var token: String
    /// `apns` or `fcm`.
    public var platform: String
    /// The data map: `voximplant` = `im`, and `event` = the event's JSON text.
    public var data: [String: String]
}
