import Foundation
import Logging
@_spi(TestKit) import Switchboard
import SwitchboardEmulation
@_spi(TestKit) import SwitchboardTestKit
import Testing
import VoximplantEmulator

@testable import SupportChat

/// `Examples/SupportChat` against the Voximplant-style emulator over a real socket: what its
/// screen shows for a chat with an agent, history paging, typing, read markers and a dropped
/// connection.
@Suite(.timeLimit(.minutes(1)))
struct ExampleAppTests {
    final class Screen: Sendable {
        private let lines = Locked<[String]>([])
        private let changed = AsyncSignal()
        func show(_ line: String) {
            lines.withLock { $0.append(line) }
            changed.signal()
        }
        var all: [String] { lines.withLock { $0 } }
        func wait(for what: String, _ matches: @escaping @Sendable (String) -> Bool) async throws {
            try await waitUntil(what, timeout: .seconds(30), signal: changed) { self.all.contains(where: matches) }
        }
    }

    @Test func theExampleChatsPagesAndSurvivesADrop() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a", displayName: "Alice")
        let bob = server.addUser("bob", token: "b", displayName: "Bob")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        for index in 1...30 { try server.robot(bob).send("earlier \(index)", in: conversation) }
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let screen = Screen()
            let app = SupportChatApp(options: .init(url: url, user: alice, token: "a", window: 10), screen: { screen.show($0) })
            let (input, typed) = AsyncStream.makeStream(of: String.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await app.run(input: input) }
                try await screen.wait(for: "online") { $0 == "● online" }
                try await screen.wait(for: "the chat opened") { $0.hasPrefix("chat \(conversation)") }

                typed.yield("Hello, my parcel is late")
                try await screen.wait(for: "my line, pending then sent") { $0.hasSuffix("✓ Hello, my parcel is late") }
                try server.robot(bob).typing(in: conversation)
                try await screen.wait(for: "bob typing") { $0 == "  \(bob) is typing…" }
                try server.robot(bob).send("Which order?", in: conversation)
                try await screen.wait(for: "bob's answer") { $0 == "\(bob): Which order?" }
                try server.robot(bob).markRead(in: conversation)
                try await screen.wait(for: "read by bob") { $0 == "  ✓✓ read by \(bob)" }

                typed.yield("/more")
                try await screen.wait(for: "older messages on top") { $0.hasPrefix("↑ \(bob): earlier") }

                server.disconnect(user: alice)
                try await screen.wait(for: "the drop shown") { $0.hasPrefix("○ ") }
                try server.robot(bob).send("Still there?", in: conversation)
                try await screen.wait(for: "the message after the reconnect") { $0 == "\(bob): Still there?" }

                // Another conversation the app has not opened: the inbox says it is there, unread.
                let billing = try server.robot(bob).createConversation(title: "Billing", with: [alice])
                try server.robot(bob).send("Your invoice is ready", in: billing)
                let notice = "✉ Billing · 1 unread · \(bob): Your invoice is ready"
                try await screen.wait(for: "the other conversation's message noticed") { $0 == notice }
                typed.yield("/inbox")
                try await screen.wait(for: "the inbox") { $0.hasSuffix("unread in all") }
                let listed = screen.all.filter { $0.hasPrefix("▸ ") }
                #expect(listed.first == "▸ Billing · 1 unread · \(bob): Your invoice is ready", "newest activity first, with what is unread")
                #expect(listed.contains { $0.hasPrefix("▸ Support · ") })

