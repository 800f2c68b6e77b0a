public import Foundation
import Switchboard
public import SwitchboardEmulation

/// The agent's desk at the CXone emulator: what `switchboard emulate cxone` commands do.
public struct CXoneDesk: AgentDesk {
    public let server: CXoneServer
    public let agent: CXoneAgentRobot
    /// Who takes the thread on `/transfer`.
    public let colleague: CXoneAgentRobot
    private let state = Locked((typing: false, offline: false))

    public init(server: CXoneServer, agent: CXoneAgentRobot, colleague: CXoneAgentRobot) {
        self.server = server
        self.agent = agent
        self.colleague = colleague
    }

    public var vendor: String { "CXone" }

    /// The thread the customer wrote in last.
    private func thread() throws -> String {
        let sent = server.received.last { $0.eventType == "SendMessage" }
        if let thread = sent?.data["thread"]?["idOnExternalPlatform"]?.stringValue { return thread }
        if let customer = server.received.last?.customer, let thread = server.threads(of: customer).last { return thread }
        throw DeskError("no thread yet: connect an app and write first")
    }

    public func current() throws -> String {
        let thread = try thread()
        return "thread \(thread), \(server.status(ofThread: thread) ?? "unknown")"
    }

    public func say(_ text: String) throws -> String {
        let thread = try thread()
        if server.status(ofThread: thread) != "open" { agent.assign(thread) }
        let id = agent.send(text, in: thread)
        state.withLock { $0.typing = false }
        return "said in thread \(thread) (message \(id))"
    }

    public func typing() throws -> String {
        let thread = try thread()
        let typing = state.withLock { state in
            state.typing.toggle()
            return state.typing
        }
        agent.typing(typing, in: thread)
        return typing ? "typing in thread \(thread)" : "stopped typing"
    }

    public func read() throws -> String {
        let thread = try thread()
        agent.markRead(thread)
        return "read the customer's messages in thread \(thread)"
    }

    public func close() throws -> String {
        let thread = try thread()
        agent.close(thread)
        return "closed thread \(thread)"
    }

    public func transfer() throws -> String {
        let thread = try thread()
        agent.transfer(thread, to: colleague)
        return "handed thread \(thread) to agent \(colleague.id)"
    }

    public func offline() throws -> String {
        guard server.configuration.mode == .live else {
            throw DeskError.notOffered("/offline", by: vendor, "only a live-chat channel (--mode live) has agent availability")
        }
        let offline = state.withLock { state in
            state.offline.toggle()
            return state.offline
        }
        server.setLiveChatOnline(!offline)
        return offline ? "live chat offline" : "live chat online"
    }

    public func disconnect() -> String {
        server.inject(.closeSocket)
        return "closed the customer's sockets"
    }

    public func drop(_ count: Int) throws -> String {
        for _ in 0..<count { server.inject(.dropOnNext(eventType: nil)) }
        return "the socket closes before each of the app's next \(count) requests is handled"
    }

    public func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.inject(.slowReplies(.milliseconds(milliseconds), eventType: nil))
        return ("what follows the app's next request is held for \(milliseconds) ms", nil)
    }

    public func reinit() throws -> String {
        throw DeskError.notOffered("/reinit", by: vendor, "a session is its socket; /disconnect makes the app authorize again")
    }
}
