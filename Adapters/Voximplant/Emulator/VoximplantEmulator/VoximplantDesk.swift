public import Foundation
@_spi(TestKit) import Switchboard
public import SwitchboardEmulation

/// The agent's desk at the Voximplant-style emulator: what `switchboard emulate voximplant` commands do.
/// The agent is a robot participant; a command acts in the desk's conversation, or in another
/// one the robot is in.
public struct VoximplantDesk: AgentDesk {
    public let server: VoximplantServer
    public let agent: String
    public let customer: String
    public let conversation: String
    /// A user the agent can add to a conversation and remove again (the moves
    /// `add-participant` and `remove-participant`); `nil` for no such moves.
    public let colleague: String?

    public init(server: VoximplantServer, agent: String, customer: String, conversation: String, colleague: String? = nil) {
        self.server = server
        self.agent = agent
        self.customer = customer
        self.conversation = conversation
        self.colleague = colleague
    }

    public var vendor: String { "Voximplant-style" }

    /// The commands this desk does not offer, and why.
    static let notOffered: [String: String] = [
        "accept": "the agent is a participant from the start; there is nothing to take",
        "file": "the protocol has no files (a message's payload is JSON the app gets back as it was sent)",
        "close": "a conversation has no end; participants leave it",
        "transfer": "there are no agents, only participants",
        "offline": "the protocol has no agent availability",
        "reinit": "a login lasts as long as its socket",
    ]

    private func notOffered(_ command: String) -> DeskError {
        .notOffered(command, by: vendor, Self.notOffered[command] ?? "")
    }

    /// The conversation `id` names (`nil`: the desk's), if the agent is in it.
    private func resolve(_ id: String?) throws -> String {
        guard let id else { return conversation }
        guard server.isParticipant(agent, in: id) else { throw DeskError("no conversation \(id) at the \(vendor) emulator") }
        return id
    }

    // MARK: What the console shows

    /// The conversations the agent is in, then those it left (closed); the desk's conversation is
    /// the current one.
    public func snapshot() -> DeskSnapshot {
        DeskSnapshot(
            vendor: vendor,
            conversations: server.deskConversations(of: agent, including: conversation),
            current: conversation,
            notOffered: Self.notOffered,
            moves: moves,
            agentsOnline: nil,
            faults: server.faultLines
        )
    }

    private var moves: [DeskMove] {
        var moves: [DeskMove] = []
        if let colleague {
            let name = server.displayName(of: colleague)
            moves += [DeskMove(id: "add-participant", title: "Add \(name)"), DeskMove(id: "remove-participant", title: "Remove \(name)")]
        }
        moves += [DeskMove(id: "edit-last", title: "Edit the agent's last message"), DeskMove(id: "remove-last", title: "Remove the agent's last message")]
        return moves
    }

    public var revision: Int { server.changes.generation }

    /// Also returns, with ``revision`` moved, when a typing notification shown ends: typing ends
    /// by time (10 s), not by an event.
    public func waitForChange(after revision: Int) async {
        let server = self.server
        guard let ends = server.typingEnds() else {
            await server.changes.wait(since: revision)
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await server.changes.wait(since: revision) }
            group.addTask {
                if (try? await server.clock.sleep(for: ends)) != nil { server.changes.signal() }
            }
            _ = await group.next()
            group.cancelAll()
        }
    }

    // MARK: Agent commands

    public func current(in conversation: String?) throws -> String {
        let id = try resolve(conversation)
        let others = server.participants(of: id, except: agent)
        return "conversation \(id) between \(agent) (agent) and \(others.isEmpty ? "no one else" : others.joined(separator: ", "))"
    }

    public func accept(in conversation: String?) throws -> String { throw notOffered("accept") }

    public func say(_ text: String, in conversation: String?) throws -> String {
        let id = try resolve(conversation)
        let sent = try server.robot(agent).send(text, in: id)
        return "said in \(id) (#\(sent.sequence))"
    }

    public func sendFile(named name: String, contentType: String, data: Data, in conversation: String?) throws -> String {
        throw notOffered("file")
    }

    /// Typing starts (`nil` or `true`); the protocol has no stop, so `false` is refused.
    public func typing(_ isTyping: Bool?, in conversation: String?) throws -> String {
        guard isTyping != false else {
            throw DeskError("typing: the \(vendor) protocol's typing lasts 10 s and has no stop")
        }
        let id = try resolve(conversation)
        try server.robot(agent).typing(in: id)
        return "typing in \(id) (the protocol's typing lasts 10 s; there is no stop)"
    }

    public func read(in conversation: String?) throws -> String {
        let id = try resolve(conversation)
        try server.robot(agent).markRead(in: id)
        return "read \(id) up to #\(server.lastSequence(of: id))"
    }

    public func close(in conversation: String?) throws -> String { throw notOffered("close") }

    public func transfer(in conversation: String?) throws -> String { throw notOffered("transfer") }

    public func offline() throws -> String { throw notOffered("offline") }

    /// `add-participant` and `remove-participant` (the colleague), `edit-last` (appends
    /// " (edited)") and `remove-last` (the agent's last live message).
    public func move(_ id: String, in conversation: String?) throws -> String {
        let known = moves.map(\.id)
        guard known.contains(id) else {
            throw DeskError("no move \(id) at the \(vendor) emulator; its moves: \(known.joined(separator: ", "))")
        }
        let target = try resolve(conversation)
        let robot = server.robot(agent)
        switch id {
        case "add-participant", "remove-participant":
            guard let colleague else { throw DeskError("no colleague at this desk") }
            if id == "add-participant" {
                try robot.addParticipants([colleague], to: target)
                return "added \(colleague) to \(target)"
            }
            try robot.removeParticipants([colleague], from: target)
            return "removed \(colleague) from \(target)"
        default:
            guard let last = server.messages(in: target).last(where: { $0.sender == agent }) else {
                throw DeskError("\(id): \(agent) has no message in \(target)")
            }
            if id == "edit-last" {
                try robot.edit(last.uuid, in: target, text: last.text + " (edited)")
                return "edited \(last.uuid) in \(target) (#\(server.lastSequence(of: target)))"
            }
            try robot.remove(last.uuid, in: target)
            return "removed \(last.uuid) from \(target) (#\(server.lastSequence(of: target)))"
        }
    }

    // MARK: Faults

    /// The line of a fault armed on the customer's connected apps: it comes to nothing when none is.
    private func armed(_ line: String) -> String {
        server.isConnected(customer) ? line : line + "; no app of \(customer) is connected, so nothing is armed"
    }

    public func disconnect() -> String {
        server.disconnect(user: customer)
        return "closed \(customer)'s sockets"
    }

    public func drop(_ count: Int) throws -> String {
        server.dropNext(count, for: customer)
        return armed("the next \(count) events to \(customer)'s connected apps are dropped (the app fills the gap by retransmit)")
    }

    public func duplicate(_ count: Int) throws -> String {
        server.duplicateNext(count, for: customer)
        return armed("the next \(count) events to \(customer)'s connected apps are sent twice (the app keeps one of each sequence)")
    }

    public func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.delayNext(1_000_000, for: customer)
        let server = self.server
        return (armed("events to \(customer)'s connected apps are held for \(milliseconds) ms"), {
            server.releaseDelayed()
            return "released the held events"
        })
    }

    public func reinit() throws -> String { throw notOffered("reinit") }
}

