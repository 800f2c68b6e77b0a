public import Foundation
public import Logging
public import Switchboard
public import SwitchboardPostgres

/// One session a gateway runs: a backend and an account. Its key — the backend and the account,
/// as its store scope names them — is what the processes of a fleet share out.
public struct GatewaySession: Sendable {
    /// The backend's name in the sessions file (`"voximplant"`, `"webim"`, …).
    public var backend: String
    /// The account its store scope names.
    public var account: String
    /// Makes the session's backend, each time a process takes the session.
    public var makeBackend: @Sendable (_ logger: Logger) async throws -> any ChatBackend
    /// What the session does once it runs, in the process that holds it: a bot answering, a
    /// load run's sends. It is cancelled when the process gives the session up; returning early
    /// does not end the session.
    public var onRunning: (@Sendable (_ session: ChatSession, _ events: EventStream) async throws -> Void)?

    public init(
        backend: String,
        account: String,
        makeBackend: @escaping @Sendable (_ logger: Logger) async throws -> any ChatBackend,
        onRunning: (@Sendable (_ session: ChatSession, _ events: EventStream) async throws -> Void)? = nil
    ) {
        self.backend = backend
        self.account = account
        self.makeBackend = makeBackend
        self.onRunning = onRunning
    }

    /// The session's key among the processes: `backend/account`.
    public var key: String { "\(backend)/\(account)" }

    /// Runs the session on the shared store until cancelled, with its events on `bus`.
    ///
    /// A fencing token is taken before the session reads the store: should this process lose the
    /// session without noticing (a partition), its writes are refused once another takes it.
    public func run(store: PostgresChatStore, bus: EventBus, logger: Logger) async throws {
        try await run(store: store, bus: bus, logger: logger, metrics: nil, fleet: nil)
    }

    /// What a gateway adds to a session it runs: its record in the fleet's directory, and the API's
    /// requests for it.
    struct Fleet: Sendable {
        var process: String
        var directory: GatewayDirectory
        var commands: GatewayCommands
    }

    func run(store: PostgresChatStore, bus: EventBus, logger: Logger, metrics: GatewayMetrics?, fleet: Fleet?) async throws {
        let session = ChatSession(id: SessionID(key), backend: try await makeBackend(logger), account: account, store: store, bus: bus, logger: logger)
        let events = session.events(filter: .all, buffering: .unbounded)
        try await store.takeOver(session.scope)
        defer { store.endTakeOver(session.scope) }
        let key = self.key
        try await fleet?.directory.record(key, scope: session.scope, process: fleet!.process)
        metrics?.started(key, session)
        do {
            try await session.withRunning { session in
                try await session.resume()
                // The session's life is its events': the requests stop with them.
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    if let fleet {
                        group.addTask {
                            await fleet.commands.serve(session, key: key)
                            return false
                        }
                    }
                    group.addTask {
                        if let onRunning { try await onRunning(session, events) }
                        // Runs until the process gives the session up.
                        for await _ in events {}
                        return true
                    }
                    while let ended = try await group.next(), !ended {}
                    group.cancelAll()
                }
            }
        } catch where Task.isCancelled {
            // Given up: what `onRunning` was doing ended with the session (a send refused as
            // `sessionClosed` stays in the outbox for whoever runs the session next).
        } catch {
            await metrics?.stopped(key)
            throw error
        }
        await metrics?.stopped(key)
    }
}

/// How a sessions file's entries of one backend are read.
public struct GatewaySessionKind: Sendable {
    /// The `"backend"` the entries name.
    public var name: String
    /// Reads one entry (its JSON object, with `"backend": name`).
    ///
    /// - Throws: a `SwitchboardError` saying what is wrong; the file's reader adds where.
    public var read: @Sendable (_ entry: JSONValue) throws -> GatewaySession

    public init(name: String, read: @escaping @Sendable (_ entry: JSONValue) throws -> GatewaySession) {
        self.name = name
        self.read = read
    }
}

