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
        var bytes = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]]
            .map { $0.joined() }
            .joined(separator: "-")
    }
}
