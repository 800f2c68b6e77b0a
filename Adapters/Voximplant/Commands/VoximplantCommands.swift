package import ArgumentParser
package import Foundation
package import Logging
package import Switchboard
package import SwitchboardCommandKit
package import SwitchboardEmulation
package import SwitchboardVoximplant
package import VoximplantEmulator

/// The Voximplant-style adapter's entry in the command-line tool's registry.
package enum VoximplantCommands {
    package static let entry = AdapterEntry(
        name: "voximplant", connect: ConnectVoximplant.self, emulate: EmulateVoximplant.self, rig: VoximplantRig(), demo: VoximplantDemo.script,
        gatewayExample: #"{"backend": "voximplant", "url": "ws://…", "user": …, "token": …, "conversation": …}"#
    ) { json throws(SwitchboardError) in
        let session = try GatewaySessionSetup.decode(json, as: GatewaySession.self, backend: "voximplant")
        guard let user = session.user, let token = session.token else {
            throw SwitchboardError(.invalidArgument, "a voximplant session needs user and token (\(session.url))")
        }
        return GatewaySessionSetup(
            account: GatewaySessionSetup.account(of: json),
            makeBackend: { logger in VoximplantBackend(configuration: VoximplantConfiguration(url: session.url, user: user, token: token), logger: logger) },
            trafficConversation: GatewaySessionSetup.known(session.conversation.map(ConversationID.init))
        )
    }

    /// `{"backend": "voximplant", "url": "ws://…", "user": …, "token": …, "conversation": …}`.
    struct GatewaySession: Decodable {
        var url: String
        var user: String?
        var token: String?
        var conversation: String?
    }
}

package struct ConnectVoximplant: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "voximplant",
        abstract: "Connect to a Voximplant-style service (Docs/Protocols/voximplant-style.md)."
    )

    @Option(help: "The WebSocket URL, such as ws://127.0.0.1:8080/ws.") package var url: String
    @Option(help: "The user id, user@application.account.") package var user: String
    @Option(help: "The user's token.") package var token: String
    @OptionGroup package var options: ConnectOptions

    package func validate() throws {
        try validateURL(url, option: "--url", schemes: ["ws", "wss"], allowsPlainText: options.allowPlainText)
    }

    package func run() async throws {
        let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token, allowsPlainText: options.allowPlainText), logger: .off)
        var runner = try options.runner(backend: backend, target: url, me: ParticipantID(user))
        runner.commands = Console.Commands(start: .group, ending: .leave) { session, id in
            try await VoximplantRequests(session: session).joinConversation(ConversationID(id)).id
        }
        try await runner.run().exit()
    }
}

package struct EmulateVoximplant: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "voximplant",
        abstract: "Run the Voximplant-style emulator with users alice and bob; bob is a robot that answers."
    )

    @OptionGroup package var agent: AgentOptions

    package func run() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "secret-a", displayName: "Alice")
        let bob = server.addUser("bob", token: "secret-b", displayName: "Bob (agent robot)")
        let carol = server.addUser("carol", token: "secret-c", displayName: "Carol")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        try server.robot(bob).send("Hi Alice, Bob here. What can I do for you?", in: conversation)
        let output = StandardOutput()
        let reply = try agent.replies(output: output)
        server.autoReply(as: bob) { _, text in reply(text) }
        let desk = VoximplantDesk(server: server, agent: bob, customer: alice, conversation: conversation, colleague: carol)
        let banner = agent.banner
        try await agent.run(VoximplantEmulator(server: server, logger: Logger(label: "voximplant-emulator")), desk: desk, output: output) { url in
            """
            Voximplant-style emulator at \(url)
            users: \(alice) / secret-a, \(bob) / secret-b (the agent), \(carol) / secret-c (the users of the spec's golden frames)
            conversation \(conversation) between alice and bob; \(banner)
            connect with: swift run switchboard connect voximplant --url \(url) --user \(alice) --token secret-a
            """
        }
    }
}
