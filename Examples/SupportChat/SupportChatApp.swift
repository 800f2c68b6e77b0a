import Foundation
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
    struct Options: Sendable {
        var url: String
        var user: String
        var token: String
        /// The conversation to open; the first the session lists without it.
        var conversation: String?
        /// How many messages the timeline keeps on screen.
        var window = 20
    }

    let options: Options
    /// Where the app's screen goes: a line at a time.
    let screen: @Sendable (String) -> Void

    static let help = "type a message and press return · /more older messages · /typing · /read · /quit"

    /// Runs the chat until the input ends or `/quit`.
    func run(input: AsyncStream<String>) async throws {
        let bus = EventBus()
        let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: options.url, user: options.user, token: options.token))
        let session = ChatSession(backend: backend, store: InMemoryChatStore(), bus: bus)
        let me = ParticipantID(options.user)

        try await session.withRunning { session in
            // The connection state, for a status line: the session reconnects by itself; the app
            // only tells the user.
            let connection = bus.subscribe(filter: EventFilter(categories: [.connection]))
            let listed = session.events(filter: .all, buffering: .unbounded)
            try await session.resume()

            let chat = try await openConversation(session, listed: listed)
            listed.finish()
            let timeline = try await chat.timeline(limit: options.window)
            // Typing and read markers of the others come as events of the conversation.
            let activity = chat.events()
            screen("chat \(chat.id) · \(Self.help)")

            await withTaskGroup(of: Void.self) { group in
                group.addTask { await showConnection(connection) }
                group.addTask { await render(timeline, me: me, chat: chat) }
                group.addTask { await showActivity(activity, me: me) }
                await readInput(input, chat: chat, timeline: timeline)
                connection.finish()
                activity.finish()
                group.cancelAll()
            }
        }
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

    private func showActivity(_ events: EventStream, me: ParticipantID) async {
        for await event in events {
            switch event.kind {
            case .typing(let who, true, _) where who != me: screen("  \(who) is typing…")
            case .readMarker(let who, _) where who != me: screen("  ✓✓ read by \(who)")
            default: continue
            }
        }
    }

    private func readInput(_ input: AsyncStream<String>, chat: any Conversation, timeline: Timeline) async {
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
