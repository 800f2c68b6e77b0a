import Foundation
import Switchboard

/// Wire objects to the normalized model, and protocol error codes to `SwitchboardError`.
enum VoximplantMapping {
    static func participant(_ wire: VoximplantWire.Participant) -> Participant {
        Participant(
            id: ParticipantID(wire.userId),
            role: .user,
            permissions: Participant.Permissions(
                canWrite: wire.canWrite ?? true,
                canEditOwn: wire.canEdit ?? true,
                canEditAll: wire.canEditAll ?? false,
                canRemoveOwn: wire.canRemove ?? true,
                canRemoveAll: wire.canRemoveAll ?? false,
                canManageParticipants: wire.canManageParticipants ?? false,
                isOwner: wire.isOwner ?? false
            ),
            lastReadSequence: wire.lastReadSequence
        )
    }

    static func wireParticipant(_ participant: Participant) -> JSONValue {
        let permissions = participant.permissions
        return [
            "userId": .string(participant.id.rawValue), "canWrite": .bool(permissions.canWrite),
            "canEdit": .bool(permissions.canEditOwn), "canEditAll": .bool(permissions.canEditAll),
            "canRemove": .bool(permissions.canRemoveOwn), "canRemoveAll": .bool(permissions.canRemoveAll),
            "canManageParticipants": .bool(permissions.canManageParticipants), "isOwner": .bool(permissions.isOwner),
        ]
    }

    static func conversation(_ wire: VoximplantWire.Conversation) -> ConversationInfo {
        var flags: ConversationInfo.Flags = []
        if wire.direct == true { flags.insert(.direct) }
        if wire.uber == true { flags.insert(.uber) }
        if wire.publicJoin == true { flags.insert(.publicJoin) }
        return ConversationInfo(
            id: ConversationID(wire.uuid),
            kind: wire.direct == true ? .direct : .group,
            // A cleared title is empty on the wire; a cleared customData an empty map.
            title: wire.title?.isEmpty == true ? nil : wire.title,
            state: .active,
            participants: (wire.participants ?? []).map(participant),
            lastSequence: wire.lastSequence,
            customData: wire.customData == [:] ? nil : wire.customData,
            flags: flags,
            createdAt: wire.createdTime.map(date),
            updatedAt: wire.lastUpdateTime.map(date)
        )
    }

    /// A message snapshot. `keepSequence` is false for edit/remove snapshots, whose `sequence`
    /// is the edit's: the message keeps its place at the sequence it was sent with.
    static func message(_ wire: VoximplantWire.Message, keepSequence: Bool, edited: Bool = false) -> Message {
        Message(
            serverID: MessageID(wire.uuid),
            clientID: wire.clientMessageId.map(ClientMessageID.init),
            conversationID: ConversationID(wire.conversation),
            sequence: keepSequence ? wire.sequence : nil,
            sender: wire.sender.map(ParticipantID.init),
            senderRole: .user,
            kind: .text,
            text: wire.text ?? "",
            payload: appPayload(wire.payload),
            time: date(wire.timestamp ?? 0),
            isEdited: edited,
            deliveryState: .sent
        )
    }

    /// A message's `payload` as the wire carries it, a list of maps (§1.8): a map goes as a list
    /// of one, a list of maps as it is, nothing as an empty list.
    ///
    /// - Throws: `invalidArgument` for anything else (a string, a number, a list of other values).
    static func wirePayload(_ payload: JSONValue?) throws -> JSONValue {
        switch payload {
        case nil, .null?: return []
        case .object?: return [payload!]
        case .array(let items)? where items.allSatisfy({ $0.objectValue != nil }): return .array(items)
        default: throw SwitchboardError(.invalidArgument, "a Voximplant payload is a map or a list of maps")
        }
    }

    /// A message's `payload` as the app sent it: a list of one map is that map (what
    /// ``wirePayload(_:)`` made of a map), an empty list is none, a longer list stays a list.
    static func appPayload(_ wire: JSONValue?) -> JSONValue? {
        switch wire?.nonNull {
        case nil, .array([])?: return nil
        case .array(let items)? where items.count == 1 && items[0].objectValue != nil: return items[0]
        case let other: return other
        }
    }

