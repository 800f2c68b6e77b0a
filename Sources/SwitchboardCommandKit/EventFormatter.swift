package import Foundation
package import Switchboard

/// Renders normalized events as one readable line each, or as JSON lines.
package struct EventFormatter: Sendable {
    package enum Format: Sendable {
        case timeline
        case jsonLines
    }

    package let format: Format
    package let start: Date
    /// The user the session is logged in as, where peers share one role (Voximplant-style): their
    /// messages are `"mine": true` in JSON lines and "me" on the timeline.
    package var me: ParticipantID?
    /// What the timeline has learnt so far, so each person has one name and a message's
    /// updates read as updates.
    private var names = TimelineNames()

    package init(format: Format, start: Date, me: ParticipantID? = nil) {
        self.format = format
        self.start = start
        self.me = me
    }

    /// One line for `event`, or `nil` for an update that would print the line shown last for
    /// the same message again. The timeline's clock is when the app received it (`receivedAt`,
    /// since `start`); the server's time is added only where it differs by half a second or more
    /// (a server clock of whole seconds, a message sent while the app was away).
    package mutating func line(for event: ChatEvent, receivedAt: Date? = nil) -> String? {
        switch format {
        case .jsonLines:
            return Self.jsonLine(for: event, me: me)
        case .timeline:
            names.learn(from: event)
            guard let kind = describe(event) else { return nil }
            let received = receivedAt ?? event.time
            let offset = String(format: "+%7.3fs", received.timeIntervalSince(start))
            let server = abs(event.time.timeIntervalSince(received)) >= 0.5 ? String(format: "  (server %+.3fs)", event.time.timeIntervalSince(start)) : ""
            let origin = "\(event.origin.backend)/\(event.origin.session)".padding(toLength: 27, withPad: " ", startingAt: 0)
            let conversation = (event.conversationID.map { id in
                "[\(id.rawValue.count > 8 ? String(id.rawValue.prefix(7)) + "…" : id.rawValue)]"
            } ?? "").padding(toLength: 10, withPad: " ", startingAt: 0)
            let sequence = event.sequence.map { " #\($0)" } ?? ""
            return "\(offset)  \(origin) \(conversation) \(kind)\(sequence)\(server)"
        }
    }

    /// One JSON object per event (Docs/CLI.md): flat fields for scripts (`kind`, `backend`,
    /// `session`, `conversation`, `time`, `sequence`, and `message` for message events), plus the
    /// whole event as `event`, which decodes as a ``ChatEvent``. `sequence` is the event's, else
    /// its message's (history pages carry no event sequence), `null` when neither has one (a
    /// pending send).
    package static func jsonLine(for event: ChatEvent, me: ParticipantID? = nil) -> String {
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

    /// The app user's own message: a customer's in a support chat, the logged-in user's among
    /// peers, or one still pending (only the app's own are).
    package static func isMine(_ message: Message, me: ParticipantID?) -> Bool {
        message.senderRole == .customer || message.deliveryState == .pending || (me != nil && message.sender == me)
    }

    package static func json(_ message: Message, me: ParticipantID? = nil) -> JSONValue {
        let mine = isMine(message, me: me)
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

    package static func kindName(_ kind: Message.Kind) -> String {
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

    package static func stateName(_ state: Message.DeliveryState) -> String {
        switch state {
        case .pending: "pending"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
        case .failed: "failed"
        }
    }

    /// The timeline's words for `event`; `nil` for a message update that changes nothing shown.
    private mutating func describe(_ event: ChatEvent) -> String? {
        let session = event.origin.session
        let conversation = event.conversationID
        func name(_ who: ParticipantID) -> String { names.name(of: who, in: conversation, session: session, me: me) }
        func name(_ participant: Participant) -> String { name(participant.id) }
        switch event.kind {
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
            return "left: \(ids.map(name).joined(separator: ", "))"
        case .agentChanged(let agent):
            return "agent is now \(agent.map(name) ?? "nobody")"
        case .messageAdded(let message, let position):
            let whereFrom = position == .history ? "history " : ""
            let shown = describe(message, session: session)
            names.shown(shown, for: message, session: session)
            return "\(whereFrom)message \(shown.sender): \(shown.body) (\(shown.state))"
        case .messageUpdated(let message):
            // The same line, moved on: "me: "hi" (pending)" then "me: "hi" → sent".
            var shown = describe(message, session: session)
            // A message once shown as the user's own stays theirs, however its update is signed.
            if names.lastShown(of: message, session: session)?.sender == "me" { shown.sender = "me" }
            guard let previous = names.shown(shown, for: message, session: session) else {
                return "message \(shown.sender): \(shown.body) (\(shown.state))"
            }
            guard previous != shown else { return nil }
            let change = previous.body == shown.body ? shown.state : "\(shown.state), now \(shown.body)"
            return "message \(shown.sender): \(previous.body) → \(change)"
        case .messageRemoved(let id):
            return "message \(id) removed"
        case .historyCleared:
            return "history cleared"
        case .typing(let who, let isTyping, let draft):
            return "\(name(who)) \(isTyping ? "is typing" : "stopped typing")" + (draft.map { " \(quoted($0))" } ?? "")
        case .readMarker(let who, let marker):
            return "\(name(who)) read up to \(describe(marker))"
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

    /// A message as the timeline shows it: who (always "me" for the app user's own), what, and
    /// how far it got.
    package struct ShownMessage: Equatable {
        var sender: String
        var body: String
        var state: String
    }

    private func describe(_ message: Message, session: SessionID) -> ShownMessage {
        let sender: String
        if Self.isMine(message, me: me) {
            sender = "me"
        } else if let id = message.sender {
            sender = names.name(of: id, in: message.conversationID, session: session, me: me, fallback: message.senderName)
        } else {
            sender = message.senderName ?? message.senderRole?.rawValue ?? "unknown"
        }
        var body = quoted(message.text)
        if !message.attachments.isEmpty {
            body += " [\(message.attachments.map { "\($0.name), \($0.size.map { "\($0) B" } ?? "?")" }.joined(separator: "; "))]"
        }
        var state: String
        switch message.deliveryState {
        case .pending: state = "pending"
        case .sent: state = "sent"
        case .delivered: state = "delivered"
        case .read: state = "read"
        case .failed(let reason): state = "failed: \(reason)"
        }
        if message.isEdited { state += ", edited" }
        return ShownMessage(sender: sender, body: body, state: state)
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

    private func quoted(_ text: String) -> String {
        let short = text.count > 48 ? String(text.prefix(47)) + "…" : text
        return "\"\(short)\""
    }
}

/// What a timeline has learnt from the events it printed: each participant's name (one name per
/// person, whichever event named them), each conversation's agent (for the placeholders vendors
/// use where an event does not say which agent: Webim's `operator`, CXone's `agent`), and the
/// line shown last for each message.
package struct TimelineNames: Sendable {
    private struct Person: Hashable {
        var session: SessionID
        var id: ParticipantID
    }

    private struct Place: Hashable {
        var session: SessionID
        var conversation: ConversationID?
    }

    private struct MessageKey: Hashable {
        var session: SessionID
        var id: String
    }

    /// Ids that stand for "the agent", whoever that is now.
    private static let agentPlaceholders: Set<ParticipantID> = ["operator", "agent"]
    /// The most messages whose last line is kept; a long-running timeline starts afresh past it.
    private static let shownLimit = 10_000

    private var names: [Person: String] = [:]
    private var agents: [Place: ParticipantID] = [:]
    private var lastShown: [MessageKey: EventFormatter.ShownMessage] = [:]

    package mutating func learn(from event: ChatEvent) {
        let session = event.origin.session
        func learn(_ participant: Participant) {
            if let name = participant.displayName, !name.isEmpty { names[Person(session: session, id: participant.id)] = name }
        }
        switch event.kind {
        case .conversationAdded(let info), .conversationUpdated(let info):
            info.participants.forEach(learn)
            if let agent = info.assignedAgent {
                learn(agent)
                agents[Place(session: session, conversation: info.id)] = agent.id
            }
        case .participantsAdded(let participants), .participantsUpdated(let participants):
            participants.forEach(learn)
        case .agentChanged(let agent):
            agent.map(learn)
            agents[Place(session: session, conversation: event.conversationID)] = agent?.id
        case .messageAdded(let message, _), .messageUpdated(let message):
            if let id = message.sender, let name = message.senderName, !name.isEmpty { names[Person(session: session, id: id)] = name }
        default:
            break
        }
    }

    /// The name to show for `id`: "me" for the app user, else the name the timeline learnt,
    /// else `fallback`, else the id.
    package func name(of id: ParticipantID, in conversation: ConversationID?, session: SessionID, me: ParticipantID?, fallback: String? = nil) -> String {
        if id == me { return "me" }
        if let name = names[Person(session: session, id: id)] { return name }
        if Self.agentPlaceholders.contains(id), let agent = agents[Place(session: session, conversation: conversation)],
            let name = names[Person(session: session, id: agent)]
        {
            return name
        }
        return fallback ?? id.rawValue
    }

    /// The line shown last for `message`, if any.
    package func lastShown(of message: Message, session: SessionID) -> EventFormatter.ShownMessage? {
        (message.clientID?.rawValue ?? message.serverID?.rawValue).flatMap { lastShown[MessageKey(session: session, id: $0)] }
    }

    /// Records `shown` as the line of `message`; returns the one shown before, if any.
    @discardableResult
    package mutating func shown(_ shown: EventFormatter.ShownMessage, for message: Message, session: SessionID) -> EventFormatter.ShownMessage? {
        guard let id = message.clientID?.rawValue ?? message.serverID?.rawValue else { return nil }
        if lastShown.count >= Self.shownLimit { lastShown.removeAll(keepingCapacity: true) }
        return lastShown.updateValue(shown, forKey: MessageKey(session: session, id: id))
    }
}
