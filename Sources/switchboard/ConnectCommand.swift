import ArgumentParser
import Foundation
import Logging
import Switchboard
import SwitchboardCXone
import SwitchboardSQLite
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim

struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a real or emulated service: commands on stdin, normalized events on stdout.",
        subcommands: [ConnectVoximplant.self, ConnectWebim.self, ConnectCXone.self]
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

    func run() async throws {
        let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token, allowsPlainText: allowPlainText), logger: .quiet)
        try await ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, me: ParticipantID(user)).run()
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

    func validate() throws {
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
            try await ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl, configuration: configuration).run()
            return
        }
        let backend = try WebimBackend(configuration: WebimConfiguration(accountName: url, location: location, visitorFieldsJSON: visitorFields, allowsPlainText: allowPlainText))
        try await ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl).run()
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
        let backend = try await CXoneBackend.make(
            configuration: CXoneConfiguration(environment: resolved, brandID: brand, channelID: channel, customerID: customer, allowsPlainText: allowPlainText)
        )
        try await ConsoleRunner(backend: backend, store: try storage.makeStore(), jsonl: jsonl).run()
    }
}

/// Where a `connect` session keeps its state.
struct StorageOptions: ParsableArguments {
    @Option(help: "Keep the session in this SQLite file: history, the outbox and the credentials (the same visitor or customer next time) survive between runs. In memory without it.")
    var store: String?

    func makeStore() throws -> any ChatStore {
        guard let store else { return InMemoryChatStore() }
        return try SQLiteChatStore(path: store)
    }
}

/// Runs a session with a console on stdin and the event timeline on stdout.
struct ConsoleRunner: Sendable {
    let backend: any ChatBackend
    let store: any ChatStore
    let jsonl: Bool
    var configuration = SessionConfiguration()
    /// The logged-in user, where the backend's peers share one role.
    var me: ParticipantID?

    func run() async throws {
        let output = StandardOutput()
        let session = ChatSession(backend: backend, store: store, configuration: configuration, logger: .quiet)
        let formatter = EventFormatter(format: jsonl ? .jsonLines : .timeline, start: Date(), me: me)
        let console = Console(session: session)
        let events = session.events(filter: .all, buffering: .unbounded)
        let firstConnection = session.events(filter: .all, buffering: .unbounded)
        try await session.withRunning { session in
            try await session.resume()
            if !jsonl { output.write(Console.help) }
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in events {
                        output.write(formatter.line(for: event, receivedAt: Date()))
                        if case .fatal = event.kind { return }
                    }
                }
                // Commands typed (or piped) before the first connection wait for it, up to 10 s:
                // a start or a send right away then goes through instead of failing as not connected.
                await withTaskGroup(of: Void.self) { wait in
                    wait.addTask {
                        for await event in firstConnection {
                            switch event.kind {
                            case .connection(.connected, _), .fatal: return
                            default: continue
                            }
                        }
                    }
                    wait.addTask { try? await Task.sleep(for: .seconds(10)) }
                    await wait.next()
                    wait.cancelAll()
                }
                firstConnection.finish()
                for await line in StandardInput.lines() {
                    guard let reply = await console.handle(line) else { break }
                    for text in reply { FileHandle.standardError.write(Data((text + "\n").utf8)) }
                    if await session.isClosed { break }
                }
                events.finish()
            }
        }
    }
}
