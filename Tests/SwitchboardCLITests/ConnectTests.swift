import ArgumentParser
import Foundation
import Switchboard
import SwitchboardCXone
import SwitchboardEmulation
import SwitchboardMatrix
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim
import Testing
import VoximplantEmulator
import WebimEmulator

@testable import switchboard
import SwitchboardCommandKit
import CXoneCommands
import MatrixCommands
import VoximplantCommands
import WebimCommands

/// `switchboard connect` for long work and for the first connection that fails.
// Three minutes: `httpsToAPlainEmulatorSaysSo` takes 8 s alone, and took 47 s (CI) to 127 s
// (locally, with the browser tests' Chromium beside it) of a one-minute limit in a full run. The
// limit catches a hang; each test's own deadlines are what it checks.
@Suite(.timeLimit(.minutes(3)))
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

    /// The HTTP backends too: the refused connection is the line, at once, not a request
    /// timeout 10 to 90 s later (AsyncHTTPClient retried the connection until each request's
    /// deadline).
    @Test func aRefusedFirstConnectionEndsWithOneLineOnWebimAndMatrix() async throws {
        let url = "http://127.0.0.1:1"
        let backends: [any ChatBackend] = [
            try WebimBackend(configuration: WebimConfiguration(accountName: url)),
            try MatrixBackend(configuration: MatrixConfiguration(homeserver: url, login: .accessToken("t"))),
        ]
        for backend in backends {
            let started = ContinuousClock.now
            let runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: false, target: url, progress: .off)
            let (input, _) = AsyncStream.makeStream(of: String.self)
            let outcome = try await runner.run(lines: input, output: { _ in }, replies: { _ in })
            print("\(backend.descriptor.name), refused: \(outcome) after \(ContinuousClock.now - started)")
            #expect(outcome == .failed("error: cannot connect to \(url): HTTP failure: connection refused (--retry keeps trying)"))
        }
    }

    /// CXone reads its channel configuration first: that request says "connection refused".
    @Test func aRefusedChannelConfigurationSaysConnectionRefused() async throws {
        let environment = CXoneEnvironment(chatURL: "http://127.0.0.1:1/chat", socketURL: "ws://127.0.0.1:1/ws")
        let started = ContinuousClock.now
        let error = await #expect(throws: SwitchboardError.self) {
            _ = try await CXoneBackend.make(configuration: CXoneConfiguration(environment: environment, brandID: 1, channelID: "c"))
        }
        print("cxone, refused: \(error?.message ?? "-") after \(ContinuousClock.now - started)")
        #expect(error?.code == .connectionLost)
        #expect(error?.message == "HTTP failure: connection refused")
    }

    /// `https://` to the (plain HTTP) emulator: the line says the TLS handshake did not happen and
    /// what to try, within the connect timeout, not "no answer in time" after the request's. The
    /// emulator does not answer a TLS hello at all; a plain server that answers it in plain text
    /// is reported at once as one that "does not speak TLS".
    @Test func httpsToAPlainEmulatorSaysSo() async throws {
        try await WebimEmulator(server: WebimServer(), logger: .quiet).withRunning { plain in
            let url = plain.replacingOccurrences(of: "http://", with: "https://")
            let backend = try WebimBackend(configuration: WebimConfiguration(accountName: url))
            let started = ContinuousClock.now
            let runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: false, target: url, progress: .off)
            let (input, _) = AsyncStream.makeStream(of: String.self)
            let outcome = try await runner.run(lines: input, output: { _ in }, replies: { _ in })
            print("webim, https to a plain emulator: \(outcome) after \(ContinuousClock.now - started)")
            let server = String(url.dropFirst("https://".count))
            #expect(outcome == .failed("error: cannot connect to \(url): no connection to the server at \(server) in time (TCP and TLS handshakes; for a plain server, try http://) (--retry keeps trying)"))
        }
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

    /// Options a newcomer gets wrong are refused in one line that names the option and what is
    /// wrong, before anything connects.
    @Test func wrongOptionsNameTheOptionAndTheFix() throws {
        func refusal<Command: ParsableCommand>(_ command: Command.Type, _ arguments: [String]) -> String {
            do {
                _ = try command.parse(arguments)
                return "accepted"
            } catch {
                return command.message(for: error)
            }
        }
        let plain = refusal(ConnectVoximplant.self, ["--url", "ws://chat.example.com/ws", "--user", "a", "--token", "b"])
        print("  ws:// to a remote host: \(plain)")
        #expect(plain.hasPrefix("--url ws://chat.example.com/ws is plain ws://") && plain.hasSuffix("use wss://, or add --allow-plain-text"))
        #expect(refusal(ConnectVoximplant.self, ["--url", "ws://chat.example.com/ws", "--user", "a", "--token", "b", "--allow-plain-text"]) == "accepted")
        #expect(refusal(ConnectMatrix.self, ["--homeserver", "http://matrix.example.com", "--token", "t"]).hasSuffix("use https://, or add --allow-plain-text"))
        #expect(refusal(ConnectCXone.self, ["--chat-url", "http://127.0.0.1:1/chat", "--socket-url", "ws://localhost:1/ws", "--brand", "1", "--channel", "c"]) == "accepted")

        let broken = refusal(ConnectWebim.self, ["--url", "demo", "--visitor-fields", #"{"fields":{"id":"x"}"#])
        print("  broken --visitor-fields: \(broken)")
        #expect(broken.hasPrefix("--visitor-fields: visitor fields are not JSON: malformed JSON"), "\(broken)")
        #expect(broken.contains("at byte"), "where the JSON breaks")
        let noID = refusal(ConnectWebim.self, ["--url", "demo", "--visitor-fields", #"{"fields":{"name":"x"}}"#])
        #expect(noID.hasPrefix(#"--visitor-fields: visitor fields have no "id" string"#), "\(noID)")
        #expect(refusal(ConnectWebim.self, ["--url", "demo", "--visitor-fields", #"["id"]"#]).hasPrefix("--visitor-fields: visitor fields are a JSON object"))
        #expect(refusal(ConnectWebim.self, ["--url", "demo", "--visitor-fields", #"{"fields":{"id":"x"}}"#]) == "accepted")
    }

    /// A WebSocket URL whose path the server does not serve says so, in one line.
    @Test func aWrongWebSocketPathSaysSo() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a")
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let wrong = url.replacingOccurrences(of: "/ws", with: "/wrong")
            let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: wrong, user: alice, token: "a"), logger: .quiet)
            let runner = ConsoleRunner(backend: backend, store: InMemoryChatStore(), jsonl: false, target: wrong, progress: .off)
            let (input, _) = AsyncStream.makeStream(of: String.self)
            let outcome = try await runner.run(lines: input, output: { _ in }, replies: { _ in })
            print("  wrong path: \(outcome)")
            #expect(outcome == .failed("error: cannot connect to \(wrong): the server at \(wrong) answered but would not open a WebSocket there (is the path right?) (--retry keeps trying)"))
        }
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
