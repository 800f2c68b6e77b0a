import SwitchboardCommandKit
import CXoneEmulator
import Foundation
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardCXone
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim
import VoximplantEmulator
import WebimEmulator

/// The main job: a scripted support conversation on embedded backends, every session publishing
/// into one bus, printed as one timeline, then checked against the server's own log.
///
/// It runs on the in-memory reference backend, then on the embedded Voximplant-style, Webim and
/// CXone emulators: the same app code on every backend.
struct Demo: Sendable {
    let seed: UInt64
    let format: EventFormatter.Format

    struct SessionSummary: Sendable {
        var backend: BackendName
        var session: SessionID
        var statistics: SessionStatistics
        var storedMessages: Int
        var lost: Int
        var duplicated: Int
        var outOfOrder: Int
    }

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
                random: Self.randomness(seed, for: id),
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
            try await confirmed(question, events, in: phone.id)
            try bob.markRead(id)
            try await events.first("Bob read it") { if case .readMarker = $0.kind { return true } else { return false } }
            let receipt = try await chat.send(
                MessageDraft(
                    text: "Here is the receipt.",
                    kind: .file,
                    attachments: [Message.Attachment(name: "receipt.pdf", mimeType: "application/pdf", size: 48_213)]
                )
            )
            try await confirmed(receipt, events, in: phone.id)

