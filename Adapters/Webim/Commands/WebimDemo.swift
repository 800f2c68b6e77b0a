import Foundation
import Logging
import Switchboard
package import SwitchboardCommandKit
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardWebim
import WebimEmulator

/// The Webim part of `switchboard demo`: the same app code as the in-memory part, on the
/// embedded emulator over real sockets, each session checked against the server's log.
package enum WebimDemo {
    /// The demo's part for the registry entry: the online chat, then the offline appeals.
    package static let script: DemoScript = { stage in [try await runChat(stage), try await runAppeals(stage)] }

    /// The same app on the Webim emulator: HTTP long-poll, the chat state machine, a file upload,
    /// a rating, and a `reinit-required` the client handles without duplicates.
    static func runChat(_ stage: DemoStage) async throws -> DemoOutcome {
        let (bus, events, configuration, narrate) = (stage.bus, stage.events, stage.configuration, stage.narrate)
        narrate("The same app on Webim: the real mobile API (long-poll) against the embedded Webim emulator")
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(2)))
        let bob = server.robot(id: 7, name: "Bob")
        let visitor = "provided-alice"
        let store = InMemoryChatStore()
        let seed = stage.seed
        let receipt = FileManager.default.temporaryDirectory.appendingPathComponent("receipt-\(UUID().uuidString.prefix(8)).pdf")
        try Data("%PDF-1.4 receipt #4711".utf8).write(to: receipt)
        defer { try? FileManager.default.removeItem(at: receipt) }
        let desk: @Sendable () -> any AgentDesk = { WebimDesk(server: server, agent: bob, colleague: server.robot(id: 9, name: "Carol")) }
        return try await stage.running(WebimEmulator(server: server, logger: Logger.quiet), desk: desk) { url in
            let session = ChatSession(
                id: "alice-webim",
                backend: try WebimBackend(
                    configuration: WebimConfiguration(accountName: url, visitorFieldsJSON: #"{"fields":{"id":"alice","display_name":"Alice"}}"#)
                ),
                store: store,
                bus: bus,
                configuration: configuration,
                random: DemoStage.randomness(seed, for: "alice-webim"),
                logger: Logger.quiet
            )
            try await session.withRunning { session in
                try await session.resume()
                try await events.first("webim knows the chat") {
                    $0.origin.session == session.id && $0.conversationID == WebimBackend.conversationID && $0.kind.category == .conversation
                }
                let chat = try await session.conversation(WebimBackend.conversationID)
                try await stage.confirmed(try await chat.send(text: "Hello, I need help with order #4711."), in: session.id)

                narrate("Bob takes the chat (queue → chatting), types, answers; Alice sends a file")
                try bob.join(visitor: visitor)
                try bob.typing(true, visitor: visitor)
                try bob.send("Hi Alice, Bob here. Do you have the receipt?", to: visitor)
                try await events.first("Bob's answer") { $0.addedMessage?.text.hasPrefix("Hi Alice, Bob here") == true }
                try await stage.confirmed(
                    try await chat.send(MessageDraft(text: "", kind: .file, attachments: [Message.Attachment(name: receipt.lastPathComponent, mimeType: "application/pdf", url: receipt)])),
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
                try await stage.disconnectedByTheApp(session.id, "webim disconnects")
            }
            let truth = server.messages(ofVisitor: visitor).map { MessageID($0.id) }
            return (try await DemoStage.summarize(session, store: store, conversation: WebimBackend.conversationID, truth: truth), truth.count)
        }
    }


    /// Webim's offline appeals: no operator is online, so Alice writes an appeal; the operator
    /// answers later and the app's next poll (here a pull to refresh) brings the answer.
    static func runAppeals(_ stage: DemoStage) async throws -> DemoOutcome {
        let (bus, events, configuration, narrate) = (stage.bus, stage.events, stage.configuration, stage.narrate)
        narrate("Webim offline appeals: no operator online, Alice writes an appeal; the answer comes on a later poll")
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(2)))
        let olga = server.robot(id: 3, name: "Olga")
        let store = InMemoryChatStore()
        let seed = stage.seed
        return try await WebimEmulator(server: server, logger: Logger.quiet).withRunning { url in
            let session = ChatSession(
                id: "alice-appeals",
                backend: try WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: url, userToken: "alice-user-token")),
                store: store,
                bus: bus,
                configuration: configuration,
                random: DemoStage.randomness(seed, for: "alice-appeals"),
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
                try await stage.disconnectedByTheApp(session.id, "the appeals session disconnects")
                return appeal.id
            }
            let truth = server.appeals(ofVisitor: server.visitor(ofUserToken: "alice-user-token") ?? "").flatMap { appeal in
                server.appealMessages(ofVisitor: server.visitor(ofUserToken: "alice-user-token") ?? "", chatID: appeal.id).map { MessageID($0.id) }
            }
            return (try await DemoStage.summarize(session, store: store, conversation: appealID, truth: truth), truth.count)
        }
    }
}
