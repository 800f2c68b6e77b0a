import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim
import Testing
import VoximplantEmulator
import WebimEmulator

@testable import switchboard
import SwitchboardCommandKit

/// What a newcomer types at `switchboard connect`, against the emulators over real sockets: the
/// commands the backend offers, leaving a conversation on purpose, words that are commands, and
/// messages typed before the conversation is known.
@Suite(.timeLimit(.minutes(1)))
struct ConsoleEdgeTests {
    static let voximplant = Console.Commands(start: .group, ending: .leave) { session, id in
        try await VoximplantRequests(session: session).joinConversation(ConversationID(id)).id
    }

    /// Runs `body` with a console on a connected Voximplant-style session of alice, who is in
    /// `conversation` with bob, a robot that echoes what she writes.
    static func withVoximplantConsole(
        _ body: @escaping @Sendable (Console, VoximplantServer, _ alice: String, _ conversation: String, EventRecorder) async throws -> Void
    ) async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a", displayName: "Alice")
        let bob = server.addUser("bob", token: "b", displayName: "Bob")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        server.autoReply(as: bob) { _, text in "echo: \(text)" }
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let session = ChatSession(
                backend: VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: alice, token: "a"), logger: .quiet),
                configuration: .fastForTests,
                logger: .quiet
            )
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.first("the conversation") { $0.conversationID == ConversationID(conversation) }
                try await body(Console(session: session, commands: Self.voximplant), server, alice, conversation, recorder)
            }
        }
    }

    /// `/close` does not leave a messenger conversation by surprise; `/leave` asks, and a second
    /// `/leave` leaves. Anything typed between the two cancels the question.
    @Test func leavingIsAskedForByNameAndConfirmed() async throws {
        try await Self.withVoximplantConsole { console, server, alice, conversation, recorder in
            let members = { server.conversationJSON(conversation)?["participants"]?.arrayValue?.compactMap { $0["userId"]?.stringValue } ?? [] }
            #expect(try #require(await console.handle("/close")) == ["a voximplant conversation has no end: /leave takes you out of \(conversation)"])
            let asked = try #require(await console.handle("/leave"))
            print("  /leave asks: \(asked[0])")
            #expect(asked.count == 1 && asked[0].hasSuffix("Type /leave again to leave."))
            #expect(try #require(await console.handle("/conversations")).count == 1, "another command cancels the question")
            #expect(members().contains(alice), "asking left nothing")
            _ = await console.handle("/leave")
            #expect(try #require(await console.handle("/leave")) == ["left \(conversation)"])
            try await recorder.first("the conversation is gone") {
                if case .conversationRemoved = $0.kind { return $0.conversationID == ConversationID(conversation) }
                return false
            }
            #expect(!members().contains(alice), "the server's conversation no longer has alice: \(members())")
        }
    }

    /// A bare `help`, `quit` or `exit` is the command, not a message to the agent; `/send` with
    /// no text sends nothing; the help lists only what the backend offers.
    @Test func wordsThatAreCommandsAndEmptySendsSendNothing() async throws {
        try await Self.withVoximplantConsole { console, server, _, conversation, _ in
            let help = try #require(await console.handle("help"))
            print("  voximplant help:\n\(help[0])")
            for offered in ["/create", "/leave", "/join ID", "/add USER", "/rename", "/typing", "/read"] {
                #expect(help[0].contains(offered), "\(offered) is offered")
            }
            for missing in ["/new", "/appeal", "/rate", "/file", "/close", "/archive", "/refresh"] {
                #expect(!help[0].contains(missing), "\(missing) is not offered by the Voximplant-style backend")
            }
            #expect(try #require(await console.handle("/send")) == ["usage: /send TEXT"])
            #expect(try #require(await console.handle("/send   ")) == ["usage: /send TEXT"])
            #expect(await console.handle("quit") == nil)
            #expect(await console.handle("EXIT") == nil)
            #expect(server.messages(in: conversation).isEmpty, "nothing reached the server: \(server.messages(in: conversation).map(\.text))")
        }
    }

    @Test func webimHelpNamesWebimCommands() async throws {
        let server = WebimServer()
        try await WebimEmulator(server: server, logger: .quiet).withRunning { url in
            let online = ChatSession(backend: try WebimBackend(configuration: WebimConfiguration(accountName: url)), configuration: .fastForTests, logger: .quiet)
            let help = await Console(session: online).help
            #expect(help.contains("/rate N") && help.contains("/file PATH"))
            #expect(!help.contains("/create") && !help.contains("/leave") && !help.contains("/close") && !help.contains("/new"))
            let appeals = ChatSession(
                backend: try WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: url, userToken: "t")),
                configuration: .fastForTests,
                logger: .quiet
            )
            let console = Console(session: appeals, commands: Console.Commands(start: .appeal))
            let appealsHelp = await console.help
            #expect(appealsHelp.contains("/appeal TEXT") && appealsHelp.contains("/refresh"))
            #expect(try #require(await console.handle("/new")) == ["/new is not offered by webim-appeals; /help lists what is"])
        }
    }

    /// A Webim visitor's message piped right after connecting: the conversation comes just
    /// after the link opens, and the message waits for it instead of finding none. Six runs (a
    /// new visitor, then returning, three times): the race it guards lost 2 of 5 before.
    @Test func aWebimMessagePipedAtOnceIsSent() async throws {
        let server = WebimServer(configuration: .init(deltaHold: .seconds(1)))
        try await WebimEmulator(server: server, logger: .quiet).withRunning { url in
            var outcomes: [ConsoleRunner.Outcome] = []
            for visitor in 1...3 {
                let fields = #"{"fields":{"id":"piped-\#(visitor)"}}"#
                for text in ["first visit", "returning visit"] {
                    let backend = try WebimBackend(configuration: WebimConfiguration(accountName: url, visitorFieldsJSON: fields))
                    var runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: true, target: url, progress: .off)
                    runner.drainWait = .seconds(20)
                    let (input, typed) = AsyncStream.makeStream(of: String.self)
                    typed.yield(text)
                    typed.finish()
                    outcomes.append(try await runner.run(lines: input, output: { _ in }, replies: { _ in }))
                }
                let texts = server.messages(ofVisitor: "provided-piped-\(visitor)").filter { $0.kind == "visitor" }.map(\.text)
                #expect(texts == ["first visit", "returning visit"], "visitor \(visitor): the server has both, once each: \(texts)")
            }
            print("  webim, a message piped at once: \(outcomes.filter { $0 == .ended }.count) of \(outcomes.count) runs sent it and ended with status 0")
            #expect(outcomes == Array(repeating: .ended, count: 6))
        }
    }

    /// Input that ends with a message the console could not send exits non-zero.
    @Test func aConsoleThatCouldNotSendFails() async throws {
        let server = VoximplantServer()
        let dave = server.addUser("dave", token: "d")
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: dave, token: "d"), logger: .quiet)
            var runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: true, target: url, progress: .off)
            runner.firstConversationWait = .milliseconds(200)
            runner.commands = Self.voximplant
            let (input, typed) = AsyncStream.makeStream(of: String.self)
            typed.yield("anyone there?")
            typed.finish()
            let replies = Locked<[String]>([])
            let outcome = try await runner.run(lines: input, output: { _ in }, replies: { line in replies.withLock { $0.append(line) } })
            print("  no conversation: \(replies.withLock { $0 }) → \(outcome)")
            #expect(replies.withLock { $0 }.first?.hasPrefix("no conversation, nothing sent:") == true)
            #expect(outcome == .failed("error: 1 message not sent (see the lines above)"))
        }
    }
}

