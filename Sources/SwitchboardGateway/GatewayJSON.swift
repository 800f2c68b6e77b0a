import Foundation
import Switchboard

/// The JSON the gateway's API speaks: the model's values as `openapi.yaml` describes them, with
/// plain field names and ISO 8601 times, written here field by field so the wire format does not
/// move when a Swift type's synthesized `Codable` would.
enum GatewayJSON {
    static func time(_ date: Date) -> JSONValue {
        .string(date.formatted(.iso8601.year().month().day().timeZone(separator: .omitted).time(includingFractionalSeconds: true).timeSeparator(.colon)))
    }

    static func object(_ fields: [String: JSONValue?]) -> JSONValue {
        .object(fields.compactMapValues { $0 })
    }

    static func participant(_ participant: Participant) -> JSONValue {
        object([
            "id": .string(participant.id.rawValue),
            "role": .string(participant.role.rawValue),
            "displayName": participant.displayName.map(JSONValue.string),
            "lastReadSequence": participant.lastReadSequence.map(JSONValue.int),
        ])
    }

    static func conversation(_ info: ConversationInfo) -> JSONValue {
        object([
            "id": .string(info.id.rawValue),
            "kind": .string(info.kind.rawValue),
            "title": info.title.map(JSONValue.string),
            "state": .string(info.state.description),
            "unreadCount": .int(Int64(info.unreadCount)),
            "lastSequence": info.lastSequence.map(JSONValue.int),
            "participants": .array(info.participants.map(participant)),
            "agent": info.assignedAgent.map(participant),
        ])
    }

    static func deliveryState(_ state: Message.DeliveryState) -> (String, String?) {
        switch state {
        case .pending: ("pending", nil)
        case .sent: ("sent", nil)
        case .delivered: ("delivered", nil)
        case .read: ("read", nil)
        case .failed(let reason): ("failed", reason)
        }
    }

    static func kind(_ kind: Message.Kind) -> String {
        switch kind {
        case .text: "text"
        case .file: "file"
        case .system: "system"
        case .actionRequest: "actionRequest"
        case .agentBusy: "agentBusy"
        case .rich(let name): "rich:\(name)"
        case .custom(let name): "custom:\(name)"
        }
    }

    static func message(_ message: Message) -> JSONValue {
        let (state, failure) = deliveryState(message.deliveryState)
        return object([
            "serverId": message.serverID.map { .string($0.rawValue) },
            "clientId": message.clientID.map { .string($0.rawValue) },
            "conversationId": .string(message.conversationID.rawValue),
            "sequence": message.sequence.map(JSONValue.int),
            "sender": message.sender.map { .string($0.rawValue) },
            "senderRole": message.senderRole.map { .string($0.rawValue) },
            "senderName": message.senderName.map(JSONValue.string),
            "kind": .string(kind(message.kind)),
            "text": .string(message.text),
            "time": time(message.time),
            "state": .string(state),
            "error": failure.map(JSONValue.string),
            "edited": message.isEdited ? .bool(true) : nil,
            "deleted": message.isDeleted ? .bool(true) : nil,
            "attachments": message.attachments.isEmpty
                ? nil
                : .array(
                    message.attachments.map {
                        object([
                            "name": .string($0.name), "mimeType": $0.mimeType.map(JSONValue.string), "size": $0.size.map(JSONValue.int),
                            "url": $0.url.map { .string($0.absoluteString) },
                        ])
                    }
                ),
            "payload": message.payload,
        ])
    }

    static func error(_ error: SwitchboardError) -> JSONValue {
        object(["code": .string(error.code.description), "message": .string(error.message)])
    }

    static func marker(_ marker: ChatEvent.ReadMarker) -> JSONValue {
        switch marker {
        case .sequence(let sequence): .object(["sequence": .int(sequence)])
        case .message(let id): .object(["messageId": .string(id.rawValue)])
        case .time(let date): .object(["time": time(date)])
        }
    }

    /// One event of the stream: where it is in the log (`id`), whose it is, and what happened
    /// (`type` and its fields).
    static func event(_ event: ChatEvent, id: String) -> JSONValue {
        var fields: [String: JSONValue?] = [
            "id": .string(id),
            "session": .string(event.origin.session.rawValue),
            "backend": .string(event.origin.backend.rawValue),
            "conversation": event.conversationID.map { .string($0.rawValue) },
            "time": time(event.time),
            "sequence": event.sequence.map(JSONValue.int),
        ]
        let (type, details) = kind(event.kind)
        fields["type"] = .string(type)
        for (name, value) in details { fields[name] = value }
        return object(fields)
    }

    static func kind(_ kind: ChatEvent.Kind) -> (String, [String: JSONValue?]) {
        switch kind {
        case .connection(let state, let reason):
            return ("connection", ["state": .string(state.rawValue), "reason": reason.map { .string("\($0)") }])
        case .conversationAdded(let info): return ("conversationAdded", ["conversationInfo": conversation(info)])
        case .conversationUpdated(let info): return ("conversationUpdated", ["conversationInfo": conversation(info)])
        case .conversationStateChanged(let state, let previous):
            return ("conversationStateChanged", ["state": .string(state.description), "previous": previous.map { .string($0.description) }])
        case .conversationRemoved: return ("conversationRemoved", [:])
        case .participantsAdded(let participants): return ("participantsAdded", ["participants": .array(participants.map(participant))])
        case .participantsUpdated(let participants): return ("participantsUpdated", ["participants": .array(participants.map(participant))])
        case .participantsRemoved(let ids): return ("participantsRemoved", ["participantIds": .array(ids.map { .string($0.rawValue) })])
        case .agentChanged(let agent): return ("agentChanged", ["agent": agent.map(participant) ?? .null])
        case .messageAdded(let added, let position): return ("messageAdded", ["message": message(added), "position": .string(position.rawValue)])
        case .messageUpdated(let updated): return ("messageUpdated", ["message": message(updated)])
        case .messageRemoved(let id): return ("messageRemoved", ["messageId": .string(id.rawValue)])
        case .historyCleared: return ("historyCleared", [:])
        case .typing(let who, let isTyping, let draft):
            return ("typing", ["participant": .string(who.rawValue), "isTyping": .bool(isTyping), "draft": draft.map(JSONValue.string)])
        case .readMarker(let who, let readMarker): return ("readMarker", ["participant": .string(who.rawValue), "marker": marker(readMarker)])
        case .availability(let availability): return ("availability", ["availability": .string(availability.rawValue)])
        case .queuePosition(let position): return ("queuePosition", ["queuePosition": position.map { .int(Int64($0)) } ?? .null])
        case .settingsChanged(let settings): return ("settingsChanged", ["settings": settings])
        case .custom(let name, let payload): return ("custom", ["name": .string(name), "payload": payload])
        case .error(let failure): return ("error", ["error": error(failure)])
        case .fatal(let failure): return ("fatal", ["error": error(failure)])
        case .gap(let dropped): return ("gap", ["dropped": .int(Int64(dropped))])
        }
    }

    /// A history page's `before` cursor: a message's place in its conversation, opaque to callers.
    static func cursor(_ key: MessageOrderKey) -> String {
        let data = (try? JSONEncoder().encode(key)) ?? Data()
        return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func orderKey(cursor: String) -> MessageOrderKey? {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return try? JSONDecoder().decode(MessageOrderKey.self, from: data)
    }
}
