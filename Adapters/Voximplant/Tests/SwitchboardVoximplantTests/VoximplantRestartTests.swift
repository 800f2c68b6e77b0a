import Foundation
import Switchboard
import SwitchboardEmulation
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardVoximplant
import Testing
@_spi(TestKit) import VoximplantEmulator

/// A server that forgot: the emulator restarts without its data and numbers the conversation's
/// events from 1 again. The session must say so and take the server's new history, not drop
/// what arrives as events it already has.
@Suite(.timeLimit(.minutes(1)))
struct VoximplantRestartTests {
    /// The same users and the same first conversation, on a fresh server.
    static func freshServer() throws -> (server: VoximplantServer, alice: String, bob: String, conversation: String) {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a", displayName: "Alice")
        let bob = server.addUser("bob", token: "b", displayName: "Bob")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        try server.robot(bob).send("Hi, Bob here", in: conversation)
        server.autoReply(as: bob) { _, text in "echo: \(text)" }
        return (server, alice, bob, conversation)
    }

    /// Alice's session on a fresh server's emulator, connected and knowing the conversation.
    static func withAlicesSession(
        _ body: @escaping @Sendable (ChatSession, EventRecorder, _ server: VoximplantServer, _ alice: String, _ bob: String, _ conversation: String) async throws -> Void
    ) async throws {
        let (server, alice, bob, conversation) = try freshServer()
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let session = ChatSession(
                backend: VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: alice, token: "a"), logger: .quiet),
                configuration: .fastForTests,
                logger: .quiet
            )
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.first("the conversation") { $0.conversationID == ConversationID(conversation) }
                try await body(session, recorder, server, alice, bob, conversation)
            }
            await session.close()
        }
    }

    @Test func aRestartedServerIsResynchronizedNotIgnored() async throws {
        try await Self.withAlicesSession { session, recorder, server, alice, bob, conversation in
            let id = ConversationID(conversation)
            // Before: three messages and their echoes, all delivered.
            let chat = try await session.conversation(id)
            for index in 1...3 { try await chat.send(text: "before \(index)") }
            try await recorder.first("the last echo") { $0.addedMessage?.text == "echo: before 3" }
            let deliveredBefore = server.lastSequence(of: conversation)

            // The service restarts without its data; its robot makes the same conversation
            // again, greets, and answers: three events, numbered from 1.
            let again = try server.restartWithoutData { server in
                let again = try server.robot(bob).createConversation(title: "Support", with: [alice])
                try server.robot(bob).send("Hi, Bob here", in: again)
                try server.robot(bob).send("The answer you were waiting for", in: again)
                return again
            }
            try #require(again == conversation, "the same conversation id, numbered afresh")
            let headAtRestart = server.lastSequence(of: conversation)

            let problem = try await recorder.first("the problem said") {
                if case .error(let error) = $0.kind { return error.message.contains("has forgotten the events of \(conversation)") }
                return false
            }
            try await recorder.first("the answer shown") { $0.addedMessage?.text == "The answer you were waiting for" }
            try await chat.send(text: "after 1")
            try await recorder.first("its echo") { $0.addedMessage?.text == "echo: after 1" }

            let stored = try await chat.storedMessages(before: nil, limit: .max)
            let audit = StoreAudit.compare(server: server.log(of: conversation, customer: alice), stored: stored)
            let statistics = await session.statistics
            print(
                "voximplant restart: \(deliveredBefore) events delivered before, \(headAtRestart) on the restarted server; "
                    + "problem: \(problem.kind); \(statistics.resynchronizations) resynchronization; store against the new server: \(audit)"
            )
            #expect(statistics.resynchronizations == 1)
            #expect(audit.isClean, "\(audit)")
            #expect(stored.map(\.text) == server.messages(in: conversation).map(\.text), "the store is the new server's history")
            #expect(recorder.events.contains { $0.kind == .historyCleared && $0.conversationID == id }, "the app was told to drop the old history")
        }
    }

    /// A new message pushed with a sequence already delivered and another server id: a server
    /// that numbers afresh, seen before any head.
    @Test func aKnownSequenceWithAnotherMessageIsAServerThatForgot() async throws {
        try await Self.withAlicesSession { session, recorder, server, alice, bob, conversation in
            let id = ConversationID(conversation)
            _ = try await session.conversation(id).send(text: "hello")
            try await recorder.first("the echo") { $0.addedMessage?.text == "echo: hello" }
            let greeting = try #require(server.messages(in: conversation).last)
            // The echo's sequence again, with a message the store does not have there.
            let frame = #"{"type":"event","eventType":"sendMessage","action":"sendMessage","initiator":"\#(bob)","conversation":"\#(conversation)","seq":\#(greeting.sequence),"timestamp":1700000000,"message":{"uuid":"afresh-\#(greeting.sequence)","conversation":"\#(conversation)","sequence":\#(greeting.sequence),"sender":"\#(bob)","text":"numbered afresh","payload":[],"timestamp":1700000000}}"#
            server.sendRawFrame(frame, to: alice)
            try await recorder.first("the problem said") {
                if case .error(let error) = $0.kind { return error.message.contains("not the one stored at #\(greeting.sequence)") }
                return false
            }
            try await recorder.first("the new message kept") { $0.addedMessage?.text == "numbered afresh" }
            let stored = try await session.conversation(id).storedMessages(before: nil, limit: .max)
            print("voximplant: a known sequence with another message → \(await session.statistics.resynchronizations) resynchronization; stored now \(stored.map(\.text))")
            #expect(stored.contains { $0.serverID == MessageID("afresh-\(greeting.sequence)") })
            #expect(await session.statistics.resynchronizations == 1)
            server.sendRawFrame(frame, to: alice)
            try await recorder.first("the same frame again") { _ in server.appliedFaults[.rawFrame] == 2 }
            #expect(await session.statistics.resynchronizations == 1, "the same message again is a duplicate, not another restart")
        }
    }
}
