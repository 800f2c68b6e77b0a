import SwitchboardCommandKit
import ArgumentParser
import Foundation
import CXoneEmulator
import Logging
import SwitchboardEmulation
import VoximplantEmulator
import WebimEmulator

struct EmulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulate",
        abstract: "Run a service emulator standalone on 127.0.0.1.",
        subcommands: [EmulateVoximplant.self, EmulateWebim.self, EmulateCXone.self]
    )
}

struct EmulateVoximplant: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "voximplant",
        abstract: "Run the Voximplant-style emulator with users alice and bob; bob is a robot that answers."
    )

    @Option(help: "The port to listen on (0 picks a free one).") var port: Int = 0
    @OptionGroup var agent: AgentOptions

    func validate() throws { try AgentOptions.validate(port: port) }

    func run() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "secret-a", displayName: "Alice")
        let bob = server.addUser("bob", token: "secret-b", displayName: "Bob (agent robot)")
        let carol = server.addUser("carol", token: "secret-c", displayName: "Carol")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        try server.robot(bob).send("Hi Alice, Bob here. What can I do for you?", in: conversation)
        let output = StandardOutput()
        let reply = try agent.replies(output: output)
        server.autoReply(as: bob) { _, text in reply(text) }
        let desk = VoximplantDesk(server: server, agent: bob, customer: alice, conversation: conversation)
        let port = self.port
        let banner = agent.banner
        try await agent.run(desk: desk, output: output) {
            try await VoximplantEmulator(server: server, logger: Logger(label: "voximplant-emulator")).run(port: port) { url in
                output.write(
                    """
                    Voximplant-style emulator at \(url)
                    users: \(alice) / secret-a, \(bob) / secret-b (the agent), \(carol) / secret-c (the users of the spec's golden frames)
                    conversation \(conversation) between alice and bob; \(banner)
                    connect with: swift run switchboard connect voximplant --url \(url) --user \(alice) --token secret-a
                    """
                )
            }
        }
    }
}

struct EmulateWebim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webim",
        abstract: "Run the Webim emulator; an operator robot takes every chat and answers."
    )

    @Option(help: "The port to listen on (0 picks a free one).") var port: Int = 0
    @Option(help: "How long a delta long-poll is held, in seconds.") var hold: Int = 20
    @Option(name: .customLong("appeal-delay"), help: "Seconds before the robot answers an offline appeal.") var appealDelay: Int = 10
    @OptionGroup var agent: AgentOptions

    func validate() throws { try AgentOptions.validate(port: port) }

    func run() async throws {
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(hold)))
        let output = StandardOutput()
        let bob = server.robot(id: 7, name: "Bob")
        server.autoReply(as: bob, try agent.replies(output: output))
        server.answerAppealsLater(as: server.robot(id: 8, name: "Olga (robot)"), after: .seconds(appealDelay)) { text in "About your appeal: \(text)" }
        let desk = WebimDesk(server: server, agent: bob, colleague: server.robot(id: 9, name: "Carol"))
        let (port, appealDelay, banner) = (self.port, self.appealDelay, agent.banner)
        try await agent.run(desk: desk, output: output) {
            try await WebimEmulator(server: server, logger: Logger(label: "webim-emulator")).run(port: port) { url in
                output.write(
                    """
                    Webim emulator at \(url) (location mobile)
                    operator Bob takes every chat; \(banner)
                    connect with: swift run switchboard connect webim --url \(url) --visitor-fields '{"fields":{"id":"alice","display_name":"Alice"}}'
                    offline appeals (answered after \(appealDelay) s): swift run switchboard connect webim --url \(url) --offline --user-token alice-token
                    """
                )
            }
        }
    }
}

struct EmulateCXone: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cxone",
        abstract: "Run the CXone emulator; an agent robot takes every thread and answers."
    )

    @Option(help: "The port to listen on (0 picks a free one).") var port: Int = 0
    @Option(help: "The channel mode: single, multi or live.") var mode: String = "multi"
    @Option(help: "The brand id served; others are refused, as the real service refuses them.") var brand: Int = CXoneServer.Configuration().brandID
    @Option(help: "The channel id served; others are refused.") var channel: String = CXoneServer.Configuration().channelID
    @OptionGroup var agent: AgentOptions

    func validate() throws { try AgentOptions.validate(port: port) }

    func run() async throws {
        guard let mode = CXoneServer.Mode(rawValue: mode) else {
            throw ValidationError("--mode is one of \(CXoneServer.Mode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let server = CXoneServer(configuration: CXoneServer.Configuration(brandID: brand, channelID: channel, mode: mode))
        let output = StandardOutput()
        let david = server.agent()
        server.autoReply(as: david, try agent.replies(output: output))
        let desk = CXoneDesk(server: server, agent: david, colleague: server.agent(id: 62_713_629, firstName: "Carol", surname: "Lane"))
        let (port, banner) = (self.port, agent.banner)
        try await agent.run(desk: desk, output: output) {
            try await CXoneEmulator(server: server, logger: Logger(label: "cxone-emulator")).run(port: port) { endpoints in
                output.write(
                    """
                    CXone emulator at \(endpoints.chatURL) (brand \(server.configuration.brandID), channel \(server.configuration.channelID), mode \(mode.rawValue); other brands and channels are refused)
                    agent David takes every thread; \(banner)
                    connect with: swift run switchboard connect cxone --chat-url \(endpoints.chatURL) --socket-url \(endpoints.socketURL) --brand \(server.configuration.brandID) --channel \(server.configuration.channelID)
                    """
                )
            }
        }
    }
}
