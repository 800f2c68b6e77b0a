public import Foundation
public import SwitchboardEmulation

/// The agent's desk at the Voximplant-style emulator: what `switchboard emulate voximplant` commands do.
public struct VoximplantDesk: AgentDesk {
    public let server: VoximplantServer
    public let agent: String
    public let customer: String
    public let conversation: String

    public init(server: VoximplantServer, agent: String, customer: String, conversation: String) {
        self.server = server
        self.agent = agent
        self.customer = customer
        self.conversation = conversation
    }

    public var vendor: String { "Voximplant-style" }

    public func current() throws -> String { "conversation \(conversation) between \(agent) (agent) and \(customer)" }

    public func say(_ text: String) throws -> String {
        let sent = try server.robot(agent).send(text, in: conversation)
        return "said in \(conversation) (#\(sent.sequence))"
    }

    public func typing() throws -> String {
        try server.robot(agent).typing(in: conversation)
        return "typing in \(conversation) (the protocol's typing lasts 10 s; there is no stop)"
    }

    public func read() throws -> String {
        try server.robot(agent).markRead(in: conversation)
        return "read \(conversation) up to #\(server.lastSequence(of: conversation))"
    }

    public func close() throws -> String {
        throw DeskError.notOffered("/close", by: vendor, "a conversation has no end; participants leave it")
    }

    public func transfer() throws -> String {
        throw DeskError.notOffered("/transfer", by: vendor, "there are no agents, only participants")
    }

    public func offline() throws -> String {
        throw DeskError.notOffered("/offline", by: vendor, "the protocol has no agent availability")
    }

    public func disconnect() -> String {
        server.disconnect(user: customer)
        return "closed \(customer)'s sockets"
    }

    public func drop(_ count: Int) throws -> String {
        server.dropNext(count, for: customer)
        return "the next \(count) events to \(customer)'s connected apps are dropped (the app fills the gap by retransmit)"
    }

    public func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.delayNext(1_000_000, for: customer)
        let server = self.server
        return ("events to \(customer)'s connected apps are held for \(milliseconds) ms", {
            server.releaseDelayed()
            return "released the held events"
        })
    }

    public func reinit() throws -> String {
        throw DeskError.notOffered("/reinit", by: vendor, "a login lasts as long as its socket")
    }
}
