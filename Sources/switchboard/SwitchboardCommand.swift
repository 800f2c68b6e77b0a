import Foundation
import Switchboard
import SwitchboardCommandKit
import SwitchboardEmulation
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

    @Flag(name: .long, help: "Serve each emulator's agent console in the browser while its part runs, and wait for Enter before stopping it.")
    var console = false

    func run() async throws {
        let output = StandardOutput()
        var demo = Demo(seed: seed, format: jsonl ? .jsonLines : .timeline)
        if console {
            var random = SystemRandomNumberGenerator()
            // Only a line typed while the demo waits ends the wait; closed input ends each at once.
            let lines = StandardInput.lines(bufferingPolicy: .bufferingNewest(0))
            // On standard error: standard output may be JSON lines (the timeline has a heading).
            let say: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
            let jsonl = self.jsonl
            demo.console = DemoConsole(key: AgentConsoleKey.random(using: &random)) { vendor, url in
                if jsonl { say("The \(vendor) emulator's agent console: \(url)") }
            } hold: { vendor, url in
                say("The \(vendor) part is done; its agent console stays at \(url) until you press Enter.")
                for await _ in lines { break }
            }
        }
        let summary = try await demo.run { output.write($0) }
        if !summary.isClean {
            throw ExitCode.failure
        }
    }
}
