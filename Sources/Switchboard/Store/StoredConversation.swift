package import Foundation

/// The stored form of a ``ConversationInfo``: a binary record, as ``StoredMessage`` is for a
/// message. The engine stores a conversation with every message that changes its preview or its
/// unread count (a send, its confirmation, each arriving message), and `JSONEncoder` took almost
/// half of the SQLite store's time in those transactions (`Docs/Benchmarks.md`).
///
/// It starts with its own format byte, which JSON text never starts with: rows stored as JSON
/// before this form still read (``StoredValue/decode(_:_:)``).
package enum StoredConversation {
    /// The first byte of a record in this form.
    package static let format: UInt8 = 0x02

    package static func encode(_ conversation: ConversationInfo) -> Data {
        var writer = StoredRecordWriter()
        writer.bytes.reserveCapacity(128 + (conversation.lastMessage?.text.utf8.count ?? 0))
        writer.byte(format)
        var flags: UInt64 = 0
        if conversation.title != nil { flags |= Flag.title }
        if conversation.assignedAgent != nil { flags |= Flag.assignedAgent }
        if conversation.lastSequence != nil { flags |= Flag.lastSequence }
        if conversation.customData != nil { flags |= Flag.customData }
        if conversation.createdAt != nil { flags |= Flag.createdAt }
        if conversation.updatedAt != nil { flags |= Flag.updatedAt }
        if conversation.lastMessage != nil { flags |= Flag.lastMessage }
        writer.varint(flags)
        writer.string(conversation.id.rawValue)
        writer.string(conversation.kind.rawValue)
        writer.state(conversation.state)
        if let title = conversation.title { writer.string(title) }
        writer.varint(UInt64(conversation.participants.count))
        for participant in conversation.participants { writer.participant(participant) }
        if let agent = conversation.assignedAgent { writer.participant(agent) }
        if let sequence = conversation.lastSequence { writer.signed(sequence) }
        writer.signed(Int64(conversation.unreadCount))
        if let customData = conversation.customData { writer.string(customData.jsonString) }
        writer.signed(Int64(conversation.flags.rawValue))
        if let createdAt = conversation.createdAt { writer.double(createdAt.timeIntervalSinceReferenceDate) }
        if let updatedAt = conversation.updatedAt { writer.double(updatedAt.timeIntervalSinceReferenceDate) }
        if let preview = conversation.lastMessage { writer.preview(preview) }
        return Data(writer.bytes)
    }

    /// - Throws: `storageFailure` when the record is cut short, has bytes after its end, or holds
    ///   a value no conversation has (an unknown kind, role or tag, a bad URL, data that is not JSON).
    package static func decode(_ data: Data) throws -> ConversationInfo {
        try data.withUnsafeBytes { raw in
            var reader = StoredRecordReader(bytes: raw, type: "ConversationInfo")
            guard try reader.byte() == format else { throw reader.corrupt("an unknown format") }
            let flags = try reader.varint()
            guard flags & ~Flag.known == 0 else { throw reader.corrupt("parts this version does not know") }
            let id = ConversationID(try reader.string())
            let kindName = try reader.string()
            guard let kind = ConversationInfo.Kind(rawValue: kindName) else { throw reader.corrupt("an unknown kind \(kindName)") }
            let state = try reader.state()
            let title = flags & Flag.title != 0 ? try reader.string() : nil
            var participants: [Participant] = []
            let count = try reader.count()
            participants.reserveCapacity(count)
            for _ in 0..<count { participants.append(try reader.participant()) }
            let assignedAgent = flags & Flag.assignedAgent != 0 ? try reader.participant() : nil
            let lastSequence = flags & Flag.lastSequence != 0 ? try reader.signed() : nil
            let unreadCount = try reader.int()
            var customData: JSONValue?
            if flags & Flag.customData != 0 { customData = try reader.json() }
            let conversationFlags = ConversationInfo.Flags(rawValue: try reader.int())
            let createdAt = flags & Flag.createdAt != 0 ? Date(timeIntervalSinceReferenceDate: try reader.double()) : nil
            let updatedAt = flags & Flag.updatedAt != 0 ? Date(timeIntervalSinceReferenceDate: try reader.double()) : nil
            let lastMessage = flags & Flag.lastMessage != 0 ? try reader.preview() : nil
            guard reader.isAtEnd else { throw reader.corrupt("bytes after its end") }
            return ConversationInfo(
                id: id, kind: kind, title: title, state: state, participants: participants, assignedAgent: assignedAgent,
                lastSequence: lastSequence, unreadCount: unreadCount, customData: customData, flags: conversationFlags,
                createdAt: createdAt, updatedAt: updatedAt, lastMessage: lastMessage
            )
        }
    }

    /// Which of a conversation's optional parts the record holds.
    private enum Flag {
        static let title: UInt64 = 1 << 0
        static let assignedAgent: UInt64 = 1 << 1
        static let lastSequence: UInt64 = 1 << 2
        static let customData: UInt64 = 1 << 3
        static let createdAt: UInt64 = 1 << 4
        static let updatedAt: UInt64 = 1 << 5
        static let lastMessage: UInt64 = 1 << 6
        static let known: UInt64 = (1 << 7) - 1
    }

    /// Which of a participant's or a preview's parts the record holds.
    fileprivate enum PartFlag {
        static let displayName: UInt64 = 1 << 0
        static let avatarURL: UInt64 = 1 << 1
        static let lastReadSequence: UInt64 = 1 << 2
        static let payload: UInt64 = 1 << 3
        static let serverID: UInt64 = 1 << 4
        static let sender: UInt64 = 1 << 5
        static let senderRole: UInt64 = 1 << 6
        static let senderName: UInt64 = 1 << 7
        static let isOwn: UInt64 = 1 << 8
        static let known: UInt64 = (1 << 9) - 1
    }

    /// A participant's permissions, one bit each.
    fileprivate enum Permission {
        static func bits(_ permissions: Participant.Permissions) -> UInt64 {
            let flags = [
                permissions.canWrite, permissions.canEditOwn, permissions.canEditAll, permissions.canRemoveOwn,
                permissions.canRemoveAll, permissions.canManageParticipants, permissions.isOwner,
            ]
            return flags.enumerated().reduce(0) { bits, flag in flag.element ? bits | 1 << UInt64(flag.offset) : bits }
        }

        static func permissions(_ bits: UInt64) -> Participant.Permissions {
            func has(_ index: UInt64) -> Bool { bits & 1 << index != 0 }
            return Participant.Permissions(
                canWrite: has(0), canEditOwn: has(1), canEditAll: has(2), canRemoveOwn: has(3), canRemoveAll: has(4),
                canManageParticipants: has(5), isOwner: has(6)
            )
        }

        static let known: UInt64 = (1 << 7) - 1
    }

    /// The tags of a conversation's states. Never renumbered: stored records keep them.
    fileprivate enum StateTag: UInt8 {
        case none, queued, active, invitation, closedByAgent, closedByCustomer, closed, archived, unknown
    }
}

