import Foundation
@_spi(TestKit) import Switchboard
import SwitchboardEmulation
import SwitchboardSQLite
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardLoadKit
import SwitchboardVoximplant
import SwitchboardWebim
import Testing
@_spi(TestKit) import VoximplantEmulator
@_spi(TestKit) import WebimEmulator

/// The durable outbox against `kill -9`: the CLI (`switchboard connect … --store FILE`) sends
/// messages through an emulator while the test kills it with SIGKILL at seeded moments — right
/// after a send was accepted, or with a send still on its way in — and starts it again on the
/// same file, 20 times. Then the emulator's log must hold every message the child accepted,
/// exactly once and in order, and the child's store must agree with the emulator.
@Suite(.timeLimit(.minutes(5)), .serialized)
struct CrashTests {
    static let kills = 20

    @Test func voximplantSurvivesKillNine() async throws {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a", displayName: "Alice")
        let bob = server.addUser("bob", token: "b", displayName: "Bob")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        try await VoximplantEmulator(server: server, logger: .quiet).withRunning { url in
            let report = try await Self.killRepeatedly(
                seed: 0xC4A5_0001,
                arguments: { ["connect", "voximplant", "--url", url, "--user", alice, "--token", "a", "--store", $0, "--jsonl"] },
                scope: StoreScope(backend: "voximplant", account: "default", user: alice),
                conversation: ConversationID(conversation),
                changes: server.changes,
                serverTexts: { server.messages(in: conversation).filter { $0.sender == alice }.map(\.text) },
                resumeCheck: { stored in
                    // Each start's first retransmit begins right after the sequence its store held
                    // (read from the file while no child runs): how far back depends on how much
                    // the killed life stored, which load moves, so only where it starts is checked.
                    // Only this start's connections count: a request the killed child wrote
                    // before it died can still be answered (and logged) after the kill.
                    let firstConnection = server.connectionsOpened
                    return {
                        guard let stored,
                            let first = server.retransmits.first(where: { $0.client >= firstConnection && $0.conversation == conversation })
                        else { return .notSeen }
                        return first.from == stored + 1 ? .resumed : .wrong("a start with sequence \(stored) stored asked first for \(first.from)...\(first.to)")
                    }
                }
            )
            print("  catch-up: the emulator retransmitted \(server.retransmittedEvents) events in \(server.retransmits.count) retransmits over \(report.lives) starts for \(report.serverCount) messages; \(report.resumesChecked) starts caught up, each from right after the sequence its file held")
            #expect(report.resumesChecked > 0, "some start caught up, and was checked")
        }
    }

