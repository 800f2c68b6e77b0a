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
///
/// The exit policy: a fatal error ends the run with one line; so does a first connection that
/// fails (a wrong URL, an unreachable server, a TLS failure, refused credentials) unless `retry`
/// keeps trying as an app would. Once connected, drops are reconnected and shown as events.
struct ConsoleRunner: Sendable {
    let backend: any ChatBackend
    let store: any ChatStore
    let jsonl: Bool
    var configuration = SessionConfiguration()
    /// The logged-in user, where the backend's peers share one role.
    var me: ParticipantID?
    /// What the session connects to, for the line that says it could not.
    var target: String
    var retry = false
    var progress = ProgressReporter.standardError
    /// How long commands wait for the first connection before they run anyway.
    var firstConnectionWait: Duration = .seconds(10)
    /// How long after the first connection a command that needs a conversation waits for one
    /// to arrive (a Webim chat comes just after the link opens): a message typed or piped right
    /// away then goes to it instead of finding no conversation.
    var firstConversationWait: Duration = .seconds(3)
    /// How long the end of input waits for messages still on their way to be confirmed.
    var drainWait: Duration = .seconds(10)
    /// How conversations start and end on this backend, and whether `/join` is offered.
    var commands = Console.Commands()
    /// The SQLite file the session is kept in, if any: what the outbox still holds at the end is
    /// sent from it on the next run.
    var storePath: String?

    /// How a run ended.
    enum Outcome: Sendable, Equatable {
        /// The input ended or asked to quit.
        case ended
        /// One line to print on standard error; the command exits with status 1.
        case failed(String)
    }

    func run(
        lines: AsyncStream<String> = StandardInput.lines(),
        output: @escaping @Sendable (String) -> Void = { StandardOutput().write($0) },
        replies: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    ) async throws -> Outcome {
        let session = ChatSession(backend: backend, store: store, configuration: configuration, logger: .quiet)
        let formatter = EventFormatter(format: jsonl ? .jsonLines : .timeline, start: Date(), me: me)
        let console = Console(session: session, commands: commands, me: me, progress: progress, conversationWait: firstConversationWait)
        let events = session.events(filter: .all, buffering: .unbounded)
        let firstConnection = session.events(filter: .all, buffering: .unbounded)
        let (target, retry, progress) = (self.target, self.retry, self.progress)
        let (wait, drainWait) = (firstConnectionWait, self.drainWait)
        let kept = storePath
        return try await session.withRunning { session in
            try await session.resume()
            if !jsonl { output(await console.help) }
            return await withTaskGroup(of: Outcome?.self) { group in
                group.addTask {
                    var formatter = formatter
                    var connected = false
                    var catchUp = CatchUpProgress()
                    for await event in events {
                        if let line = formatter.line(for: event, receivedAt: Date()) { output(line) }
                        if let line = catchUp.observe(event) { progress.report(line) }
                        switch event.kind {
                        case .connection(.connected, _):
                            connected = true
                        case .connection(.waitingToReconnect, .connectionLost(let error)?) where !connected && !retry:
                            return .failed(Self.firstConnectionFailure(error, target: target))
                        case .fatal(let error):
                            return .failed("error: \(error.message)")
                        default:
                            continue
                        }
                    }
                    return nil
                }
                group.addTask {
                    // Commands typed (or piped) before the first connection wait for it: a start
                    // or a send right away then goes through instead of failing as not connected.
                    if await Self.waitForFirstConnection(firstConnection, wait: wait) { await console.linkConnected() }
                    var quit = false
                    for await line in lines {
                        guard let reply = await console.handle(line) else {
                            quit = true
                            break
                        }
                        for text in reply { replies(text) }
                        if await session.isClosed { break }
                    }
                    // The input ended: what was queued gets its chance to be confirmed, and a
                    // console that could not send says so in its exit status.
                    if !quit { await Self.drain(session, wait: drainWait) }
                    let unsent = await console.unsent
                    let pending = await session.isClosed ? [] : await session.pendingSends
                    if !unsent.isEmpty {
                        return .failed("error: \(unsent.count) message\(unsent.count == 1 ? "" : "s") not sent (see the lines above)")
                    }
                    if !pending.isEmpty {
                        return .failed("error: \(pending.count) message\(pending.count == 1 ? "" : "s") not confirmed by the server when the input ended\(kept.map { "; kept in \($0), sent on the next run" } ?? "")")
                    }
                    return .ended
                }
                var outcome = Outcome.ended
                for await finished in group {
                    guard let finished else { continue }
                    outcome = finished
                    break
                }
                events.finish()
                group.cancelAll()
                return outcome
            }
        }
    }

