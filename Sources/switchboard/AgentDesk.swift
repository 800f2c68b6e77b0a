import ArgumentParser
import CXoneEmulator
import Foundation
import Switchboard
import VoximplantEmulator
import WebimEmulator

/// How the agent of `switchboard emulate` answers.
enum AgentMode: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Answers every customer message with "You wrote: …".
    case echo
    /// Answers with the lines of a script in order (`--script FILE`, or a short built-in one), then
    /// stops answering.
    case scripted
    /// Answers nothing by itself: a person types the agent's side on standard input.
    case manual
}

/// The replies of `--agent scripted`: one per customer message, in order; `{text}` is replaced by
/// what the customer wrote.
struct AgentScript: Sendable {
    static let builtIn = [
        "Hello, I am the scripted agent. How can I help?",
        "Let me look into \"{text}\" for you.",
        "Thanks for waiting: that is sorted now.",
        "Is there anything else I can do?",
    ]

    private let lines: [String]
    private let next = Locked(0)

    init(lines: [String] = Self.builtIn) { self.lines = lines }

    /// - Throws: ``OptionError`` naming `--script` and `path` when the file cannot be read or
    ///   has no lines.
    init(contentsOf path: String) throws {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile || error.code == .fileNoSuchFile {
            throw OptionError("--script \(path): no such file")
        } catch let error as CocoaError where error.code == .fileReadNoPermission {
            throw OptionError("--script \(path): permission denied")
        } catch let error as CocoaError where error.code == .fileReadInapplicableStringEncoding {
            throw OptionError("--script \(path): not UTF-8 text")
        } catch {
            throw OptionError("--script \(path): cannot be read (\(error.localizedDescription))")
        }
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw OptionError("--script \(path): the file has no lines") }
        self.init(lines: lines)
    }

    /// The next reply, or `nil` once the script is done.
    func reply(to text: String) -> String? {
        let index = next.withLock { next in
            defer { next += 1 }
            return next
        }
        guard index < lines.count else { return nil }
        return lines[index].replacingOccurrences(of: "{text}", with: text)
    }
}

/// An option's value the command cannot use, said in one line that names the option (where a
/// `ValidationError` would add the usage: the value parsed, the problem is what it points to).
struct OptionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A line for whoever drives the emulator: what a command did, or why it could not.
struct DeskError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    static func notOffered(_ what: String, by vendor: String, _ why: String) -> DeskError {
        DeskError("\(what) is not offered by the \(vendor) emulator: \(why)")
    }
}

/// The agent's desk at one emulator: what `switchboard emulate` commands do there. Each acts in
/// the conversation the customer wrote in last; what the vendor's protocol lacks throws
/// ``DeskError/notOffered(_:by:_:)``.
protocol AgentDesk: Sendable {
    var vendor: String { get }
    /// The conversation the agent acts in, described.
    func current() throws -> String
    func say(_ text: String) throws -> String
    /// Starts typing, or stops when the agent is typing.
    func typing() throws -> String
    func read() throws -> String
    func close() throws -> String
    func transfer() throws -> String
    /// Takes the agents offline, or back online.
    func offline() throws -> String

    // Faults, in every mode.
    func disconnect() -> String
    func drop(_ count: Int) throws -> String
    /// Delays what the app receives by `milliseconds`; a release to run afterwards, if any.
    func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?)
    func reinit() throws -> String
}

/// One command line typed at `switchboard emulate`; what to print back, and work to do later.
struct AgentConsole: Sendable {
    let desk: any AgentDesk

    static let help = """
        agent commands: /say TEXT (or just TEXT) · /typing · /read · /close · /transfer · /offline · /where
        faults:         /disconnect · /drop N · /delay MS · /reinit · /help
        """

    struct Reply: Sendable {
        var lines: [String]
        /// Something to do after a delay (releasing what `/delay` held), and the line it prints.
        var later: (after: Duration, run: @Sendable () -> String)?
    }

