import Foundation
import Switchboard

#if canImport(Glibc)
public import Glibc
#elseif canImport(Darwin)
public import Darwin
#endif

/// A child process a live test runs (a throwaway server: Synapse, Prosody; or a tool that runs to
/// the end: `prosodyctl`), or the bench (its idle clients, in a process of their own). Output goes to a file; a server is killed with SIGKILL (it has nothing
/// to save) and reaped.
///
/// On Linux it is started with `spawnProcess` (`posix_spawn`), not Foundation's `Process`, whose
/// `run()` crashes the test process now and then (swift-corelibs-foundation #5472); on Apple
/// systems with `Process`. Waiting for the exit blocks a thread of its own in `waitid` (Linux) or
/// `waitUntilExit` (Apple systems), never the cooperative pool: the waiter resumes when the child
/// exits. A caller cancelled while it waits kills the child.
@_spi(TestKit) public final class SpawnedChild: Sendable {
    #if canImport(Glibc)
    public let pid: pid_t
    #else
    private let process: ProcessBox
    #endif
    private let state = Locked(Waiting())

    private struct Waiting {
        /// `waitpid`'s status (Linux) or the exit code (Apple systems) once the child is reaped.
        var status: Int32?
        var waiters: [CheckedContinuation<Void, Never>] = []
        var watching = false
    }

    /// Starts `arguments[0]` with the rest as its arguments; standard input is `/dev/null`,
    /// standard output and error go to the file at `output`.
    public init(_ arguments: [String], output: String) throws {
        #if canImport(Glibc)
        self.pid = try spawnProcess(arguments[0], arguments: Array(arguments.dropFirst())) { actions in
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        #else
        self.process = try ProcessBox(arguments, output: output)
        #endif
    }

    /// Whether the child has not exited (reaping it if it has).
    public var isRunning: Bool {
        state.withLock { state in
            reap(&state, blocking: false)
            return state.status == nil
        }
    }

    /// The exit code once the child has exited (128 + the signal for one a signal ended).
    public var exitCode: Int32? {
        state.withLock { state in
            reap(&state, blocking: false)
            return state.status.map(Self.exitCode(of:))
        }
    }

    /// SIGKILL, then the exit reaped (at once: the signal cannot be caught).
    public func kill() {
        state.withLock { state in
            guard state.status == nil else { return }
            #if canImport(Glibc)
            // Not reaped yet, so the pid is still this child's (a zombie's at worst).
            _ = Glibc.kill(pid, SIGKILL)
            #else
            process.kill()
            #endif
            reap(&state, blocking: true)
        }
    }

    /// Waits for the child to exit: its exit code. A child still running after `limit` is killed
    /// and the call throws `timedOut`.
    public func waitForExit(within limit: Duration) async throws -> Int32 {
        let exited = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.exit()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            // A kill ends the first task's wait; a timer that lost is cancelled.
            if !first { kill() }
            group.cancelAll()
            return first
        }
        guard exited, let code = exitCode else {
            throw SwitchboardError(.timedOut, "a child process ran for more than \(limit)")
        }
        return code
    }

    /// Returns once the child has exited and was reaped.
    private func exit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let watch: Bool? = state.withLock { state in
                reap(&state, blocking: false)
                guard state.status == nil else { return nil }
                state.waiters.append(continuation)
                defer { state.watching = true }
                return !state.watching
            }
            switch watch {
            case nil: continuation.resume()
            case true?: Thread { self.watchForExit() }.start()
            case false?: break
            }
        }
    }

    /// On a thread of its own: blocks until the child exits, then reaps it and resumes the
    /// waiters.
    private func watchForExit() {
        while true {
            #if canImport(Glibc)
            // Waits without reaping: until this takes the lock, the pid stays the child's, so
            // `kill()` never signals a process that took its number. It returns at once, with
            // ECHILD, when `kill()` reaped the child first; it is called again after a signal.
            var info = siginfo_t()
            _ = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)
            #else
            process.waitUntilExit()
            #endif
            let done = state.withLock { state in
                reap(&state, blocking: false)
                return state.status != nil
            }
            if done { return }
        }
    }

    /// Takes the child's exit status when it has one (or, `blocking`, waits for it), and resumes
    /// the waiters once it is known. A child someone else reaped (`ECHILD`) counts as exited
    /// with 255: its own code is gone.
    private func reap(_ state: inout Waiting, blocking: Bool) {
        if state.status == nil {
            #if canImport(Glibc)
            var status: Int32 = 0
            var result: pid_t
            repeat {
                result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            } while result == -1 && errno == EINTR
            if result == pid {
                state.status = status
            } else if result == -1 {
                state.status = 255 << 8
            }
            #else
            if blocking { process.waitUntilExit() }
            if !process.isRunning {
                state.status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
            }
            #endif
        }
        guard state.status != nil, !state.waiters.isEmpty else { return }
        for waiter in state.waiters { waiter.resume() }
        state.waiters = []
    }

    private static func exitCode(of status: Int32) -> Int32 {
        #if canImport(Glibc)
        status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        #else
        status
        #endif
    }
}

#if !canImport(Glibc)
/// On Apple systems, Foundation's `Process` (the crash above is swift-corelibs-foundation's).
private final class ProcessBox: @unchecked Sendable {
    private let process = Process()

    init(_ arguments: [String], output: String) throws {
        FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var terminationStatus: Int32 { process.terminationStatus }
    var terminationReason: Process.TerminationReason { process.terminationReason }
    func waitUntilExit() { process.waitUntilExit() }

    func kill() {
        guard process.isRunning else { return }
        _ = Darwin.kill(process.processIdentifier, SIGKILL)
    }
}
#endif

/// A loopback port nobody listens on now: bound on 127.0.0.1 port 0, read, released. For a server
/// the test starts as a child process, which must be told its port; another process may take it
/// in between, which the server's start then reports.
@_spi(TestKit) public func freeLoopbackPort() throws -> Int {
    #if canImport(Glibc)
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { throw SwitchboardError(.notConnected, "no socket") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
    }
    guard bound else { throw SwitchboardError(.notConnected, "could not bind a loopback port") }
    return Int(UInt16(bigEndian: address.sin_port))
}