    @Test func webimSurvivesKillNine() async throws {
        let server = WebimServer(configuration: .init(deltaHold: .seconds(1)))
        let visitor = "provided-crash"
        try await WebimEmulator(server: server, logger: .quiet).withRunning { baseURL in
            _ = try await Self.killRepeatedly(
                seed: 0xC4A5_0002,
                arguments: { ["connect", "webim", "--url", baseURL, "--visitor-fields", #"{"fields":{"id":"crash"}}"#, "--store", $0, "--jsonl"] },
                scope: StoreScope(backend: "webim", account: "default", user: "visitor:crash"),
                conversation: WebimBackend.conversationID,
                changes: server.changes,
                serverTexts: { server.messages(ofVisitor: visitor).filter { $0.kind == "visitor" }.map(\.text) }
            )
        }
    }

    struct Report {
        var lives = 0
        var serverCount = 0
        /// Starts whose catch-up ``killRepeatedly(seed:arguments:scope:conversation:changes:serverTexts:resumeCheck:)`` checked.
        var resumesChecked = 0
    }

    /// What a start's catch-up was, against the sequence its store held.
    enum Resume {
        /// It asked for no retransmit (nothing was missed, or it died first).
        case notSeen
        /// Its first retransmit began right after the stored sequence.
        case resumed
        case wrong(String)
    }

    /// Runs the child `kills + 1` times on one store file, killing all but the last, and checks
    /// the emulator's log and the store against what the child accepted.
    static func killRepeatedly(
        seed: UInt64,
        arguments: (String) -> [String],
        scope: StoreScope,
        conversation: ConversationID,
        changes: AsyncSignal,
        serverTexts: @escaping @Sendable () -> [String],
        resumeCheck: ((_ storedSequence: Int64?) -> @Sendable () -> Resume)? = nil
    ) async throws -> Report {
        signal(SIGPIPE, SIG_IGN)  // a write to a killed child's stdin must fail, not end the test
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("chat.sqlite").path

        var random = SeededRandomNumberGenerator(seed: seed)
        var accepted: [String] = []
        var inFlightAtKill = 0
        var next = 0
        var resumesChecked = 0
        for life in 0...kills {
            // What the store holds before this life starts: the last child is dead.
            var afterLife: (@Sendable () -> Resume)?
            if let resumeCheck {
                afterLife = resumeCheck(try await SQLiteChatStore(path: path).fetchSequences(scope: scope)[conversation])
            }
            let child = try Child.start(arguments(path))
            let quota = life == kills ? 3 : Int.random(in: 0...4, using: &random)
            var sent = 0
            while sent < quota {
                let text = "m\(next)"
                try child.send(text)
                let reply = try await child.nextLine()
                if reply.hasPrefix("queued") {
                    accepted.append(text)
                    next += 1
                    sent += 1
                } else if reply.hasPrefix("no conversation") {
                    continue  // not connected yet: the same text again (it was not accepted)
                } else {
                    throw ConformanceFailure("the child answered \(reply) to a send")
                }
            }
            if life < kills {
                if Bool.random(using: &random) {
                    // A send on its way in: the child may or may not have stored it.
                    try? child.send("m\(next)")
                    next += 1
                    inFlightAtKill += 1
                }
                child.kill()
            } else {
                let expected = accepted
                try await waitUntil("every accepted message on the server", timeout: .seconds(60), signal: changes) {
                    Set(serverTexts()).isSuperset(of: expected)
                }
                try child.send("/quit")
            }
            await child.waitForExit()
            switch afterLife?() {
            case .resumed: resumesChecked += 1
            case .wrong(let violation): Issue.record("life \(life): \(violation)")
            case .notSeen, nil: break
            }
        }

        // The proof, against the emulator's log.
        let onServer = serverTexts()
        let lost = Set(accepted).subtracting(onServer).count
        let duplicated = onServer.count - Set(onServer).count
        let order = onServer.filter(Set(accepted).contains)
        let outOfOrder = zip(order, accepted).filter { $0 != $1 }.count
        // The child's store against the emulator.
        let store = try SQLiteChatStore(path: path)
        let stored = try await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: scope)
            .filter { $0.clientID != nil }  // the child's own messages
        let storedTexts = stored.map(\.text)
        let outbox = try await store.fetchOutbox(scope: scope)
        print(
            """
            kill -9 (\(scope.backend)): \(kills) kills, \(accepted.count) messages accepted, \(inFlightAtKill) on their way in at a kill, \
            \(onServer.count) on the server; lost \(lost), duplicated \(duplicated), out of order \(outOfOrder); \
            store \(storedTexts.count) messages, outbox left \(outbox.count)
            """
        )
        #expect(lost == 0, "every accepted message reached the server")
        #expect(duplicated == 0, "none twice")
        #expect(outOfOrder == 0, "in the order they were accepted")
        #expect(storedTexts == onServer, "the store agrees with the emulator")
        // Every stored message is one the server took (a Webim reply says only "done": its server
        // id comes with the next poll, which a quit may cut short).
        let unconfirmed = stored.filter { $0.deliveryState == .pending || $0.deliveryState.isFailed }
        #expect(unconfirmed.isEmpty, "every stored message is confirmed: \(unconfirmed.map { "\($0.text) \($0.deliveryState)" })")
        #expect(outbox.isEmpty)
        return Report(lives: kills + 1, serverCount: onServer.count, resumesChecked: resumesChecked)
    }
}

/// The CLI as a child process: lines to its standard input, the console's replies (standard
/// error) back as lines; standard output (the events) is discarded. The lock guards the reply
/// lines, the waiting reader and the exit waiter.
///
/// Started with `posix_spawn`, not Foundation's `Process`: on Linux `Process.run()` reads
/// `/proc/self/fd` past the end of glibc's buffer (swift-corelibs-foundation #5472, fixed after
/// Swift 6.3.1) and crashed the whole test process with signal 11 in `memcpy` (seen in CI and in
/// a local run). Its pipes are close-on-exec in this process, so no other child inherits them;
/// one thread reads its standard error, another waits for its exit.
final class Child: Sendable {
    private struct State {
        var lines: [String] = []
        var partial = Data()
        var reader: CheckedContinuation<String?, Never>?
        var exited = false
        /// `waitpid`'s status once it exited.
        var status: Int32?
        var exitWaiter: CheckedContinuation<Void, Never>?
        var closed = false
        /// The write end of the child's standard input, until it is closed.
        var input: Int32?
    }

    let pid: pid_t
    private let state = Locked(State())

    /// The `switchboard` executable beside the test bundle.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("switchboard")
    }