                typed.yield("/quit")
                try await group.next()
            }
            let shown = screen.all
            for line in shown { print("  | \(line)") }
            print("example app: \(shown.count) screen lines, \(shown.filter { $0 == "● online" }.count) times online, \(shown.filter { $0.hasPrefix("↑") }.count) older lines paged in")
            #expect(server.messages(in: conversation).map(\.text).contains("Hello, my parcel is late"))
            #expect(server.readLog.contains { $0.user == alice }, "the app marked what it showed read")
        }
    }

    /// What the app shows when it cannot connect: one line that says where and why, and the run
    /// ends with that line as its failure (exit status 1), never a blank screen.
    @Test func aConnectionThatCannotBeMadeIsOneLine() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a")
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let tls = url.replacingOccurrences(of: "ws://", with: "wss://")
            let cases = [
                ("ws://127.0.0.1:1/ws", "cannot connect to ws://127.0.0.1:1/ws: WebSocket failure: connection refused"),
                (tls, "cannot connect to \(tls): TLS handshake failed: this client cannot name an IP address in TLS (\(tls.dropFirst("wss://".count).prefix { $0 != "/" })); use the server's host name (localhost for 127.0.0.1)"),
            ]
            for (target, expected) in cases {
                let screen = Screen()
                let app = SupportChatApp(options: .init(url: target, user: alice, token: "a"), screen: { screen.show($0) })
                let (input, _) = AsyncStream.makeStream(of: String.self)
                let started = ContinuousClock.now
                let failure = await #expect(throws: SupportChatApp.Failure.self) { try await app.run(input: input) }
                print("example app, \(target): \(screen.all) after \(ContinuousClock.now - started)")
                #expect(failure?.description == expected)
                #expect(screen.all == ["connecting to \(target)…", "✕ \(expected)"])
            }
        }
    }

    /// A wrong token: the reason in one line, not a log line and then `sessionClosed`. The
    /// library's log goes to the file the app chose (`--log`), never onto the screen.
    @Test func aWrongTokenSaysTheServerRefusedTheCredentials() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "right")
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("supportchat-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let screen = Screen()
            let app = SupportChatApp(
                options: .init(url: url, user: alice, token: "wrong-token"),
                logger: try SupportChatApp.logs(appendingTo: log, level: .trace),   // the library logs the refusal at debug
                screen: { screen.show($0) }
            )
            let (input, _) = AsyncStream.makeStream(of: String.self)
            let failure = await #expect(throws: SupportChatApp.Failure.self) { try await app.run(input: input) }
            let logged = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            for line in screen.all { print("  | \(line)") }
            print("example app, wrong token: \(screen.all.count) screen lines, \(logged.count) log lines in the file (\(logged.first ?? "-"))")
            #expect(failure?.description.hasPrefix("cannot connect to \(url): the server refused the credentials") == true, "\(String(describing: failure))")
            #expect(failure.map { !$0.description.contains("wrong-token") } == true, "the token is not shown")
            #expect(screen.all.last == "✕ \(failure?.description ?? "")")
            #expect(!logged.isEmpty, "the library's log went to the app's file")
            #expect(screen.all.allSatisfy { line in !logged.contains { $0.contains(line) } && !line.contains("switchboard.") }, "no log line on the screen")
        }
    }

    /// `--help` explains every option and exits 0; wrong arguments (an unknown option, a missing
    /// value, a URL without a scheme) get the usage and exit 2.
    @Test func helpExplainsEachOptionAndWrongArgumentsGetTheUsage() {
        #expect(SupportChatApp.parse(["--help"]) == .help)
        #expect(SupportChatApp.parse(["--url", "ws://h/ws", "-h"]) == .help)
        for option in ["--url", "--user", "--token", "--conversation", "--log", "--help"] {
            #expect(SupportChatApp.usage.contains(option), "\(option) is explained")
        }
        #expect(
            SupportChatApp.parse(["--url", "ws://127.0.0.1:8080/ws", "--user", "alice@app.acc", "--token", "t", "--log", "/tmp/chat.log"])
                == .run(.init(url: "ws://127.0.0.1:8080/ws", user: "alice@app.acc", token: "t", log: "/tmp/chat.log"))
        )
        let wrong: [([String], String)] = [
            ([], "missing --url, --user, --token"),
            (["--url", "ws://h/ws", "--user", "a"], "missing --token"),
            (["--url"], "--url needs a value"),
            (["--verbose"], "unknown argument: --verbose"),
            (["--url", "127.0.0.1:8080/ws", "--user", "a", "--token", "t"], "--url is not a ws:// or wss:// URL with a host: 127.0.0.1:8080/ws"),
        ]
        for (arguments, problem) in wrong {
            #expect(SupportChatApp.parse(arguments) == .usageError(problem), "\(arguments)")
        }
        print(SupportChatApp.usage)
    }
}
