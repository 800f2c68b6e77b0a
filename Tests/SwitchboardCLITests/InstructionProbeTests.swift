import Foundation
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// The instruction-count probes (`switchboard-probes`, run under callgrind by
/// scripts/instruction-counts.sh) run every path here, unmeasured: each does its work twice (the
/// uncounted warm-up and the counted pass) with the same result, and says how much it did.
@Suite(.timeLimit(.minutes(2)))
struct InstructionProbeTests {
    static var probes: URL { Child.executable.deletingLastPathComponent().appendingPathComponent("switchboard-probes") }

    @Test(arguments: ["decode", "bus", "tracker", "projection"])
    func eachProbeRunsItsPathTwiceTheSame(_ probe: String) async throws {
        let child = try Child.start([probe, repositoryRoot.path], mergingOutput: true, executable: Self.probes.path)
        let line = try await child.nextLine()
        await child.waitForExit()
        print("probe \(line) (\(child.ending))")
        #expect(child.ending == "exit 0")
        let units = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        #expect(line.hasPrefix("\(probe): ") && units > 0, "the probe says how much it did: \(line)")
    }

    @Test func anUnknownProbeIsRefused() async throws {
        let child = try Child.start(["nothing", repositoryRoot.path], mergingOutput: true, executable: Self.probes.path)
        let line = try await child.nextLine()
        await child.waitForExit()
        #expect(child.ending == "exit 2" && line.contains("no probe nothing"))
    }
}
