import ArgumentParser
import Foundation
import Switchboard
import SwitchboardBench
import SwitchboardCommandKit

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure Switchboard against the fastest thing possible for the same step, in the same run.",
        discussion: """
            Every figure is reported next to a baseline measured in the same process (absolute times \
            on shared machines drift; ratios do not). Build with -c release: \
            swift run -c release switchboard bench.
            """
    )

    @Flag(help: "Tiny sizes: checks that every row runs, not how fast.") var quick = false
    @Flag(help: "Print the rows as JSON.") var json = false
    @Option(help: "Only these figures: bus, history, decode, latency, catch-up, memory, postgres, peer (repeatable; all when absent).") var only: [Bench.Figure] = []
    @Option(help: "Only these adapters' rows: \(BenchCommand.rigNames.joined(separator: ", ")) (repeatable; all when absent).") var adapter: [String] = []
    @Option(help: "Also measure the PostgreSQL store and event bridge on this database (postgres://user:password@host:port/db?sslmode=disable); a schema of its own is made and dropped.")
    var postgres: String?
    @Option(help: .hidden) var idleClients: String?
    @Option(help: .hidden) var count = 1
    @Option(help: .hidden) var domain = ""
    // The Switchboard side of a peer row's phase, in a process of its own.
    @Option(help: .hidden) var matrixPeer: String?
    @Option(help: .hidden) var homeserver = ""
    @Option(help: .hidden) var user = ""
    @Option(help: .hidden) var password = ""
    @Option(help: .hidden) var store = ""
    @Option(help: .hidden) var room = ""

    /// The registry's adapters that have an emulator to measure.
    static var rigs: [(name: String, rig: any EmulatorRigRunner)] { registry.compactMap { entry in entry.rig.map { (entry.name, $0) } } }
    private static var rigNames: [String] { rigs.map(\.name) }

    func validate() throws {
        if idleClients != nil {
            guard count >= 1 else { throw ValidationError("--count must be at least 1") }
            guard !domain.isEmpty else { throw ValidationError("--idle-clients needs the emulator's --domain") }
        }
        for name in adapter where !Self.rigNames.contains(name) {
            throw ValidationError("no adapter \(name) to measure: one of \(Self.rigNames.joined(separator: ", "))")
        }
    }

    func run() async throws {
        // The client side of the memory row over WebSockets, in a process of its own: prints the
        // resident bytes per session.
        if let idleClients {
            StandardOutput().write("\(Bench.idleClientsTag) \(try await Bench.idleVoximplantClients(url: idleClients, count: count, domain: domain))")
            return
        }
        if let matrixPeer {
            let printed = try await Bench.matrixPeerPhase(
                matrixPeer, homeserver: homeserver, user: user, password: password, store: store, room: ConversationID(room), count: count
            )
            for (key, value) in printed { StandardOutput().write("\(Bench.peerTag) \(key) \(value)") }
            return
        }
        let progress = BenchProgress(enabled: isatty(STDERR_FILENO) == 1)
        var bench = Bench(sizes: quick ? .quick : .full, progress: progress, rigs: Self.rigs, figures: Set(only), adapters: Set(adapter))
        bench.postgresURL = postgres
        // This executable (run from `PATH`, `arguments[0]` is a bare name).
        bench.clientProcess = [Bundle.main.executablePath ?? "/proc/self/exe", "bench"]
        let rows = try await bench.run()
        let output = StandardOutput()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            output.write(String(decoding: try encoder.encode(rows), as: UTF8.self))
        } else {
            for line in BenchRow.table(rows) { output.write(line) }
        }
    }
}