    /// Waits for the first connection (at most `wait`); whether it came.
    private static func waitForFirstConnection(_ events: EventStream, wait: Duration) async -> Bool {
        await firstEvent(in: events, within: wait) { kind in
            switch kind {
            case .connection(.connected, _): return true
            case .fatal: return false
            default: return nil
            }
        } == true
    }

    /// The verdict of the first event of `events` that `verdict` has one for, or `nil` when
    /// `limit` passes first; `events` is finished either way.
    static func firstEvent(in events: EventStream, within limit: Duration, _ verdict: @escaping @Sendable (ChatEvent.Kind) -> Bool?) async -> Bool? {
        defer { events.finish() }
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                for await event in events {
                    if let found = verdict(event.kind) { return found }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Waits (at most `wait`) until the outbox holds nothing on its way.
    private static func drain(_ session: ChatSession, wait: Duration) async {
        let events = session.events(filter: .all, buffering: .unbounded)
        await withTaskGroup(of: Void.self) { draining in
            draining.addTask {
                if await session.pendingSends.isEmpty { return }
                for await _ in events {
                    if await session.pendingSends.isEmpty { return }
                }
            }
            draining.addTask { try? await Task.sleep(for: wait) }
            await draining.next()
            draining.cancelAll()
        }
        events.finish()
    }

    /// One line for a first connection that failed: what was tried and why, never a stack trace.
    static func firstConnectionFailure(_ error: SwitchboardError, target: String) -> String {
        let reason: String
        switch error.code {
        case .authenticationFailed: reason = "the server refused the credentials (\(error.message))"
        case .timedOut: reason = "no answer in time"
        default: reason = error.message
        }
        return "error: cannot connect to \(target): \(reason) (--retry keeps trying)"
    }
}

/// How `connect` handles a first connection that fails.
struct ConnectPolicyOptions: ParsableArguments {
    @Flag(help: "Keep retrying when the first connection fails, as an app would, instead of exiting with the reason.")
    var retry = false
}

extension ConsoleRunner.Outcome {
    /// Ends the command: prints the failure's line and exits with status 1.
    func exit() throws {
        guard case .failed(let line) = self else { return }
        FileHandle.standardError.write(Data((line + "\n").utf8))
        throw ExitCode.failure
    }
}

/// Checks a URL option before anything connects: a scheme from `schemes`, a host, and plain
/// text only to loopback unless `--allow-plain-text` is given.
func validateURL(_ text: String, option: String, schemes: [String], allowsPlainText: Bool = false) throws {
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), schemes.contains(scheme), url.host?.isEmpty == false else {
        throw ValidationError("\(option) is not a \(schemes.map { "\($0)://" }.joined(separator: " or ")) URL with a host: \(text)")
    }
    do {
        try PlainTextPolicy.check(text, allowed: allowsPlainText)
    } catch {
        let secure = scheme == "ws" ? "wss" : "https"
        throw ValidationError(
            "\(option) \(text) is plain \(scheme):// to a host that is not loopback (tokens and messages would travel unencrypted): use \(secure)://, or add --allow-plain-text"
        )
    }
}
