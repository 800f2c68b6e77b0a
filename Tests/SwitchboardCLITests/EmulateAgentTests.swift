import ArgumentParser
import CXoneEmulator
import Foundation
import Switchboard
import SwitchboardCXone
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim
import Testing
import VoximplantEmulator
import WebimEmulator

@testable import switchboard
import SwitchboardCommandKit

/// `switchboard emulate --agent manual`: a person types the agent's side and the faults, and an app
/// connected over a real socket survives them. Each test drives the console exactly as standard
/// input would, line by line.
@Suite(.timeLimit(.minutes(1)))
struct EmulateAgentTests {
    @Test func voximplantManualAgentAndFaultsReachTheApp() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a", displayName: "Alice")
        let bob = server.addUser("bob", token: "b", displayName: "Bob")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        let console = AgentConsole(desk: VoximplantDesk(server: server, agent: bob, customer: alice, conversation: conversation))
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let session = ChatSession(
                backend: VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: alice, token: "a"), logger: .quiet),
                configuration: .fastForTests, logger: .quiet
            )
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.first("the conversation") { $0.conversationID == ConversationID(conversation) }

                #expect(console.handle("/say Hi, Bob here").lines.first?.hasPrefix("said in \(conversation)") == true)
                try await recorder.first("the agent's line") { $0.addedMessage?.text == "Hi, Bob here" }

                // Two events lost on the way: the third shows the gap, retransmit fills it.
                #expect(console.handle("/drop 2").lines.first?.contains("the next 2 events") == true)
                for text in ["one", "two", "three"] { _ = console.handle("/say \(text)") }
                try await recorder.waitUntil("all three after the gap") { events in
                    ["one", "two", "three"].allSatisfy { text in events.contains { $0.addedMessage?.text == text } }
                }

                // The socket closes; the app reconnects and reads on.
                let connects = recorder.events(where: \.isConnected).count
                #expect(console.handle("/disconnect").lines == ["closed \(alice)'s sockets"])
                try await recorder.waitUntil("the reconnect") { $0.filter(\.isConnected).count > connects }
                _ = console.handle("after the drop")
                try await recorder.first("a line after the reconnect") { $0.addedMessage?.text == "after the drop" }

                // Held until the release the runner would do after the delay.
                let delayed = console.handle("/delay 60000")
                let release = try #require(delayed.later, "a delay releases what it held")
                #expect(release.after == .milliseconds(60_000))
                _ = console.handle("/say held")
                #expect(release.run() == "released the held events")
                try await recorder.first("the held line") { $0.addedMessage?.text == "held" }

                #expect(console.handle("/typing").lines.first?.hasPrefix("typing in") == true)
                try await recorder.first("the agent typing") { if case .typing(let who, true, _) = $0.kind { return who.rawValue == bob } else { return false } }
                #expect(console.handle("/close").lines.first?.contains("not offered by the Voximplant-style emulator") == true)
                #expect(console.handle("/reinit").lines.first?.contains("not offered") == true)
                #expect(console.handle("/drop many").lines == ["usage: /drop N (1 to 1000)"])
                #expect(console.handle("/bogus").lines == ["unknown command /bogus; /help lists them"])

                let added = try await session.conversation(ConversationID(conversation)).storedMessages(before: nil, limit: .max).map(\.text)
                let said = server.messages(in: conversation).map(\.text)
                let duplicates = added.count - Set(added).count
                print("emulate --agent manual (Voximplant-style): agent said \(said.count), 2 events dropped, 1 disconnect, 1 hold; app stored \(added.count), lost \(Set(said).subtracting(added).count), duplicated \(duplicates)")
                #expect(Set(said).isSubset(of: Set(added)) && duplicates == 0)
            }
        }
    }

    @Test func webimManualAgentTypesReadsTransfersAndReinitialises() async throws {
        let server = WebimServer()
        let bob = server.robot(id: 7, name: "Bob")
        let console = AgentConsole(desk: WebimDesk(server: server, agent: bob, colleague: server.robot(id: 9, name: "Carol")))
        #expect(console.handle("/say hello").lines == ["no visitor yet: connect an app and write first"])
        try await WebimEmulator(server: server, logger: .quiet).withRunning { url in
            let session = ChatSession(backend: try WebimBackend(configuration: WebimConfiguration(accountName: url)), configuration: .fastForTests, logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                let chat = try await session.startConversation(ConversationDraft())
                _ = try await chat.send(text: "my order is late")
                try await recorder.first("sent") { $0.updatedMessage?.text == "my order is late" && $0.updatedMessage?.serverID != nil }

                #expect(console.handle("/where").lines.first?.hasPrefix("visitor ") == true)
                #expect(console.handle("/typing").lines.first?.hasPrefix("typing to visitor") == true)
                try await recorder.first("the operator typing") { if case .typing(_, true, _) = $0.kind { return true } else { return false } }
                #expect(console.handle("Let me check").lines.first?.hasPrefix("said to visitor") == true)
                try await recorder.first("the operator's line") { $0.addedMessage?.text == "Let me check" }
                _ = console.handle("/read")
                try await recorder.first("the visitor's message read") { $0.updatedMessage?.text == "my order is late" && $0.updatedMessage?.deliveryState == .read }

                let initsBefore = server.initLocations.count
                #expect(console.handle("/reinit").lines.first?.contains("reinit-required") == true)
                try await recorder.waitUntil("a new page") { _ in server.initLocations.count > initsBefore }
                _ = console.handle("after the reinit")
                try await recorder.first("a line after the reinit") { $0.addedMessage?.text == "after the reinit" }

                #expect(console.handle("/transfer").lines.first == "Carol took visitor \(try #require(server.actions.last?.visitor))'s chat")
                try await recorder.first("Carol as the agent") { if case .agentChanged(let agent?) = $0.kind { return agent.displayName == "Carol" } else { return false } }
                #expect(console.handle("/close").lines.first?.contains("closed_by_operator") == true)
                try await recorder.first("the chat closed by the operator") { if case .conversationStateChanged(.closedByAgent, _) = $0.kind { return true } else { return false } }
                #expect(console.handle("/offline").lines.first?.hasPrefix("operators offline") == true)
                try await recorder.first("offline") { if case .availability(.offline) = $0.kind { return true } else { return false } }
            }
        }
    }

    @Test func cxoneManualAgentTransfersAndTheAppSurvivesDroppedSockets() async throws {
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: .multi))
        let david = server.agent()
        let console = AgentConsole(desk: CXoneDesk(server: server, agent: david, colleague: server.agent(id: 5, firstName: "Carol", surname: "Lane")))
        try await CXoneEmulator(server: server, logger: .quiet).withRunning { endpoints in
            let backend = CXoneBackend(
                configuration: CXoneConfiguration(
                    environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                    brandID: server.configuration.brandID, channelID: server.configuration.channelID, customerID: "customer-1"
                ),
                channel: try CXoneChannelConfiguration(json: server.channelConfiguration)
            )
            let session = ChatSession(backend: backend, configuration: .fastForTests, logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                let chat = try await session.startConversation(ConversationDraft(kind: .thread))
                _ = try await chat.send(text: "hello")
                try await recorder.first("sent") { $0.updatedMessage?.text == "hello" && $0.updatedMessage?.serverID != nil }

                #expect(console.handle("/say Hi, David here").lines.first?.hasPrefix("said in thread") == true)
                try await recorder.first("the agent's line") { $0.addedMessage?.text == "Hi, David here" }
                #expect(console.handle("/transfer").lines.first?.hasPrefix("handed thread") == true)
                try await recorder.first("Carol as the agent") { if case .agentChanged(let agent?) = $0.kind { return agent.displayName?.contains("Carol") == true } else { return false } }

                // The socket closes before the app's next request is handled: the send goes
                // through once after the reconnect.
                #expect(console.handle("/drop 1").lines.first?.contains("next 1 requests") == true)
                _ = try await chat.send(text: "are you there?")
                try await recorder.first("sent after the drop") { $0.updatedMessage?.text == "are you there?" && $0.updatedMessage?.serverID != nil }
                let texts = server.messages(inThread: chat.id.rawValue).map(\.text)
                print("emulate --agent manual (CXone): 1 dropped socket; the thread holds \(texts.count) messages, \(texts.filter { $0 == "are you there?" }.count) copy of the resent one")
                #expect(texts.filter { $0 == "are you there?" }.count == 1)
                #expect(console.handle("/offline").lines.first?.contains("only a live-chat channel") == true)
                _ = console.handle("/close")
                try await recorder.first("the thread closed") { if case .conversationStateChanged(.closed, _) = $0.kind { return true } else { return false } }
            }
        }
    }

    @Test func theScriptAnswersInOrderThenStops() throws {
        let script = AgentScript(lines: ["Hi!", "About {text}: done.", "Bye."])
        #expect(script.reply(to: "a") == "Hi!")
        #expect(script.reply(to: "my parcel") == "About my parcel: done.")
        #expect(script.reply(to: "c") == "Bye.")
        #expect(script.reply(to: "d") == nil, "after the script the agent stops answering")

        let options = try AgentOptions.parse(["--agent", "manual"])
        #expect(options.agent == .manual)
        #expect(try options.replies(output: StandardOutput())("hello") == nil, "a manual agent answers nothing by itself")
        #expect(try AgentOptions.parse([]).replies(output: StandardOutput())("hello") == "You wrote: hello")
        #expect(throws: (any Error).self) { try AgentOptions.parse(["--agent", "psychic"]) }
        #expect(throws: (any Error).self) { try AgentOptions.parse(["--agent", "scripted", "--script", "/nonexistent/script.txt"]).replies(output: StandardOutput()) }
    }
}
