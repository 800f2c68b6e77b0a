import ArgumentParser
import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardVoximplant
import Testing
import VoximplantEmulator

@testable import switchboard

/// `switchboard connect` for long work and for the first connection that fails.
@Suite(.timeLimit(.minutes(1)))
struct ConnectTests {
    /// A port nothing listens on: one line that says what was tried and why, status 1, without
    /// waiting for input.
    @Test func aRefusedFirstConnectionEndsWithOneLine() async throws {
        let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: "ws://127.0.0.1:1/ws", user: "a@app.acc", token: "t"), logger: .quiet)
        let runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: false, target: "ws://127.0.0.1:1/ws", progress: .off)
        let (input, _) = AsyncStream.makeStream(of: String.self)
        let outcome = try await runner.run(lines: input, output: { _ in }, replies: { _ in })
        #expect(outcome == .failed("error: cannot connect to ws://127.0.0.1:1/ws: WebSocket failure: connection refused (--retry keeps trying)"))
    }

    @Test func refusedCredentialsSayWhoRefusedWhat() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "right")
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: alice, token: "wrong"), logger: .quiet)
            let runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: false, target: url, progress: .off)
            let (input, _) = AsyncStream.makeStream(of: String.self)
            let outcome = try await runner.run(lines: input, output: { _ in }, replies: { _ in })
            guard case .failed(let line) = outcome else { Issue.record("not a failure: \(outcome)"); return }
            #expect(line.hasPrefix("error: cannot connect to \(url): the server refused the credentials"), "\(line)")
            #expect(!line.contains("wrong"), "the token is not printed")
        }
    }

    @Test func urlOptionsAreCheckedBeforeAnythingConnects() throws {
        #expect(throws: (any Error).self) { try ConnectVoximplant.parse(["--url", "not a url", "--user", "a", "--token", "b"]) }
        #expect(throws: (any Error).self) { try ConnectVoximplant.parse(["--url", "http://127.0.0.1:8080/ws", "--user", "a", "--token", "b"]) }
        #expect(throws: (any Error).self) { try ConnectCXone.parse(["--chat-url", "ws://x/chat", "--socket-url", "ws://x/ws", "--brand", "1", "--channel", "c"]) }
        #expect(throws: (any Error).self) { try ConnectWebim.parse(["--url", "ftp://example.com"]) }
        _ = try ConnectVoximplant.parse(["--url", "ws://127.0.0.1:8080/ws", "--user", "a", "--token", "b", "--retry"])
        _ = try ConnectWebim.parse(["--url", "demo"])
        #expect(throws: (any Error).self) { try ConnectMatrix.parse(["--homeserver", "matrix.org", "--token", "t"]) }
        #expect(throws: (any Error).self) { try ConnectMatrix.parse(["--homeserver", "https://m.org", "--user", "a", "--password", "p", "--token", "t"]) }
        #expect(throws: (any Error).self) { try ConnectMatrix.parse(["--homeserver", "https://m.org", "--password", "p"]) }
        #expect(throws: (any Error).self) { try ConnectMatrix.parse(["--homeserver", "https://m.org"]) }
        _ = try ConnectMatrix.parse(["--homeserver", "https://m.org", "--user", "alice", "--password", "p"])
        _ = try ConnectMatrix.parse(["--homeserver", "http://127.0.0.1:8008", "--token", "t"])
    }

    /// The app was away while the agent wrote 300 messages: the catch-up says how far it has come
    /// in tenths and when it is done.
    @Test func aLongCatchUpReportsHowManyOfHowMany() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a")
        let bob = server.addUser("bob", token: "b")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        let store = InMemoryChatStore()
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let configuration = VoximplantConfiguration(url: url, user: alice, token: "a")
            let first = ChatSession(backend: VoximplantBackend(configuration: configuration, logger: .quiet), store: store, configuration: .fastForTests, logger: .quiet)
            try await withRecording(first) { recorder in
                try await first.resume()
                try await recorder.waitUntil("the session knows the conversation") {
                    try await first.conversations().contains { $0.id == ConversationID(conversation) }
                }
                _ = try await first.conversation(ConversationID(conversation)).send(text: "hello")
                try await recorder.first("the greeting sent") { $0.updatedMessage?.text == "hello" && $0.updatedMessage?.sequence != nil }
            }
            for index in 1...300 { _ = try server.robot(bob).send("while away \(index)", in: conversation) }

            let second = ChatSession(backend: VoximplantBackend(configuration: configuration, logger: .quiet), store: store, configuration: .fastForTests, logger: .quiet)
            let lines = try await withRecording(second) { recorder in
                try await second.resume()
                try await recorder.first("the last message") { $0.addedMessage?.text == "while away 300" }
                var progress = CatchUpProgress()
                return recorder.events.compactMap { progress.observe($0) }
            }
            print("catch-up progress: \(lines.joined(separator: " | "))")
            #expect(lines.last == "caught up \(conversation): 300 events")
            #expect(lines.first == "catching up \(conversation): 0 of 300 events" || lines.first?.hasPrefix("catching up") == true)
            #expect(lines.count >= 2 && lines.count <= 12, "a line per tenth at most")
        }
    }

    @Test func aShortCatchUpSaysNothing() {
        var progress = CatchUpProgress()
        let id = ConversationID("c")
        let head = ChatEvent(origin: .init(session: SessionID("s"), backend: "b"), conversationID: id, time: Date(), kind: .conversationUpdated(ConversationInfo(id: id, kind: .group, lastSequence: 20)))
        #expect(progress.observe(head) == nil)
        for sequence in 11...20 {
            let message = Message(serverID: MessageID("m\(sequence)"), conversationID: id, sequence: Int64(sequence), senderRole: .agent, text: "x", time: Date())
            #expect(progress.observe(ChatEvent(origin: head.origin, conversationID: id, time: Date(), kind: .messageAdded(message, position: .newest))) == nil)
        }
    }
}
