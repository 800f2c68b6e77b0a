import Foundation
import Logging
import Switchboard
import SwitchboardCommandKit
import SwitchboardTestKit

/// The main job: a scripted support conversation on embedded backends, every session publishing
/// into one bus, printed as one timeline, then checked against the server's own log.
///
/// It runs on the in-memory reference backend, then each adapter's part of the registry on its
/// embedded emulator (`Adapters/<Vendor>/Commands/<Vendor>Demo.swift`): the same app code on
/// every backend.
struct Demo: Sendable {
    let seed: UInt64
    let format: EventFormatter.Format
    /// Serves each emulator's agent console while its part runs (`demo --console`).
    var console: DemoConsole? = nil

    typealias SessionSummary = DemoSessionSummary

    struct Summary: Sendable {
        var sessions: [SessionSummary]
        var serverMessages: Int
        var isClean: Bool { sessions.allSatisfy { $0.lost == 0 && $0.duplicated == 0 && $0.outOfOrder == 0 } }
    }

    func run(_ write: @escaping @Sendable (String) -> Void) async throws -> Summary {
        let bus = EventBus()
        let server = InMemoryServer()
        let alice = ParticipantID("alice")
        let bob = server.agent("bob", name: "Bob (agent)")
        let configuration = SessionConfiguration(
            reconnectBackoff: BackoffPolicy(initial: .milliseconds(20), maximum: .milliseconds(200)),
            outboxBackoff: BackoffPolicy(initial: .milliseconds(20), maximum: .milliseconds(200)),
            holdTimeout: .milliseconds(200)
        )
        func session(_ id: SessionID, store: InMemoryChatStore) -> ChatSession {
            ChatSession(
                id: id,
                backend: InMemoryBackend(server: server, user: alice),
                store: store,
                bus: bus,
                configuration: configuration,
                random: DemoStage.randomness(seed, for: id),
                logger: Logger.quiet
            )
        }
        let phoneStore = InMemoryChatStore()
        let tabletStore = InMemoryChatStore()
        let phone = session("alice-phone", store: phoneStore)
        let tablet = session("alice-tablet", store: tabletStore)
        let events = EventRecorder(bus.subscribe(buffering: .unbounded))
        // Offsets count from the whole second the demo started in: some services stamp events in
        // whole seconds, and an event must never seem to come before the start.
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let printer = TimelinePrinter(events: events, formatter: EventFormatter(format: format, start: start), write: write)
        let narrate: @Sendable (String) -> Void = { text in
            printer.flush()
            if format == .timeline { write("\n── \(text)") }
        }

        // The recorder runs for the whole script; each part scopes its own sessions.
        return try await withThrowingTaskGroup(of: Void.self) { recording in
            recording.addTask { await events.run() }
            defer { recording.cancelAll() }
            return try await script(
                bus: bus, server: server, alice: alice, bob: bob, configuration: configuration,
                sessions: (phone, phoneStore, tablet, tabletStore), events: events, printer: printer, narrate: narrate, write: write
            )
        }
    }

    private func script(
        bus: EventBus,
        server: InMemoryServer,
        alice: ParticipantID,
        bob: InMemoryAgent,
        configuration: SessionConfiguration,
        sessions devices: (ChatSession, InMemoryChatStore, ChatSession, InMemoryChatStore),
        events: EventRecorder,
        printer: TimelinePrinter,
        narrate: @escaping @Sendable (String) -> Void,
        write: @escaping @Sendable (String) -> Void
    ) async throws -> Summary {
        let (phone, phoneStore, tablet, tabletStore) = devices
        let stage = DemoStage(bus: bus, events: events, configuration: configuration, seed: seed, console: console, flush: { printer.flush() }, narrate: narrate)
        let conversationID: ConversationID = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await phone.run() }
            group.addTask { try await tablet.run() }
            defer { group.cancelAll() }

            narrate("Alice opens the app on her phone and asks for help")
            try await phone.resume()
            try await events.first("the phone connects") { $0.isConnected && $0.origin.session == phone.id }
            let chat = try await phone.startConversation(ConversationDraft(title: "Where is my parcel?"))
            let id = chat.id

            narrate("Bob, an agent, picks the chat up, types and answers")
            try bob.join(id)
            try await events.first("Bob is assigned") { if case .agentChanged = $0.kind { return true } else { return false } }
            try bob.typing(true, in: id)
            try bob.send("Hi Alice, I'm Bob. How can I help?", in: id)
            try await events.first("Bob's greeting") { $0.addedMessage?.text.hasPrefix("Hi Alice") == true }

            narrate("Alice types (throttled) and sends; the message is pending, then sent")
            try await chat.userTyping(draft: "My parcel")
            let question = try await chat.send(text: "My parcel #4711 has not arrived yet.")
            try await stage.confirmed(question, in: phone.id)
            try bob.markRead(id)
            try await events.first("Bob read it") { if case .readMarker = $0.kind { return true } else { return false } }
            let receipt = try await chat.send(
                MessageDraft(
                    text: "Here is the receipt.",
                    kind: .file,
                    attachments: [Message.Attachment(name: "receipt.pdf", mimeType: "application/pdf", size: 48_213)]
                )
            )
            try await stage.confirmed(receipt, in: phone.id)

