package import ArgumentParser
package import CXoneEmulator
package import Foundation
package import Logging
package import Switchboard
package import SwitchboardCommandKit
package import SwitchboardCXone
package import SwitchboardEmulation

/// The CXone adapter's entry in the command-line tool's registry.
package enum CXoneCommands {
    package static let entry = AdapterEntry(
        name: "cxone", connect: ConnectCXone.self, emulate: EmulateCXone.self, rig: CXoneRig(), demo: CXoneDemo.script,
        gatewayExample: #"{"backend": "cxone", "url": "https://…/chat", "socket": "wss://…", "brand": 1386, "channel": …, "customer": …}"#
    ) { json throws(SwitchboardError) in
        let session = try GatewaySessionSetup.decode(json, as: GatewaySession.self, backend: "cxone")
        guard let socket = session.socket, let brand = session.brand, let channel = session.channel, let customer = session.customer else {
            throw SwitchboardError(.invalidArgument, "a cxone session needs socket, brand, channel and customer (\(session.url))")
        }
        let configured = session.conversation.map(ConversationID.init)
        return GatewaySessionSetup(
            account: GatewaySessionSetup.account(of: json),
            makeBackend: { _ in
                // Reads the channel's configuration first: a refused channel fails the session here.
                try await CXoneBackend.make(
                    configuration: CXoneConfiguration(
                        environment: CXoneEnvironment(chatURL: session.url, socketURL: socket), brandID: brand, channelID: channel, customerID: customer
                    )
                )
            },
            trafficConversation: { chatSession, events in
                if configured != nil { return try await GatewaySessionSetup.known(configured)(chatSession, events) }
                // The customer's thread: the stored one (a session taken over keeps writing
                // there, as the last process started it), or a new one once a link is up.
                if let stored = try await chatSession.conversations().first { return try await chatSession.conversation(stored.id) }
                for await event in events {
                    if case .connection(.connected, _) = event.kind { break }
                }
                return try await chatSession.startConversation(ConversationDraft(kind: .thread))
            }
        )
    }

    /// `{"backend": "cxone", "url": "https://…/chat", "socket": "wss://…", "brand": 1386,
    /// "channel": …, "customer": …}`. The customer is required: a session taken over must be the
    /// same customer.
    struct GatewaySession: Decodable {
        var url: String
        var socket: String?
        var brand: Int?
        var channel: String?
        var customer: String?
        var conversation: String?
    }
}

package struct ConnectCXone: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "cxone",
        abstract: "Connect to a CXone Digital First channel (or the emulator) as a customer."
    )

    @Option(name: .customLong("chat-url"), help: "The chat URL, such as http://127.0.0.1:8080/chat.") package var chatURL: String?
    @Option(name: .customLong("socket-url"), help: "The WebSocket URL, such as ws://127.0.0.1:8080/ws.") package var socketURL: String?
    @Option(help: "A region instead of the URLs: na1, eu1, au1, ca1, uk1 or jp1.") package var region: String?
    @Option(help: "The brand id.") package var brand: Int
    @Option(help: "The channel id.") package var channel: String
    @Option(help: "The customer id; a new customer without it.") package var customer: String?
    @OptionGroup package var options: ConnectOptions

    package func validate() throws {
        if let chatURL { try validateURL(chatURL, option: "--chat-url", schemes: ["http", "https"], allowsPlainText: options.allowPlainText) }
        if let socketURL { try validateURL(socketURL, option: "--socket-url", schemes: ["ws", "wss"], allowsPlainText: options.allowPlainText) }
    }

    package func run() async throws {
        let regions: [String: CXoneEnvironment] = ["na1": .na1, "eu1": .eu1, "au1": .au1, "ca1": .ca1, "uk1": .uk1, "jp1": .jp1]
        let resolved: CXoneEnvironment
        switch (region.map { $0.lowercased() }, chatURL, socketURL) {
        case (let region?, nil, nil):
            guard let environment = regions[region] else {
                throw ValidationError("--region is one of \(regions.keys.sorted().joined(separator: ", "))")
            }
            resolved = environment
        case (nil, let chatURL?, let socketURL?):
            resolved = CXoneEnvironment(chatURL: chatURL, socketURL: socketURL)
        default:
            throw ValidationError("give either --region, or both --chat-url and --socket-url")
        }
        let backend: CXoneBackend
        do {
            backend = try await CXoneBackend.make(
                configuration: CXoneConfiguration(environment: resolved, brandID: brand, channelID: channel, customerID: customer, allowsPlainText: options.allowPlainText)
            )
        } catch let error as SwitchboardError {
            // The channel's configuration is read before anything else: a wrong URL, an unknown
            // host or a refused channel ends here, in one line.
            try ConsoleRunner.Outcome.failed("error: cannot load the channel configuration from \(resolved.chatURL): \(error.message)").exit()
            return
        }
        var runner = try options.runner(backend: backend, target: resolved.socketURL)
        // A live-chat or multi-thread channel starts threads (a single-thread channel has its one).
        let lifecycle = backend.descriptor.capabilities.contains(.conversationLifecycle)
        runner.commands = Console.Commands(start: lifecycle ? .thread : nil, ending: lifecycle ? .close : nil)
        try await runner.run().exit()
    }
}

package struct EmulateCXone: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "cxone",
        abstract: "Run the CXone emulator; an agent robot takes every thread and answers."
    )

    @Option(help: "The channel mode: single, multi or live.") package var mode: String = "multi"
    @Option(help: "The brand id served; others are refused, as the real service refuses them.") package var brand: Int = CXoneServer.Configuration().brandID
    @Option(help: "The channel id served; others are refused.") package var channel: String = CXoneServer.Configuration().channelID
    @OptionGroup package var agent: AgentOptions

    package func run() async throws {
        guard let mode = CXoneServer.Mode(rawValue: mode) else {
            throw ValidationError("--mode is one of \(CXoneServer.Mode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let server = CXoneServer(configuration: CXoneServer.Configuration(brandID: brand, channelID: channel, mode: mode))
        let output = StandardOutput()
        let david = server.agent()
        server.autoReply(as: david, try agent.replies(output: output))
        let desk = CXoneDesk(server: server, agent: david, colleague: server.agent(id: 62_713_629, firstName: "Carol", surname: "Lane"))
        let (banner, robot) = (agent.banner, agent.robotAnswers ? "agent David takes every thread; " : "")
        try await agent.run(CXoneEmulator(server: server, logger: Logger(label: "cxone-emulator")), desk: desk, output: output) { endpoints in
            """
            CXone emulator at \(endpoints.chatURL) (brand \(server.configuration.brandID), channel \(server.configuration.channelID), mode \(mode.rawValue); other brands and channels are refused)
            \(robot)\(banner)
            connect with: swift run switchboard connect cxone --chat-url \(endpoints.chatURL) --socket-url \(endpoints.socketURL) --brand \(server.configuration.brandID) --channel \(server.configuration.channelID)
            """
        }
    }
}
