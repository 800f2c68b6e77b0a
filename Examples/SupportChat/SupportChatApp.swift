import Foundation
import Logging
import Switchboard
import SwitchboardVoximplant

/// A command-line support chat written the way an app uses Switchboard, with the public API only:
/// one session on an event bus, a timeline rendered from its diffs, sending, history paging,
/// typing, read markers and the connection state shown to the user.
///
/// The chat runs on a Voximplant-style server; swapping the backend (`WebimBackend`,
/// `CXoneBackend`) is the only change another vendor needs, and what that vendor lacks throws
/// `unsupported`, which the app shows as a line.
struct SupportChatApp: Sendable {
    struct Options: Sendable, Equatable {
        var url: String
        var user: String
        var token: String
        /// The conversation to open; the first the session lists without it.
        var conversation: String?
        /// How many messages the timeline keeps on screen.
        var window = 20
        /// The file the library's log is appended to; without it the log is discarded, so that
        /// nothing the library logs draws over the chat.
        var log: String?
    }

    /// Why the chat ended without the user asking: the one line the screen showed for it.
    struct Failure: Error, CustomStringConvertible, Equatable {
        var description: String
    }

    let options: Options
    /// Makes the library's loggers, one per label: where its warnings go is the app's choice,
    /// never the screen (``discardingLogs`` unless `--log` names a file).
    let logger: @Sendable (_ label: String) -> Logger
    /// Where the app's screen goes: a line at a time.
    let screen: @Sendable (String) -> Void

    init(
        options: Options,
        logger: @escaping @Sendable (_ label: String) -> Logger = SupportChatApp.discardingLogs,
        screen: @escaping @Sendable (String) -> Void
    ) {
        self.options = options
        self.logger = logger
        self.screen = screen
    }

    static let help = "type a message and press return · /more older messages · /typing · /read · /inbox · /quit"

    /// Runs the chat until the input ends or `/quit`.
    ///
    /// A first connection that fails (a refused connection, TLS with a plain server, refused
    /// credentials) is shown in one line and ends the run with ``Failure``: the address or the
    /// token the user gave is wrong, and retrying would only hide it. Once connected, a drop is
    /// shown and the session reconnects by itself.
    func run(input: AsyncStream<String>) async throws {
        let bus = EventBus()
        let backend = VoximplantBackend(
            configuration: VoximplantConfiguration(url: options.url, user: options.user, token: options.token),
            logger: logger("switchboard.voximplant")
        )
        let session = ChatSession(backend: backend, store: InMemoryChatStore(), bus: bus, logger: logger("switchboard.session"))
        let me = ParticipantID(options.user)

        try await session.withRunning { session in
            // The connection state, for a status line: the session reconnects by itself; the app
            // only tells the user.
            let connection = bus.subscribe(filter: EventFilter(categories: [.connection]))
            let firstConnection = session.events(filter: EventFilter(categories: [.connection, .error]), buffering: .unbounded)
            let listed = session.events(filter: .all, buffering: .unbounded)
            defer {
                connection.finish()
                firstConnection.finish()
                listed.finish()
            }
            screen("connecting to \(options.url)…")
            try await session.resume()
            if let failure = await Self.firstConnectionFailure(firstConnection, url: options.url) {
                screen("✕ \(failure)")
                throw Failure(description: failure)
            }
            firstConnection.finish()

            let chat = try await openConversation(session, listed: listed)
            listed.finish()
            let timeline = try await chat.timeline(limit: options.window)
            // Every conversation of the session, for `/inbox` and a line when another one has
            // something unread.
            let inbox = try await Inbox(bus: bus, sessions: [session])
            // Typing and read markers of the others come as events of the conversation.
            let activity = chat.events()
            screen("chat \(chat.id) · \(Self.help)")

            await withTaskGroup(of: Void.self) { group in
                group.addTask { await showConnection(connection) }
                group.addTask { await render(timeline, me: me, chat: chat) }
                group.addTask { await showActivity(activity, me: me) }
                group.addTask { await showOthers(inbox, open: chat.id, me: me) }
                await readInput(input, chat: chat, timeline: timeline, inbox: inbox)
                connection.finish()
                activity.finish()
                group.cancelAll()
            }
        }
    }

    /// Waits for the first connection: `nil` once connected, else the line that says why not.
    static func firstConnectionFailure(_ events: EventStream, url: String) async -> String? {
        for await event in events {
            switch event.kind {
            case .connection(.connected, _):
                return nil
            case .connection(_, .connectionLost(let error)?), .connection(_, .serverInitiated(let error)?),
                .connection(_, .fatal(let error)?), .fatal(let error):
                return cannotConnect(to: url, error)
            default:
                continue
            }
        }
        return "cannot connect to \(url): the session ended"
    }

