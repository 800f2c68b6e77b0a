public import Foundation

/// The state of a conversation as a value: what ``Conversation`` handles read and what the
/// store keeps.
///
/// It is named `ConversationInfo` because ``Conversation`` is the app-facing protocol you act
/// on (send, type, read, page history).
public struct ConversationInfo: Sendable, Hashable, Codable, Identifiable {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A customer-to-agent support chat (Webim chat, CXone live chat).
        case supportChat
        /// One of several threads of a customer (CXone multi-thread).
        case thread
        /// A one-to-one conversation between users.
        case direct
        case group
    }

    /// Where a conversation is in its lifecycle.
    public enum State: Sendable, Hashable, Codable, CustomStringConvertible {
        case none
        case queued
        case active
        case invitation
        case closedByAgent
        case closedByCustomer
        case closed
        case archived
        /// A vendor state the model does not know, kept verbatim.
        case unknown(String)

        public var isClosed: Bool {
            switch self {
            case .closedByAgent, .closedByCustomer, .closed, .archived: return true
            default: return false
            }
        }

        public var description: String {
            switch self {
            case .none: return "none"
            case .queued: return "queued"
            case .active: return "active"
            case .invitation: return "invitation"
            case .closedByAgent: return "closedByAgent"
            case .closedByCustomer: return "closedByCustomer"
            case .closed: return "closed"
            case .archived: return "archived"
            case .unknown(let raw): return "unknown(\(raw))"
            }
        }
    }

    /// Flags of messenger conversations.
    public struct Flags: OptionSet, Sendable, Hashable, Codable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let direct = Flags(rawValue: 1 << 0)
        /// Voximplant "uber" conversations: members do not see what was posted while away.
        public static let uber = Flags(rawValue: 1 << 1)
        /// Anyone may join.
        public static let publicJoin = Flags(rawValue: 1 << 2)
    }

    public var id: ConversationID
    public var kind: Kind
    public var title: String?
    public var state: State
    public var participants: [Participant]
    public var assignedAgent: Participant?
    /// The newest event sequence the server reports, where the backend has sequences.
    public var lastSequence: Int64?
    public var unreadCount: Int
    public var customData: JSONValue?
    public var flags: Flags
    public var createdAt: Date?
    public var updatedAt: Date?

    public init(
        id: ConversationID,
        kind: Kind = .supportChat,
        title: String? = nil,
        state: State = .none,
        participants: [Participant] = [],
        assignedAgent: Participant? = nil,
        lastSequence: Int64? = nil,
        unreadCount: Int = 0,
        customData: JSONValue? = nil,
        flags: Flags = [],
        createdAt: Date? = nil,
        updatedAt: Date? = nil
    ) {
        self.id = id
        self.kind = kind
        self.title = title
        self.state = state
        self.participants = participants
        self.assignedAgent = assignedAgent
        self.lastSequence = lastSequence
        self.unreadCount = unreadCount
        self.customData = customData
        self.flags = flags
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    public func participant(_ id: ParticipantID) -> Participant? {
        participants.first { $0.id == id }
    }
}

extension ConversationInfo {
    /// This conversation with its assigned agent among the participants: an assigned agent takes
    /// part in the conversation, whether or not the backend lists it there.
    func withAssignedAgentAsParticipant() -> ConversationInfo {
        guard let agent = assignedAgent, !participants.contains(where: { $0.id == agent.id }) else { return self }
        var info = self
        info.participants.append(agent)
        return info
    }
}