/// The timeline `connect` prints: one send reads as one line and its updates, the user is
/// always "me", and an agent has one name.
@Suite struct TimelineTests {
    static let origin = ChatEvent.Origin(session: "s", backend: "webim")

    static func event(_ kind: ChatEvent.Kind) -> ChatEvent {
        ChatEvent(origin: origin, conversationID: "chat", time: Date(timeIntervalSince1970: 0), kind: kind)
    }

    func lines(_ kinds: [ChatEvent.Kind], me: ParticipantID? = nil) -> [String] {
        var formatter = EventFormatter(format: .timeline, start: Date(timeIntervalSince1970: 0), me: me)
        // The words after the clock, origin and conversation columns.
        return kinds.compactMap { formatter.line(for: Self.event($0), receivedAt: Date(timeIntervalSince1970: 0)) }
            .map { String($0.dropFirst(48)).trimmingCharacters(in: .whitespaces) }
    }

    @Test func aSendIsOneLineAndItsUpdates() {
        var message = Message(clientID: "c-1", conversationID: "chat", text: "hello there", time: .distantPast, deliveryState: .pending)
        var sent = message
        sent.serverID = "m1"
        sent.deliveryState = .sent
        var named = sent
        named.sender = "visitor-1"
        named.senderName = "Ann"
        named.senderRole = .customer
        message.senderRole = nil
        var read = named
        read.deliveryState = .read
        let shown = lines([.messageAdded(message, position: .newest), .messageUpdated(sent), .messageUpdated(named), .messageUpdated(read)])
        for line in shown { print("  | \(line)") }
        #expect(shown == [#"message me: "hello there" (pending)"#, #"message me: "hello there" → sent"#, #"message me: "hello there" → read"#])
    }

    @Test func aPeersOwnMessageIsMine() {
        let pending = Message(clientID: "c-1", conversationID: "chat", text: "hi", time: .distantPast, deliveryState: .pending)
        var confirmed = pending
        confirmed.sender = "alice@app.acc"
        confirmed.senderName = "Alice"
        confirmed.senderRole = .user
        confirmed.deliveryState = .sent
        #expect(lines([.messageAdded(pending, position: .newest), .messageUpdated(confirmed)], me: "alice@app.acc") == [
            #"message me: "hi" (pending)"#, #"message me: "hi" → sent"#,
        ])
    }

    @Test func anAgentHasOneName() {
        let bob = Participant(id: "operator-7", role: .agent, displayName: "Bob")
        let david = Participant(id: "agent-62713628", role: .agent, displayName: "David Berry")
        let answer = Message(serverID: "m2", conversationID: "chat", sender: "operator-7", senderRole: .agent, text: "Hi", time: .distantPast)
        let shown = lines([
            .agentChanged(bob),
            .typing("operator", isTyping: true, draft: nil),
            .messageAdded(answer, position: .newest),
            .readMarker("operator-7", .message("m1")),
            .participantsAdded([david]),
            .participantsRemoved(["agent-62713628"]),
        ])
        for line in shown { print("  | \(line)") }
        #expect(shown == [
            "agent is now Bob", "Bob is typing", #"message Bob: "Hi" (sent)"#, "Bob read up to message m1", "joined: David Berry", "left: David Berry",
        ])
    }
}
