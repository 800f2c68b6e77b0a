public import Foundation

/// A line for whoever drives the emulator: what a command did, or why it could not.
public struct DeskError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    public static func notOffered(_ what: String, by vendor: String, _ why: String) -> DeskError {
        DeskError("\(what) is not offered by the \(vendor) emulator: \(why)")
    }
}

/// The agent's desk at one emulator: what the agent consoles (`switchboard emulate` on standard
/// input, and in the browser) do there, and what they show. A command acts in the conversation
/// it names, or, given `nil`, in the one the customer wrote in last; what the vendor's protocol
/// lacks throws ``DeskError/notOffered(_:by:_:)`` and is listed in
/// ``DeskSnapshot/notOffered``.
public protocol AgentDesk: Sendable {
    var vendor: String { get }

    /// The conversations as the emulator's model holds them now.
    func snapshot() -> DeskSnapshot
    /// Moves whenever the emulator's model changes.
    var revision: Int { get }
    /// Returns once ``revision`` has moved past `revision`, or the task is cancelled.
    func waitForChange(after revision: Int) async

    /// The conversation the agent acts in, described.
    func current(in conversation: String?) throws -> String
    /// Takes a waiting conversation (joins it).
    func accept(in conversation: String?) throws -> String
    func say(_ text: String, in conversation: String?) throws -> String
    func sendFile(named name: String, contentType: String, data: Data, in conversation: String?) throws -> String
    /// Starts or stops typing; `nil` toggles.
    func typing(_ isTyping: Bool?, in conversation: String?) throws -> String
    func read(in conversation: String?) throws -> String
    func close(in conversation: String?) throws -> String
    func transfer(in conversation: String?) throws -> String
    /// Takes the agents offline, or back online.
    func offline() throws -> String
    /// One of the vendor's own moves, by its ``DeskMove/id``.
    func move(_ id: String, in conversation: String?) throws -> String

    // Faults, in every mode.
    func disconnect() -> String
    func drop(_ count: Int) throws -> String
    func duplicate(_ count: Int) throws -> String
    /// Delays what the app receives by `milliseconds`; a release to run afterwards, if any.
    func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?)
    func reinit() throws -> String
}

/// One thing an agent console asks of a desk.
public enum DeskCommand: Sendable, Equatable {
    case current
    case accept
    case say(String)
    case file(name: String, contentType: String, data: Data)
    case typing(Bool?)
    case read
    case close
    case transfer
    case offline
    case move(String)
    case disconnect
    case drop(Int)
    case duplicate(Int)
    case delay(milliseconds: Int)
    case reinit

    /// The largest count `drop` and `duplicate` take, and the longest `delay`.
    public static let maxCount = 1_000
    public static let maxDelayMilliseconds = 600_000
}

/// What a command did: its line, and work to do after a delay (releasing what `delay` held).
public struct DeskOutcome: Sendable {
    public var line: String
    public var later: (after: Duration, run: @Sendable () -> String)?

    public init(line: String, later: (after: Duration, run: @Sendable () -> String)? = nil) {
        self.line = line
        self.later = later
    }
}

extension AgentDesk {
    /// Runs `command` in `conversation` (`nil`: the one the customer wrote in last).
    ///
    /// - Throws: ``DeskError`` when the command is not offered, its argument is out of range,
    ///   or the conversation cannot take it.
    public func perform(_ command: DeskCommand, in conversation: String? = nil) throws -> DeskOutcome {
        switch command {
        case .current: return DeskOutcome(line: try current(in: conversation))
        case .accept: return DeskOutcome(line: try accept(in: conversation))
        case .say(let text):
            guard !text.isEmpty else { throw DeskError("say: the text is empty") }
            return DeskOutcome(line: try say(text, in: conversation))
        case .file(let name, let contentType, let data):
            guard !name.isEmpty, !data.isEmpty else { throw DeskError("file: a name and some content are needed") }
            return DeskOutcome(line: try sendFile(named: name, contentType: contentType, data: data, in: conversation))
        case .typing(let isTyping): return DeskOutcome(line: try typing(isTyping, in: conversation))
        case .read: return DeskOutcome(line: try read(in: conversation))
        case .close: return DeskOutcome(line: try close(in: conversation))
        case .transfer: return DeskOutcome(line: try transfer(in: conversation))
        case .offline: return DeskOutcome(line: try offline())
        case .move(let id): return DeskOutcome(line: try move(id, in: conversation))
        case .disconnect: return DeskOutcome(line: disconnect())
        case .drop(let count):
            try Self.check(count, "drop N", 1...DeskCommand.maxCount)
            return DeskOutcome(line: try drop(count))
        case .duplicate(let count):
            try Self.check(count, "duplicate N", 1...DeskCommand.maxCount)
            return DeskOutcome(line: try duplicate(count))
        case .delay(let milliseconds):
            try Self.check(milliseconds, "delay MS", 1...DeskCommand.maxDelayMilliseconds)
            let (line, release) = try delay(milliseconds: milliseconds)
            return DeskOutcome(line: line, later: release.map { (.milliseconds(milliseconds), $0) })
        case .reinit: return DeskOutcome(line: try reinit())
        }
    }

