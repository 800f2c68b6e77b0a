public import Foundation
import Switchboard
public import SwitchboardEmulation

/// The operator's desk at the Webim emulator: what `switchboard emulate webim` commands do.
public struct WebimDesk: AgentDesk {
    public let server: WebimServer
    public let agent: WebimOperatorRobot
    /// Who takes the chat on `/transfer`.
    public let colleague: WebimOperatorRobot
    private let state = Locked((typing: false, offline: false))

    public init(server: WebimServer, agent: WebimOperatorRobot, colleague: WebimOperatorRobot) {
        self.server = server
        self.agent = agent
        self.colleague = colleague
    }

    public var vendor: String { "Webim" }

    /// The visitor who acted last.
    private func visitor() throws -> String {
        guard let visitor = server.actions.last?.visitor ?? server.visitorIDs.last else {
            throw DeskError("no visitor yet: connect an app and write first")
        }
        return visitor
    }

    public func current() throws -> String {
        let visitor = try visitor()
        return "visitor \(visitor), chat \(server.chatState(ofVisitor: visitor) ?? "not started")"
    }

    public func say(_ text: String) throws -> String {
        let visitor = try visitor()
        if server.chatState(ofVisitor: visitor) != "chatting" { try agent.join(visitor: visitor) }
        let id = try agent.send(text, to: visitor)
        state.withLock { $0.typing = false }
        return "said to visitor \(visitor) (message \(id))"
    }

    public func typing() throws -> String {
        let visitor = try visitor()
        let typing = state.withLock { state in
            state.typing.toggle()
            return state.typing
        }
        try agent.typing(typing, visitor: visitor)
        return typing ? "typing to visitor \(visitor)" : "stopped typing"
    }

    public func read() throws -> String {
        let visitor = try visitor()
        try agent.markRead(visitor: visitor)
        return "read visitor \(visitor)'s messages"
    }

    public func close() throws -> String {
        let visitor = try visitor()
        try agent.close(visitor: visitor)
        return "closed visitor \(visitor)'s chat (closed_by_operator)"
    }

    public func transfer() throws -> String {
        let visitor = try visitor()
        try colleague.join(visitor: visitor)
        return "\(colleague.name) took visitor \(visitor)'s chat"
    }

    public func offline() throws -> String {
        let offline = state.withLock { state in
            state.offline.toggle()
            return state.offline
        }
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

    public func disconnect() -> String {
        server.inject(.dropConnection, on: .delta)
        return "the next long-poll answer is cut mid-body"
    }

    public func drop(_ count: Int) throws -> String {
        for _ in 0..<count { server.inject(.dropConnection, on: .delta) }
        return "the next \(count) long-poll answers are cut mid-body (the app polls again from its revision)"
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