/// A gateway's sessions file: a JSON array of objects, one per session, each with its
/// `"backend"` and what that backend takes.
///
/// A field's value may be `{"env": "NAME"}` instead of text: it is read from the environment
/// variable `NAME` when the file is read, so tokens and passwords need not be in the file.
public enum GatewaySessionsFile {
    /// Reads the file at `path`, with `{"env": …}` values from this process's environment.
    ///
    /// - Throws: `invalidArgument` naming the file, the line and place of the session, the field
    ///   where there is one, and what is wrong.
    public static func load(_ path: String, kinds: [GatewaySessionKind]) throws -> [GatewaySession] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw SwitchboardError(.invalidArgument, "cannot read \(path): \(error.localizedDescription)")
        }
        return try read(data, from: path, kinds: kinds)
    }

    /// Reads a file's contents; `path` names it in errors, and `environment` gives the values of
    /// `{"env": "NAME"}` fields.
    public static func read(
        _ data: Data,
        from path: String,
        kinds: [GatewaySessionKind],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> [GatewaySession] {
        // A byte-order mark (an editor's UTF-8 "with BOM") is not part of the JSON.
        let text = data.starts(with: [0xEF, 0xBB, 0xBF]) ? Data(data.dropFirst(3)) : data
        let entries: [JSONValue]
        do {
            guard let array = try JSONValue(parsing: text).arrayValue else { throw SwitchboardError(.invalidArgument, "not an array") }
            entries = array
        } catch {
            let message = SwitchboardError.classify(error).message
            // The parser says at which byte it stopped: say the line, as an editor shows it.
            if let match = message.firstMatch(of: /at byte (\d+)/), let offset = Int(match.1) {
                throw SwitchboardError(.invalidArgument, "\(path):\(line(at: offset, in: text)): not a JSON array of sessions: \(message)")
            }
            throw SwitchboardError(.invalidArgument, "\(path) is not a JSON array of sessions: \(message)")
        }
        let lines = entryLines(in: text)
        let names = kinds.map(\.name)
        let known = names.count > 1 ? names.dropLast().joined(separator: ", ") + " and " + names.last! : names.joined()
        var keys: [String: Int] = [:]
        return try entries.enumerated().map { index, raw in
            let place = "\(path):\(index < lines.count ? lines[index] : 1): session \(index + 1)"
            let entry = try resolvingEnvironment(raw, environment: environment, place: place)
            guard let backend = entry["backend"]?.stringValue else {
                throw SwitchboardError(.invalidArgument, "\(place) names no \"backend\"")
            }
            guard let kind = kinds.first(where: { $0.name == backend }) else {
                throw SwitchboardError(.invalidArgument, "\(place): gateway runs \(known) sessions; not \(backend)")
            }
            let session: GatewaySession
            do {
                session = try kind.read(entry)
            } catch {
                throw SwitchboardError(.invalidArgument, "\(place): \(SwitchboardError.classify(error).message)")
            }
            if let first = keys[session.key] {
                throw SwitchboardError(.invalidArgument, "\(place): \(session.key) is session \(first) already; each account runs once")
            }
            keys[session.key] = index + 1
            return session
        }
    }

    /// The entry with each `{"env": "NAME"}` field replaced by the variable's value.
    static func resolvingEnvironment(_ entry: JSONValue, environment: [String: String], place: String) throws -> JSONValue {
        guard var object = entry.objectValue else { return entry }
        for (field, value) in object {
            guard let reference = value.objectValue, reference.keys.contains("env") else { continue }
            guard reference.count == 1, let name = reference["env"]?.stringValue, !name.isEmpty else {
                throw SwitchboardError(.invalidArgument, "\(place): \"\(field)\" is {\"env\": \"NAME\"} with nothing else, the name of an environment variable")
            }
            guard let resolved = environment[name] else {
                throw SwitchboardError(.invalidArgument, "\(place): \"\(field)\" names the environment variable \(name), which is not set")
            }
            object[field] = .string(resolved)
        }
        return .object(object)
    }

    /// The line (from 1) of each element of the top-level array, where it starts.
    static func entryLines(in text: Data) -> [Int] {
        var lines: [Int] = []
        var line = 1, depth = 0
        var inString = false, escaped = false, atElement = false
        for byte in text {
            if byte == UInt8(ascii: "\n") { line += 1 }
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                if depth == 1, atElement { lines.append(line); atElement = false }
                depth += 1
                if depth == 1 { atElement = true }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 1 { atElement = true }
            default:
                if depth == 1, atElement { lines.append(line); atElement = false }
                if byte == UInt8(ascii: "\"") { inString = true }
            }
        }
        return lines
    }

    /// The line (from 1) of byte `offset`.
    static func line(at offset: Int, in text: Data) -> Int {
        1 + text.prefix(offset).count { $0 == UInt8(ascii: "\n") }
    }
}
