import Foundation
import SwitchboardTestKit
import Testing

@testable import switchboard
import SwitchboardBench
import SwitchboardCommandKit
import SynapseHarness

/// `switchboard bench --quick`: every row runs and yields a figure and a baseline. Speed is not
/// judged here (a debug build on a shared machine); `swift run -c release switchboard bench` is.
/// Five minutes: it took 57 s in CI and 112 s with eight busy loops beside a full run (the peer
/// rows' test, a Synapse and nine client processes one after the other, about 30 s here).
@Suite(.timeLimit(.minutes(5)))
struct BenchTests {
    @Test func everyRowRunsOnTinySizes() async throws {
        let (rows, skipped) = try await Bench(sizes: .quick, progress: BenchProgress(enabled: false), rigs: BenchCommand.rigs).measure()
        print(BenchRow.table(rows).joined(separator: "\n"))
        let baselines: Set<String> = [
            "AsyncStream", "bare channel", "raw indexed SELECT", "JSONSerialization parse", "raw client",
            "raw retransmits + one INSERT transaction", "goal",
        ]
        #expect(Set(rows.map(\.baselineName)) == baselines)
        for adapter in ["Webim", "Voximplant-style", "CXone"] {
            #expect(rows.contains { $0.name.hasPrefix("decode + normalize, \(adapter) (") }, "a decode row for \(adapter)")
            for store in ["in-memory store", "SQLite file"] {
                for figure in ["send → confirmed", "agent message → app"] {
                    #expect(rows.filter { $0.name.hasPrefix("\(figure), \(adapter), \(store), p") }.count == 2, "\(figure) p50 and p99, \(adapter), \(store)")
                }
            }
        }
        #expect(rows.contains { $0.name.hasPrefix("catch-up of 150 missed events") })
        #expect(rows.filter { $0.name.hasPrefix("idle sessions,") }.count == 2)
        let expected = 8 + 3 * 2 * 4 + 1 + 2
        #expect(rows.count == expected)
        for row in rows { Self.expectAFigure(row) }

        // What a report and a comparison read: an id for each row, its group, its rounds, and
        // the samples' percentiles of each latency p50 row.
        #expect(Set(rows.map(\.id)).count == rows.count, "ids are unique")
        #expect(Set(rows.map(\.figure)) == ["bus", "history", "decode", "latency", "catch-up", "memory"])
        for row in rows {
            let rounds = try #require(row.rounds, "\(row.id) has its rounds")
            #expect(rounds.switchboard.count == rounds.baseline.count && !rounds.switchboard.isEmpty, "\(row.id)")
            // Quick sizes: 2 rounds each (the memory rows and the catch-up take at most 3).
            let expected = 2
            #expect(rounds.switchboard.count == expected, "\(row.id): \(rounds.switchboard.count) rounds")
            #expect((row.distribution != nil) == (row.id.hasPrefix("latency.") && row.id.hasSuffix(".p50")), "\(row.id)")
            if let distribution = row.distribution {
                #expect(distribution.switchboard.count == BenchDistribution.fractions.count && distribution.switchboard == distribution.switchboard.sorted())
                #expect(distribution.switchboard[5] == row.switchboard, "\(row.id): the curve's p50 is the row's figure")
            }
        }
        // No PostgreSQL URL and no process of its own for the peer: both said.
        #expect(Set(skipped.map(\.figure)) == ["postgres", "peer"])
        let run = BenchRun(environment: .current(sizes: "quick", arguments: [], commit: nil), rows: rows, skipped: skipped)
        #expect(try BenchRun.read(run.json(), from: "run") == run)
    }

