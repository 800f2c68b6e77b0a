/// The shared shape of Switchboard's typed identifiers: a distinct type wrapping the backend's
/// own string, so a message id can never be passed where a conversation id is expected.
public protocol StringIdentifier: Hashable, Sendable, Codable, Comparable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    var rawValue: String { get }
    init(_ rawValue: String)
}

extension StringIdentifier {
    public init(stringLiteral value: String) { self.init(value) }
    public var description: String { rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A conversation as the backend names it: a Webim chat, a Voximplant conversation UUID, a
/// CXone thread id.
public struct ConversationID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A message id assigned by the server.
public struct MessageID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A participant (customer, agent, bot, system, user) as the backend names it.
public struct ParticipantID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A message id generated on the client before the send, echoed by the server. It is how a
/// resend after a timeout is recognised as the same message.
public struct ClientMessageID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// A fresh random id (a UUID string).
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> ClientMessageID {
        ClientMessageID(UUIDString.random(using: &generator))
    }
}

/// One session: one backend account connected by one app.
public struct SessionID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// The name of a backend kind, such as `webim`, `voximplant` or `cxone`.
public struct BackendName: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

enum UUIDString {
    /// A version-4 UUID string drawn from `generator`, so ids are reproducible under a seeded
    /// generator.
    static func random<G: RandomNumberGenerator>(using generator: inout G) -> String {
        // Two draws for the 16 bytes (a draw of the system generator is a system call), written
        // into one buffer: a client id is made for every send.
        let words = (generator.next(), generator.next())
        return String(unsafeUninitializedCapacity: 36) { buffer in
            let digits: StaticString = "0123456789abcdef"
            var written = 0
            for index in 0..<16 {
                let word = index < 8 ? words.0 : words.1
                var byte = UInt8(truncatingIfNeeded: word >> (UInt64(index % 8) * 8))
                if index == 6 { byte = (byte & 0x0F) | 0x40 }
                if index == 8 { byte = (byte & 0x3F) | 0x80 }
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    buffer[written] = UInt8(ascii: "-")
                    written += 1
                }
                buffer[written] = digits.utf8Start[Int(byte >> 4)]
                buffer[written + 1] = digits.utf8Start[Int(byte & 0x0F)]
                written += 2
            }
            return written
        }
    }
}
