import SwitchboardCommandKit
import ArgumentParser
import Foundation
import Logging
import Switchboard
import SwitchboardCXone
import SwitchboardMatrix
import SwitchboardSQLite
import SwitchboardTestKit
import SwitchboardTransport
import SwitchboardVoximplant
import SwitchboardWebim

struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a real or emulated service: commands on stdin, normalized events on stdout.",
        subcommands: [ConnectVoximplant.self, ConnectWebim.self, ConnectCXone.self, ConnectMatrix.self]
    )
}

struct ConnectVoximplant: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "voximplant",
        abstract: "Connect to a Voximplant-style service (Docs/Protocols/voximplant-style.md)."
    )

    @Option(help: "The WebSocket URL, such as ws://127.0.0.1:8080/ws.") var url: String
    @Option(help: "The user id, user@application.account.") var user: String
    @Option(help: "The user's token.") var token: String
    @Flag(help: "Print events as JSON lines.") var jsonl = false
    @Flag(name: .customLong("allow-plain-text"), help: "Allow plain ws:// or http:// to a host that is not loopback (tokens and messages unencrypted).")
    var allowPlainText = false
    @OptionGroup var storage: StorageOptions
    @OptionGroup var policy: ConnectPolicyOptions

    func validate() throws {
        try validateURL(url, option: "--url", schemes: ["ws", "wss"], allowsPlainText: allowPlainText)
    }

    func run() async throws {
        let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token, allowsPlainText: allowPlainText), logger: .quiet)
        var runner = ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, me: ParticipantID(user), target: url, retry: policy.retry)
        runner.storePath = storage.store
        runner.commands = Console.Commands(start: .group, ending: .leave) { session, id in
            try await VoximplantRequests(session: session).joinConversation(ConversationID(id)).id
        }
        try await runner.run().exit()
    }
}

struct ConnectWebim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webim",
        abstract: "Connect to a Webim account (or the emulator) as a visitor."
    )

    @Option(help: "The account name (demo → https://demo.webim.ru) or a full URL such as http://127.0.0.1:8080.") var url: String
    @Option(help: "The location.") var location: String = "mobile"
    @Option(name: .customLong("visitor-fields"), help: "Identified visitor JSON, {\"fields\":{\"id\":…}}; anonymous without it.")
    var visitorFields: String?
    @Flag(help: "Offline appeals (Mobile SDK 2.3): each appeal is a conversation; /appeal TEXT writes a new one, answers come on polls.")
    var offline = false
    @Option(name: .customLong("user-token"), help: "With --offline: the user's stable token, which finds the same appeals from any device.")
    var userToken: String?
    @Option(name: .customLong("poll-interval"), help: "With --offline: seconds between polls for answers.") var pollInterval: Int = 30
    @Flag(help: "Print events as JSON lines.") var jsonl = false
    @Flag(name: .customLong("allow-plain-text"), help: "Allow plain ws:// or http:// to a host that is not loopback (tokens and messages unencrypted).")
    var allowPlainText = false
    @OptionGroup var storage: StorageOptions
    @OptionGroup var policy: ConnectPolicyOptions

    func validate() throws {
        if url.contains("://") { try validateURL(url, option: "--url", schemes: ["http", "https"], allowsPlainText: allowPlainText) }
        do {
            try WebimConfiguration(accountName: "check", visitorFieldsJSON: visitorFields).validate()
        } catch let error as SwitchboardError {
            throw ValidationError("--visitor-fields: \(error.message.replacingOccurrences(of: "invalidVisitorFields: ", with: ""))")
        }
        if offline && userToken == nil { throw ValidationError("--offline needs --user-token") }
        if !offline && userToken != nil { throw ValidationError("--user-token is for --offline") }
        if pollInterval < 1 { throw ValidationError("--poll-interval is at least 1 second") }
    }

    func run() async throws {
        if offline, let userToken {
            let backend = try WebimAppealsBackend(
                configuration: WebimAppealsConfiguration(
                    accountName: url, location: location, userToken: userToken, visitorFieldsJSON: visitorFields, allowsPlainText: allowPlainText
                )
            )
            var configuration = SessionConfiguration()
            configuration.pollInterval = .seconds(pollInterval)
            var runner = ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, configuration: configuration, target: url, retry: policy.retry)
            runner.storePath = storage.store
            runner.commands = Console.Commands(start: .appeal)
            try await runner.run().exit()
            return
        }
        let backend = try WebimBackend(configuration: WebimConfiguration(accountName: url, location: location, visitorFieldsJSON: visitorFields, allowsPlainText: allowPlainText))
        // The visitor's one chat starts with its first message; the operator or the service ends
        // it (Mobile SDK 4.0 has no close).
        var runner = ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, target: url, retry: policy.retry)
        runner.storePath = storage.store
        try await runner.run().exit()
    }
}