    /// The PostgreSQL rows, on the live tests' server (`SWITCHBOARD_POSTGRES_URL`).
    @Test(needsPostgres)
    func thePostgresRowsRunOnTinySizes() async throws {
        var bench = Bench(sizes: .quick, progress: BenchProgress(enabled: false), rigs: BenchCommand.rigs, figures: [.postgres])
        bench.postgresURL = try LiveServer.postgres.require()
        let rows = try await bench.run()
        print(BenchRow.table(rows).joined(separator: "\n"))
        #expect(
            rows.map(\.baselineName) == [
                "raw PostgresNIO SELECT", "64 raw INSERTs in a transaction", "raw INSERT + NOTIFY, heard", "the same sessions on the in-memory store",
            ]
        )
        for row in rows { Self.expectAFigure(row) }
    }

    /// That a row measured something. A memory row (KB per session) reads the whole process's
    /// resident memory, which the suites running beside this one move either way (one read
    /// −642 KB per session), so only that it came out is checked: `switchboard bench`, alone in
    /// its process, is where the figure means something.
    static func expectAFigure(_ row: BenchRow) {
        if row.unit == "KB/session" {
            #expect(row.switchboard.isFinite && row.baseline.isFinite, "\(row.name)")
        } else {
            #expect(row.switchboard > 0 && row.baseline > 0 && row.ratio.isFinite, "\(row.name) against \(row.baselineName)")
        }
    }

    /// The memory rows with their sessions in a process of their own, a fresh one each round, as
    /// `switchboard bench` runs them: this build's executable started again with
    /// `--idle-in-memory` and `--idle-clients`, the emulator in this process.
    @Test func theMemoryRowsMeasureTheClientInAProcessOfItsOwn() async throws {
        let directory = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0]).deletingLastPathComponent()
        let executable = directory.appendingPathComponent("switchboard").path
        try #require(FileManager.default.isExecutableFile(atPath: executable), "the switchboard executable beside the tests, at \(executable)")
        var bench = Bench(sizes: .quick, progress: BenchProgress(enabled: false), rigs: BenchCommand.rigs, figures: [.memory], adapters: ["voximplant"])
        bench.clientProcess = [executable, "bench"]
        let rows = try await bench.run()
        print(BenchRow.table(rows).joined(separator: "\n"))
        let overSockets = try #require(rows.first { $0.name.contains("over WebSockets") })
        #expect(overSockets.name.contains("the client's process alone"))
        let inMemory = try #require(rows.first { $0.id == "memory.idle.in-memory" })
        #expect(inMemory.name.contains("a process of their own"))
        // Figures from the other processes (their own resident memory: nothing here moves them),
        // a fresh process each round.
        for row in [overSockets, inMemory] {
            #expect(row.switchboard > 0 && row.switchboard.isFinite)
            #expect(row.rounds?.switchboard.count == 2 && row.rounds?.switchboard.allSatisfy { $0 > 0 } == true)
        }
    }

    /// The Matrix peer rows beside matrix-nio on a real Synapse, each client in a process of its
    /// own (this build's executable with `--matrix-peer`, `scripts/nio-bench.py`). Skipped
    /// locally without Synapse; under `CI` a missing Synapse or matrix-nio fails it.
    @Test(.enabled(if: Synapse.live.runsTests, Comment(rawValue: Synapse.live.skipNote)))
    func thePeerRowsRunOnTinySizes() async throws {
        _ = try Synapse.live.require()
        let missing = await Bench.peerMissing()
        #expect(missing == nil, "the peer rows need Synapse and matrix-nio: \(missing ?? "")")
        guard missing == nil else { return }
        let directory = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0]).deletingLastPathComponent()
        let executable = directory.appendingPathComponent("switchboard").path
        var bench = Bench(sizes: .quick, progress: BenchProgress(enabled: false), rigs: BenchCommand.rigs, figures: [.peer])
        bench.clientProcess = [executable, "bench"]
        let rows = try await bench.run()
        print(BenchRow.table(rows).joined(separator: "\n"))
        #expect(rows.count == 5)
        // The echoes in four parts, each a round (enough for `bench compare` to judge them).
        #expect(rows.first { $0.id == "peer.echo.p50" }?.rounds?.switchboard.count == 4)
        #expect(rows.first { $0.id == "peer.catch-up" }?.rounds?.switchboard.count == 1)
        #expect(rows.allSatisfy { $0.name.hasPrefix("Matrix on Synapse, ") && $0.baselineName == "matrix-nio" })
        for row in rows { Self.expectAFigure(row) }
    }

    @Test func onlyAndAdapterChooseTheRows() async throws {
        let bench = Bench(sizes: .quick, progress: BenchProgress(enabled: false), rigs: BenchCommand.rigs, figures: [.decode], adapters: ["cxone"])
        let rows = try await bench.run()
        #expect(rows.map(\.name) == ["decode + normalize, CXone (\(try RecordedFrames.load().cxone.count) recorded frames)"])
    }
}