extension StoredRecordWriter {
    fileprivate mutating func state(_ state: ConversationInfo.State) {
        typealias Tag = StoredConversation.StateTag
        switch state {
        case .none: byte(Tag.none.rawValue)
        case .queued: byte(Tag.queued.rawValue)
        case .active: byte(Tag.active.rawValue)
        case .invitation: byte(Tag.invitation.rawValue)
        case .closedByAgent: byte(Tag.closedByAgent.rawValue)
        case .closedByCustomer: byte(Tag.closedByCustomer.rawValue)
        case .closed: byte(Tag.closed.rawValue)
        case .archived: byte(Tag.archived.rawValue)
        case .unknown(let raw):
            byte(Tag.unknown.rawValue)
            string(raw)
        }
    }

    fileprivate mutating func participant(_ participant: Participant) {
        typealias Part = StoredConversation.PartFlag
        var flags: UInt64 = 0
        if participant.displayName != nil { flags |= Part.displayName }
        if participant.avatarURL != nil { flags |= Part.avatarURL }
        if participant.lastReadSequence != nil { flags |= Part.lastReadSequence }
        if participant.payload != nil { flags |= Part.payload }
        varint(flags)
        string(participant.id.rawValue)
        string(participant.role.rawValue)
        if let name = participant.displayName { string(name) }
        if let url = participant.avatarURL { string(url.absoluteString) }
        varint(StoredConversation.Permission.bits(participant.permissions))
        if let sequence = participant.lastReadSequence { signed(sequence) }
        if let payload = participant.payload { string(payload.jsonString) }
    }

