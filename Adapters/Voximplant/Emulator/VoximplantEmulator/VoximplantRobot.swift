import Switchboard

/// Acts as one user on a ``VoximplantServer`` without a socket: the agent or other participant
/// of tests, the demo and `switchboard emulate`.
public struct VoximplantRobot: Sendable {
    public let server: VoximplantServer
    public let user: String

    /// Creates a conversation owned by this user with `participants`; returns its UUID.
    @discardableResult
    public func createConversation(
        title: String?,
        with participants: [String],
        direct: Bool = false,
        uber: Bool = false,
        publicJoin: Bool = false
    ) throws -> String {
        var params: [String: JSONValue] = [
            "participants": .array(participants.map { ["userId": .string($0)] }),
            "direct": .bool(direct), "uber": .bool(uber), "publicJoin": .bool(publicJoin),
        ]
        if let title { params["title"] = .string(title) }
        let event = try server.perform("createConversation", params: .object(params), as: user)
        return event["conversation"]?.stringValue ?? ""
    }

    /// Sends a message; returns its UUID and sequence.
    @discardableResult
    public func send(_ text: String, in conversation: String) throws -> (uuid: String, sequence: Int64) {
        let event = try server.perform("sendMessage", params: ["conversation": .string(conversation), "text": .string(text)], as: user)
        return (event["message"]?["uuid"]?.stringValue ?? "", event["seq"]?.intValue ?? 0)
    }

    public func edit(_ message: String, in conversation: String, text: String) throws {
        _ = try server.perform("editMessage", params: ["conversation": .string(conversation), "message": .string(message), "text": .string(text)], as: user)
    }

    public func remove(_ message: String, in conversation: String) throws {
        _ = try server.perform("removeMessage", params: ["conversation": .string(conversation), "message": .string(message)], as: user)
    }

    public func typing(in conversation: String) throws {
        _ = try server.perform("typing", params: ["conversation": .string(conversation)], as: user)
    }

    /// Marks the conversation read up to `sequence` (its last sequence by default).
    public func markRead(in conversation: String, upTo sequence: Int64? = nil) throws {
        let upTo = sequence ?? server.lastSequence(of: conversation)
        _ = try server.perform("read", params: ["conversation": .string(conversation), "seq": .int(upTo)], as: user)
    }

    public func addParticipants(_ users: [String], to conversation: String) throws {
        _ = try server.perform("addParticipants", params: ["conversation": .string(conversation), "participants": .array(users.map { ["userId": .string($0)] })], as: user)
    }

    /// Sets a participant's permissions (`editParticipants`); the keys are the protocol's
    /// (`canWrite`, `canEdit`, `canEditAll`, `canRemove`, `canRemoveAll`, `canManageParticipants`,
    /// `isOwner`), the others keep their defaults.
    public func editParticipant(_ participant: String, in conversation: String, _ permissions: [String: Bool]) throws {
        var entry: [String: JSONValue] = ["userId": .string(participant)]
        for (key, value) in permissions { entry[key] = .bool(value) }
        _ = try server.perform("editParticipants", params: ["conversation": .string(conversation), "participants": [.object(entry)]], as: user)
    }

    public func removeParticipants(_ users: [String], from conversation: String) throws {
        _ = try server.perform("removeParticipants", params: ["conversation": .string(conversation), "participants": .array(users.map(JSONValue.string))], as: user)
    }

    public func leave(_ conversation: String) throws {
        _ = try server.perform("leaveConversation", params: ["conversation": .string(conversation)], as: user)
    }
}
