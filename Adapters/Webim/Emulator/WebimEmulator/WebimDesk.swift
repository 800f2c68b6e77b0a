public import Foundation
@_spi(TestKit) import Switchboard
public import SwitchboardEmulation

/// The operator's desk at the Webim emulator: what `switchboard emulate webim` commands do.
///
/// A conversation is a visitor (its id the visitor id): a visitor has one chat at a time, and
/// the desk shows the messages of all of them.
public struct WebimDesk: AgentDesk {
    public let server: WebimServer
    public let agent: WebimOperatorRobot
    /// Who takes the chat on `/transfer`.
    public let colleague: WebimOperatorRobot

    public init(server: WebimServer, agent: WebimOperatorRobot, colleague: WebimOperatorRobot) {
        self.server = server
        self.agent = agent
        self.colleague = colleague
    }

    public var vendor: String { "Webim" }

    /// Webim's own moves: the rating survey, and the "all operators are busy" notice.
    static let moves = [DeskMove(id: "rate", title: "Ask for a rating"), DeskMove(id: "operator-busy", title: "Say all operators are busy")]

    // MARK: What the console shows

    /// Every visitor with a chat or messages, oldest first. The faults: each one a request met,
    /// then how many messages long-poll answers listed twice (the server counts those).
    public func snapshot() -> DeskSnapshot {
        let twice = server.duplicatesDelivered
        return DeskSnapshot(
            vendor: vendor, conversations: server.deskConversations(), current: try? visitor(), notOffered: [:], moves: Self.moves,
            agentsOnline: !WebimServer.isOffline(server.accountOnlineStatus),
            faults: server.takenFaults.map(Self.line) + (twice > 0 ? ["\(twice) message\(twice == 1 ? "" : "s") listed twice in long-poll answers"] : [])
        )
    }

    /// The server's change count: every change of the model signals it.
    public var revision: Int { server.changes.generation }

    public func waitForChange(after revision: Int) async {
        await server.changes.wait(since: revision)
    }

    /// A taken fault, as the console lists it.
    static func line(_ taken: WebimServer.TakenFault) -> String {
        let what: String
        switch taken.fault {
        case .reinitRequired: what = "reinit-required"
        case .error(let code): what = "error \(code)"
        case .status(let status): what = "HTTP \(status) without a body"
        case .malformed: what = "a body cut off mid-JSON"
        case .body(let text): what = "the raw body \(text.prefix(60))"
        case .delay(let duration):
            let (seconds, attoseconds) = duration.components
            what = "answered after \(seconds * 1_000 + attoseconds / 1_000_000_000_000_000) ms"
        case .dropConnection: what = "connection cut mid-body"
        case .loseAnswer: what = "done, then the answer lost"
        }
        return "\(taken.endpoint.rawValue)\(taken.action.map { " \($0)" } ?? ""): \(what)"
    }

    // MARK: Which visitor

    /// The visitor who acted last.
    private func visitor() throws -> String {
        guard let visitor = server.actions.last?.visitor ?? server.visitorIDs.last else {
            throw DeskError("no visitor yet: connect an app and write first")
        }
        return visitor
    }

    /// The visitor `conversation` names, or, for `nil`, the one who acted last.
    private func visitor(_ conversation: String?) throws -> String {
        guard let conversation else { return try visitor() }
        guard server.hasVisitor(conversation) else { throw DeskError("no visitor \(conversation) at the Webim emulator") }
        return conversation
    }

    private func chat(of visitor: String) throws -> WebimChat {
        guard let chat = server.chat(ofVisitor: visitor) else {
            throw DeskError("visitor \(visitor) has no chat yet: the app starts one when the visitor writes")
        }
        return chat
    }

    /// The visitor's chat, if it is open.
    private func openChat(of visitor: String) throws -> WebimChat {
        let chat = try chat(of: visitor)
        guard !chat.isClosed else { throw DeskError("visitor \(visitor)'s chat is closed (\(chat.state)): a new one starts when the visitor writes") }
        return chat
    }

