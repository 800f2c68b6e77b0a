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

    func line(for event: ChatEvent) -> String {
        switch format {
        case .jsonLines:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            return (try? encoder.encode(event)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        case .timeline:
            let offset = String(format: "+%7.3fs", event.time.timeIntervalSince(start))
            let origin = "\(event.origin.backend)/\(event.origin.session)".padding(toLength: 27, withPad: " ", startingAt: 0)
            let conversation = (event.conversationID.map { id in
                "[\(id.rawValue.count > 8 ? String(id.rawValue.prefix(7)) + "…" : id.rawValue)]"
            } ?? "").padding(toLength: 10, withPad: " ", startingAt: 0)
            let sequence = event.sequence.map { " #\($0)" } ?? ""
            return "\(offset)  \(origin) \(conversation) \(describe(event.kind))\(sequence)"
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
        let from = message.senderName ?? message.sender?.rawValue ?? "me"
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