    /// One line for a connection that failed: where, and why in words, never a type dump.
    static func cannotConnect(to url: String, _ error: SwitchboardError) -> String {
        let reason: String
        switch error.code {
        case .authenticationFailed: reason = "the server refused the credentials (\(error.message))"
        case .timedOut: reason = "no answer in time"
        default: reason = error.message
        }
        return "cannot connect to \(url): \(reason)"
    }

    /// The conversation named in the options, or the first one the server lists once connected.
    private func openConversation(_ session: ChatSession, listed: EventStream) async throws -> any Conversation {
        if let id = options.conversation { return try await session.conversation(ConversationID(id)) }
        if let first = try await session.conversations().first { return try await session.conversation(first.id) }
        for await _ in listed {
            if let first = try await session.conversations().first { return try await session.conversation(first.id) }
        }
        throw SwitchboardError(.sessionClosed, "the session ended before any conversation was listed")
    }

    private func showConnection(_ events: EventStream) async {
        for await event in events {
            guard case .connection(let state, let reason) = event.kind else { continue }
            switch (state, reason) {
            case (.connected, _): screen("● online")
            case (.waitingToReconnect, .connectionLost(let error)?): screen("○ connection lost (\(error.message)); reconnecting…")
            case (.waitingToReconnect, _): screen("○ reconnecting…")
            case (.disconnected, .fatal(let error)?): screen("✕ \(error.message)")
            default: continue
            }
        }
    }
    /// Draws the timeline from its diffs: a UI would insert, update and remove rows at these
    /// indexes; here each diff becomes a line.
    private func render(_ timeline: Timeline, me: ParticipantID, chat: any Conversation) async {
        for await update in timeline {
            for diff in update.diffs {
                switch diff {
                case .reset(let messages):
                    screen("— \(messages.count) messages —")
                    for message in messages { screen(line(message, me: me)) }
                case .insert(let message, let index):
                    screen(index < update.items.count - 1 ? "↑ \(line(message, me: me))" : line(message, me: me))
                    // Shown to the user: mark it read (sent now, or when the link is back).
                    if message.sender != me, message.senderRole != .system { try? await chat.markRead() }
                case .update(let message, _):
                    if message.sender == nil || message.sender == me { screen("  \(Self.state(message.deliveryState)) \(message.text)") }
                case .remove:
                    continue
                }
            }
        }
    }

    /// A line when another conversation than the open one has something new the user has not
    /// read: the inbox says which, and what.
    private func showOthers(_ inbox: Inbox, open: ConversationID, me: ParticipantID) async {
        var shown: [ConversationID: Int] = [:]
        for await update in inbox {
            for item in update.items where item.conversation.id != open {
                let unread = item.conversation.unreadCount
                if unread > shown[item.conversation.id, default: 0] { screen("✉ " + Self.inboxLine(item.conversation, me: me).dropFirst(2)) }
                shown[item.conversation.id] = unread
            }
        }
    }

    private func showActivity(_ events: EventStream, me: ParticipantID) async {
        for await event in events {
            switch event.kind {
            case .typing(let who, true, _) where who != me: screen("  \(who) is typing…")
            case .readMarker(let who, _) where who != me: screen("  ✓✓ read by \(who)")
            default: continue
            }
        }
    }

    private func readInput(
        _ input: AsyncStream<String>,
        chat: any Conversation,
        timeline: Timeline,
        inbox: Inbox
    ) async {
        for await line in input {
            let text = line.trimmingCharacters(in: .whitespaces)
            do {
                switch text {
                case "": continue
                case "/quit": return
                case "/more":
                    let loaded = try await timeline.loadOlder(limit: options.window)
                    if loaded == 0 { screen("(no older messages)") }
                case "/typing":
                    let outcome = try await chat.userTyping(draft: nil)
                    screen("  (typing: \(outcome))")
                case "/read":
                    try await chat.markRead()
                case "/inbox":
                    // Every conversation, newest activity first, with what the user has not read.
                    for item in inbox.items { screen(Self.inboxLine(item.conversation, me: ParticipantID(options.user))) }
                    screen("  \(inbox.unreadTotal) unread in all")
                default:
                    _ = try await chat.send(text: text)   // on screen at once as pending, via the timeline
                }
            } catch let error as SwitchboardError {
                screen("! \(error.message)")
            } catch {
                screen("! \(error)")
            }
        }
    }