    private static func check(_ value: Int, _ usage: String, _ range: ClosedRange<Int>) throws {
        guard range.contains(value) else { throw DeskError("\(usage): from \(range.lowerBound) to \(range.upperBound), not \(value)") }
    }

    /// The conversation `conversation` names, or the default; `DeskError` when there is none.
    public func conversation(_ conversation: String?, in snapshot: DeskSnapshot) throws -> DeskConversation {
        if let conversation {
            guard let found = snapshot.conversations.first(where: { $0.id == conversation }) else {
                throw DeskError("no conversation \(conversation) at the \(vendor) emulator")
            }
            return found
        }
        guard let current = snapshot.current, let found = snapshot.conversations.first(where: { $0.id == current }) else {
            throw DeskError("no conversation yet: connect an app and write first")
        }
        return found
    }
}

/// What an agent console shows of one emulator: its conversations with their messages, which
/// commands it does not offer and why, the vendor's own moves, and the faults that took effect.
public struct DeskSnapshot: Codable, Sendable, Equatable {
    public var vendor: String
    public var conversations: [DeskConversation]
    /// The conversation a command without one acts in: the one the customer wrote in last.
    public var current: String?
    /// The commands the emulator does not offer (by their names on the console's socket, such as
    /// `"close"`), each with the reason.
    public var notOffered: [String: String]
    public var moves: [DeskMove]
    /// Whether the agents are available, where the vendor has availability.
    public var agentsOnline: Bool?
    /// The faults that took effect at the emulator, oldest first (the last 200).
    public var faults: [String]

    public init(
        vendor: String,
        conversations: [DeskConversation],
        current: String?,
        notOffered: [String: String],
        moves: [DeskMove] = [],
        agentsOnline: Bool? = nil,
        faults: [String] = []
    ) {
        self.vendor = vendor
        self.conversations = conversations
        self.current = current
        self.notOffered = notOffered
        self.moves = moves
        self.agentsOnline = agentsOnline
        self.faults = Array(faults.suffix(200))
    }
}

/// A chat, thread or conversation at the emulator.
public struct DeskConversation: Codable, Sendable, Equatable {
    public enum Phase: String, Codable, Sendable {
        /// The customer wrote; no agent has taken it.
        case waiting
        case active
        case closed
    }

    public var id: String
    /// Who the customer is, as the emulator knows them.
    public var customer: String
    public var phase: Phase
    /// The agent in the conversation, if any.
    public var agent: String?
    public var customerTyping: Bool
    public var agentTyping: Bool
    public var messages: [DeskMessage]

    public init(id: String, customer: String, phase: Phase, agent: String?, customerTyping: Bool = false, agentTyping: Bool = false, messages: [DeskMessage]) {
        self.id = id
        self.customer = customer
        self.phase = phase
        self.agent = agent
        self.customerTyping = customerTyping
        self.agentTyping = agentTyping
        self.messages = messages
    }
}

/// A message as the emulator stored it.
public struct DeskMessage: Codable, Sendable, Equatable {
    public enum Author: String, Codable, Sendable {
        case customer, agent, system
    }

    /// The emulator's id of the message.
    public var id: String
    public var author: Author
    /// The author's name, where the message carries one.
    public var name: String?
    public var text: String
    /// The file's name, for a file message.
    public var file: String?
    /// For an agent's message: whether the customer's read marker covers it; for a customer's:
    /// whether the agent's does.
    public var read: Bool

    public init(id: String, author: Author, name: String? = nil, text: String, file: String? = nil, read: Bool) {
        self.id = id
        self.author = author
        self.name = name
        self.text = text
        self.file = file
        self.read = read
    }
}

/// A move of the vendor's own (Webim's rating request, CXone's quick replies): its id, and
/// what the console's button says.
public struct DeskMove: Codable, Sendable, Equatable {
    public var id: String
    public var title: String

    public init(id: String, title: String) {
        self.id = id
        self.title = title
    }
}
