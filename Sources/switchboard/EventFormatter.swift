import Foundation
import Switchboard

/// Renders normalized events as one readable line each, or as JSON lines.
struct EventFormatter: Sendable {
    enum Format: Sendable {
        case timeline
        case jsonLines
    }

    let format: Format
    let start: Date
    /// The user the session is logged in as, where peers share one role (Voximplant-style): their
    /// messages are `"mine": true` in JSON lines.
    var me: ParticipantID?

    /// One line for `event`. The timeline's clock is when the app received it (`receivedAt`,
    /// since `start`); the server's time is added only where it differs by half a second or more
    /// (a server clock of whole seconds, a message sent while the app was away).
    func line(for event: ChatEvent, receivedAt: Date? = nil) -> String {
        switch format {
        case .jsonLines:
            return Self.jsonLine(for: event, me: me)
        case .timeline:
            let received = receivedAt ?? event.time
            let offset = String(format: "+%7.3fs", received.timeIntervalSince(start))
            let server = abs(event.time.timeIntervalSince(received)) >= 0.5 ? String(format: "  (server %+.3fs)", event.time.timeIntervalSince(start)) : ""
            let origin = "\(event.origin.backend)/\(event.origin.session)".padding(toLength: 27, withPad: " ", startingAt: 0)
            let conversation = (event.conversationID.map { id in
                "[\(id.rawValue.count > 8 ? String(id.rawValue.prefix(7)) + "…" : id.rawValue)]"
            } ?? "").padding(toLength: 10, withPad: " ", startingAt: 0)
            let sequence = event.sequence.map { " #\($0)" } ?? ""
            return "\(offset)  \(origin) \(conversation) \(describe(event.kind))\(sequence)\(server)"
        }
    }