struct ConnectCXone: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cxone",
        abstract: "Connect to a CXone Digital First channel (or the emulator) as a customer."
    )

    @Option(name: .customLong("chat-url"), help: "The chat URL, such as http://127.0.0.1:8080/chat.") var chatURL: String?
    @Option(name: .customLong("socket-url"), help: "The WebSocket URL, such as ws://127.0.0.1:8080/ws.") var socketURL: String?
    @Option(help: "A region instead of the URLs: na1, eu1, au1, ca1, uk1 or jp1.") var region: String?
    @Option(help: "The brand id.") var brand: Int
    @Option(help: "The channel id.") var channel: String
    @Option(help: "The customer id; a new customer without it.") var customer: String?
    @Flag(help: "Print events as JSON lines.") var jsonl = false
    @Flag(name: .customLong("allow-plain-text"), help: "Allow plain ws:// or http:// to a host that is not loopback (tokens and messages unencrypted).")
    var allowPlainText = false
    @OptionGroup var storage: StorageOptions
    @OptionGroup var policy: ConnectPolicyOptions

    func validate() throws {
        if let chatURL { try validateURL(chatURL, option: "--chat-url", schemes: ["http", "https"], allowsPlainText: allowPlainText) }
        if let socketURL { try validateURL(socketURL, option: "--socket-url", schemes: ["ws", "wss"], allowsPlainText: allowPlainText) }
    }

    func run() async throws {
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
                configuration: CXoneConfiguration(environment: resolved, brandID: brand, channelID: channel, customerID: customer, allowsPlainText: allowPlainText)
            )
        } catch let error as SwitchboardError {
            // The channel's configuration is read before anything else: a wrong URL, an unknown
            // host or a refused channel ends here, in one line.
            try ConsoleRunner.Outcome.failed("error: cannot load the channel configuration from \(resolved.chatURL): \(error.message)").exit()
            return
        }
        var runner = ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, target: resolved.socketURL, retry: policy.retry)
        runner.storePath = storage.store
        // A live-chat or multi-thread channel starts threads (a single-thread channel has its one).
        let lifecycle = backend.descriptor.capabilities.contains(.conversationLifecycle)
        runner.commands = Console.Commands(start: lifecycle ? .thread : nil, ending: lifecycle ? .close : nil)
        try await runner.run().exit()
    }
}

struct ConnectMatrix: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "matrix",
        abstract: "Connect to a Matrix homeserver (Synapse, or any other) as a user: joined rooms are conversations."
    )

    @Option(help: "The homeserver's base URL, such as https://matrix.example.org or http://127.0.0.1:8008.") var homeserver: String
    @Option(help: "The user: a local part (alice) or a user id (@alice:example.org).") var user: String?
    @Option(help: "The user's password (a login whose token is kept with --store).") var password: String?
    @Option(help: "An access token instead of a password.") var token: String?
    @Option(name: .customLong("device-id"), help: "The device to log in as; keep it stable with --store.") var deviceID: String?
    @Flag(help: "Print events as JSON lines.") var jsonl = false
    @Flag(name: .customLong("allow-plain-text"), help: "Allow plain http:// to a host that is not loopback (tokens and messages unencrypted).")
    var allowPlainText = false
    @OptionGroup var storage: StorageOptions
    @OptionGroup var policy: ConnectPolicyOptions

    func validate() throws {
        try validateURL(homeserver, option: "--homeserver", schemes: ["http", "https"], allowsPlainText: allowPlainText)
        switch (password, token) {
        case (_?, _?): throw ValidationError("give either --password or --token, not both")
        case (_?, nil): if user == nil { throw ValidationError("--password needs --user") }
        case (nil, nil): throw ValidationError("give --user with --password, or --token")
        case (nil, _?): break
        }
    }

    func run() async throws {
        let login: MatrixConfiguration.Login
        if let token { login = .accessToken(token) } else { login = .password(user: user ?? "", password: password ?? "") }
        let backend = try MatrixBackend(
            configuration: MatrixConfiguration(homeserver: homeserver, login: login, deviceID: deviceID, allowsPlainText: allowPlainText)
        )
        // Messages of the logged-in user are `"mine": true` in JSON lines when the user id is given.
        let me = user.flatMap { $0.hasPrefix("@") ? ParticipantID($0) : nil }
        var runner = ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, me: me, target: homeserver, retry: policy.retry)
        runner.storePath = storage.store
        runner.commands = Console.Commands(start: .group, ending: .leave) { session, room in try await MatrixRequests(session: session).join(room) }
        try await runner.run().exit()
    }
}

