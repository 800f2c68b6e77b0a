package import Foundation
package import Switchboard

/// The interactive client of `switchboard connect`: one command line in, lines of output back.
/// Commands work the same for every backend; the help lists the ones the backend in use offers,
/// and a command it lacks says so in one line.
package actor Console {
    package let session: ChatSession
    package let commands: Commands
    private(set) var current: ConversationID?
    private var oldestLoaded: MessageOrderKey?
    /// The conversation `/leave` asked about; a second `/leave` confirms it.
    private var leaving: ConversationID?
    /// Messages the console could not hand to the session, for the exit status.
    private(set) var unsent: [String] = []

    private let progress: ProgressReporter
    /// The logged-in user, where peers share one role: their messages show as "me".
    private let me: ParticipantID?

    /// Joins a conversation (a Matrix room id or alias, a public Voximplant-style conversation).
    package typealias Joiner = @Sendable (ChatSession, String) async throws -> ConversationID

    /// What the backend in use offers beyond sending: how a conversation starts and ends, and
    /// whether one can be joined by its id. The rest follows the backend's capabilities.
    package struct Commands: Sendable {
        package enum Start: Sendable {
            /// `/create TITLE [USER…]`: a group conversation (messengers).
            case group
            /// `/new [FIELD=VALUE…]`: a thread, with pre-chat fields (CXone).
            case thread
            /// `/appeal TEXT`: a conversation its first message makes (Webim offline appeals).
            case appeal

            /// The command as the help writes it.
            package var usage: String {
                switch self {
                case .group: "/create TITLE [USER…]"
                case .thread: "/new [FIELD=VALUE…]"
                case .appeal: "/appeal TEXT"
                }
            }
        }

        package enum Ending: Sendable {
            /// `/close` ends the chat (a support chat).
            case close
            /// `/leave` takes the user out of the conversation, which goes on without them.
            case leave

            package var command: String {
                switch self {
                case .close: "/close"
                case .leave: "/leave"
                }
            }
        }

        package var start: Start?
        package var ending: Ending?
        package var join: Joiner?

        package init(start: Start? = nil, ending: Ending? = nil, join: Joiner? = nil) {
            self.start = start
            self.ending = ending
            self.join = join
        }
    }

    /// How long after the first connection a command that needs a conversation waits for one.
    private let conversationWait: Duration
    /// When the first link opened.
    private var connectedAt: ContinuousClock.Instant?

    package init(
        session: ChatSession,
        commands: Commands = Commands(),
        me: ParticipantID? = nil,
        progress: ProgressReporter = .off,
        conversationWait: Duration = .seconds(3)
    ) {
        self.session = session
        self.commands = commands
        self.me = me
        self.progress = progress
        self.conversationWait = conversationWait
    }

    /// The first link is open: conversations the backend has arrive from now on.
    package func linkConnected() {
        if connectedAt == nil { connectedAt = .now }
    }

    /// The commands this backend offers, a line per group.
    package var help: String {
        let capabilities = session.descriptor.capabilities
        func offered(_ capability: BackendCapabilities, _ text: String) -> String? { capabilities.contains(capability) ? text : nil }
        let lines: [[String?]] = [
            ["TEXT or /send TEXT", offered(.typing, "/typing [DRAFT]"), offered(.readMarkers, "/read"), "/history N", offered(.files, "/file PATH")],
            ["/conversations", "/open ID", commands.start?.usage, commands.join == nil ? nil : "/join ID", commands.ending?.command, offered(.archive, "/archive")],
            [
                offered(.participantsManagement, "/add USER"), offered(.participantsManagement, "/remove USER"),
                offered(.conversationUpdate, "/rename TITLE"), offered(.agentRating, "/rate N"), session.descriptor.sync == .polled ? "/refresh [forced]" : nil,
            ],
            ["/help", "/quit"],
        ]
        return lines.map { $0.compactMap { $0 } }.filter { !$0.isEmpty }.enumerated()
            .map { ($0.offset == 0 ? "commands: " : "          ") + $0.element.joined(separator: " · ") }
            .joined(separator: "\n")
    }

    /// Runs one command line; returns what to print, or `nil` to quit.
    package func handle(_ line: String) async -> [String]? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return [] }
        let words = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        // A bare word that is a console command is taken as the command, not sent to the agent.
        let bare = ["help", "quit", "exit"].contains(trimmed.lowercased()) ? "/" + trimmed.lowercased() : nil
        let command = bare ?? (trimmed.hasPrefix("/") ? words[0] : "/send")
        let argument = trimmed.hasPrefix("/") ? (words.count > 1 ? words[1] : "") : (bare == nil ? trimmed : "")
        if command != "/leave" { leaving = nil }
        do {
            switch command {
            case "/quit", "/exit":
                return nil
            case "/help":
                return [help]
            case "/conversations", "/threads":
                let list = try await session.conversations()
                if list.isEmpty { return ["no conversations"] }
                return list.map { "\($0.id == current ? "*" : " ") \($0.id)  \($0.title ?? "(untitled)")  \($0.participants.count) participants, last #\($0.lastSequence ?? 0)" }
            case "/open":
                let chat = try await session.conversation(ConversationID(argument))
                current = chat.id
                oldestLoaded = nil
                return ["opened \(chat.id)"]
            case "/create":
                guard commands.start == .group else { return notOffered(command) }
                var parts = argument.split(separator: " ").map(String.init)
                let title = parts.isEmpty ? nil : parts.removeFirst()
                let chat = try await session.startConversation(
                    ConversationDraft(kind: .group, title: title, participants: parts.map { Participant(id: ParticipantID($0), role: .user) })
                )
                current = chat.id
                return ["created and opened \(chat.id)"]
            case "/new":
                guard commands.start == .thread else { return notOffered(command) }
                // A thread with pre-chat custom fields: /new email=a@example.com topic=billing
                var fields: [String: String] = [:]
                for pair in argument.split(separator: " ") {
                    let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2 else { return ["not FIELD=VALUE: \(pair)"] }
                    fields[parts[0]] = parts[1]
                }
                let chat = try await session.startConversation(ConversationDraft(kind: .thread, customFields: fields))
                current = chat.id
                oldestLoaded = nil
                return ["created and opened \(chat.id)"]
            case "/appeal":
                guard commands.start == .appeal else { return notOffered(command) }
                guard !argument.isEmpty else { return ["usage: /appeal TEXT (an appeal is made by its first message)"] }
                do {
                    let chat = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: argument)))
                    current = chat.id
                    oldestLoaded = nil
                    return ["wrote and opened appeal \(chat.id)"]
                } catch {
                    unsent.append(argument)
                    throw error
                }
            case "/join":
                guard let join = commands.join else { return notOffered(command) }
                let id = try await join(session, argument)
                current = id
                oldestLoaded = nil
                return ["joined and opened \(id)"]
            case "/refresh":
                guard session.descriptor.sync == .polled else { return notOffered(command) }
                try await session.refresh(forced: argument == "forced")
                return ["refreshed"]
            default:
                return try await inConversation(command, argument)
            }
        } catch let error as SwitchboardError {
            return ["error: \(error)"]
        } catch {
            return ["error: \(error)"]
        }
    }

    /// The line for a command the backend in use does not offer.
    private func notOffered(_ command: String, _ why: String? = nil) -> [String] {
        ["\(command) is not offered by \(session.descriptor.name)\(why.map { ": \($0)" } ?? ""); /help lists what is"]
    }

    /// The capability each conversation command needs, where one does.
    private static let needs: [String: BackendCapabilities] = [
        "/typing": .typing, "/read": .readMarkers, "/file": .files, "/add": .participantsManagement,
        "/remove": .participantsManagement, "/rename": .conversationUpdate, "/archive": .archive, "/delete": .archive,
        "/rate": .agentRating,
    ]

    private func inConversation(_ command: String, _ argument: String) async throws -> [String] {
        let sends = command == "/send" || command == "/file"
        if let needed = Self.needs[command], !session.descriptor.capabilities.contains(needed) { return notOffered(command) }
        guard !(sends && argument.isEmpty) else { return ["usage: \(command) \(command == "/file" ? "PATH" : "TEXT")"] }
        guard let id = try await currentConversation() else {
            if sends { unsent.append(argument) }
            let start = commands.start.map { ", \($0.usage)" } ?? ""
            return ["no conversation\(sends ? ", nothing sent" : ""): /conversations, /open ID\(start)\(commands.join == nil ? "" : " or /join ID")"]
        }
        let chat = try await session.conversation(id)
        switch command {
        case "/send":
            do {
                let message = try await chat.send(text: argument)
                return ["queued \(message.clientID?.rawValue ?? "")"]
            } catch {
                unsent.append(argument)
                throw error
            }
        case "/typing":
            try await chat.userTyping(draft: argument.isEmpty ? nil : argument)
            return []
        case "/read":
            try await chat.markRead()
            return ["marked read"]
        case "/history":
            // Loaded in pages of up to 100, saying how far it has come on a long load.
            let wanted = max(1, Int(argument) ?? 20)
            var loaded: [Message] = []
            while loaded.count < wanted {
                let page = try await chat.history(before: oldestLoaded, limit: min(100, wanted - loaded.count))
                guard !page.isEmpty else { break }
                oldestLoaded = page.first?.orderKey ?? oldestLoaded
                loaded.insert(contentsOf: page, at: 0)
                if wanted > 100 { progress.report("history: \(loaded.count) of \(wanted) loaded") }
            }
            if loaded.isEmpty { return ["no older messages"] }
            return loaded.map { "  #\($0.sequence.map(String.init) ?? "-") \(EventFormatter.isMine($0, me: me) ? "me" : $0.senderName ?? $0.sender?.rawValue ?? "unknown"): \($0.text)" }
        case "/add":
            try await chat.addParticipants([Participant(id: ParticipantID(argument), role: .user)])
            return ["added \(argument)"]
        case "/remove":
            try await chat.removeParticipants([ParticipantID(argument)])
            return ["removed \(argument)"]
        case "/close", "/end":
            switch commands.ending {
            case .close:
                try await chat.close()
                return ["closed \(id)"]
            case .leave:
                return ["a \(session.descriptor.name) conversation has no end: /leave takes you out of \(id)"]
            case nil:
                return notOffered(command, "the agent or the service ends a chat")
            }
        case "/leave":
            guard commands.ending == .leave else { return notOffered(command) }
            guard leaving == id else {
                leaving = id
                let back = commands.join == nil ? "a member adds you" : "it is public (/join \(id)) or a member adds you"
                return ["leaving \(id) takes you out of it for good: you come back only if \(back). Type /leave again to leave."]
            }
            leaving = nil
            try await chat.close()
            current = nil
            return ["left \(id)"]
        case "/archive", "/delete":
            try await chat.archive()
            if current == id { current = nil }
            return ["archived \(id)"]
        case "/rename":
            try await chat.update(ConversationChanges(title: argument))
            return ["renamed \(id)"]
        case "/rate":
            guard let rating = Int(argument) else { return ["usage: /rate N"] }
            try await chat.rateAgent(nil, rating: rating, comment: nil)
            return ["rated"]
        case "/file":
            let url = URL(fileURLWithPath: argument)
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else {
                unsent.append(argument)
                return ["no file at \(url.path), nothing sent"]
            }
            let size = attributes[.size] as? Int
            do {
                try await chat.send(
                    // The file alone: its name is the attachment's (text beside it would go as a
                    // message of its own where a file is one, Webim).
                    MessageDraft(
                        text: "",
                        kind: .file,
                        attachments: [
                            Message.Attachment(name: url.lastPathComponent, mimeType: Self.mimeType(of: url), size: size.map(Int64.init), url: url)
                        ]
                    )
                )
            } catch {
                unsent.append(argument)
                throw error
            }
            return ["queued \(url.lastPathComponent)"]
        default:
            return ["unknown command \(command); /help lists the commands"]
        }
    }

    package static func mimeType(of url: URL) -> String {
        switch url.pathExtension.lowercased() {
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "pdf": return "application/pdf"
        case "txt": return "text/plain"
        default: return "application/octet-stream"
        }
    }

    /// The open conversation, or the only one there is. Right after the first connection, when
    /// there is none yet, waits (until `conversationWait` after it) for the first to arrive.
    private func currentConversation() async throws -> ConversationID? {
        if let current { return current }
        var all = try await session.conversations()
        if all.isEmpty, let connectedAt, case let deadline = connectedAt + conversationWait, deadline > .now {
            // Subscribed before the store is read again, so a conversation stored meanwhile is heard.
            let events = session.events(filter: .all, buffering: .unbounded)
            if try await session.conversations().isEmpty {
                _ = await ConsoleRunner.firstEvent(in: events, within: deadline - .now) { kind in
                    if case .conversationAdded = kind { return true }
                    return nil
                }
            } else {
                events.finish()
            }
            all = try await session.conversations()
        }
        if all.count == 1 { current = all[0].id }
        return current
    }
}

/// Standard input as an async sequence of lines, read on a thread of its own so a blocking
/// read never holds a thread of the concurrency pool.
package enum StandardInput {
    /// The lines of standard input, read on a thread of their own; `bufferingPolicy` says what
    /// is kept of the lines nobody awaits yet (all of them by default).
    package static func lines(bufferingPolicy: AsyncStream<String>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<String> {
        let (lines, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: bufferingPolicy)
        let reader = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        reader.start()
        return lines
    }
}
