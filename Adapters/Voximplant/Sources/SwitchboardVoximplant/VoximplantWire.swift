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

    /// Any frame from the server, before it is told apart by `type`.
    struct Incoming: Decodable {
        var type: String
        var id: String?
        var result: JSONValue?
        var code: Int?
        var description: String?
    }

    struct Participant: Codable, Equatable {
        var userId: String
        var canWrite: Bool?
        var canEdit: Bool?
        var canEditAll: Bool?
        var canRemove: Bool?
        var canRemoveAll: Bool?
        var canManageParticipants: Bool?
        var isOwner: Bool?
        var lastReadSequence: Int64?
    }

    struct Conversation: Decodable, Equatable {
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
    }

    struct Message: Decodable, Equatable {
        var uuid: String
        var conversation: String
        var sequence: Int64?
        var sender: String?
        var text: String?
        var payload: JSONValue?
        var clientMessageId: String?
        var timestamp: Int64?
    }

    /// A server event (the frame of §3, also the `result` of requests that log one, and the
    /// entries of a retransmit).
    struct Event: Decodable {
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
    }

    static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw SwitchboardError(.protocolViolation, "undecodable \(type) of \(text.utf8.count) bytes", underlying: error)
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try decode(type, from: value.jsonString)
    }
}