    func handle(_ line: String) -> Reply {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return Reply(lines: []) }
        let words = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        let command = trimmed.hasPrefix("/") ? words[0] : "/say"
        let argument = trimmed.hasPrefix("/") ? (words.count > 1 ? words[1] : "") : trimmed
        do {
            switch command {
            case "/help": return Reply(lines: [Self.help])
            case "/where": return Reply(lines: [try desk.current()])
            case "/say":
                guard !argument.isEmpty else { return Reply(lines: ["usage: /say TEXT"]) }
                return Reply(lines: [try desk.say(argument)])
            case "/typing": return Reply(lines: [try desk.typing()])
            case "/read": return Reply(lines: [try desk.read()])
            case "/close": return Reply(lines: [try desk.close()])
            case "/transfer": return Reply(lines: [try desk.transfer()])
            case "/offline": return Reply(lines: [try desk.offline()])
            case "/disconnect": return Reply(lines: [desk.disconnect()])
            case "/drop":
                guard let count = Int(argument), (1...1_000).contains(count) else { return Reply(lines: ["usage: /drop N (1 to 1000)"]) }
                return Reply(lines: [try desk.drop(count)])
            case "/delay":
                guard let milliseconds = Int(argument), (1...600_000).contains(milliseconds) else {
                    return Reply(lines: ["usage: /delay MS (1 to 600000)"])
                }
                let (text, release) = try desk.delay(milliseconds: milliseconds)
                return Reply(lines: [text], later: release.map { (.milliseconds(milliseconds), $0) })
            case "/reinit": return Reply(lines: [try desk.reinit()])
            default: return Reply(lines: ["unknown command \(command); /help lists them"])
            }
        } catch let error as DeskError {
            return Reply(lines: [error.description])
        } catch {
            return Reply(lines: ["error: \(error)"])
        }
    }

    /// Reads commands from standard input until it ends, printing each reply; the releases of
    /// `/delay` run as child tasks, so the scope ends only when they have.
    func run(lines: AsyncStream<String>, output: StandardOutput) async {
        await withTaskGroup(of: Void.self) { group in
            for await line in lines {
                let reply = handle(line)
                for text in reply.lines { output.write(text) }
                if let later = reply.later {
                    group.addTask {
                        try? await Task.sleep(for: later.after)
                        output.write(later.run())
                    }
                }
            }
        }
    }
}

// MARK: Voximplant-style

struct VoximplantDesk: AgentDesk {
    let server: VoximplantServer
    let agent: String
    let customer: String
    let conversation: String

    var vendor: String { "Voximplant-style" }

    func current() throws -> String { "conversation \(conversation) between \(agent) (agent) and \(customer)" }

    func say(_ text: String) throws -> String {
        let sent = try server.robot(agent).send(text, in: conversation)
        return "said in \(conversation) (#\(sent.sequence))"
    }

    func typing() throws -> String {
        try server.robot(agent).typing(in: conversation)
        return "typing in \(conversation) (the protocol's typing lasts 10 s; there is no stop)"
    }

    func read() throws -> String {
        try server.robot(agent).markRead(in: conversation)
        return "read \(conversation) up to #\(server.lastSequence(of: conversation))"
    }

    func close() throws -> String {
        throw DeskError.notOffered("/close", by: vendor, "a conversation has no end; participants leave it")
    }

    func transfer() throws -> String {
        throw DeskError.notOffered("/transfer", by: vendor, "there are no agents, only participants")
    }

    func offline() throws -> String {
        throw DeskError.notOffered("/offline", by: vendor, "the protocol has no agent availability")
    }

    func disconnect() -> String {
        server.disconnect(user: customer)
        return "closed \(customer)'s sockets"
    }

    func drop(_ count: Int) throws -> String {
        server.dropNext(count, for: customer)
        return "the next \(count) events to \(customer)'s connected apps are dropped (the app fills the gap by retransmit)"
    }

    func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.delayNext(1_000_000, for: customer)
        let server = self.server
        return ("events to \(customer)'s connected apps are held for \(milliseconds) ms", {
            server.releaseDelayed()
            return "released the held events"
        })
    }

    func reinit() throws -> String {
        throw DeskError.notOffered("/reinit", by: vendor, "a login lasts as long as its socket")
    }
}

// MARK: Webim

struct WebimDesk: AgentDesk {
    let server: WebimServer
    let agent: WebimOperatorRobot
    /// Who takes the chat on `/transfer`.
    let colleague: WebimOperatorRobot
    private let state = Locked((typing: false, offline: false))

    init(server: WebimServer, agent: WebimOperatorRobot, colleague: WebimOperatorRobot) {
        self.server = server
        self.agent = agent
        self.colleague = colleague
    }

    var vendor: String { "Webim" }

    /// The visitor who acted last.
    private func visitor() throws -> String {
        guard let visitor = server.actions.last?.visitor ?? server.visitorIDs.last else {
            throw DeskError("no visitor yet: connect an app and write first")
        }
        return visitor
    }

    func current() throws -> String {
        let visitor = try visitor()
        return "visitor \(visitor), chat \(server.chatState(ofVisitor: visitor) ?? "not started")"
    }