    /// The robot's errors, as the console's lines.
    private func robot<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as WebimEmulatorError { throw DeskError(error.description) }
    }

    /// The agent takes the visitor's open chat unless it is `chatting` already.
    private func joinIfNeeded(_ visitor: String) throws {
        if try openChat(of: visitor).state != "chatting" { try robot { try agent.join(visitor: visitor) } }
    }

    /// As the operator's console does once a message is sent: typing stops.
    private func stopTyping(_ visitor: String) throws {
        if server.chat(ofVisitor: visitor)?.operatorTyping == true { try robot { try agent.typing(false, visitor: visitor) } }
    }

    // MARK: Commands

    public func current(in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        return "visitor \(visitor), chat \(server.chatState(ofVisitor: visitor) ?? "not started")"
    }

    public func accept(in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        let chat = try openChat(of: visitor)
        if chat.state == "chatting", chat.operatorInChat?.id == agent.id { return "\(agent.name) is in visitor \(visitor)'s chat already" }
        try robot { try agent.join(visitor: visitor) }
        return "\(agent.name) took visitor \(visitor)'s chat"
    }

    public func say(_ text: String, in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        try joinIfNeeded(visitor)
        let id = try robot { try agent.send(text, to: visitor) }
        try stopTyping(visitor)
        return "said to visitor \(visitor) (message \(id))"
    }

    public func sendFile(named name: String, contentType: String, data: Data, in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        try joinIfNeeded(visitor)
        let id = try robot { try agent.sendFile(named: name, contentType: contentType, data: data, to: visitor) }
        try stopTyping(visitor)
        return "sent visitor \(visitor) the file \(name) (message \(id), \(data.count) bytes)"
    }

    public func typing(_ isTyping: Bool?, in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        let typing = try isTyping ?? !chat(of: visitor).operatorTyping
        if typing { _ = try openChat(of: visitor) }
        try robot { try agent.typing(typing, visitor: visitor) }
        return typing ? "typing to visitor \(visitor)" : "stopped typing to visitor \(visitor)"
    }

    public func read(in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        try robot { try agent.markRead(visitor: visitor) }
        return "read visitor \(visitor)'s messages"
    }

    public func close(in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        _ = try openChat(of: visitor)
        try robot { try agent.close(visitor: visitor) }
        return "closed visitor \(visitor)'s chat (closed_by_operator)"
    }

    public func transfer(in conversation: String?) throws -> String {
        let visitor = try visitor(conversation)
        _ = try openChat(of: visitor)
        try robot { try colleague.join(visitor: visitor) }
        return "\(colleague.name) took visitor \(visitor)'s chat"
    }

    /// `rate`: the rating survey (stars 1–5) for the agent; `operator-busy`: the "all operators
    /// are busy" notice (`operator_busy`) in the open chat.
    public func move(_ id: String, in conversation: String?) throws -> String {
        guard Self.moves.contains(where: { $0.id == id }) else {
            throw DeskError("no move \(id) at the Webim emulator (there are \(Self.moves.map(\.id).joined(separator: ", ")))")
        }
        let visitor = try visitor(conversation)
        if id == "rate" {
            let survey = try robot { try agent.requestRating(visitor: visitor) }
            return "asked visitor \(visitor) to rate \(agent.name) (survey \(survey), stars 1–5)"
        }
        _ = try openChat(of: visitor)
        let message = try robot { try agent.sendOperatorBusy(to: visitor) }
        return "told visitor \(visitor) all operators are busy (operator_busy message \(message))"
    }

    public func offline() throws -> String {
        let offline = !WebimServer.isOffline(server.accountOnlineStatus)
        let told = server.setOnlineStatus(offline ? "offline" : "online")
        let chatting = server.visitorIDs.filter { server.hasOpenChat(visitor: $0) }
        return Self.availabilityLine(offline: offline, told: told, chatting: chatting)
    }

    /// What `/offline` did, as Webim does it: a visitor without an open chat is told at once by
    /// the visit session state (`offline-message`: leave a message); one in a chat keeps it, and
    /// sees the status only on its next init or `get-online-status` poll, since the Webim SDKs
    /// read no online-status delta.
    public static func availabilityLine(offline: Bool, told: [String], chatting: [String]) -> String {
        func visitors(_ ids: [String]) -> String { "\(ids.count) visitor\(ids.count == 1 ? "" : "s") (\(ids.joined(separator: ", ")))" }
        var parts: [String] = []
        if !told.isEmpty {
            parts.append(
                offline
                    ? "\(visitors(told)) without an open chat told now (they may only leave a message)"
                    : "\(visitors(told)) told now (they may chat again)"
            )
        }
        if !chatting.isEmpty {
            parts.append("\(visitors(chatting)) in a chat keep it and see the status on their next init (/reinit) or get-online-status poll (the Webim SDKs read no online-status delta)")
        }
        if parts.isEmpty { parts.append("apps see it when they initialise") }
        return (offline ? "operators offline: " : "operators online: ") + parts.joined(separator: "; ")
    }

    // MARK: Faults

    public func disconnect() -> String {
        server.inject(.dropConnection, on: .delta)
        return "the next long-poll answer is cut mid-body"
    }

    public func drop(_ count: Int) throws -> String {
        for _ in 0..<count { server.inject(.dropConnection, on: .delta) }
        return "the next \(count) long-poll answers are cut mid-body (the app polls again from its revision)"
    }

    public func duplicate(_ count: Int) throws -> String {
        server.duplicateNextMessages(count)
        return "the next \(count) message\(count == 1 ? " is" : "s are") listed twice in the long-poll answers, whoever writes (the app shows each once)"
    }

    public func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.inject(.delay(.milliseconds(milliseconds)), on: .delta)
        server.inject(.delay(.milliseconds(milliseconds)), on: .action)
        return ("the next long-poll answer and the next action answer wait \(milliseconds) ms", nil)
    }

    public func reinit() throws -> String {
        server.inject(.reinitRequired, on: .delta)
        return "the next long poll answers reinit-required (the app initialises a new page)"
    }
}

