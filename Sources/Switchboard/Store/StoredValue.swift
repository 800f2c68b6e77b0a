package import Foundation

/// A model value as a durable store keeps it, beside the columns its queries need: shared by the
/// SQLite and PostgreSQL stores so both write the same bytes, and both report a value that does
/// not encode or decode as `storageFailure`. A ``Message`` is kept in its binary
/// ``StoredMessage`` form (the history pages read thousands of them), a ``ConversationInfo`` in
/// its ``StoredConversation`` form (stored with nearly every message); everything else as the
/// JSON of its `Codable` form.
package enum StoredValue {
    package static func encode(_ message: Message) -> Data { StoredMessage.encode(message) }

    package static func encode(_ conversation: ConversationInfo) -> Data { StoredConversation.encode(conversation) }

    package static func encode(_ value: some Encodable) throws -> Data {
        if let message = value as? Message { return StoredMessage.encode(message) }
        if let conversation = value as? ConversationInfo { return StoredConversation.encode(conversation) }
        do {
            return try JSONEncoder().encode(value)
        } catch {
            throw SwitchboardError(.storageFailure, "cannot encode \(type(of: value)) for the store", underlying: error)
        }
    }

    /// Decodes what `encode` stored; a message or a conversation stored as JSON (before its
    /// binary form) still decodes.
    package static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        if type == Message.self, data.first == StoredMessage.format, let message = try StoredMessage.decode(data) as? T {
            return message
        }
        if type == ConversationInfo.self, data.first == StoredConversation.format, let conversation = try StoredConversation.decode(data) as? T {
            return conversation
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw SwitchboardError(.storageFailure, "a stored \(type) does not decode", underlying: error)
        }
    }
}
