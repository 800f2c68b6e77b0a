import Switchboard
import SwitchboardCommandKit
import ArgumentParser

@main
struct SwitchboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard",
        abstract: "One vendor-neutral chat API over several chat backends.",
        discussion: """
            `demo` runs a scripted conversation on the in-memory backend and on the embedded \
            Voximplant-style, Webim and CXone emulators. `emulate` runs an emulator standalone; \
            `connect` is a client for a real or emulated service. `bench` measures Switchboard             against raw baselines in the same run.
            """,
        version: SwitchboardVersion.string,
        subcommands: [DemoCommand.self, ConnectCommand.self, EmulateCommand.self, BenchCommand.self, SoakCommand.self, LoadCommand.self, GatewayCommand.self, EventsCommand.self]
    )
}

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run a scripted conversation on embedded backends and print the unified timeline."
    )

    @Flag(name: .long, help: "Print events as JSON lines instead of the readable timeline.")
    var jsonl = false

    @Option(name: .long, help: "Seed for the session's randomness (client ids, backoff jitter).")
    var seed: UInt64 = 2026

    func run() async throws {
        let output = StandardOutput()
        let summary = try await Demo(seed: seed, format: jsonl ? .jsonLines : .timeline).run { output.write($0) }
        if !summary.isClean {
            throw ExitCode.failure
        }
    }
}
