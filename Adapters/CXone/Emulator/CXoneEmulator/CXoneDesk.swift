public import Foundation
@_spi(TestKit) import Switchboard
public import SwitchboardEmulation

/// The agent's desk at the CXone emulator: what `switchboard emulate cxone` commands do, and what
/// its consoles show. A conversation is a thread, named by its `idOnExternalPlatform`.
public struct CXoneDesk: AgentDesk {
    public let server: CXoneServer
    public let agent: CXoneAgentRobot
    /// Who takes the thread on `transfer`.
    public let colleague: CXoneAgentRobot

    public init(server: CXoneServer, agent: CXoneAgentRobot, colleague: CXoneAgentRobot) {
        self.server = server
        self.agent = agent
        self.colleague = colleague
    }

    public var vendor: String { "CXone" }

    private static let reinitReason = "a session is its socket; disconnect makes the app authorize again"
    private static let offlineReason = "only a live-chat channel (--mode live) has agent availability"

    private var isLive: Bool { server.configuration.mode == .live }

    // MARK: What the consoles show

    /// Every thread the server holds, in the order they were opened.
    public func snapshot() -> DeskSnapshot {
        var notOffered = ["reinit": Self.reinitReason]
        if !isLive { notOffered["offline"] = Self.offlineReason }
        return DeskSnapshot(
            vendor: vendor,
            conversations: server.deskConversations(),
            current: try? lastThread(),
            notOffered: notOffered,
            moves: [DeskMove(id: "quick-replies", title: "Send quick replies"), DeskMove(id: "inactivity-popup", title: "Inactivity pop-up")],
            agentsOnline: isLive ? server.isLiveChatOnline : nil,
            faults: server.faultLog
        )
    }

    public var revision: Int { server.changes.generation }

    public func waitForChange(after revision: Int) async {
        await server.changes.wait(since: revision)
    }

    // MARK: Threads

    /// The thread the customer wrote in last.
    private func lastThread() throws -> String {
        let sent = server.received.last { $0.eventType == "SendMessage" }
        if let thread = sent?.data["thread"]?["idOnExternalPlatform"]?.stringValue { return thread.lowercased() }
        if let customer = server.received.last?.customer, let thread = server.threads(of: customer).last { return thread }
        throw DeskError("no thread yet: connect an app and write first")
    }

    /// The thread `conversation` names, or the one the customer wrote in last.
    private func thread(_ conversation: String?) throws -> String {
        guard let conversation else { return try lastThread() }
        guard server.status(ofThread: conversation) != nil else { throw DeskError("no thread \(conversation) at the CXone emulator") }
        return conversation.lowercased()
    }

    public func current(in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        return "thread \(thread), \(server.status(ofThread: thread) ?? "unknown")"
    }

    /// Assigns the agent to the thread's case, which opens it.
    public func accept(in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        switch server.status(ofThread: thread) ?? "" {
        case "closed": throw DeskError("thread \(thread) is closed")
        case "open" where server.assigneeID(ofThread: thread) == agent.id: return "already in thread \(thread)"
        default:
            agent.assign(thread)
            return "took thread \(thread)"
        }
    }

    public func say(_ text: String, in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        if server.status(ofThread: thread) != "open" { agent.assign(thread) }
        let id = agent.send(text, in: thread)
        return "said in thread \(thread) (message \(id))"
    }

    /// A message carrying the file as an attachment, with no text.
    public func sendFile(named name: String, contentType: String, data: Data, in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        if server.status(ofThread: thread) != "open" { agent.assign(thread) }
        let id = agent.sendFile(named: name, contentType: contentType, data: data, in: thread)
        return "sent \(name) in thread \(thread) (message \(id))"
    }

    public func typing(_ isTyping: Bool?, in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        let typing = isTyping ?? !server.isAgentTyping(inThread: thread)
        agent.typing(typing, in: thread)
        return typing ? "typing in thread \(thread)" : "stopped typing in thread \(thread)"
    }

    public func read(in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        agent.markRead(thread)
        return "read the customer's messages in thread \(thread)"
    }

    public func close(in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        agent.close(thread)
        return "closed thread \(thread)"
    }

    public func transfer(in conversation: String?) throws -> String {
        let thread = try thread(conversation)
        agent.transfer(thread, to: colleague)
        return "handed thread \(thread) to agent \(colleague.id)"
    }

    /// Turns live chat's availability (H2) off, or back on.
    public func offline() throws -> String {
        guard isLive else { throw DeskError.notOffered("offline", by: vendor, Self.offlineReason) }
        let online = !server.isLiveChatOnline
        server.setLiveChatOnline(online)
        return online ? "live chat online" : "live chat offline"
    }

