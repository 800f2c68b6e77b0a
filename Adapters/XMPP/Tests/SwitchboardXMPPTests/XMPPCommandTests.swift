import ArgumentParser
import Foundation
import Switchboard
import SwitchboardCommandKit
import SwitchboardTestKit
import SwitchboardXMPP
import Testing
import XMPPCommands

/// `switchboard connect xmpp` (its options, then the console on the backend they describe) and a
/// gateway's `"backend": "xmpp"` session (the registry entry's decoding, backend and `--send`
/// conversation), against a real Prosody.
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPCommandTests {
    let live = XMPPLiveTests()

    @Test func connectXMPPTalksToProsodyFromTheConsole() async throws {
        try await Prosody.withServer { server in
            #expect(throws: (any Error).self) { try ConnectXMPP.parse(["--url", server.url, "--jid", "no-domain", "--password", "p"]) }
            #expect(throws: (any Error).self) { try ConnectXMPP.parse(["--url", "http://\(server.url.dropFirst(5))", "--jid", XMPPLiveTests.customer, "--password", "p"]) }
            let command = try ConnectXMPP.parse(["--url", server.url, "--jid", XMPPLiveTests.customer, "--password", "secret-customer"])
            try await server.send(["hello"], from: "agent1", to: XMPPLiveTests.customer)
            let runner = ConsoleRunner(backend: try command.makeBackend(), store: InMemoryChatStore(), jsonl: true, target: command.url, progress: .off)
            let (lines, typed) = AsyncStream.makeStream(of: String.self)
            let printed = Locked<[String]>([])
            let (outcome, body) = try await XMPPTestClient.withClient(server, user: "agent1", resource: "watch", presence: true) { agent in
                async let outcome = runner.run(lines: lines, output: { line in printed.withLock { $0.append(line) } }, replies: { _ in })
                // However the wait ends, the input ends: the runner does not wait for more.
                defer { typed.finish() }
                typed.yield("/open \(XMPPLiveTests.agent)")
                typed.yield("from the console")
                let stanza = try await agent.waitForStanza("the console's message", timeout: .seconds(30)) {
                    $0.name == "message" && $0.child("body")?.text == "from the console"
                }
                // The input ends: the console waits for the send's confirmation, then ends.
                typed.finish()
                return (try await outcome, stanza.child("body")?.text)
            }
            let output = printed.withLock { $0 }
            print("xmpp: connect xmpp — \(outcome), the agent got \(body ?? "nothing"), \(output.count) lines printed, the agent's hello among them: \(output.contains { $0.contains("\"hello\"") })")
            #expect(outcome == .ended)
            #expect(body == "from the console")
            #expect(output.contains { $0.contains("\"hello\"") })
        }
    }

    /// `/join` in `connect xmpp`'s console joins a room, and what is typed then goes to it.
    @Test func theConsoleJoinsARoomAndWritesThere() async throws {
        try await Prosody.withServer { server in
            let room = "lobby@conference.localhost"
            let command = try ConnectXMPP.parse(["--url", server.url, "--jid", XMPPLiveTests.customer, "--password", "secret-customer"])
            var console = ConsoleRunner(backend: try command.makeBackend(), store: InMemoryChatStore(), jsonl: true, target: command.url, progress: .off)
            console.commands = ConnectXMPP.consoleCommands
            let runner = console
            let printed = Locked<[String]>([])
            let (lines, typed) = AsyncStream.makeStream(of: String.self)
            let (outcome, body) = try await XMPPTestClient.withClient(server, user: "agent1", resource: "watch") { agent in
                try await agent.joinRoom(room, nick: "agent1")
                async let outcome = runner.run(lines: lines, output: { line in printed.withLock { $0.append(line) } }, replies: { line in printed.withLock { $0.append(line) } })
                defer { typed.finish() }
                typed.yield("/join \(room)")
                typed.yield("hello room")
                let stanza: XMPPTestClient.Element
                do {
                    stanza = try await agent.waitForStanza("the console's message in the room", timeout: .seconds(30)) {
                        $0.name == "message" && $0["type"] == "groupchat" && $0.child("body")?.text == "hello room"
                    }
                } catch {
                    print("xmpp: connect xmpp — the console printed \(printed.withLock { $0 }); the agent got \(agent.received)")
                    throw error
                }
                typed.finish()
                return (try await outcome, stanza["from"])
            }
            print("xmpp: connect xmpp — /join \(room): \(outcome), the room relayed the message from \(body ?? "nobody"); the console printed \(printed.withLock { $0.count }) lines")
            #expect(outcome == .ended)
            #expect(body == "\(room)/customer")
        }
    }

    @Test func aGatewaySessionsFileEntryConnectsAndSends() async throws {
        try await Prosody.withServer { server in
            let entry: JSONValue = [
                "backend": "xmpp", "url": .string(server.url), "user": .string(XMPPLiveTests.customer), "password": "secret-customer",
                "conversation": .string(XMPPLiveTests.agent),
            ]
            let setup = try XMPPCommands.entry.gatewaySession(entry)
            #expect(setup.account == XMPPLiveTests.customer)
            #expect(throws: SwitchboardError.self) { try XMPPCommands.entry.gatewaySession(["backend": "xmpp", "url": .string(server.url), "user": "no-domain", "password": "p"]) }
            try await server.send(["hello"], from: "agent1", to: XMPPLiveTests.customer)
            let session = ChatSession(backend: try await setup.makeBackend(.quiet), store: InMemoryChatStore(), configuration: .fastForTests, logger: .quiet)
            try await withConnectedRecording(session) { recorder in
                let events = session.events(filter: .all, buffering: .unbounded)
                let chat = try #require(try await setup.trafficConversation(session, events))
                let sent = try await chat.send(text: "from the gateway's session")
                try await recorder.waitUntil("the gateway's send confirmed", check: {
                    try await chat.storedMessages(before: nil, limit: 20).contains { $0.clientID == sent.clientID && $0.serverID != nil }
                })
            }
            let archive = try await server.archive(of: "customer", with: XMPPLiveTests.agent).compactMap(\.body)
            print("xmpp: a gateway's xmpp session — account \(setup.account), archived \(archive)")
            #expect(archive == ["hello", "from the gateway's session"])
        }
    }
}
