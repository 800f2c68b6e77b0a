import SwitchboardBench
import SwitchboardCommandKit
import SwitchboardLoadKit
import ArgumentParser
import Foundation
import Switchboard
import SwitchboardSQLite
import SwitchboardTestKit

struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Exchange messages with each adapter's emulator over real sockets under seeded faults, then check nothing was lost, doubled or reordered.",
        discussion: """
            Each adapter runs against its embedded emulator on 127.0.0.1 with a SQLite file store; the \
            faults are those its emulator supports (disconnects, dropped, duplicated, reordered and \
            delayed events, failed sends). At the end the server's log is compared with the store. \
            Exits non-zero on any loss, duplicate or misorder.
            """
    )

    @Argument(help: "\(BenchCommand.rigs.map(\.name).joined(separator: ", ")) or all.") var target: String
    @Option(help: "Messages each way, per adapter.") var messages = 1_000
    @Option(help: "The seed of the faults.") var seed: UInt64 = 0x50A4

    func validate() throws {
        guard target == "all" || BenchCommand.rigs.contains(where: { $0.name == target }) else {
            throw ValidationError("no emulator \(target) to soak: one of \(BenchCommand.rigs.map(\.name).joined(separator: ", ")) or all")
        }
    }

    func run() async throws {
        let output = StandardOutput()
        let progress = BenchProgress(enabled: isatty(STDERR_FILENO) == 1)
        var clean = true
        for figures in try await Soak(messages: messages, seed: seed, progress: progress).run(target) {
            output.write(figures.description)
            clean = clean && figures.isClean
        }
        progress.say("")
        if !clean { throw ExitCode(1) }
    }
}

/// The soak of one or all adapters, each against its emulator, with a SQLite file store.
struct Soak: Sendable {
    let messages: Int
    let seed: UInt64
    let progress: BenchProgress
    /// How long a client may take to converge once the faults stop; past it the figures say what is missing.
    var convergeTimeout: Duration = .seconds(120)

    /// Soaks the adapter named `target` (a registry name), or each with an emulator for `all`.
    func run(_ target: String) async throws -> [SoakRun.Figures] {
        var figures: [SoakRun.Figures] = []
        for (name, rig) in BenchCommand.rigs where target == "all" || target == name {
            figures.append(try await rig.withRig { try await soak($0.control) })
        }
        guard !figures.isEmpty || target == "all" else { throw SwitchboardError(.invalidArgument, "no emulator \(target) to soak") }
        return figures
    }

    private func soak(_ emulator: any EmulatorControl) async throws -> SoakRun.Figures {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-soak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let progress = self.progress
        return try await SoakRun(
            emulator: emulator, messages: messages, seed: seed,
            store: try SQLiteChatStore(path: directory.appendingPathComponent("soak.sqlite").path), convergeTimeout: convergeTimeout,
            progress: { progress.say($0) }
        ).run()
    }
}