    /// One conversation as an inbox shows it: its title, what is unread, the last message.
    static func inboxLine(_ conversation: ConversationInfo, me: ParticipantID) -> String {
        let title = conversation.title ?? conversation.id.rawValue
        let last = conversation.lastMessage.map { last in
            " · \(last.isOwn || last.sender == me ? "me" : last.sender?.rawValue ?? "?"): \(last.text)"
        } ?? ""
        return "▸ \(title) · \(conversation.unreadCount) unread\(last)"
    }

    private func line(_ message: Message, me: ParticipantID) -> String {
        let who = message.sender == nil || message.sender == me ? "me" : message.sender!.rawValue
        let state = message.sender == nil || message.sender == me ? " \(Self.state(message.deliveryState))" : ""
        return "\(who): \(message.text)\(state)"
    }

    static func state(_ state: Message.DeliveryState) -> String {
        switch state {
        case .pending: return "…"
        case .sent: return "✓"
        case .delivered: return "✓"
        case .read: return "✓✓"
        case .failed: return "✕"
        }
    }
}

// MARK: - The command line

extension SupportChatApp {
    /// What the command line asks for.
    enum Command: Sendable, Equatable {
        case run(Options)
        /// `--help`: the usage, on standard output, exit status 0.
        case help
        /// Wrong arguments: this line and the usage on standard error, exit status 2.
        case usageError(String)
    }

    static let usageLine = "usage: SupportChat --url URL --user USER --token TOKEN [--conversation ID] [--log FILE]"

    static let usage = """
        \(usageLine)

        A support chat on a Voximplant-style service: type a message and press return.

        options:
          --url URL           the service's WebSocket address, ws:// or wss://
                              (ws://127.0.0.1:8080/ws for `switchboard emulate voximplant --port 8080`)
          --user USER         who you are: user@application.account (alice@app.acc on the emulator)
          --token TOKEN       your token (secret-a for alice on the emulator)
          --conversation ID   the conversation to open; the first one the server lists without it
          --log FILE          append the library's log (info and above) to FILE, such as
                              /tmp/chat.log; without it the log is discarded, never drawn on the chat
          -h, --help          show this help

        in the chat: \(help)

        exit status: 0 when you quit or the input ends, 1 when the chat cannot connect or fails,
        2 for wrong arguments.
        """

    /// Reads the command line (without the program's name).
    static func parse(_ arguments: [String]) -> Command {
        var arguments = arguments[...]
        var values: [String: String] = [:]
        let known: Set = ["url", "user", "token", "conversation", "log"]
        while let argument = arguments.popFirst() {
            if argument == "--help" || argument == "-h" { return .help }
            guard argument.hasPrefix("--"), known.contains(String(argument.dropFirst(2))) else {
                return .usageError("unknown argument: \(argument)")
            }
            let name = String(argument.dropFirst(2))
            guard let value = arguments.popFirst(), !value.hasPrefix("--") else {
                return .usageError("\(argument) needs a value")
            }
            values[name] = value
        }
        let missing = ["url", "user", "token"].filter { values[$0] == nil }
        guard missing.isEmpty, let url = values["url"], let user = values["user"], let token = values["token"] else {
            return .usageError("missing \(missing.map { "--\($0)" }.joined(separator: ", "))")
        }
        guard let parsed = URL(string: url), ["ws", "wss"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host?.isEmpty == false else {
            return .usageError("--url is not a ws:// or wss:// URL with a host: \(url)")
        }
        return .run(Options(url: url, user: user, token: token, conversation: values["conversation"], log: values["log"]))
    }
}

// MARK: - Where the library's log goes

extension SupportChatApp {
    /// Loggers that drop every record: the default, since the terminal is the chat's screen and
    /// swift-log's default handler would write the library's warnings over it.
    static let discardingLogs: @Sendable (String) -> Logger = { label in
        Logger(label: label) { _ in SwiftLogNoOpLogHandler() }
    }

    /// Loggers that append each record, at `level` and above, as one line to the file at `path`
    /// (created when missing).
    static func logs(appendingTo path: String, level: Logger.Level = .info) throws -> @Sendable (String) -> Logger {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw SwitchboardError(.storageFailure, "cannot create the log file \(path)")
            }
        }
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        file.seekToEndOfFile()
        return { label in
            var logger = Logger(label: label) { label in FileLogHandler(label: label, file: file) }
            logger.logLevel = level
            return logger
        }
    }

    /// Appends each record as one line to a file (as in `Docs/Logging.md`).
    struct FileLogHandler: LogHandler {
        let label: String
        let file: FileHandle
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
            let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            let text = "\(Date().formatted(.iso8601)) \(event.level) \(label) \(event.message) \(fields)\n"
            file.write(Data(text.utf8))   // FileHandle writes are serialized by the system
        }
    }
}
