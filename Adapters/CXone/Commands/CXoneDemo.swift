import Foundation
import Logging
import Switchboard
package import SwitchboardCommandKit
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardCXone
import CXoneEmulator

/// The CXone part of `switchboard demo`: the same app code as the in-memory part, on the
/// embedded emulator over real sockets, each session checked against the server's log.
package enum CXoneDemo {
    /// The demo's part for the registry entry.
    package static let script: DemoScript = { stage in [try await run(stage)] }

    /// The same app on the CXone emulator (multi-thread channel): a proactive welcome message, a
    /// new thread, the agent assigned from the queue, rich content, an inactivity pop-up answered,
    /// a dropped socket the client recovers without duplicates, and the agent closing the case.
    static func run(_ stage: DemoStage) async throws -> DemoOutcome {
        let (bus, events, configuration, narrate) = (stage.bus, stage.events, stage.configuration, stage.narrate)
        narrate("The same app on CXone: channel configuration over HTTP, then the event WebSocket of the embedded CXone emulator")
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: .multi))
        let agent = server.agent(firstName: "Bob", surname: "Agent")
        let store = InMemoryChatStore()
        let seed = stage.seed
        let desk: @Sendable () -> any AgentDesk = { CXoneDesk(server: server, agent: agent, colleague: server.agent(id: 5, firstName: "Carol", surname: "Lane")) }
        return try await stage.running(CXoneEmulator(server: server, logger: Logger.quiet), desk: desk) { endpoints in
            let backend = try await CXoneBackend.make(
                configuration: CXoneConfiguration(
                    environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                    brandID: server.configuration.brandID,
                    channelID: server.configuration.channelID,
                    customerID: "alice-cxone",
                    firstName: "Alice"
                )
            )
            let session = ChatSession(
                id: "alice-cxone",
                backend: backend,
                store: store,
                bus: bus,
                configuration: configuration,
                random: DemoStage.randomness(seed, for: "alice-cxone"),
                logger: Logger.quiet
            )
            return try await session.withRunning { session in
                try await session.resume()
                try await events.first("cxone connected") { $0.origin.session == session.id && $0.isConnected }

                narrate("A proactive welcome message fires; the new thread opens with it, filled in for Alice, and the server gets it (SendOutbound) before her first message")
                server.fireWelcomeMessage(toCustomer: "alice-cxone", bodyText: "Hi {{customer.firstName|there}}! Delivery is free this week.")
                try await events.first("the welcome message kept") {
                    if case .custom("cxone.FireProactiveAction", _) = $0.kind { return $0.origin.session == session.id } else { return false }
                }
                let chat = try await session.startConversation(ConversationDraft(kind: .thread, title: "Order #4711"))
                try await events.first("the welcome in the new thread") { $0.conversationID == chat.id && $0.addedMessage?.text.hasPrefix("Hi Alice!") == true }
                try await stage.confirmed(try await chat.send(text: "Hello, where is my order #4711?"), in: session.id)

                narrate("Bob is assigned from the queue, types and answers with quick replies")
                agent.assign(chat.id.rawValue)
                agent.typing(true, in: chat.id.rawValue)
                agent.send(
                    "Which day suits you?",
                    in: chat.id.rawValue,
                    content: [
                        "type": "QUICK_REPLIES",
                        "payload": [
                            "text": ["content": "It arrives between 12:00 and 16:00. Which day suits you?"],
                            "actions": [["type": "REPLY_BUTTON", "text": "Today", "postback": "1"], ["type": "REPLY_BUTTON", "text": "Tomorrow", "postback": "2"]],
                        ],
                    ]
                )
                try await events.first("Bob's quick replies") { $0.origin.session == session.id && $0.addedMessage?.text.contains("Which day") == true }
                try await stage.confirmed(try await chat.send(text: "Tomorrow"), in: session.id)
                agent.markRead(chat.id.rawValue)
                try await events.first("Bob read it") {
                    if case .readMarker = $0.kind { return $0.origin.session == session.id } else { return false }
                }

                narrate("Bob's workflow asks whether Alice is still there; the app answers the pop-up and the chat goes on")
                let popupID = agent.sendInactivityPopup(in: chat.id.rawValue, seconds: 60)
                let shown = try await events.first("the inactivity pop-up") {
                    if case .custom(CXoneInactivityPopup.eventName, _) = $0.kind { return $0.origin.session == session.id } else { return false }
                }
                guard case .custom(_, let payload) = shown.kind else { throw SwitchboardError(.protocolViolation, "no pop-up") }
                try await CXoneRequests(session: session).answer(try CXoneInactivityPopup(message: payload), refresh: true)

                narrate("The socket drops; the client reconnects, recovers the thread and adds nothing twice")
                server.inject(.closeSocket)
                try await events.waitUntil("reconnected") { recorded in
                    recorded.filter { $0.origin.session == session.id && $0.isConnected }.count >= 2
                }
                agent.send("Booked for tomorrow. Anything else?", in: chat.id.rawValue)
                try await events.first("the booking") { $0.addedMessage?.text.hasPrefix("Booked for tomorrow") == true }
                let assigned = try await chat.info().assignedAgent?.displayName ?? "nobody"
                narrate("Still assigned after the reconnect: \(assigned)")
                agent.close(chat.id.rawValue)
                try await events.first("closed") {
                    if case .conversationStateChanged(let state, _) = $0.kind { return $0.origin.session == session.id && state.isClosed } else { return false }
                }
                await session.close()
                try await stage.disconnectedByTheApp(session.id, "cxone disconnects")
                // The pop-up is a workflow's prompt, not a message of the thread.
                let truth = server.messages(inThread: chat.id.rawValue).filter { $0.id != popupID }.map { MessageID($0.id) }
                return (try await DemoStage.summarize(session, store: store, conversation: chat.id, truth: truth), truth.count)
            }
        }
    }
}