            narrate("Alice's phone goes offline; Bob writes; she sends a reply from the outbox on reconnect")
            try await phone.pause()
            try await stage.disconnectedByTheApp(phone.id, "the phone is offline")
            try bob.send("Found it: it is at the depot.", in: id)
            try bob.send("It will be delivered tomorrow before noon.", in: id)
            let offlineReply = try await chat.send(text: "Thank you!")
            try await phone.resume()
            try await events.first("caught up") { $0.addedMessage?.text.hasPrefix("It will be delivered") == true }
            try await stage.confirmed(offlineReply, in: phone.id)
            let badge = try await chat.info().unreadCount
            try await chat.markRead()
            narrate("The app's badge: \(badge) unread from Bob; Alice reads the chat and it shows \(try await chat.info().unreadCount)")

            narrate("The server loses two events on the way to the phone; the gap is detected and filled")
            server.dropNext(2, for: .clientsOf(alice))
            try bob.send("Tracking: DE-4711-X.", in: id)
            try bob.send("You will get an SMS as well.", in: id)
            try bob.send("Anything else?", in: id)
            try await events.first("the gap is filled") { $0.addedMessage?.text == "Anything else?" && $0.origin.session == phone.id }
            try await events.waitUntil("both lost messages are back") { events in
                let texts = Set(events.filter { $0.origin.session == phone.id }.compactMap(\.addedMessage?.text))
                return texts.isSuperset(of: ["Tracking: DE-4711-X.", "You will get an SMS as well."])
            }

            narrate("Alice opens her tablet: a fresh store pages the history from the server")
            try await tablet.resume()
            try await events.first("the tablet knows the chat") { $0.origin.session == tablet.id && $0.conversationID == id }
            let onTablet = try await tablet.conversation(id)
            var before: MessageOrderKey?
            while let oldest = try await onTablet.history(before: before, limit: 4).first {
                before = oldest.orderKey
            }

            narrate("Bob closes the chat")
            try bob.close(id)
            try await events.waitUntil("both devices see the chat closed") { events in
                let closed = events.filter {
                    if case .conversationStateChanged(.closedByAgent, _) = $0.kind { return true } else { return false }
                }
                return Set(closed.map(\.origin.session)) == [phone.id, tablet.id]
            }
            await phone.close()
            await tablet.close()
            try await stage.disconnectedByTheApp(tablet.id, "the tablet disconnects")
            return id
        }
        let truth = server.messages(in: conversationID).compactMap(\.serverID)
        var sessions: [SessionSummary] = []
        for (session, store) in [(phone, phoneStore), (tablet, tabletStore)] {
            sessions.append(try await DemoStage.summarize(session, store: store, conversation: conversationID, truth: truth))
        }
        var serverMessages = truth.count
        // Then each adapter's part, in the registry's order, on its embedded emulator.
        for entry in registry {
            for outcome in try await entry.demo?(stage) ?? [] {
                sessions.append(outcome.summary)
                serverMessages += outcome.serverMessages
            }
        }
        events.finish()
        bus.finish()
        printer.flush()
        let summary = Summary(sessions: sessions, serverMessages: serverMessages)
        if format == .timeline { write(render(summary)) }
        return summary
    }

    /// Prints what the recorder holds and has not printed, in bus order. Steps of the script
    /// flush before they narrate, so each step's events follow its heading.
    final class TimelinePrinter: Sendable {
        let events: EventRecorder
        let write: @Sendable (String) -> Void
        /// How many events are printed, and the formatter that printed them (it learns names).
        private let state: Locked<(printed: Int, formatter: EventFormatter)>

        init(events: EventRecorder, formatter: EventFormatter, write: @escaping @Sendable (String) -> Void) {
            self.events = events
            self.state = Locked((0, formatter))
            self.write = write
        }

        func flush() {
            state.withLock { state in
                let recorded = events.events
                let arrivals = events.arrivals
                for (index, event) in recorded.enumerated().dropFirst(state.printed) {
                    if let line = state.formatter.line(for: event, receivedAt: index < arrivals.count ? arrivals[index] : nil) { write(line) }
                }
                state.printed = recorded.count
            }
        }
    }

    func render(_ summary: Summary) -> String {
        var lines = ["", "── Summary " + String(repeating: "─", count: 70)]
        let header = ["backend", "session", "events", "stored", "connects", "retransmits", "dups dropped", "lost", "duplicated", "out of order"]
        var rows: [[String]] = []
        for session in summary.sessions {
            let statistics = session.statistics
            rows.append([
                session.backend.rawValue, session.session.rawValue, "\(statistics.eventsPublished)", "\(session.storedMessages)",
                "\(statistics.connects)", "\(statistics.retransmitRequests)", "\(statistics.duplicatesDropped)",
                "\(session.lost)", "\(session.duplicated)", "\(session.outOfOrder)",
            ])
        }
        lines += TextTable.lines(header: header, rows: rows)
        lines.append("")
        lines.append(
            summary.isClean
                ? "The servers logged \(summary.serverMessages) messages; every session's store holds each once, in the server's order."
                : "MISMATCH: a session's store differs from the server's log."
        )
        let shown = registry.filter { $0.demo != nil }.map(\.name)
        lines.append("Backends shown: in-memory (reference), \(shown.joined(separator: ", ")); adapters in this build: \(registry.map(\.name).joined(separator: ", ")).")
        return lines.joined(separator: "\n")
    }
}