    fileprivate mutating func preview(_ preview: MessagePreview) {
        typealias Part = StoredConversation.PartFlag
        var flags: UInt64 = 0
        if preview.serverID != nil { flags |= Part.serverID }
        if preview.sender != nil { flags |= Part.sender }
        if preview.senderRole != nil { flags |= Part.senderRole }
        if preview.senderName != nil { flags |= Part.senderName }
        if preview.isOwn { flags |= Part.isOwn }
        varint(flags)
        if let serverID = preview.serverID { string(serverID.rawValue) }
        if let sender = preview.sender { string(sender.rawValue) }
        if let role = preview.senderRole { string(role.rawValue) }
        if let name = preview.senderName { string(name) }
        string(preview.text)
        signed(Int64(preview.attachmentCount))
        double(preview.time.timeIntervalSinceReferenceDate)
        deliveryState(preview.deliveryState)
    }
}

extension StoredRecordReader {
    fileprivate mutating func state() throws -> ConversationInfo.State {
        guard let tag = StoredConversation.StateTag(rawValue: try byte()) else { throw corrupt("an unknown state") }
        switch tag {
        case .none: return .none
        case .queued: return .queued
        case .active: return .active
        case .invitation: return .invitation
        case .closedByAgent: return .closedByAgent
        case .closedByCustomer: return .closedByCustomer
        case .closed: return .closed
        case .archived: return .archived
        case .unknown: return .unknown(try string())
        }
    }

    fileprivate mutating func participant() throws -> Participant {
        typealias Part = StoredConversation.PartFlag
        let flags = try varint()
        guard flags & ~(Part.displayName | Part.avatarURL | Part.lastReadSequence | Part.payload) == 0 else {
            throw corrupt("participant parts this version does not know")
        }
        let id = ParticipantID(try string())
        let role = try self.role()
        let displayName = flags & Part.displayName != 0 ? try string() : nil
        let avatarURL = flags & Part.avatarURL != 0 ? try url(from: try string()) : nil
        let bits = try varint()
        guard bits & ~StoredConversation.Permission.known == 0 else { throw corrupt("permissions this version does not know") }
        let permissions = StoredConversation.Permission.permissions(bits)
        let lastReadSequence = flags & Part.lastReadSequence != 0 ? try signed() : nil
        // Not a `?:` with `nil`: `JSONValue` is `ExpressibleByNilLiteral` (JSON's null).
        var payload: JSONValue?
        if flags & Part.payload != 0 { payload = try json() }
        return Participant(
            id: id, role: role, displayName: displayName, avatarURL: avatarURL, permissions: permissions,
            lastReadSequence: lastReadSequence, payload: payload
        )
    }

    fileprivate mutating func preview() throws -> MessagePreview {
        typealias Part = StoredConversation.PartFlag
        let flags = try varint()
        guard flags & ~(Part.serverID | Part.sender | Part.senderRole | Part.senderName | Part.isOwn) == 0 else {
            throw corrupt("preview parts this version does not know")
        }
        let serverID = flags & Part.serverID != 0 ? MessageID(try string()) : nil
        let sender = flags & Part.sender != 0 ? ParticipantID(try string()) : nil
        let senderRole = flags & Part.senderRole != 0 ? try role() : nil
        let senderName = flags & Part.senderName != 0 ? try string() : nil
        let text = try string()
        let attachmentCount = try int()
        let time = Date(timeIntervalSinceReferenceDate: try double())
        let deliveryState = try self.deliveryState()
        return MessagePreview(
            serverID: serverID, sender: sender, senderRole: senderRole, senderName: senderName, text: text,
            attachmentCount: attachmentCount, time: time, deliveryState: deliveryState, isOwn: flags & Part.isOwn != 0
        )
    }
}

extension MessagePreview {
    /// A preview with every part given: what a stored record holds.
    fileprivate init(
        serverID: MessageID?, sender: ParticipantID?, senderRole: Participant.Role?, senderName: String?, text: String,
        attachmentCount: Int, time: Date, deliveryState: Message.DeliveryState, isOwn: Bool
    ) {
        self.serverID = serverID
        self.sender = sender
        self.senderRole = senderRole
        self.senderName = senderName
        self.text = text
        self.attachmentCount = attachmentCount
        self.time = time
        self.deliveryState = deliveryState
        self.isOwn = isOwn
    }
}
