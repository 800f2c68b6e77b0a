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
    /// The newest event sequence the server reports, where the backend has sequences; the engine
    /// moves it with each message event.
    public var lastSequence: Int64?
    /// Messages from others the user has not read: kept by the engine for every backend (each new
    /// message from someone else adds one; the user's own never count; marking read, here or on
    /// another device, lowers it), or the backend's own count where it reports one
    /// (``BackendCapabilities/unreadCounts``).
    public var unreadCount: Int
    public var customData: JSONValue?
    public var flags: Flags
    public var createdAt: Date?
    /// The time of the newest message (or of the newest change the backend reported): sort a list
    /// of conversations by it.
    public var updatedAt: Date?
    /// The newest message, as a list of conversations shows it.
    public var lastMessage: MessagePreview? {
        get { lastMessageBox?.preview }
        set { lastMessageBox = newValue.map(PreviewBox.init) }
    }
    /// Held by reference: a conversation travels inline in every event and engine input, whose
    /// size is that of their largest case, and the preview would make each of them 100 bytes
    /// larger (the idle session grew by 30 KB).
    private var lastMessageBox: PreviewBox?

    private enum CodingKeys: String, CodingKey {
        case id, kind, title, state, participants, assignedAgent, lastSequence, unreadCount, customData, flags, createdAt, updatedAt
        case lastMessageBox = "lastMessage"
    }

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
        updatedAt: Date? = nil,
        lastMessage: MessagePreview? = nil
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
        self.lastMessageBox = lastMessage.map(PreviewBox.init)
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

/// A ``MessagePreview`` held by reference, encoded as the preview itself.
private final class PreviewBox: Sendable, Hashable, Codable {
    let preview: MessagePreview

    init(_ preview: MessagePreview) {
        self.preview = preview
    }

    init(from decoder: any Decoder) throws {
        self.preview = try MessagePreview(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        try preview.encode(to: encoder)
    }

    static func == (lhs: PreviewBox, rhs: PreviewBox) -> Bool { lhs.preview == rhs.preview }
    func hash(into hasher: inout Hasher) { hasher.combine(preview) }
}

/// A conversation's newest message, as a list of conversations shows it.
public struct MessagePreview: Sendable, Hashable, Codable {
    public var serverID: MessageID?
    public var sender: ParticipantID?
    public var senderRole: Participant.Role?
    public var senderName: String?
    public var text: String
    /// How many files it carries (a preview says "📎 2" where it has no text).
    public var attachmentCount: Int
    public var time: Date
    public var deliveryState: Message.DeliveryState
    /// Sent by the user (from this app or another device).
    public var isOwn: Bool

    public init(_ message: Message, isOwn: Bool) {
        self.serverID = message.serverID
        self.sender = message.sender
        self.senderRole = message.senderRole
        self.senderName = message.senderName
        self.text = message.text
        self.attachmentCount = message.attachments.count
        self.time = message.time
        self.deliveryState = message.deliveryState
        self.isOwn = isOwn
    }
}