// MARK: The model, as the desk reads it

extension WebimServer {
    /// The account's online status.
    var accountOnlineStatus: String { state.withLock { $0.onlineStatus } }

    func hasVisitor(_ visitorID: String) -> Bool { state.withLock { $0.visitors[visitorID] != nil } }

    /// The visitor's current chat (open or closed), if any.
    func chat(ofVisitor visitorID: String) -> WebimChat? { state.withLock { $0.visitors[visitorID]?.chat } }

    /// Every visitor with a chat or messages, the one who started first first.
    func deskConversations() -> [DeskConversation] {
        state.withLock { state in
            let typingLog = state.typingLog
            return state.visitors.values
                .filter { $0.chat != nil || !$0.history.isEmpty }
                .map { visitor in (started: Self.started(visitor), visitor: visitor) }
                .sorted { ($0.started, $0.visitor.id) < ($1.started, $1.visitor.id) }
                .map { entry in
                    let typing = typingLog.last { $0.visitor == entry.visitor.id }?.typing ?? false
                    return Self.deskConversation(entry.visitor, typing: typing)
                }
        }
    }

    /// When the visitor's first chat or message began, in µs.
    private static func started(_ visitor: WebimVisitor) -> Int64 {
        let created = visitor.chat.map { Int64($0.creationTs * 1_000_000) }
        return ([created].compactMap { $0 } + visitor.allMessages.map(\.tsMicros)).min() ?? 0
    }

    /// `typing`: the visitor's last `chat.visitor_typing`.
    private static func deskConversation(_ visitor: WebimVisitor, typing: Bool) -> DeskConversation {
        let chat = visitor.chat
        let phase: DeskConversation.Phase
        if let chat, !chat.isClosed {
            phase = chat.state == "queue" ? .waiting : .active
        } else {
            phase = .closed
        }
        // The visitor's read marker is the current chat's: what came before its oldest unread
        // operator message is read. Earlier chats keep no marker; their messages count as read.
        let inChat = Set(chat?.messages.map(\.id) ?? [])
        let unreadSince = chat?.unreadByVisitorSinceTs
        let messages = visitor.allMessages.sorted { $0.tsMicros < $1.tsMicros }.map { message in
            let readByVisitor = !inChat.contains(message.id) || unreadSince.map { Double(message.tsMicros) / 1_000_000 < $0 } ?? true
            return deskMessage(message, readByVisitor: readByVisitor)
        }
        let fields = visitor.fields
        return DeskConversation(
            id: visitor.id, customer: fields["display_name"] ?? fields["name"] ?? visitor.id, phase: phase,
            agent: chat?.operatorInChat?.fullname, customerTyping: phase != .closed && typing,
            agentTyping: phase != .closed && chat?.operatorTyping == true, messages: messages
        )
    }

    /// A message by its kind: the visitor's (`visitor`, `file_visitor`) read when the operator
    /// marked it (`read`); the operator's and the system's (`info`, `operator_busy`,
    /// `action_request`, …) read when the visitor's marker covers them. A file message shows its
    /// file's name.
    private static func deskMessage(_ message: WebimMessage, readByVisitor: Bool) -> DeskMessage {
        let author: DeskMessage.Author
        let read: Bool
        switch message.kind {
        case "visitor", "file_visitor":
            author = .customer
            read = message.read
        case "operator", "file_operator":
            author = .agent
            read = readByVisitor
        default:
            author = .system
            read = readByVisitor
        }
        var file: String?
        if message.kind.hasPrefix("file_") {
            // The upload's description, as the message's text (or, from other servers, `data`).
            file = (try? JSONValue(parsing: message.text))?["filename"]?.stringValue
                ?? message.data?["file"]?["properties"]?["filename"]?.stringValue
                ?? "file"
        }
        return DeskMessage(id: message.id, author: author, name: message.name, text: file ?? message.text, file: file, read: read)
    }
}