extension VoximplantServer {
    /// A user's display name; their id when there is no such user.
    func displayName(of user: String) -> String {
        state.withLock { $0.users[user]?.displayName ?? user }
    }

    func isParticipant(_ user: String, in conversation: String) -> Bool {
        state.withLock { $0.conversations[conversation]?.member(user) != nil }
    }

    /// The participants of `conversation` other than `user`, in the order they joined.
    func participants(of conversation: String, except user: String) -> [String] {
        state.withLock { $0.conversations[conversation]?.members.map(\.userId).filter { $0 != user } ?? [] }
    }

    /// The faults that took effect, as lines, oldest first.
    var faultLines: [String] { state.withLock { Array($0.faultLines) } }

    /// How long until the first typing notification that shows now ends (10 s after it was
    /// passed on); `nil` when none shows.
    func typingEnds() -> Duration? {
        let time = clock.date.timeIntervalSince1970
        let left = state.withLock { state in state.lastTyping.values.map { Double($0 + 10) - time }.filter { $0 > 0 }.min() }
        return left.map { Duration.seconds($0) + .milliseconds(10) }
    }

    /// `agent`'s conversations as an agent console shows them: those it is in (active), then
    /// those it left or was removed from (closed), and `conversation` in any case. Messages are
    /// the live ones (an edit shows its new text, a removed one is gone) with the participant
    /// changes as system lines, in log order. A typing notification shows for the protocol's 10 s.
    func deskConversations(of agent: String, including conversation: String) -> [DeskConversation] {
        let now = self.now
        let (users, conversations, lastTyping) = state.withLock { ($0.users, $0.conversations, $0.lastTyping) }
        var ids = (users[agent]?.conversations ?? []) + (users[agent]?.left ?? [])
        if !ids.contains(conversation) { ids.append(conversation) }
        func name(_ user: String) -> String { users[user]?.displayName ?? user }
        return ids.compactMap { id in
            guard let stored = conversations[id] else { return nil }
            func typing(_ user: String) -> Bool { lastTyping["\(user)/\(id)"].map { now - $0 < 10 } ?? false }
            let isIn = stored.member(agent) != nil
            let others = stored.members.map(\.userId).filter { $0 != agent }
            let agentMark = stored.member(agent)?.lastReadSequence ?? 0
            let othersMark = stored.members.filter { $0.userId != agent }.map(\.lastReadSequence).max() ?? 0
            var messages: [DeskMessage] = []
            for event in stored.log {
                let sequence = event["seq"]?.intValue ?? 0
                switch event["eventType"]?.stringValue {
                case "sendMessage":
                    guard let uuid = event["message"]?["uuid"]?.stringValue, let message = stored.messages[uuid] else { continue }
                    let mine = message.sender == agent
                    messages.append(DeskMessage(
                        id: uuid, author: mine ? .agent : .customer, name: name(message.sender), text: message.text,
                        read: (mine ? othersMark : agentMark) >= message.sequence
                    ))
                case "editConversation":
                    let who = (event["participants"]?.arrayValue ?? []).compactMap { $0.stringValue ?? $0["userId"]?.stringValue }.map(name)
                    let by = name(event["initiator"]?.stringValue ?? "")
                    let list = who.joined(separator: ", ")
                    let text: String
                    switch event["action"]?.stringValue {
                    case "addParticipants": text = "\(by) added \(list)"
                    case "removeParticipants": text = "\(by) removed \(list)"
                    case "joinConversation": text = "\(list) joined"
                    case "leaveConversation": text = "\(list) left"
                    default: continue
                    }
                    messages.append(DeskMessage(id: "\(id)#\(sequence)", author: .system, text: text, read: agentMark >= sequence))
                default: continue
                }
            }
            return DeskConversation(
                id: id,
                customer: others.isEmpty ? "no one" : others.map(name).joined(separator: ", "),
                phase: isIn ? .active : .closed,
                agent: isIn ? name(agent) : nil,
                customerTyping: others.contains(where: typing),
                agentTyping: typing(agent),
                messages: messages
            )
        }
    }
}
