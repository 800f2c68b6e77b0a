import Foundation
import Switchboard

/// The interactive client of `switchboard connect`: one command line in, lines of output back.
/// Commands work the same for every backend; what a backend lacks answers with its typed
/// `unsupported` error.
actor Console {
    let session: ChatSession
    private(set) var current: ConversationID?
    private var oldestLoaded: MessageOrderKey?

    private let progress: ProgressReporter
    /// How this backend joins a conversation by id or address (`/join`), where it can.
    private let join: Joiner?

    /// Joins a conversation (a Matrix room id or alias, a public Voximplant-style conversation).
    typealias Joiner = @Sendable (ChatSession, String) async throws -> ConversationID

    init(session: ChatSession, progress: ProgressReporter = .off, join: Joiner? = nil) {
        self.session = session
        self.progress = progress
        self.join = join
    }

    static let help = """
        commands: TEXT or /send TEXT · /typing [DRAFT] · /read · /history N · /conversations (/threads)
                  /open ID · /create TITLE [USER…] · /new [FIELD=VALUE…] · /appeal TEXT · /add USER · /remove USER
                  /rename TITLE · /archive (/delete) · /close · /end · /rate N · /file PATH · /refresh [forced]
                  /join ID · /quit
        """

    /// Runs one command line; returns what to print, or `nil` to quit.
    func handle(_ line: String) async -> [String]? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return [] }
        let words = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        let command = trimmed.hasPrefix("/") ? words[0] : "/send"
        let argument = trimmed.hasPrefix("/") ? (words.count > 1 ? words[1] : "") : trimmed
        do {
            switch command {
            case "/quit", "/exit":
                return nil
            case "/help":
                return [Self.help]
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
                var parts = argument.split(separator: " ").map(String.init)
                let title = parts.isEmpty ? nil : parts.removeFirst()
                let chat = try await session.startConversation(
                    ConversationDraft(kind: .group, title: title, participants: parts.map { Participant(id: ParticipantID($0), role: .user) })
                )
                current = chat.id
                return ["created and opened \(chat.id)"]
            case "/new":
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
                // A conversation its first message makes (Webim offline appeals).
                let chat = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: argument)))
                current = chat.id
                oldestLoaded = nil
                return ["wrote and opened appeal \(chat.id)"]
            case "/join":
                guard let join else {
                    throw SwitchboardError(.unsupported, "joining by id is not offered by \(session.descriptor.name)")
                }
                let id = try await join(session, argument)
                current = id
                oldestLoaded = nil
                return ["joined and opened \(id)"]
            case "/refresh":
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

    private func inConversation(_ command: String, _ argument: String) async throws -> [String] {
        guard let id = try await currentConversation() else { return ["no conversation: /conversations, /open ID or /create TITLE"] }
        let chat = try await session.conversation(id)
        switch command {
        case "/send":
            let message = try await chat.send(text: argument)
            return ["queued \(message.clientID?.rawValue ?? "")"]
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
            return loaded.map { "  #\($0.sequence.map(String.init) ?? "-") \($0.sender?.rawValue ?? "me"): \($0.text)" }
        case "/add":
            try await chat.addParticipants([Participant(id: ParticipantID(argument), role: .user)])
            return ["added \(argument)"]
        case "/remove":
            try await chat.removeParticipants([ParticipantID(argument)])
            return ["removed \(argument)"]
        case "/close", "/end":
            try await chat.close()
            return ["closed \(id)"]
        case "/archive", "/delete":
            try await chat.archive()
            if current == id { current = nil }
            return ["archived \(id)"]
        case "/rename":
            try await chat.update(ConversationChanges(title: argument))
            return ["renamed \(id)"]
        case "/rate":
            try await chat.rateAgent(nil, rating: Int(argument) ?? 0, comment: nil)
            return ["rated"]
        case "/file":
            let url = URL(fileURLWithPath: argument)
            let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int).flatMap { $0 }
            try await chat.send(
                MessageDraft(
                    text: url.lastPathComponent,
                    kind: .file,
                    attachments: [
                        Message.Attachment(name: url.lastPathComponent, mimeType: Self.mimeType(of: url), size: size.map(Int64.init), url: url)
                    ]
                )
            )
            return ["queued \(url.lastPathComponent)"]
        default:
            return ["unknown command \(command)", Self.help]
        }
    }

    static func mimeType(of url: URL) -> String {
        switch url.pathExtension.lowercased() {
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "pdf": return "application/pdf"
        case "txt": return "text/plain"
        default: return "application/octet-stream"
        }
    }

    /// The open conversation, or the only one there is.
    private func currentConversation() async throws -> ConversationID? {
        if let current { return current }
        let all = try await session.conversations()
        if all.count == 1 { current = all[0].id }
        return current
    }
}

/// Standard input as an async sequence of lines, read on a thread of its own so a blocking
/// read never holds a thread of the concurrency pool.
enum StandardInput {
    static func lines() -> AsyncStream<String> {
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        let reader = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        reader.start()
        return lines
    }
}
