import Foundation
public import Hummingbird
public import HummingbirdWebSocket
public import Logging
@_spi(TestKit) public import Switchboard

/// An emulator with the agent console in the browser beside its own routes: `GET /agent?key=K`
/// serves the page, its script and style come from `/agent/console.js` and `/agent/console.css`,
/// `GET /agent/state?key=K` answers the desk's ``DeskSnapshot`` as JSON, and the page's
/// WebSocket, `/agent/ws?key=K`, pushes what changes and takes the agent's commands.
///
/// The key is the console's only credential: any site open in the developer's browser can reach
/// 127.0.0.1, so the page, the state and the socket refuse a request without it (the script and
/// style hold nothing).
///
/// The socket's protocol, JSON text frames:
/// - page → emulator: `{"id": 7, "do": "say", "conversation": "…", "text": "…"}`: `do` names a
///   ``DeskCommand`` (`say`, `accept`, `drop`, …); `text` for `say`; `on` (a boolean) for `typing`; `count` for `drop`
///   and `duplicate`; `ms` for `delay`; `move` for `move`; `name`, `type` and `data` (base64)
///   for `file`. `conversation` is optional.
/// - emulator → page: `{"type": "state", "desk": {…}, "log": […]}` when it opens and whenever
///   the emulator's model or the log changes; `{"type": "result", "id": 7, "ok": true,
///   "line": "…"}` for each command (`ok` false with the reason for one refused).
public struct AgentWebConsole<Base: HostedEmulator>: HostedEmulator {
    public struct Endpoints: Sendable {
        /// What the emulator's clients are told.
        public var emulator: Base.Endpoints
        /// The page, with its key.
        public var console: String
    }

    public let base: Base
    public let desk: any AgentDesk
    public let key: String
    let log: ConsoleLog
    let clock: SessionClock

    /// - Parameters:
    ///   - key: what the console's URL carries: a random string (``AgentConsoleKey/random(using:)``).
    ///   - clock: times the releases of `delay`.
    public init(_ base: Base, desk: any AgentDesk, key: String, clock: SessionClock = .continuous) {
        self.base = base
        self.desk = desk
        self.key = key
        self.log = ConsoleLog()
        self.clock = clock
    }

    public var logger: Logger { base.logger }

    public func endpoints(host: String, port: Int) -> Endpoints {
        Endpoints(emulator: base.endpoints(host: host, port: port), console: "http://\(host):\(port)/agent?key=\(key)")
    }

    /// The lines the log shows, newest last.
    public var logLines: [String] { log.lines }

