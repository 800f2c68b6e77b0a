public import Foundation
public import Switchboard

/// The frames the in-memory server pushes to its clients, as JSON text.
///
/// The reference backend has a wire of its own so that it exercises what a real adapter does:
/// decode text, turn it into normalized updates, and survive text that does not decode. Its
/// server side encodes these frames and its client side decodes them; a fault can push text
/// that is not a frame at all.
public enum InMemoryFrame: Codable, Sendable, Hashable {
    case snapshot(conversations: [ConversationInfo])
    case event(kind: ChatEvent.Kind, conversation: ConversationID?, sequence: Int64?, time: Date)
    case fatal(SwitchboardError)

    public func encoded() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Every field is a plain Codable value; encoding cannot fail.
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    public static func decode(_ text: String) throws -> InMemoryFrame {
        do {
            return try JSONDecoder().decode(InMemoryFrame.self, from: Data(text.utf8))
        } catch {
            throw SwitchboardError(.protocolViolation, "undecodable frame of \(text.utf8.count) bytes", underlying: error)
        }
    }
}