    func say(_ text: String) throws -> String {
        let visitor = try visitor()
        if server.chatState(ofVisitor: visitor) != "chatting" { try agent.join(visitor: visitor) }
        let id = try agent.send(text, to: visitor)
        state.withLock { $0.typing = false }
        return "said to visitor \(visitor) (message \(id))"
    }

    func typing() throws -> String {
        let visitor = try visitor()
        let typing = state.withLock { state in
            state.typing.toggle()
            return state.typing
        }
        try agent.typing(typing, visitor: visitor)
        return typing ? "typing to visitor \(visitor)" : "stopped typing"
    }

    func read() throws -> String {
        let visitor = try visitor()
        try agent.markRead(visitor: visitor)
        return "read visitor \(visitor)'s messages"
    }

    func close() throws -> String {
        let visitor = try visitor()
        try agent.close(visitor: visitor)
        return "closed visitor \(visitor)'s chat (closed_by_operator)"
    }

    func transfer() throws -> String {
        let visitor = try visitor()
        try colleague.join(visitor: visitor)
        return "\(colleague.name) took visitor \(visitor)'s chat"
    }

    func offline() throws -> String {
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
    static func availabilityLine(offline: Bool, told: [String], chatting: [String]) -> String {
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

    func disconnect() -> String {
        server.inject(.dropConnection, on: .delta)
        return "the next long-poll answer is cut mid-body"
    }

    func drop(_ count: Int) throws -> String {
        for _ in 0..<count { server.inject(.dropConnection, on: .delta) }
        return "the next \(count) long-poll answers are cut mid-body (the app polls again from its revision)"
    }

    func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.inject(.delay(.milliseconds(milliseconds)), on: .delta)
        server.inject(.delay(.milliseconds(milliseconds)), on: .action)
        return ("the next long-poll answer and the next action answer wait \(milliseconds) ms", nil)
    }

    func reinit() throws -> String {
        server.inject(.reinitRequired, on: .delta)
        return "the next long poll answers reinit-required (the app initialises a new page)"
    }
}

// MARK: CXone

struct CXoneDesk: AgentDesk {
    let server: CXoneServer
    let agent: CXoneAgentRobot
    /// Who takes the thread on `/transfer`.
    let colleague: CXoneAgentRobot
    private let state = Locked((typing: false, offline: false))

    init(server: CXoneServer, agent: CXoneAgentRobot, colleague: CXoneAgentRobot) {
        self.server = server
        self.agent = agent
        self.colleague = colleague
    }

    var vendor: String { "CXone" }

    /// The thread the customer wrote in last.
    private func thread() throws -> String {
        let sent = server.received.last { $0.eventType == "SendMessage" }
        if let thread = sent?.data["thread"]?["idOnExternalPlatform"]?.stringValue { return thread }
        if let customer = server.received.last?.customer, let thread = server.threads(of: customer).last { return thread }
        throw DeskError("no thread yet: connect an app and write first")
    }

    func current() throws -> String {
        let thread = try thread()
        return "thread \(thread), \(server.status(ofThread: thread) ?? "unknown")"
    }

    func say(_ text: String) throws -> String {
        let thread = try thread()
        if server.status(ofThread: thread) != "open" { agent.assign(thread) }
        let id = agent.send(text, in: thread)
        state.withLock { $0.typing = false }
        return "said in thread \(thread) (message \(id))"
    }

    func typing() throws -> String {
        let thread = try thread()
        let typing = state.withLock { state in
            state.typing.toggle()
            return state.typing
        }
        agent.typing(typing, in: thread)
        return typing ? "typing in thread \(thread)" : "stopped typing"
    }

    func read() throws -> String {
        let thread = try thread()
        agent.markRead(thread)
        return "read the customer's messages in thread \(thread)"
    }

    func close() throws -> String {
        let thread = try thread()
        agent.close(thread)
        return "closed thread \(thread)"
    }

    func transfer() throws -> String {
        let thread = try thread()
        agent.transfer(thread, to: colleague)
        return "handed thread \(thread) to agent \(colleague.id)"
    }

    func offline() throws -> String {
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

    func disconnect() -> String {
        server.inject(.closeSocket)
        return "closed the customer's sockets"
    }

    func drop(_ count: Int) throws -> String {
        for _ in 0..<count { server.inject(.dropOnNext(eventType: nil)) }
        return "the socket closes before each of the app's next \(count) requests is handled"
    }

    func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?) {
        server.inject(.slowReplies(.milliseconds(milliseconds), eventType: nil))
        return ("what follows the app's next request is held for \(milliseconds) ms", nil)
    }

    func reinit() throws -> String {
        throw DeskError.notOffered("/reinit", by: vendor, "a session is its socket; /disconnect makes the app authorize again")
    }
}
