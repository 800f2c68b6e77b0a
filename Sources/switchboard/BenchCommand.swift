import ArgumentParser
import Foundation
import Switchboard
import SwitchboardBench
import SwitchboardCommandKit

/// `switchboard bench`: measures (`bench run`, the default) and compares two runs (`bench compare`).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure Switchboard against the fastest thing possible for the same step, in the same run; compare two runs.",
        subcommands: [BenchRunCommand.self, BenchCompareCommand.self],
        defaultSubcommand: BenchRunCommand.self
    )

    /// The registry's adapters that have an emulator to measure.
    static var rigs: [(name: String, rig: any EmulatorRigRunner)] { registry.compactMap { entry in entry.rig.map { (entry.name, $0) } } }
    static var rigNames: [String] { rigs.map(\.name) }
}

/// `switchboard bench [run]`: the rows, as a table, as JSON or as a report.
struct BenchRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Measure Switchboard against the fastest thing possible for the same step, in the same run (what `bench` alone does).",
        discussion: """
            Every figure is reported next to a baseline measured in the same process (absolute times \
            on shared machines drift; ratios do not). Build with -c release: \
            swift run -c release switchboard bench. --json prints the run (format version 1, \
            Docs/Benchmarks.md); --report DIR writes it beside an HTML page with its charts. \
            `bench compare OLD.json NEW.json` says what moved between two runs.
            """
    )

    @Flag(help: "Tiny sizes: checks that every row runs, not how fast.") var quick = false
    @Flag(help: "Print the run as JSON (format version 1: the rows, their rounds, the machine) instead of the table.") var json = false
    @Option(help: ArgumentHelp("Also write the run as an HTML report with charts, and its JSON, into this directory (index.html, bench.json).", valueName: "dir"))
    var report: String?
    @Option(help: "Only these figures: bus, history, decode, latency, catch-up, memory, postgres, peer (repeatable; all when absent).") var only: [Bench.Figure] = []
    @Option(help: "Only these adapters' rows: \(BenchCommand.rigNames.joined(separator: ", ")) (repeatable; all when absent).") var adapter: [String] = []
    @Option(help: "Also measure the PostgreSQL store and event bridge on this database (postgres://user:password@host:port/db?sslmode=disable); a schema of its own is made and dropped.")
    var postgres: String?
    @Option(help: .hidden) var idleClients: String?
    @Option(help: .hidden) var idleInMemory: Int?
    @Option(help: .hidden) var count = 1
    @Option(help: .hidden) var domain = ""
    // The Switchboard side of a peer row's phase, in a process of its own.
    @Option(help: .hidden) var matrixPeer: String?
    @Option(help: .hidden) var homeserver = ""
    @Option(help: .hidden) var user = ""
    @Option(help: .hidden) var password = ""
    @Option(help: .hidden) var store = ""
    @Option(help: .hidden) var room = ""

    func validate() throws {
        if idleClients != nil {
            guard count >= 1 else { throw ValidationError("--count must be at least 1") }
            guard !domain.isEmpty else { throw ValidationError("--idle-clients needs the emulator's --domain") }
        }
        if let idleInMemory, idleInMemory < 1 { throw ValidationError("--idle-in-memory must be at least 1") }
        for name in adapter where !BenchCommand.rigNames.contains(name) {
            throw ValidationError("no adapter \(name) to measure: one of \(BenchCommand.rigNames.joined(separator: ", "))")
        }
    }

    func run() async throws {
        // The memory rows' sessions, in a process of their own: each prints the resident bytes a
        // session.
        if let idleInMemory {
            StandardOutput().write("\(Bench.idleClientsTag) \(try await Bench.idleInMemorySessions(count: idleInMemory))")
            return
        }
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
        var bench = Bench(sizes: quick ? .quick : .full, progress: progress, rigs: BenchCommand.rigs, figures: Set(only), adapters: Set(adapter))
        bench.postgresURL = postgres
        // This executable (run from `PATH`, `arguments[0]` is a bare name).
        bench.clientProcess = [Bundle.main.executablePath ?? "/proc/self/exe", "bench"]
        let environment = BenchEnvironment.current(
            sizes: quick ? "quick" : "full", arguments: Array(CommandLine.arguments.drop { $0 != "bench" }.dropFirst()),
            commit: await Bench.workingCopyCommit()
        )
        let (rows, skipped) = try await bench.measure()
        let run = BenchRun(environment: environment, rows: rows, skipped: skipped)
        let output = StandardOutput()
        if json {
            output.write(String(decoding: try run.json(), as: UTF8.self))
        } else {
            for line in BenchRow.table(rows) { output.write(line) }
        }
        if let report {
            let page = try BenchReport.write(run, to: report)
            FileHandle.standardError.write(Data("the report: \(page)\n".utf8))
        }
    }
}

/// `switchboard bench compare OLD.json NEW.json`: what moved between two runs, against each
/// row's noise.
struct BenchCompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Say what moved between two bench runs (their --json), each row against the noise its rounds showed.",
        discussion: """
            Rows are matched by id and compared by their ratio to the baseline of their own run, so two \
            machines' runs compare too. A move no larger than the row's noise (four standard errors of \
            the difference between the two runs' medians, estimated from their rounds) is "within \
            noise". Exits 0 whatever moved; with --fail-on-regression, 1 when a row regressed or is \
            gone.
            """
    )

    @Argument(help: "The older run's JSON (switchboard bench --json > old.json).") var old: String
    @Argument(help: "The newer run's JSON.") var new: String
    @Option(help: ArgumentHelp("Also write the newer run's HTML report with what moved into this directory.", valueName: "dir")) var report: String?
    @Flag(help: "Exit 1 when a row regressed beyond its noise, or is gone.") var failOnRegression = false

    func run() throws {
        let before: BenchRun
        let after: BenchRun
        do {
            before = try BenchRun.read(path: old)
            after = try BenchRun.read(path: new)
        } catch let error as BenchFileError {
            throw ValidationError(error.description)
        }
        let comparison = BenchComparison(old: before, new: after)
        let output = StandardOutput()
        for line in comparison.table() { output.write(line) }
        if let report {
            let page = try BenchReport.write(after, comparedWith: before, to: report)
            FileHandle.standardError.write(Data("the report: \(page)\n".utf8))
        }
        if failOnRegression, comparison.entries.contains(where: { $0.verdict == .regressed || $0.verdict == .removed }) {
            throw ExitCode(1)
        }
    }
}
