import Foundation
import Logging
import Switchboard
package import SwitchboardCommandKit
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardVoximplant
import VoximplantEmulator

/// The Voximplant part of `switchboard demo`: the same app code as the in-memory part, on the
/// embedded emulator over real sockets, each session checked against the server's log.
package enum VoximplantDemo {
    /// The demo's part for the registry entry.
    package static let script: DemoScript = { stage in [try await run(stage)] }

    /// The same app on the Voximplant-style emulator: a real WebSocket on 127.0.0.1, sequences,
    /// a dropped-event gap filled by retransmit, and a catch-up after going offline.
    static func run(_ stage: DemoStage) async throws -> DemoOutcome {
        let (bus, events, configuration, narrate) = (stage.bus, stage.events, stage.configuration, stage.narrate)
        narrate("The same app on a Voximplant-style service: a WebSocket to the embedded emulator")
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "alice-token", displayName: "Alice")
        let bobID = server.addUser("bob", token: "bob-token", displayName: "Bob")
        let bob = server.robot(bobID)
        // Bob opens the conversation before Alice connects: the console (`demo --console`) shows it.
        let id = try bob.createConversation(title: "Order #4711", with: [alice])
        let store = InMemoryChatStore()
        let seed = stage.seed
        let desk: @Sendable () -> any AgentDesk = { VoximplantDesk(server: server, agent: bobID, customer: alice, conversation: id) }
        return try await stage.running(VoximplantEmulator(server: server, logger: Logger.quiet), desk: desk) { url in
            let session = ChatSession(
                id: "alice-messenger",
                backend: VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: alice, token: "alice-token"), logger: Logger.quiet),
                store: store,
                bus: bus,
                configuration: configuration,
                random: DemoStage.randomness(seed, for: "alice-messenger"),
                logger: Logger.quiet
            )
            try await session.withRunning { session in
                try await session.resume()
                try await events.first("the messenger connects") { $0.isConnected && $0.origin.session == session.id }
                try await events.first("the conversation appears") {
                    $0.origin.session == session.id && $0.conversationID == ConversationID(id) && $0.kind.category == .conversation
                }
                try bob.typing(in: id)
                try bob.send("Hello Alice, Bob from the shop here.", in: id)
                try await events.first("Bob's hello") { $0.addedMessage?.text.hasPrefix("Hello Alice") == true }
                let chat = try await session.conversation(ConversationID(id))
                try await chat.userTyping(draft: nil)
                try await stage.confirmed(try await chat.send(text: "Hi Bob! Where is order #4711?"), in: session.id)
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
                try await stage.disconnectedByTheApp(session.id, "offline")
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
            }
            let truth = server.messages(in: id).map { MessageID($0.uuid) }
            return (try await DemoStage.summarize(session, store: store, conversation: ConversationID(id), truth: truth), truth.count)
        }
    }
}