            narrate("Alice's phone goes offline; Bob writes; she sends a reply from the outbox on reconnect")
            try await phone.pause()
            try await disconnectedByTheApp(phone.id, events, "the phone is offline")
            try bob.send("Found it: it is at the depot.", in: id)
            try bob.send("It will be delivered tomorrow before noon.", in: id)
            let offlineReply = try await chat.send(text: "Thank you!")
            try await phone.resume()
            try await events.first("caught up") { $0.addedMessage?.text.hasPrefix("It will be delivered") == true }
            try await confirmed(offlineReply, events, in: phone.id)
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
            try await disconnectedByTheApp(tablet.id, events, "the tablet disconnects")
            return id
        }
        let truth = server.messages(in: conversationID).compactMap(\.serverID)
        var sessions: [SessionSummary] = []
        for (session, store) in [(phone, phoneStore), (tablet, tabletStore)] {
            sessions.append(try await Self.summarize(session, store: store, conversation: conversationID, truth: truth))
        }
        let messenger = try await runVoximplant(bus: bus, events: events, configuration: configuration, narrate: narrate)
        sessions.append(messenger.summary)
        let webim = try await runWebim(bus: bus, events: events, configuration: configuration, narrate: narrate)
        sessions.append(webim.summary)
        let appeals = try await runWebimAppeals(bus: bus, events: events, configuration: configuration, narrate: narrate)
        sessions.append(appeals.summary)
        let cxone = try await runCXone(bus: bus, events: events, configuration: configuration, narrate: narrate)
        sessions.append(cxone.summary)
        events.finish()
        bus.finish()
        printer.flush()
        let summary = Summary(
            sessions: sessions,
            serverMessages: truth.count + messenger.serverMessages + webim.serverMessages + appeals.serverMessages + cxone.serverMessages
        )
        if format == .timeline { write(render(summary)) }
        return summary
    }

    /// The same app on the Voximplant-style emulator: a real WebSocket on 127.0.0.1, sequences,
    /// a dropped-event gap filled by retransmit, and a catch-up after going offline.
    private func runVoximplant(
        bus: EventBus,
        events: EventRecorder,
        configuration: SessionConfiguration,
        narrate: @escaping @Sendable (String) -> Void
    ) async throws -> (summary: SessionSummary, serverMessages: Int) {
        narrate("The same app on a Voximplant-style service: a WebSocket to the embedded emulator")
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "alice-token", displayName: "Alice")
        let bob = server.robot(server.addUser("bob", token: "bob-token", displayName: "Bob"))
        let store = InMemoryChatStore()
        let seed = self.seed
        return try await VoximplantEmulator(server: server, logger: Logger.quiet).withRunning { url in
            let session = ChatSession(
                id: "alice-messenger",
                backend: VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: alice, token: "alice-token"), logger: Logger.quiet),
                store: store,
                bus: bus,
                configuration: configuration,
                random: Self.randomness(seed, for: "alice-messenger"),
                logger: Logger.quiet
            )
            let id: String = try await session.withRunning { session in
                try await session.resume()
                try await events.first("the messenger connects") { $0.isConnected && $0.origin.session == session.id }
                let id = try bob.createConversation(title: "Order #4711", with: [alice])
                try await events.first("the conversation appears") {
                    $0.origin.session == session.id && $0.conversationID == ConversationID(id) && $0.kind.category == .conversation
                }
                try bob.typing(in: id)
                try bob.send("Hello Alice, Bob from the shop here.", in: id)
                try await events.first("Bob's hello") { $0.addedMessage?.text.hasPrefix("Hello Alice") == true }
                let chat = try await session.conversation(ConversationID(id))
                try await chat.userTyping(draft: nil)
                try await confirmed(try await chat.send(text: "Hi Bob! Where is order #4711?"), events, in: session.id)
                try bob.markRead(in: id)
                try await events.first("Bob read it") {
                    if case .readMarker = $0.kind { return $0.origin.session == session.id } else { return false }
                }

                narrate("The emulator drops three events on their way to Alice; the gap is filled by retransmit")
                server.dropNext(3, for: alice)
                let burst = ["It left the warehouse on Monday.", "It is with the courier now.", "Tracking: VX-4711.", "Delivery is due tomorrow."]
                for text in burst { try bob.send(text, in: id) }
                try await events.waitUntil("the whole burst arrives") { recorded in
                    Set(recorded.filter { $0.origin.session == session.id }.compactMap(\.addedMessage?.text)).isSuperset(of: burst)
                }

                narrate("Alice goes offline; Bob writes twice; on reconnect she catches up from her stored cursor")
                try await session.pause()
                try await disconnectedByTheApp(session.id, events, "offline")
                try bob.send("One more thing: the courier calls ahead.", in: id)
                try bob.send("Have a good day!", in: id)
                try await session.resume()
                try await events.first("caught up") { $0.addedMessage?.text == "Have a good day!" && $0.origin.session == session.id }
                await session.close()
                try await events.waitUntil("the messenger disconnects") { recorded in
                    recorded.filter {
                        $0.origin.session == session.id && $0.kind == .connection(.disconnected, reason: .userInitiated)
                    }.count >= 2
                }
                return id
            }
            let truth = server.messages(in: id).map { MessageID($0.uuid) }
            return (try await Self.summarize(session, store: store, conversation: ConversationID(id), truth: truth), truth.count)
        }
    }

    /// The same app on the Webim emulator: HTTP long-poll, the chat state machine, a file upload,
    /// a rating, and a `reinit-required` the client handles without duplicates.
    private func runWebim(
        bus: EventBus,
        events: EventRecorder,
        configuration: SessionConfiguration,
        narrate: @escaping @Sendable (String) -> Void
    ) async throws -> (summary: SessionSummary, serverMessages: Int) {
        narrate("The same app on Webim: the real mobile API (long-poll) against the embedded Webim emulator")
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(2)))
        let bob = server.robot(id: 7, name: "Bob")
        let visitor = "provided-alice"
        let store = InMemoryChatStore()
        let seed = self.seed
        let receipt = FileManager.default.temporaryDirectory.appendingPathComponent("receipt-\(UUID().uuidString.prefix(8)).pdf")
        try Data("%PDF-1.4 receipt #4711".utf8).write(to: receipt)
        defer { try? FileManager.default.removeItem(at: receipt) }
        return try await WebimEmulator(server: server, logger: Logger.quiet).withRunning { url in
            let session = ChatSession(
                id: "alice-webim",
                backend: try WebimBackend(
                    configuration: WebimConfiguration(accountName: url, visitorFieldsJSON: #"{"fields":{"id":"alice","display_name":"Alice"}}"#)
                ),
                store: store,
                bus: bus,
                configuration: configuration,
                random: Self.randomness(seed, for: "alice-webim"),
                logger: Logger.quiet
            )
            try await session.withRunning { session in
                try await session.resume()
                try await events.first("webim knows the chat") {
                    $0.origin.session == session.id && $0.conversationID == WebimBackend.conversationID && $0.kind.category == .conversation
                }
                let chat = try await session.conversation(WebimBackend.conversationID)
                try await confirmed(try await chat.send(text: "Hello, I need help with order #4711."), events, in: session.id)

                narrate("Bob takes the chat (queue → chatting), types, answers; Alice sends a file")
                try bob.join(visitor: visitor)
                try bob.typing(true, visitor: visitor)
                try bob.send("Hi Alice, Bob here. Do you have the receipt?", to: visitor)
                try await events.first("Bob's answer") { $0.addedMessage?.text.hasPrefix("Hi Alice, Bob here") == true }
                try await confirmed(
                    try await chat.send(MessageDraft(text: "receipt", kind: .file, attachments: [Message.Attachment(name: receipt.lastPathComponent, mimeType: "application/pdf", url: receipt)])),
                    events,
                    in: session.id
                )
                try bob.markRead(visitor: visitor)
                // Both of Alice's messages read (two markers), before the next step's heading.
                try await events.waitUntil("Bob read both") { recorded in
                    recorded.filter { event in
                        if case .readMarker = event.kind { return event.origin.session == session.id } else { return false }
                    }.count >= 2
                }

                narrate("The server demands a re-init; the client re-initialises and diffs the full update: no duplicates")
                server.inject(.reinitRequired, on: .delta)
                try await events.waitUntil("re-initialised") { recorded in
                    recorded.filter { $0.origin.session == session.id && $0.isConnected }.count >= 2
                }
                try bob.send("Thanks, the refund is on its way.", to: visitor)
                try await events.first("the refund") { $0.addedMessage?.text.hasPrefix("Thanks, the refund") == true }
                try await chat.rateAgent(nil, rating: 5, comment: "Quick and kind")
                try bob.close(visitor: visitor)
                try await events.first("closed") {
                    if case .conversationStateChanged(.closedByAgent, _) = $0.kind { return $0.origin.session == session.id } else { return false }
                }
                await session.close()
                try await disconnectedByTheApp(session.id, events, "webim disconnects")
            }
            let truth = server.messages(ofVisitor: visitor).map { MessageID($0.id) }
            return (try await Self.summarize(session, store: store, conversation: WebimBackend.conversationID, truth: truth), truth.count)
        }
    }

    /// Webim's offline appeals: no operator is online, so Alice writes an appeal; the operator
    /// answers later and the app's next poll (here a pull to refresh) brings the answer.
    private func runWebimAppeals(
        bus: EventBus,
        events: EventRecorder,
        configuration: SessionConfiguration,
        narrate: @escaping @Sendable (String) -> Void
    ) async throws -> (summary: SessionSummary, serverMessages: Int) {
        narrate("Webim offline appeals: no operator online, Alice writes an appeal; the answer comes on a later poll")
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(2)))
        let olga = server.robot(id: 3, name: "Olga")
        let store = InMemoryChatStore()
        let seed = self.seed
        return try await WebimEmulator(server: server, logger: Logger.quiet).withRunning { url in
            let session = ChatSession(
                id: "alice-appeals",
                backend: try WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: url, userToken: "alice-user-token")),
                store: store,
                bus: bus,
                configuration: configuration,
                random: Self.randomness(seed, for: "alice-appeals"),
                logger: Logger.quiet
            )
            let appealID = try await session.withRunning { session in
                try await session.resume()
                try await events.first("the appeals session connects") { $0.origin.session == session.id && $0.isConnected }
                let appeal = try await session.startConversation(
                    ConversationDraft(title: "Refund for order #4711", customFields: ["department-key": "billing"], firstMessage: MessageDraft(text: "Where is my refund?"))
                )
                guard let visitor = server.visitor(ofUserToken: "alice-user-token"), let chatID = Int(appeal.id.rawValue) else {
                    throw SwitchboardError(.protocolViolation, "the emulator has no appeal for Alice")
                }
                narrate("Olga answers the appeal later; Alice's app refreshes, reads it and marks it read")
                try olga.answerAppeal(chatID, of: visitor, text: "The refund left on Monday; allow three days.")
                try await session.refresh()
                try await events.first("Olga's answer") { $0.origin.session == session.id && $0.addedMessage?.text.hasPrefix("The refund left") == true }
                try await appeal.markRead()
                await session.close()
                try await disconnectedByTheApp(session.id, events, "the appeals session disconnects")
                return appeal.id
            }
            let truth = server.appeals(ofVisitor: server.visitor(ofUserToken: "alice-user-token") ?? "").flatMap { appeal in
                server.appealMessages(ofVisitor: server.visitor(ofUserToken: "alice-user-token") ?? "", chatID: appeal.id).map { MessageID($0.id) }
            }
            return (try await Self.summarize(session, store: store, conversation: appealID, truth: truth), truth.count)
        }
    }

    /// The same app on the CXone emulator (multi-thread channel): a proactive welcome message, a
    /// new thread, the agent assigned from the queue, rich content, an inactivity pop-up answered,
    /// a dropped socket the client recovers without duplicates, and the agent closing the case.
    private func runCXone(
        bus: EventBus,
        events: EventRecorder,
        configuration: SessionConfiguration,
        narrate: @escaping @Sendable (String) -> Void
    ) async throws -> (summary: SessionSummary, serverMessages: Int) {
        narrate("The same app on CXone: channel configuration over HTTP, then the event WebSocket of the embedded CXone emulator")
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: .multi))
        let agent = server.agent(firstName: "Bob", surname: "Agent")
        let store = InMemoryChatStore()
        let seed = self.seed
        return try await CXoneEmulator(server: server, logger: Logger.quiet).withRunning { endpoints in
            let backend = try await CXoneBackend.make(
                configuration: CXoneConfiguration(
                    environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                    brandID: server.configuration.brandID,
                    channelID: server.configuration.channelID,
                    customerID: "alice-cxone",
                    firstName: "Alice"
                )
            )
            let session = ChatSession(
                id: "alice-cxone",
                backend: backend,
                store: store,
                bus: bus,
                configuration: configuration,
                random: Self.randomness(seed, for: "alice-cxone"),
                logger: Logger.quiet
            )
            return try await session.withRunning { session in
                try await session.resume()
                try await events.first("cxone connected") { $0.origin.session == session.id && $0.isConnected }

                narrate("A proactive welcome message fires; the new thread opens with it, filled in for Alice, and the server gets it (SendOutbound) before her first message")
                server.fireWelcomeMessage(toCustomer: "alice-cxone", bodyText: "Hi {{customer.firstName|there}}! Delivery is free this week.")
                try await events.first("the welcome message kept") {
                    if case .custom("cxone.FireProactiveAction", _) = $0.kind { return $0.origin.session == session.id } else { return false }
                }
                let chat = try await session.startConversation(ConversationDraft(kind: .thread, title: "Order #4711"))
                try await events.first("the welcome in the new thread") { $0.conversationID == chat.id && $0.addedMessage?.text.hasPrefix("Hi Alice!") == true }
                try await confirmed(try await chat.send(text: "Hello, where is my order #4711?"), events, in: session.id)

                narrate("Bob is assigned from the queue, types and answers with quick replies")
                agent.assign(chat.id.rawValue)
                agent.typing(true, in: chat.id.rawValue)
                agent.send(
                    "Which day suits you?",
                    in: chat.id.rawValue,
                    content: [
                        "type": "QUICK_REPLIES",
                        "payload": [
                            "text": ["content": "It arrives between 12:00 and 16:00. Which day suits you?"],
                            "actions": [["type": "REPLY_BUTTON", "text": "Today", "postback": "1"], ["type": "REPLY_BUTTON", "text": "Tomorrow", "postback": "2"]],
                        ],
                    ]
                )
                try await events.first("Bob's quick replies") { $0.origin.session == session.id && $0.addedMessage?.text.contains("Which day") == true }
                try await confirmed(try await chat.send(text: "Tomorrow"), events, in: session.id)
                agent.markRead(chat.id.rawValue)
                try await events.first("Bob read it") {
                    if case .readMarker = $0.kind { return $0.origin.session == session.id } else { return false }
                }

                narrate("Bob's workflow asks whether Alice is still there; the app answers the pop-up and the chat goes on")
                let popupID = agent.sendInactivityPopup(in: chat.id.rawValue, seconds: 60)
                let shown = try await events.first("the inactivity pop-up") {
                    if case .custom(CXoneInactivityPopup.eventName, _) = $0.kind { return $0.origin.session == session.id } else { return false }
                }
                guard case .custom(_, let payload) = shown.kind else { throw SwitchboardError(.protocolViolation, "no pop-up") }
                try await CXoneRequests(session: session).answer(try CXoneInactivityPopup(message: payload), refresh: true)

                narrate("The socket drops; the client reconnects, recovers the thread and adds nothing twice")
                server.inject(.closeSocket)
                try await events.waitUntil("reconnected") { recorded in
                    recorded.filter { $0.origin.session == session.id && $0.isConnected }.count >= 2
                }
                agent.send("Booked for tomorrow. Anything else?", in: chat.id.rawValue)
                try await events.first("the booking") { $0.addedMessage?.text.hasPrefix("Booked for tomorrow") == true }
                let assigned = try await chat.info().assignedAgent?.displayName ?? "nobody"
                narrate("Still assigned after the reconnect: \(assigned)")
                agent.close(chat.id.rawValue)
                try await events.first("closed") {
                    if case .conversationStateChanged(let state, _) = $0.kind { return $0.origin.session == session.id && state.isClosed } else { return false }
                }
                await session.close()
                try await disconnectedByTheApp(session.id, events, "cxone disconnects")
                // The pop-up is a workflow's prompt, not a message of the thread.
                let truth = server.messages(inThread: chat.id.rawValue).filter { $0.id != popupID }.map { MessageID($0.id) }
                return (try await Self.summarize(session, store: store, conversation: chat.id, truth: truth), truth.count)
            }
        }
    }

    /// One session's row of the summary: its store against the server's log.
    private static func summarize(
        _ session: ChatSession,
        store: InMemoryChatStore,
        conversation: ConversationID,
        truth: [MessageID]
    ) async throws -> SessionSummary {
        let stored = await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: session.scope)
        let ids = stored.compactMap(\.serverID)
        return SessionSummary(
            backend: session.descriptor.name,
            session: session.id,
            statistics: await session.statistics,
            storedMessages: stored.count,
            lost: Set(truth).subtracting(ids).count,
            duplicated: ids.count - Set(ids).count,
            outOfOrder: zip(ids, truth).filter { $0 != $1 }.count
        )
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

    /// Waits until the server has confirmed `message` (its client id is unique per session, not
    /// across sessions, so the session is part of the match).
    /// Waits until `session`'s link is down because the app paused or closed it.
    private func disconnectedByTheApp(_ session: SessionID, _ events: EventRecorder, _ what: String) async throws {
        try await events.first(what) { $0.origin.session == session && $0.kind == .connection(.disconnected, reason: .userInitiated) }
    }

    private func confirmed(_ message: Message, _ events: EventRecorder, in session: SessionID) async throws {
        let clientID = message.clientID
        try await events.first("\"\(message.text)\" is confirmed") { event in
            event.origin.session == session && (event.updatedMessage.map { $0.clientID == clientID && $0.serverID != nil } ?? false)
        }
    }

    /// Each session draws from its own seeded generator: the same seed for two sessions would
    /// give them the same client ids.
    static func randomness(_ seed: UInt64, for session: SessionID) -> SeededRandomNumberGenerator {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in session.rawValue.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return SeededRandomNumberGenerator(seed: seed ^ hash)
    }

    func render(_ summary: Summary) -> String {
        var lines = ["", "── Summary " + String(repeating: "─", count: 70)]
        let header = ["backend", "session", "events", "stored", "connects", "retransmits", "dups dropped", "lost", "duplicated", "out of order"]
        var rows = [header]
        for session in summary.sessions {
            let statistics = session.statistics
            rows.append([
                session.backend.rawValue, session.session.rawValue, "\(statistics.eventsPublished)", "\(session.storedMessages)",
                "\(statistics.connects)", "\(statistics.retransmitRequests)", "\(statistics.duplicatesDropped)",
                "\(session.lost)", "\(session.duplicated)", "\(session.outOfOrder)",
            ])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            lines.append(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  "))
        }
        lines.append("")
        lines.append(
            summary.isClean
                ? "The servers logged \(summary.serverMessages) messages; every session's store holds each once, in the server's order."
                : "MISMATCH: a session's store differs from the server's log."
        )
        lines.append("Adapters in this build: in-memory (reference), Voximplant-style, Webim (online chat and offline appeals), CXone.")
        return lines.joined(separator: "\n")
    }
}
