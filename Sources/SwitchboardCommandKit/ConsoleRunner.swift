package import ArgumentParser
package import Foundation
package import Logging
package import Switchboard
package import SwitchboardSQLite
package import SwitchboardTransport

/// Where a `connect` session keeps its state.
package struct StorageOptions: ParsableArguments {
    package init() {}

    @Option(help: "Keep the session in this SQLite file: history, the outbox and the credentials (the same visitor or customer next time) survive between runs. In memory without it.")
    package var store: String?

    package func makeStore() throws -> any ChatStore {
        guard let store else { return InMemoryChatStore() }
        return try SQLiteChatStore(path: store)
    }
}

/// Runs a session with a console on stdin and the event timeline on stdout.
///
/// The exit policy: a fatal error ends the run with one line; so does a first connection that
/// fails (a wrong URL, an unreachable server, a TLS failure, refused credentials) unless `retry`
/// keeps trying as an app would. Once connected, drops are reconnected and shown as events.
package struct ConsoleRunner: Sendable {
    package let backend: any ChatBackend
    package let store: any ChatStore
    package let jsonl: Bool
    package var configuration = SessionConfiguration()
    /// The logged-in user, where the backend's peers share one role.
    package var me: ParticipantID?
    /// What the session connects to, for the line that says it could not.
    package var target: String
    package var retry = false
    package var progress = ProgressReporter.standardError
    /// How long commands wait for the first connection before they run anyway.
    package var firstConnectionWait: Duration = .seconds(10)
    /// How long after the first connection a command that needs a conversation waits for one
    /// to arrive (a Webim chat comes just after the link opens): a message typed or piped right
    /// away then goes to it instead of finding no conversation.
    package var firstConversationWait: Duration = .seconds(3)
    /// How long the end of input waits for messages still on their way to be confirmed.
    package var drainWait: Duration = .seconds(10)
    /// How conversations start and end on this backend, and whether `/join` is offered.
    package var commands = Console.Commands()
    /// The SQLite file the session is kept in, if any: what the outbox still holds at the end is
    /// sent from it on the next run.
    package var storePath: String?

    package init(
        backend: any ChatBackend,
        store: any ChatStore,
        jsonl: Bool,
        configuration: SessionConfiguration = SessionConfiguration(),
        me: ParticipantID? = nil,
        target: String,
        retry: Bool = false,
        progress: ProgressReporter = .standardError
    ) {
        self.backend = backend
        self.store = store
        self.jsonl = jsonl
        self.configuration = configuration
        self.me = me
        self.target = target
        self.retry = retry
        self.progress = progress
    }

    /// How a run ended.
    package enum Outcome: Sendable, Equatable {
        /// The input ended or asked to quit.
        case ended
        /// One line to print on standard error; the command exits with status 1.
        case failed(String)
    }

    package func run(
        lines: AsyncStream<String> = StandardInput.lines(),
        output: @escaping @Sendable (String) -> Void = { StandardOutput().write($0) },
        replies: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    ) async throws -> Outcome {
        let session = ChatSession(backend: backend, store: store, configuration: configuration, logger: .off)
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
    package static func firstEvent(in events: EventStream, within limit: Duration, _ verdict: @escaping @Sendable (ChatEvent.Kind) -> Bool?) async -> Bool? {
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
    package static func firstConnectionFailure(_ error: SwitchboardError, target: String) -> String {
        let reason: String
        switch error.code {
        case .authenticationFailed: reason = "the server refused the credentials (\(error.message))"
        case .timedOut: reason = "no answer in time"
        default: reason = error.message
        }
        return "error: cannot connect to \(target): \(reason) (--retry keeps trying)"
    }
}

/// The options every `connect` command shares: the output, plain text, the store, the retry
/// policy; and the console runner they make.
package struct ConnectOptions: ParsableArguments {
    package init() {}

    @Flag(help: "Print events as JSON lines.") package var jsonl = false
    @Flag(name: .customLong("allow-plain-text"), help: "Allow plain ws:// or http:// to a host that is not loopback (tokens and messages unencrypted).")
    package var allowPlainText = false
    @OptionGroup package var storage: StorageOptions
    @OptionGroup package var policy: ConnectPolicyOptions

    /// A console runner for `backend` with these options: its store (kept in the SQLite file
    /// when one is given), its output, its retry policy.
    package func runner(
        backend: any ChatBackend,
        target: String,
        me: ParticipantID? = nil,
        configuration: SessionConfiguration = SessionConfiguration()
    ) throws -> ConsoleRunner {
        var runner = ConsoleRunner(
            backend: backend, store: try storage.makeStore(), jsonl: jsonl, configuration: configuration, me: me, target: target, retry: policy.retry
        )
        runner.storePath = storage.store
        return runner
    }
}

/// How `connect` handles a first connection that fails.
package struct ConnectPolicyOptions: ParsableArguments {
    package init() {}

    @Flag(help: "Keep retrying when the first connection fails, as an app would, instead of exiting with the reason.")
    package var retry = false
}

extension ConsoleRunner.Outcome {
    /// Ends the command: prints the failure's line and exits with status 1.
    package func exit() throws {
        guard case .failed(let line) = self else { return }
        FileHandle.standardError.write(Data((line + "\n").utf8))
        throw ExitCode.failure
    }
}

/// Checks a URL option before anything connects: a scheme from `schemes`, a host, and plain
/// text only to loopback unless `--allow-plain-text` is given.
package func validateURL(_ text: String, option: String, schemes: [String], allowsPlainText: Bool = false) throws {
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
