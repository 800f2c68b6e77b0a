public import Foundation
import Switchboard

/// Starts the child processes of a test run one at a time.
///
/// Foundation's `Process.run()` on Linux is not safe to call from several threads at once: with the
/// crash tests starting `switchboard` children while the Matrix tests started Synapse, the test
/// process died in `Process.run()` copying memory another launch had freed (CI, signal 11). Every
/// test that starts a process goes through ``run(_:)``.
public enum ChildProcesses {
    private static let launching = Locked(())

    /// `process.run()`, never at the same time as another launch through here.
    public static func run(_ process: Process) throws {
        try launching.withLock { _ in try process.run() }
    }
}
