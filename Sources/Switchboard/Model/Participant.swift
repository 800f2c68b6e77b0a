public import Foundation

/// Someone in a conversation: the app's own user, an agent, a bot, the system.
public struct Participant: Sendable, Hashable, Codable, Identifiable {
    /// What a participant is in the conversation.
    public enum Role: String, Sendable, Hashable, Codable {
        /// The person using the app in a support chat (Webim visitor, CXone customer).
        case customer
        /// A human operator or agent.
        case agent
        case bot
        case system
        /// A peer user in a messenger conversation (Voximplant).
        case user
    }

    /// What a participant may do. Mirrors Voximplant's conversation permissions; support-chat
    /// backends grant the customer `canWrite` and `canEditOwn`/`canRemoveOwn` as they allow.
    public struct Permissions: Sendable, Hashable, Codable {
        public var canWrite: Bool
        public var canEditOwn: Bool
        public var canEditAll: Bool
        public var canRemoveOwn: Bool
        public var canRemoveAll: Bool
        public var canManageParticipants: Bool
        public var isOwner: Bool

        public init(
            canWrite: Bool = true,
            canEditOwn: Bool = true,
            canEditAll: Bool = false,
            canRemoveOwn: Bool = true,
            canRemoveAll: Bool = false,
            canManageParticipants: Bool = false,
            isOwner: Bool = false
        ) {
            self.canWrite = canWrite
            self.canEditOwn = canEditOwn
            self.canEditAll = canEditAll
            self.canRemoveOwn = canRemoveOwn
            self.canRemoveAll = canRemoveAll
            self.canManageParticipants = canManageParticipants
            self.isOwner = isOwner
        }

        /// Everything allowed: a conversation's owner.
        public static var owner: Permissions {
            Permissions(canEditAll: true, canRemoveAll: true, canManageParticipants: true, isOwner: true)
        }
    }

    public var id: ParticipantID
    public var role: Role
    public var displayName: String?
    public var avatarURL: URL?
    public var permissions: Permissions
    /// The sequence up to which this participant has read the conversation, where the backend
    /// has sequences.
    public var lastReadSequence: Int64?
    /// Vendor fields the model does not cover.
    public var payload: JSONValue?

    public init(
        id: ParticipantID,
        role: Role,
        displayName: String? = nil,
        avatarURL: URL? = nil,
        permissions: Permissions = Permissions(),
        lastReadSequence: Int64? = nil,
        payload: JSONValue? = nil
    ) {
        self.id = id
        self.role = role
        self.displayName = displayName
        self.avatarURL = avatarURL
        self.permissions = permissions
        self.lastReadSequence = lastReadSequence
        self.payload = payload
    }
}
