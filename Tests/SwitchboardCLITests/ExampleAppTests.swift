import Foundation
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
}