    public func httpRouter() -> Router<BasicWebSocketRequestContext> {
        let router = base.httpRouter()
        let (desk, key, log) = (desk, key, log)
        router.get("/agent") { request, _ in
            guard Self.query(request)["key"] == key else { return Self.refused() }
            let host = request.head.authority ?? "127.0.0.1"
            var headers = Self.private(contentType: "text/html; charset=utf-8")
            headers[.contentSecurityPolicy] =
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src ws://\(host); "
                + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: AgentConsolePage.html(vendor: desk.vendor))))
        }
        router.get("/agent/console.js") { _, _ in
            Response(status: .ok, headers: Self.private(contentType: "text/javascript; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: AgentConsolePage.script)))
        }
        router.get("/agent/console.css") { _, _ in
            Response(status: .ok, headers: Self.private(contentType: "text/css; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: AgentConsolePage.style)))
        }
        router.get("/agent/state") { request, _ in
            guard Self.query(request)["key"] == key else { return Self.refused() }
            let body = ConsoleFrame.state(desk.snapshot(), log: log.lines)
            return Response(status: .ok, headers: Self.private(contentType: "application/json"), body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        return router
    }

    public func webSocketRoutes() -> [WebSocketRoute] {
        let (desk, key, log, clock) = (desk, key, log, clock)
        let console = WebSocketRoute(path: "/agent/ws", maxFrameSize: Self.maxCommandFrame, clock: clock, refuses: { WebSocketRoute.query(of: $0)["key"] != key }) { _, socket in
            ConsoleSocket(desk: desk, log: log, clock: clock, socket: socket).handlers()
        }
        return base.webSocketRoutes() + [console]
    }

    /// The largest command the console reads: the largest file the page sends (10 MiB), in
    /// base64, with room for the rest.
    public static var maxCommandFrame: Int { AgentConsolePage.maxFile / 3 * 4 + (1 << 20) }

    private static func query(_ request: Request) -> [String: String] {
        WebSocketRoute.query(of: request.uri.description)
    }

    private static func `private`(contentType: String) -> HTTPFields {
        [.contentType: contentType, .cacheControl: "no-store", .init("X-Content-Type-Options")!: "nosniff"]
    }

    private static func refused() -> Response {
        Response(
            status: .forbidden,
            headers: Self.private(contentType: "text/plain; charset=utf-8"),
            body: .init(byteBuffer: ByteBuffer(string: "the agent console needs its key: open the URL `switchboard emulate` printed\n"))
        )
    }
}

/// The key of an agent console's URL.
public enum AgentConsoleKey {
    /// 128 random bits, as 32 hex digits.
    public static func random<Generator: RandomNumberGenerator>(using generator: inout Generator) -> String {
        (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max, using: &generator)) }.joined()
    }
}

/// The JSON text frames of the console's socket.
enum ConsoleFrame {
    static func state(_ snapshot: DeskSnapshot, log: [String]) -> String {
        struct State: Encodable {
            var type = "state"
            var desk: DeskSnapshot
            var log: [String]
        }
        return encode(State(desk: snapshot, log: log))
    }

    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // The snapshot's types encode without failing: strings, numbers, arrays.
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "{}"
    }

    /// A command from the page (the fields the command takes; the rest absent).
    struct Command: Decodable {
        var id: Int?
        var `do`: String
        var conversation: String?
        var text: String?
        var on: Bool?
        var count: Int?
        var ms: Int?
        var move: String?
        var name: String?
        var type: String?
        var data: String?
    }
}

/// What the console did, shared by every page open on it: the last 200 lines.
final class ConsoleLog: Sendable {
    private let entries = Locked([String]())
    let changed = AsyncSignal()

    var lines: [String] { entries.withLock { $0 } }

    func append(_ line: String) {
        entries.withLock { entries in
            entries.append(line)
            if entries.count > 200 { entries.removeFirst(entries.count - 200) }
        }
        changed.signal()
    }
}

/// One page's socket: the desk's state pushed when it changes, the page's commands performed.
struct ConsoleSocket: Sendable {
    let desk: any AgentDesk
    let log: ConsoleLog
    let clock: SessionClock
    let socket: EmulatedSocket

    func handlers() -> EmulatedSocket.Handlers {
        let (laters, later) = AsyncStream.makeStream(of: (after: Duration, run: @Sendable () -> String).self)
        return EmulatedSocket.Handlers(
            receive: { inbound in
                guard case .text(let text) = inbound else {
                    if case .binary = inbound { answer(id: nil, .failure(DeskError("the console takes JSON text frames"))) }
                    return
                }
                let (id, result) = perform(text)
                if case .success(let outcome) = result, let release = outcome.later { later.yield(release) }
                answer(id: id, result.map(\.line))
            },
            closed: { later.finish() },
            run: {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await pushChanges() }
                    for await release in laters {
                        group.addTask {
                            // However the wait ends (the socket closing cancels it), what the
                            // delay held is released.
                            try? await clock.sleep(for: release.after)
                            log.append(release.run())
                        }
                    }
                    group.cancelAll()
                }
            }
        )
    }

    /// Sends the state when it opens and whenever the model or the log moves (the newest only,
    /// when the page reads slower than the model changes).
    private func pushChanges() async {
        var sent: String?
        while !Task.isCancelled {
            let (revision, logged) = (desk.revision, log.changed.generation)
            let frame = ConsoleFrame.state(desk.snapshot(), log: log.lines)
            if frame != sent {
                socket.sendNewest(frame)
                sent = frame
            }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await desk.waitForChange(after: revision) }
                group.addTask { await log.changed.wait(since: logged) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    private func answer(id: Int?, _ result: Result<String, DeskError>) {
        struct Answer: Encodable {
            var type = "result"
            var id: Int?
            var ok: Bool
            var line: String
        }
        switch result {
        case .success(let line): socket.send(ConsoleFrame.encode(Answer(id: id, ok: true, line: line)))
        case .failure(let error): socket.send(ConsoleFrame.encode(Answer(id: id, ok: false, line: error.description)))
        }
    }

    /// Decodes and runs one command; what it did goes to the log.
    private func perform(_ text: String) -> (id: Int?, Result<DeskOutcome, DeskError>) {
        // The id first, so that a command with a field of the wrong type is answered by its id.
        struct Identified: Decodable { var id: Int? }
        let id = try? JSONDecoder().decode(Identified.self, from: Data(text.utf8)).id
        let frame: ConsoleFrame.Command
        do {
            frame = try JSONDecoder().decode(ConsoleFrame.Command.self, from: Data(text.utf8))
        } catch {
            return (id, .failure(DeskError("not a command: \(text.prefix(80)) (\(error))")))
        }
        do {
            let outcome = try desk.perform(try Self.command(frame), in: frame.conversation)
            log.append(outcome.line)
            return (frame.id, .success(outcome))
        } catch let error as DeskError {
            log.append(error.description)
            return (frame.id, .failure(error))
        } catch {
            return (frame.id, .failure(DeskError("\(error)")))
        }
    }

    /// The command a frame names.
    ///
    /// - Throws: ``DeskError`` naming what is missing or unknown.
    static func command(_ frame: ConsoleFrame.Command) throws -> DeskCommand {
        let name = frame.do
        func needed<Value>(_ value: Value?, _ key: String) throws -> Value {
            guard let value else { throw DeskError("\(name) needs \"\(key)\"") }
            return value
        }
        switch name {
        case "current": return .current
        case "accept": return .accept
        case "say": return .say(try needed(frame.text, "text"))
        case "file":
            guard let data = Data(base64Encoded: try needed(frame.data, "data")) else { throw DeskError("file: \"data\" is not base64") }
            return .file(name: try needed(frame.name, "name"), contentType: frame.type.flatMap { $0.isEmpty ? nil : $0 } ?? "application/octet-stream", data: data)
        case "typing": return .typing(frame.on)
        case "read": return .read
        case "close": return .close
        case "transfer": return .transfer
        case "offline": return .offline
        case "move": return .move(try needed(frame.move, "move"))
        case "disconnect": return .disconnect
        case "drop": return .drop(try needed(frame.count, "count"))
        case "duplicate": return .duplicate(try needed(frame.count, "count"))
        case "delay": return .delay(milliseconds: try needed(frame.ms, "ms"))
        case "reinit": return .reinit
        default: throw DeskError("unknown command \"\(name)\"")
        }
    }
}
