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

    func run() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "secret-a", displayName: "Alice")
        let bob = server.addUser("bob", token: "secret-b", displayName: "Bob (agent robot)")
        let carol = server.addUser("carol", token: "secret-c", displayName: "Carol")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        try server.robot(bob).send("Hi Alice, Bob here. What can I do for you?", in: conversation)
        server.autoReply(as: bob) { from, text in "Bob: got \"\(text)\" from \(from)" }
        let output = StandardOutput()
        try await VoximplantEmulator(server: server, logger: Logger(label: "voximplant-emulator")).run(port: port) { url in
            output.write(
                """
                Voximplant-style emulator at \(url)
                users: \(alice) / secret-a, \(bob) / secret-b (robot), \(carol) / secret-c (the users of the spec's golden frames)
                conversation \(conversation) between alice and bob
                connect with: swift run switchboard connect voximplant --url \(url) --user \(alice) --token secret-a
                """
            )
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

    func run() async throws {
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(hold)))
        server.autoReply(as: server.robot(id: 7, name: "Bob (robot)")) { text in "You wrote: \(text)" }
        server.answerAppealsLater(as: server.robot(id: 8, name: "Olga (robot)"), after: .seconds(appealDelay)) { text in "About your appeal: \(text)" }
        let output = StandardOutput()
        try await WebimEmulator(server: server, logger: Logger(label: "webim-emulator")).run(port: port) { url in
            output.write(
                """
                Webim emulator at \(url) (location mobile)
                an operator robot takes every chat and answers
                connect with: swift run switchboard connect webim --url \(url) --visitor-fields '{"fields":{"id":"alice","display_name":"Alice"}}'
                offline appeals (answered after \(appealDelay) s): swift run switchboard connect webim --url \(url) --offline --user-token alice-token
                """
            )
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

    func run() async throws {
        guard let mode = CXoneServer.Mode(rawValue: mode) else {
            throw ValidationError("--mode is one of \(CXoneServer.Mode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: mode))
        server.autoReply(as: server.agent()) { text in "You wrote: \(text)" }
        let output = StandardOutput()
        try await CXoneEmulator(server: server, logger: Logger(label: "cxone-emulator")).run(port: port) { endpoints in
            output.write(
                """
                CXone emulator at \(endpoints.chatURL) (brand \(server.configuration.brandID), channel \(server.configuration.channelID), mode \(mode.rawValue))
                an agent robot takes every thread and answers
                connect with: swift run switchboard connect cxone --chat-url \(endpoints.chatURL) --socket-url \(endpoints.socketURL) --brand \(server.configuration.brandID) --channel \(server.configuration.channelID)
                """
            )
        }
    }
}