    /// One JSON object per event (Docs/CLI.md): flat fields for scripts (`kind`, `backend`,
    /// `session`, `conversation`, `time`, `sequence`, and `message` for message events), plus the
    /// whole event as `event`, which decodes as a ``ChatEvent``. `sequence` is the event's, else
    /// its message's (history pages carry no event sequence), `null` when neither has one (a
    /// pending send).
    static func jsonLine(for event: ChatEvent, me: ParticipantID? = nil) -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(event), let whole = try? JSONValue(parsing: data) else {
            return JSONValue.object(["kind": "unencodable", "backend": .string(event.origin.backend.rawValue)]).jsonString
        }
        var line: [String: JSONValue] = [
            "kind": .string(whole["kind"]?.objectValue?.keys.first ?? "unknown"),
            "backend": .string(event.origin.backend.rawValue),
            "session": .string(event.origin.session.rawValue),
            "time": whole["time"] ?? .null,
            "event": whole,
        ]
        if let conversation = event.conversationID { line["conversation"] = .string(conversation.rawValue) }
        if let sequence = event.sequence { line["sequence"] = .int(sequence) }
        switch event.kind {
        case .messageAdded(let message, _), .messageUpdated(let message):
            line["message"] = Self.json(message, me: me)
            line["sequence"] = (event.sequence ?? message.sequence).map { .int($0) } ?? .null
        case .messageRemoved(let id):
            line["message"] = ["id": .string(id.rawValue)]
        default:
            break
        }
        return JSONValue.object(line).jsonString
    }

    static func json(_ message: Message, me: ParticipantID? = nil) -> JSONValue {
        // The app user's own: a customer's message in a support chat, the logged-in user's among
        // peers, or one still pending (only the app's own are).
        let mine = message.senderRole == .customer || message.deliveryState == .pending || (me != nil && message.sender == me)
        var object: [String: JSONValue] = [
            "mine": .bool(mine),
            "sequence": message.sequence.map { .int($0) } ?? .null,
            "text": .string(message.text),
            "kind": .string(kindName(message.kind)),
            "deliveryState": .string(stateName(message.deliveryState)),
            "sender": [
                "id": message.sender.map { .string($0.rawValue) } ?? .null,
                "name": message.senderName.map { .string($0) } ?? .null,
                "role": message.senderRole.map { .string($0.rawValue) } ?? .null,
            ],
        ]
        object["id"] = message.serverID.map { .string($0.rawValue) } ?? .null
        object["clientId"] = message.clientID.map { .string($0.rawValue) } ?? .null
        if case .rich(let type) = message.kind { object["richType"] = .string(type) }
        if case .custom(let type) = message.kind { object["customType"] = .string(type) }
        if case .failed(let reason) = message.deliveryState { object["failureReason"] = .string(reason) }
        if !message.attachments.isEmpty {
            object["attachments"] = .array(message.attachments.map { attachment in
                ["name": .string(attachment.name), "mimeType": attachment.mimeType.map { .string($0) } ?? .null, "url": attachment.url.map { .string($0.absoluteString) } ?? .null]
            })
        }
        return .object(object)
    }

    static func kindName(_ kind: Message.Kind) -> String {
        switch kind {
        case .text: "text"
        case .file: "file"
        case .system: "system"
        case .actionRequest: "actionRequest"
        case .agentBusy: "agentBusy"
        case .rich: "rich"
        case .custom: "custom"
        }
    }

    static func stateName(_ state: Message.DeliveryState) -> String {
        switch state {
        case .pending: "pending"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
        case .failed: "failed"
        }
    }

    func describe(_ kind: ChatEvent.Kind) -> String {
        switch kind {
        case .connection(let state, let reason):
            return "link \(state)" + (reason.map { " (\(describe($0)))" } ?? "")
        case .conversationAdded(let info):
            return "conversation added \(quoted(info.title ?? info.id.rawValue)), \(info.state)"
        case .conversationUpdated(let info):
            return "conversation updated, \(info.participants.count) participants, \(info.state)"
        case .conversationStateChanged(let state, let previous):
            return "conversation \(previous.map { "\($0) → " } ?? "")\(state)"
        case .conversationRemoved:
            return "conversation removed"
        case .participantsAdded(let participants):
            return "joined: \(participants.map(name).joined(separator: ", "))"
        case .participantsUpdated(let participants):
            return "participants updated: \(participants.map(name).joined(separator: ", "))"
        case .participantsRemoved(let ids):
            return "left: \(ids.map(\.rawValue).joined(separator: ", "))"
        case .agentChanged(let agent):
            return "agent is now \(agent.map(name) ?? "nobody")"
        case .messageAdded(let message, let position):
            let whereFrom = position == .history ? "history " : ""
            return "\(whereFrom)message \(describe(message))"
        case .messageUpdated(let message):
            return "message \(describe(message))"
        case .messageRemoved(let id):
            return "message \(id) removed"
        case .historyCleared:
            return "history cleared"
        case .typing(let who, let isTyping, let draft):
            return "\(who) \(isTyping ? "is typing" : "stopped typing")" + (draft.map { " \(quoted($0))" } ?? "")
        case .readMarker(let who, let marker):
            return "\(who) read up to \(describe(marker))"
        case .availability(let availability):
            return "availability \(availability)"
        case .queuePosition(let position):
            return position.map { "queue position \($0)" } ?? "out of the queue"
        case .settingsChanged:
            return "settings changed"
        case .custom(let name, _):
            return "vendor event \(name)"
        case .error(let error):
            return "problem: \(error)"
        case .fatal(let error):
            return "FATAL: \(error)"
        case .gap(let dropped):
            return "subscriber fell behind, \(dropped) events dropped"
        }
    }

    private func describe(_ message: Message) -> String {
        let from = message.senderName ?? message.sender?.rawValue ?? (message.senderRole.map { $0 == .customer || $0 == .user ? "me" : $0.rawValue } ?? "me")
        var text = "\(from): \(quoted(message.text))"
        if !message.attachments.isEmpty {
            text += " [\(message.attachments.map { "\($0.name), \($0.size.map { "\($0) B" } ?? "?")" }.joined(separator: "; "))]"
        }
        let state: String
        switch message.deliveryState {
        case .pending: state = "pending"
        case .sent: state = "sent"
        case .delivered: state = "delivered"
        case .read: state = "read"
        case .failed(let reason): state = "failed: \(reason)"
        }
        return text + " (\(state)\(message.isEdited ? ", edited" : ""))"
    }

    private func describe(_ reason: DisconnectReason) -> String {
        switch reason {
        case .userInitiated: return "by the app"
        case .connectionLost(let error): return "lost: \(error.message)"
        case .serverInitiated(let error): return "server: \(error.message)"
        case .fatal(let error): return "fatal: \(error.message)"
        }
    }

    private func describe(_ marker: ChatEvent.ReadMarker) -> String {
        switch marker {
        case .sequence(let sequence): return "#\(sequence)"
        case .message(let id): return "message \(id)"
        case .time(let date): return "\(date)"
        }
    }

    private func name(_ participant: Participant) -> String {
        participant.displayName ?? participant.id.rawValue
    }

    private func quoted(_ text: String) -> String {
        let short = text.count > 48 ? String(text.prefix(47)) + "…" : text
        return "\"\(short)\""
    }
}
