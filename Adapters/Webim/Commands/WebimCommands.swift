package import ArgumentParser
package import Foundation
package import Logging
package import Switchboard
package import SwitchboardCommandKit
package import SwitchboardEmulation
package import SwitchboardWebim
package import WebimEmulator

/// The Webim adapter's entry in the command-line tool's registry (the online chat; `connect
/// webim --offline` runs the offline appeals).
package enum WebimCommands {
    package static let entry = AdapterEntry(
        name: "webim", connect: ConnectWebim.self, emulate: EmulateWebim.self, rig: WebimRig(), demo: WebimDemo.script,
        gatewayExample: #"{"backend": "webim", "url": "http://…", "visitor": "{\"fields\":{\"id\":…}}", "name": …}"#
    ) { json throws(SwitchboardError) in
        let session = try GatewaySessionSetup.decode(json, as: GatewaySession.self, backend: "webim")
        return GatewaySessionSetup(
            account: GatewaySessionSetup.account(of: json),
            makeBackend: { _ in try WebimBackend(configuration: WebimConfiguration(accountName: session.url, visitorFieldsJSON: session.visitor)) },
            // The visitor's one chat.
            trafficConversation: GatewaySessionSetup.known(session.conversation.map(ConversationID.init) ?? WebimBackend.conversationID)
        )
    }

    /// `{"backend": "webim", "url": "http://…", "visitor": "{\"fields\":{\"id\":…}}", "name": …}`.
    struct GatewaySession: Decodable {
        var url: String
        var visitor: String?
        var conversation: String?
    }
}

package struct ConnectWebim: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "webim",
        abstract: "Connect to a Webim account (or the emulator) as a visitor."
    )

    @Option(help: "The account name (demo → https://demo.webim.ru) or a full URL such as http://127.0.0.1:8080.") package var url: String
    @Option(help: "The location.") package var location: String = "mobile"
    @Option(name: .customLong("visitor-fields"), help: "Identified visitor JSON, {\"fields\":{\"id\":…}}; anonymous without it.")
    package var visitorFields: String?
    @Flag(help: "Offline appeals (Mobile SDK 2.3): each appeal is a conversation; /appeal TEXT writes a new one, answers come on polls.")
    package var offline = false
    @Option(name: .customLong("user-token"), help: "With --offline: the user's stable token, which finds the same appeals from any device.")
    package var userToken: String?
    @Option(name: .customLong("poll-interval"), help: "With --offline: seconds between polls for answers.") package var pollInterval: Int = 30
    @OptionGroup package var options: ConnectOptions

    package func validate() throws {
        if url.contains("://") { try validateURL(url, option: "--url", schemes: ["http", "https"], allowsPlainText: options.allowPlainText) }
        do {
            try WebimConfiguration(accountName: "check", visitorFieldsJSON: visitorFields).validate()
        } catch let error as SwitchboardError {
            throw ValidationError("--visitor-fields: \(error.message.replacingOccurrences(of: "invalidVisitorFields: ", with: ""))")
        }
        if offline && userToken == nil { throw ValidationError("--offline needs --user-token") }
        if !offline && userToken != nil { throw ValidationError("--user-token is for --offline") }
        if pollInterval < 1 { throw ValidationError("--poll-interval is at least 1 second") }
    }

    package func run() async throws {
        if offline, let userToken {
            let backend = try WebimAppealsBackend(
                configuration: WebimAppealsConfiguration(
                    accountName: url, location: location, userToken: userToken, visitorFieldsJSON: visitorFields, allowsPlainText: options.allowPlainText
                )
            )
            var configuration = SessionConfiguration()
            configuration.pollInterval = .seconds(pollInterval)
            var runner = try options.runner(backend: backend, target: url, configuration: configuration)
            runner.commands = Console.Commands(start: .appeal)
            try await runner.run().exit()
            return
        }
        let backend = try WebimBackend(configuration: WebimConfiguration(accountName: url, location: location, visitorFieldsJSON: visitorFields, allowsPlainText: options.allowPlainText))
        // The visitor's one chat starts with its first message; the operator or the service ends
        // it (Mobile SDK 4.0 has no close).
        let runner = try options.runner(backend: backend, target: url)
        try await runner.run().exit()
    }
}

package struct EmulateWebim: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "webim",
        abstract: "Run the Webim emulator; an operator robot takes every chat and answers."
    )

    @Option(help: "How long a delta long-poll is held, in seconds.") package var hold: Int = 20
    @Option(name: .customLong("appeal-delay"), help: "Seconds before the robot answers an offline appeal.") package var appealDelay: Int = 10
    @OptionGroup package var agent: AgentOptions

    package func run() async throws {
        let server = WebimServer(configuration: WebimServer.Configuration(deltaHold: .seconds(hold)))
        let output = StandardOutput()
        let bob = server.robot(id: 7, name: "Bob")
        server.autoReply(as: bob, try agent.replies(output: output))
        server.answerAppealsLater(as: server.robot(id: 8, name: "Olga (robot)"), after: .seconds(appealDelay)) { text in "About your appeal: \(text)" }
        let desk = WebimDesk(server: server, agent: bob, colleague: server.robot(id: 9, name: "Carol"))
        let (appealDelay, banner, robot) = (self.appealDelay, agent.banner, agent.robotAnswers ? "operator Bob takes every chat; " : "")
        try await agent.run(WebimEmulator(server: server, logger: Logger(label: "webim-emulator")), desk: desk, output: output) { url in
            """
            Webim emulator at \(url) (location mobile)
            \(robot)\(banner)
            connect with: swift run switchboard connect webim --url \(url) --visitor-fields '{"fields":{"id":"alice","display_name":"Alice"}}'
            offline appeals (answered after \(appealDelay) s): swift run switchboard connect webim --url \(url) --offline --user-token alice-token
            """
        }
    }
}