    /// `quick-replies`: a `QUICK_REPLIES` message with two reply buttons, as the agent sends it;
    /// `inactivity-popup`: the workflow's inactivity pop-up with a 60-second countdown.
    public func move(_ id: String, in conversation: String?) throws -> String {
        switch id {
        case "quick-replies":
            let thread = try thread(conversation)
            if server.status(ofThread: thread) != "open" { agent.assign(thread) }
            let question = "We deliver between 12:00 and 16:00. Which day suits you?"
            let message = agent.send(question, in: thread, content: [
                "type": "QUICK_REPLIES",
                "fallbackText": .string(question),
                "payload": [
                    "text": ["content": .string(question)],
                    "actions": [
                        ["type": "REPLY_BUTTON", "text": "Today", "postback": #"{"id":"1"}"#],
                        ["type": "REPLY_BUTTON", "text": "Tomorrow", "postback": #"{"id":"2"}"#],
                    ],
                ],
            ])
            return "sent quick replies in thread \(thread) (message \(message))"
        case "inactivity-popup":
            let thread = try thread(conversation)
            let message = agent.sendInactivityPopup(in: thread)
            return "sent an inactivity pop-up in thread \(thread) (message \(message)), 60 s to answer"
        default:
            throw DeskError("no move \(id) at the CXone emulator; its moves: quick-replies, inactivity-popup")
        }
    }

    // MARK: Faults

    public func disconnect() -> String {
        server.inject(.closeSocket)
        return "closed the customer's sockets"
    }

    public func drop(_ count: Int) throws -> String {
        for _ in 0..<count { server.inject(.dropOnNext(eventType: nil)) }
        return "the socket closes before each of the app's next \(count) requests is handled"
    }

    public func duplicate(_ count: Int) throws -> String {
        server.inject(.duplicateMessages(count))
        return "the next \(count) MessageCreated events go out twice"
    }

    public func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.inject(.slowReplies(.milliseconds(milliseconds), eventType: nil))
        return ("what follows the app's next request is held for \(milliseconds) ms", nil)
    }

    public func reinit() throws -> String {
        throw DeskError.notOffered("reinit", by: vendor, Self.reinitReason)
    }
}

extension CXoneServer {
    /// The threads as a console shows them, in the order they were opened.
    func deskConversations() -> [DeskConversation] {
        state.withLock { state in
            state.order.compactMap { state.threads[$0] }.map { thread -> DeskConversation in
                let identity = state.identities[thread.customerID]
                let customer = Self.displayName(identity?["firstName"]?.stringValue, identity?["lastName"]?.stringValue) ?? thread.customerID
                let phase: DeskConversation.Phase =
                    switch thread.status {
                    case "closed": .closed
                    case "open": .active
                    default: .waiting
                    }
                return DeskConversation(
                    id: thread.id, customer: customer, phase: phase, agent: thread.assignee.flatMap(Self.agentName),
                    customerTyping: thread.customerTyping, agentTyping: thread.agentTyping,
                    messages: thread.messages.map { Self.deskMessage($0, customer: customer) }
                )
            }
        }
    }

    /// The faults that took effect, oldest first.
    var faultLog: [String] { state.withLock { $0.faultLog } }

    /// The id of the agent the thread's case is assigned to.
    func assigneeID(ofThread thread: String) -> Int64? { state.withLock { $0.threads[thread.lowercased()]?.assignee?["id"]?.intValue } }

    func isAgentTyping(inThread thread: String) -> Bool { state.withLock { $0.threads[thread.lowercased()]?.agentTyping ?? false } }

    private static func deskMessage(_ message: StoredMessage, customer: String) -> DeskMessage {
        // A hidden customer message (a live chat's "Begin Conversation") is the SDK's, and an
        // agent-side one without an agent is the welcome message the app reported (SendOutbound).
        let (author, name): (DeskMessage.Author, String?) =
            if message.direction == "inbound" {
                message.isHidden ? (.system, nil) : (.customer, customer)
            } else if let agent = message.agent {
                (.agent, agentName(agent))
            } else {
                (.system, nil)
            }
        let files = message.attachments.compactMap { $0["friendlyName"]?.stringValue ?? $0["fileName"]?.stringValue }
        return DeskMessage(
            id: message.id, author: author, name: name, text: text(of: message), file: files.isEmpty ? nil : files.joined(separator: ", "),
            read: message.direction == "inbound" ? message.readAt != nil : message.seenByCustomerAt != nil
        )
    }

    /// The text, or for rich content its fallback or title, with any reply buttons.
    private static func text(of message: StoredMessage) -> String {
        let content = message.content
        var text = message.text
        if text.isEmpty, let type = content?["type"]?.stringValue, type != "TEXT" {
            text = content?["payload"]?["text"]?["content"]?.stringValue ?? content?["fallbackText"]?.stringValue ?? type
        }
        let buttons = (content?["payload"]?["actions"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }
        return buttons.isEmpty ? text : text + " " + buttons.map { "[\($0)]" }.joined(separator: " ")
    }

    private static func agentName(_ user: JSONValue) -> String? {
        displayName(user["firstName"]?.stringValue, user["surname"]?.stringValue) ?? user["id"]?.intValue.map { "agent \($0)" }
    }

    private static func displayName(_ first: String?, _ last: String?) -> String? {
        let name = [first, last].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
        return name.isEmpty ? nil : name
    }
}
