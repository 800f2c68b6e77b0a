import Foundation
import Synchronization
@_spi(TestKit) import SwitchboardTestKit

#if canImport(Glibc)
import Glibc

/// The `switchboard` executable run as a person runs it: in a terminal of its own. The child gets
/// a pseudo-terminal's slave side as standard input, output and error, in a new session whose
/// controlling terminal it is, so the terminal's line discipline turns a typed Ctrl-C (byte
/// 0x03) into SIGINT for it, as a shell's terminal does. The test holds the master side: what it
/// reads is what the person would see, what it writes is what they would type.
///
/// Started with `posix_spawn` (`POSIX_SPAWN_SETSID`, the test kit's `spawnProcess`), not
/// Foundation's `Process`, which cannot give a child a session and a controlling terminal (and
/// crashes the test process now and then, see `spawnProcess`). Reads wait in `poll` with a
/// deadline, on a thread of their own: nothing here sleeps.
final class TerminalChild: Sendable {
    let pid: pid_t
    /// The master side of the terminal.
    private let master: Int32
    /// The test's own descriptor of the slave side, kept open until the child has surely opened
    /// it (a master whose slave nobody holds reads as closed). ``closeOwnSlave()`` drops it, so
    /// the master reads as closed exactly when the child's descriptors are gone.
    private let ownSlave: Int32
    /// Whether ``ownSlave`` is still open (it is closed once, whoever closes it first).
    private let ownSlaveOpen = Mutex(true)

    init(_ arguments: [String], executable: URL = TerminalChild.executable) throws {
        // posix_openpt, unlockpt and ptsname by hand: the Glibc module does not import them (they
        // need _XOPEN_SOURCE). On Linux's devpts, grantpt has nothing to do.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw Self.failure("open /dev/ptmx") }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(master, Self.unlockRequest, &unlock) == 0, ioctl(master, Self.numberRequest, &number) == 0 else {
            close(master)
            throw Self.failure("ioctl on /dev/ptmx")
        }
        let slavePath = "/dev/pts/\(number)"
        let ownSlave = open(slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard ownSlave >= 0 else { throw Self.failure("open \(slavePath)") }

        let pid: pid_t
        do {
            // A session of its own (POSIX_SPAWN_SETSID, 0x80 in glibc 2.26 and later: a GNU
            // extension the Glibc module does not always import by name), and SIGINT and SIGTERM
            // at their default, whatever the test process does.
            pid = try spawnProcess(executable.path, arguments: arguments, flags: 0x80, defaultSignals: [SIGINT, SIGTERM]) { actions in
                // After setsid (which glibc does before the file actions), opening the terminal
                // without O_NOCTTY makes it the new session's controlling terminal.
                posix_spawn_file_actions_addopen(&actions, 0, slavePath, O_RDWR, 0)
                posix_spawn_file_actions_adddup2(&actions, 0, 1)
                posix_spawn_file_actions_adddup2(&actions, 0, 2)
            }
        } catch {
            close(master)
            close(ownSlave)
            throw error
        }
        self.pid = pid
        self.master = master
        self.ownSlave = ownSlave
    }

    /// TIOCSPTLCK (`_IOW('T', 0x31, int)`) and TIOCGPTN (`_IOR('T', 0x30, unsigned int)`), macros
    /// Swift does not import.
    private static let unlockRequest: UInt = 0x4004_5431
    private static let numberRequest: UInt = 0x8004_5430

    /// The `switchboard` executable beside the test bundle.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("switchboard")
    }

    /// What the child wrote until `needle` appears, the terminal closes (the child is gone), or
    /// `limit` passes; whether the terminal closed.
    func read(until needle: String?, within limit: Duration) async -> (text: String, closed: Bool) {
        let master = self.master
        return await Self.onOwnThread {
            let deadline = ContinuousClock.now + limit
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                if let needle, String(decoding: bytes, as: UTF8.self).contains(needle) { return (String(decoding: bytes, as: UTF8.self), false) }
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return (String(decoding: bytes, as: UTF8.self), false) }
                var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { continue }
                let count = Glibc.read(master, &buffer, buffer.count)
                if count > 0 {
                    bytes += buffer[0..<count]
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    // EIO (or end of file): no process holds the slave side any more.
                    return (String(decoding: bytes, as: UTF8.self), true)
                }
            }
        }
    }

    /// Types `bytes` at the terminal.
    func type(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBufferPointer { write(master, $0.baseAddress, $0.count) }
    }

    /// Sends `signal` to the child.
    func signal(_ signal: Int32) {
        _ = kill(pid, signal)
    }

    /// Lets the master side read as closed once the child's descriptors are gone.
    func closeOwnSlave() {
        ownSlaveOpen.withLock { open in
            if open { close(ownSlave) }
            open = false
        }
    }

    /// How the child ended: `.exited(status)` or `.signalled(signal)`; it must have ended (the
    /// terminal read as closed) or be killed first.
    enum Ending: Equatable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        var description: String {
            switch self {
            case .exited(let status): return "exit status \(status)"
            case .signalled(let signal): return "killed by signal \(signal)"
            }
        }
    }

    /// Reaps the child (SIGKILL first when `kill` is set: one that did not end in time).
    func reap(killingFirst kill: Bool = false) async -> Ending {
        if kill { signal(SIGKILL) }
        let pid = self.pid
        let status: Int32 = await Self.onOwnThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return status
        }
        closeOwnSlave()
        close(master)
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which are macros.
        return status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
    }

    private static func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    private static func failure(_ call: String) -> TerminalChildError {
        TerminalChildError(description: "\(call) failed: errno \(errno)")
    }
}

struct TerminalChildError: Error, CustomStringConvertible {
    var description: String
}
#endif
