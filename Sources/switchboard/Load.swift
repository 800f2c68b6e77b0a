import SwitchboardBench
import SwitchboardCommandKit
import SwitchboardLoadKit
import ArgumentParser
import Foundation
import Switchboard
import SwitchboardTestKit

struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Hold many sessions in one process against an adapter's emulator, exchange messages in all of them, and check nothing was lost.",
        discussion: """
            Each session is its own customer with its own conversation; all connect at once, then each \
            sends and the agent answers the given number of messages while the others do the same. \
            Prints resident memory per session (connected, and after the traffic; the emulator runs \
            in the same process, so its side of each connection counts too) and messages lost, \
            doubled or reordered. Exits non-zero on any.
            """
    )

    @Argument(help: "\(BenchCommand.rigs.map(\.name).joined(separator: ", ")).") var target: String
    @Option(help: "Concurrent sessions.") var sessions = 2_000
    @Option(help: "Messages each way per session.") var messages = 5

    func validate() throws {
        guard BenchCommand.rigs.contains(where: { $0.name == target }) else {
            throw ValidationError("no emulator \(target) to load: one of \(BenchCommand.rigs.map(\.name).joined(separator: ", "))")
        }
    }

    func run() async throws {
        let progress = BenchProgress(enabled: isatty(STDERR_FILENO) == 1)
        let figures = try await Load(sessions: sessions, messages: messages, progress: progress).run(target)
        progress.say("")
        StandardOutput().write(figures.description)
        if !figures.isClean { throw ExitCode(1) }
    }
}

/// A load run of one adapter against its emulator.
struct Load: Sendable {
    let sessions: Int
    let messages: Int
    let progress: BenchProgress
    /// How long each session may take to match the server's log after its traffic.
    var convergeTimeout: Duration = .seconds(300)

    /// Loads the adapter named `target` (a registry name with an emulator).
    func run(_ target: String) async throws -> LoadRun.Figures {
        guard let rig = BenchCommand.rigs.first(where: { $0.name == target })?.rig else {
            throw SwitchboardError(.invalidArgument, "no emulator \(target) to load")
        }
        return try await rig.withRig { try await load($0) }
    }

    private func load(_ rig: EmulatorRig) async throws -> LoadRun.Figures {
        let progress = self.progress
        return try await LoadRun(
            controls: (0..<sessions).map(rig.customer), messagesPerSession: messages, convergeTimeout: convergeTimeout,
            progress: { progress.say($0) }
        ).run()
    }
}
