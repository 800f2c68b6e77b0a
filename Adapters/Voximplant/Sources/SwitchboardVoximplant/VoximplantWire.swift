import Foundation
import Switchboard

/// The client side of Docs/Protocols/voximplant-style.md: frames as Codable values. Written from
/// the spec; it shares no code with the emulator.
enum VoximplantWire {
    struct Request: Encodable {
        let type = "request"
        var id: String
        var name: String
        var params: JSONValue
    }

    struct Ping: Encodable {
        let type = "ping"
        var id: String
    }

    /// The answer to the server's `ping` (§2: both directions), with its `id` when it had one.
    struct Pong: Encodable {
        let type = "pong"
        var id: String?
    }

    /// Any frame from the server, read once: the envelope, and for an event frame (whose fields
    /// sit beside `type`) the event.
    struct Incoming: WireDecodable {
        var type: String
        var id: String?
        var result: JSONValue?
        var code: Int?
        var description: String?
        var event: Event?

        init(json: JSONValue) throws {
            let object = try WireObject(json, "frame")
            type = try object.required("type", \.stringValue)
            id = try object.optional("id", \.stringValue)
            result = try object.optional("result") { $0 }
            code = try object.optional("code") { $0.intValue.flatMap { Int(exactly: $0) } }
            description = try object.optional("description", \.stringValue)
            event = type == "event" ? try Event(json: json) : nil
        }
    }

    struct Participant: WireDecodable, Equatable {
        var userId: String
        var canWrite: Bool?
        var canEdit: Bool?
        var canEditAll: Bool?
        var canRemove: Bool?
        var canRemoveAll: Bool?
        var canManageParticipants: Bool?
        var isOwner: Bool?
        var lastReadSequence: Int64?

        init(json: JSONValue) throws {
            let object = try WireObject(json, "participant")
            userId = try object.required("userId", \.stringValue)
            canWrite = try object.optional("canWrite", \.boolValue)
            canEdit = try object.optional("canEdit", \.boolValue)
            canEditAll = try object.optional("canEditAll", \.boolValue)
            canRemove = try object.optional("canRemove", \.boolValue)
            canRemoveAll = try object.optional("canRemoveAll", \.boolValue)
            canManageParticipants = try object.optional("canManageParticipants", \.boolValue)
            isOwner = try object.optional("isOwner", \.boolValue)
            lastReadSequence = try object.optional("lastReadSequence", \.intValue)
        }
    }

    struct Conversation: WireDecodable, Equatable {
        var uuid: String
        var title: String?
        var direct: Bool?
        var uber: Bool?
        var publicJoin: Bool?
        var customData: JSONValue?
        var createdTime: Int64?
        var lastUpdateTime: Int64?
        var lastSequence: Int64?
        var participants: [Participant]?

        init(json: JSONValue) throws {
            let object = try WireObject(json, "conversation")
            uuid = try object.required("uuid", \.stringValue)
            title = try object.optional("title", \.stringValue)
            direct = try object.optional("direct", \.boolValue)
            uber = try object.optional("uber", \.boolValue)
            publicJoin = try object.optional("publicJoin", \.boolValue)
            customData = try object.optional("customData") { $0 }
            createdTime = try object.optional("createdTime", \.intValue)
            lastUpdateTime = try object.optional("lastUpdateTime", \.intValue)
            lastSequence = try object.optional("lastSequence", \.intValue)
            participants = try object.list("participants", Participant.init(json:))
        }
    }

    struct Message: WireDecodable, Equatable {
        var uuid: String
        var conversation: String
        var sequence: Int64?
        var sender: String?
        var text: String?
        var payload: JSONValue?
        var clientMessageId: String?
        var timestamp: Int64?

        init(json: JSONValue) throws {
            let object = try WireObject(json, "message")
            uuid = try object.required("uuid", \.stringValue)
            conversation = try object.required("conversation", \.stringValue)
            sequence = try object.optional("sequence", \.intValue)
            sender = try object.optional("sender", \.stringValue)
            text = try object.optional("text", \.stringValue)
            payload = try object.optional("payload") { $0 }
            clientMessageId = try object.optional("clientMessageId", \.stringValue)
            timestamp = try object.optional("timestamp", \.intValue)
        }
    }

    /// A server event (the frame of §3, also the `result` of requests that log one, and the
    /// entries of a retransmit).
    struct Event: WireDecodable {
        var eventType: String
        var action: String?
        var initiator: String?
        var conversation: String?
        var seq: Int64?
        var timestamp: Int64?
        var message: Message?
        var conversationSnapshot: Conversation?
        /// Participant objects (add/edit) or user ids (remove/leave).
        var participants: [JSONValue]?
        var online: Bool?
        var user: JSONValue?

        init(json: JSONValue) throws {
            let object = try WireObject(json, "event")
            eventType = try object.required("eventType", \.stringValue)
            action = try object.optional("action", \.stringValue)
            initiator = try object.optional("initiator", \.stringValue)
            conversation = try object.optional("conversation", \.stringValue)
            seq = try object.optional("seq", \.intValue)
            timestamp = try object.optional("timestamp", \.intValue)
            message = try object.optional("message", Message.init(json:))
            conversationSnapshot = try object.optional("conversationSnapshot", Conversation.init(json:))
            participants = try object.optional("participants", \.arrayValue)
            online = try object.optional("online", \.boolValue)
            user = try object.optional("user") { $0 }
        }
    }

    static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Parses `text` as JSON and reads a `T` from it.
    static func decode<T: WireDecodable>(_ type: T.Type, from text: String) throws -> T {
        let json: JSONValue
        do {
            json = try JSONValue(parsing: text)
        } catch {
            throw SwitchboardError(.protocolViolation, "undecodable \(type) of \(text.utf8.count) bytes", underlying: error)
        }
        return try T(json: json)
    }

    static func decode<T: WireDecodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try T(json: value)
    }
}

/// A wire value read from parsed JSON: a missing or null optional member is `nil`, a member of
/// the wrong type is a `SwitchboardError.Code.protocolViolation`.
protocol WireDecodable {
    init(json: JSONValue) throws
}

/// The members of one JSON object, read with the type each must have.
struct WireObject {
    let members: [String: JSONValue]
    let name: String

    init(_ json: JSONValue, _ name: String) throws {
        guard case .object(let members) = json else {
            throw SwitchboardError(.protocolViolation, "a \(name) that is not a JSON object")
        }
        self.members = members
        self.name = name
    }

    func required<T>(_ key: String, _ read: (JSONValue) throws -> T?) throws -> T {
        guard let value = try optional(key, read) else {
            throw SwitchboardError(.protocolViolation, "a \(name) without \(key)")
        }
        return value
    }

    func optional<T>(_ key: String, _ read: (JSONValue) throws -> T?) throws -> T? {
        guard let value = members[key], value != .null else { return nil }
        guard let typed = try read(value) else {
            throw SwitchboardError(.protocolViolation, "a \(name) whose \(key) has the wrong type")
        }
        return typed
    }

    func list<T>(_ key: String, _ read: (JSONValue) throws -> T) throws -> [T]? {
        try optional(key, \.arrayValue)?.map(read)
    }
}