    /// `mergingOutput`: standard output's lines are read too, with standard error's. Another
    /// program than `switchboard` with `executable`; variables set over this process's with
    /// `environment`.
    static func start(_ arguments: [String], mergingOutput: Bool = false, executable: String? = nil, environment: [String: String] = [:]) throws -> Child {
        try Child(arguments, mergingOutput: mergingOutput, executable: executable ?? Self.executable.path, environment: environment)
    }

    private init(_ arguments: [String], mergingOutput: Bool, executable: String, environment: [String: String]) throws {
        // Socket pairs as pipes: made close-on-exec atomically (`pipe2` is not imported), so a
        // child another test starts meanwhile cannot inherit them.
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        var input: [Int32] = [0, 0]
        var errors: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, kind, 0, &input) == 0 else { throw ConformanceFailure("socketpair: error \(errno)") }
        guard socketpair(AF_UNIX, kind, 0, &errors) == 0 else {
            close(input[0])
            close(input[1])
            throw ConformanceFailure("socketpair: error \(errno)")
        }
        let pid: pid_t
        do {
            // SIGPIPE at its default in the child: the test process ignores it.
            pid = try spawnProcess(executable, arguments: arguments, defaultSignals: [SIGPIPE], environment: environment) { actions in
                // dup2 clears close-on-exec on the copy: the child keeps exactly these three.
                posix_spawn_file_actions_adddup2(&actions, input[0], 0)
                if mergingOutput {
                    posix_spawn_file_actions_adddup2(&actions, errors[1], 1)
                } else {
                    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
                }
                posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
            }
        } catch {
            for descriptor in input + errors { close(descriptor) }
            throw error
        }
        close(input[0])
        close(errors[1])
        self.pid = pid
        state.withLock { $0.input = input[1] }
        let readEnd = errors[0]
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                received(Data(buffer[0..<count]))
            }
            close(readEnd)
            received(Data())
        }
        let child = pid
        Thread.detachNewThread { [self] in
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            ended(status)
        }
    }

    func send(_ line: String) throws {
        guard let input = state.withLock({ $0.input }) else { throw ConformanceFailure("the child's input is closed") }
        var bytes = Array((line + "\n").utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeMutableBytes { write(input, $0.baseAddress! + written, $0.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw ConformanceFailure("writing to the child failed: error \(errno)") }
            written += count
        }
    }

    /// The next reply line; a watchdog turns a child that never answers into a failure.
    func nextLine() async throws -> String {
        let line: String? = await withCheckedContinuation { continuation in
            let ready: String?? = state.withLock { state in
                if !state.lines.isEmpty { return .some(state.lines.removeFirst()) }
                if state.closed { return .some(nil) }
                state.reader = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        guard let line else { throw ConformanceFailure("the child ended without answering") }
        return line
    }

    func kill() {
        _ = Foundation.kill(pid, SIGKILL)
    }

    func signal(_ signal: Int32) {
        _ = Foundation.kill(pid, signal)
    }

    /// How the child ended (after ``waitForExit()``): `exit N`, `signal N`, or `running`.
    var ending: String {
        guard let status = state.withLock({ $0.status }) else { return "running" }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
        return status & 0x7f == 0 ? "exit \((status >> 8) & 0xff)" : "signal \(status & 0x7f)"
    }

    /// The child's resident memory.
    func residentBytes() throws -> Int {
        try ProcessMemory.residentBytes(ofProcess: pid)
    }

    func waitForExit() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state in
                if state.exited { return true }
                state.exitWaiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
        if let input = state.withLock({ state in defer { state.input = nil }; return state.input }) { close(input) }
    }

    private func received(_ data: Data) {
        let (reader, line): (CheckedContinuation<String?, Never>?, String??) = state.withLock { state in
            if data.isEmpty {
                state.closed = true
                defer { state.reader = nil }
                return (state.reader, .some(nil))
            }
            state.partial.append(data)
            while let newline = state.partial.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: state.partial[..<newline], as: UTF8.self)
                state.partial.removeSubrange(...newline)
                state.lines.append(line)
            }
            guard let reader = state.reader, !state.lines.isEmpty else { return (nil, nil) }
            state.reader = nil
            return (reader, .some(state.lines.removeFirst()))
        }
        if let reader, let line { reader.resume(returning: line) }
    }

    /// The child exited. Its output ends when the reader reaches the end of the socket, not
    /// here: a child that writes and exits at once may exit before the reader has read it.
    private func ended(_ status: Int32) {
        let waiter = state.withLock { state in
            state.exited = true
            state.status = status
            defer { state.exitWaiter = nil }
            return state.exitWaiter
        }
        waiter?.resume()
    }
}