    /// One server event as the engine's event; `me` is the logged-in user.
    static func event(_ wire: VoximplantWire.Event, me: String) -> BackendEvent {
        let conversation = wire.conversation.map(ConversationID.init)
        let time = wire.timestamp.map(date)
        func logged(_ kind: BackendEvent.Kind) -> BackendEvent {
            BackendEvent(kind, conversation: conversation, sequence: wire.seq, time: time)
        }
        switch wire.eventType {
        case "createConversation":
            if let snapshot = wire.conversationSnapshot { return logged(.conversationAdded(self.conversation(snapshot))) }
        case "editConversation":
            let removed = (wire.participants ?? []).compactMap { $0.stringValue ?? $0["userId"]?.stringValue }
            if ["removeParticipants", "leaveConversation"].contains(wire.action ?? ""), removed.contains(me) {
                return logged(.conversationRemoved)
            }
            // The snapshot as of the event; the engine diffs it into participant events. Those the
            // event removes are gone from it, whether or not the server's snapshot still lists
            // them (it is taken as the event is sent to them too).
            if let snapshot = wire.conversationSnapshot {
                var info = self.conversation(snapshot)
                if ["removeParticipants", "leaveConversation"].contains(wire.action ?? "") {
                    info.participants.removeAll { removed.contains($0.id.rawValue) }
                }
                return logged(.conversationUpdated(info))
            }
        case "sendMessage":
            if let message = wire.message { return logged(.messageAdded(self.message(message, keepSequence: true), position: .newest)) }
        case "editMessage":
            if let message = wire.message { return logged(.messageUpdated(self.message(message, keepSequence: false, edited: true))) }
        case "removeMessage":
            if let message = wire.message { return logged(.messageRemoved(MessageID(message.uuid))) }
        case "typing":
            if let initiator = wire.initiator {
                return BackendEvent(.typing(ParticipantID(initiator), isTyping: true, draft: nil), conversation: conversation, time: time)
            }
        case "read":
            if let initiator = wire.initiator, let sequence = wire.seq {
                // `seq` is the marked sequence here, not a log position.
                return BackendEvent(.readMarker(ParticipantID(initiator), .sequence(sequence)), conversation: conversation, time: time)
            }
        default:
            break
        }
        // Unknown or incomplete: kept whole as a vendor event, still in its place in the log.
        return BackendEvent(.custom(name: "voximplant.\(wire.eventType)", payload: raw(wire)), conversation: conversation, sequence: wire.seq, time: time)
    }

    private static func raw(_ wire: VoximplantWire.Event) -> JSONValue {
        var object: [String: JSONValue] = ["eventType": .string(wire.eventType)]
        if let action = wire.action { object["action"] = .string(action) }
        if let initiator = wire.initiator { object["initiator"] = .string(initiator) }
        if let online = wire.online { object["online"] = .bool(online) }
        if let user = wire.user { object["user"] = user }
        return .object(object)
    }

    static func date(_ seconds: Int64) -> Date { Date(timeIntervalSince1970: TimeInterval(seconds)) }

    /// A protocol error (§7) as a classified `SwitchboardError`; the code stays as the vendor code.
    static func error(code: Int, description: String, request: String) -> SwitchboardError {
        let vendorCode = String(code)
        let message = "\(request): \(description)"
        switch code {
        // "Something went wrong; check input" (a customData over its limit, among others).
        case 0: return SwitchboardError(.invalidArgument, message, vendorCode: vendorCode)
        case 3: return SwitchboardError(.authenticationFailed, message, vendorCode: vendorCode)
        case 8, 16: return SwitchboardError(.conversationNotFound, message, vendorCode: vendorCode)
        case 10, 11: return SwitchboardError(.messageNotFound, message, vendorCode: vendorCode)
        case 12, 13, 15, 19, 34, 35, 37, 38, 39, 40: return SwitchboardError(.permissionDenied, message, vendorCode: vendorCode)
        case 18, 21, 22, 24, 25, 26, 28, 36, 41: return SwitchboardError(.invalidArgument, message, vendorCode: vendorCode)
        case 23: return SwitchboardError(.payloadTooLarge, message, vendorCode: vendorCode)
        case 30, 500: return SwitchboardError(.serverError, message, vendorCode: vendorCode)
        case 32: return SwitchboardError(.rateLimited, message, retryAfter: .seconds(1), vendorCode: vendorCode)
        case 33: return SwitchboardError(.rateLimited, message, retryAfter: .seconds(60), vendorCode: vendorCode)
        default: return SwitchboardError(.protocolViolation, message, vendorCode: vendorCode)
        }
    }
}
