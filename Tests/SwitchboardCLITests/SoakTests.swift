import Foundation
import SwitchboardTestKit
import Testing

@testable import switchboard
import SwitchboardBench
import SwitchboardCommandKit
import SwitchboardLoadKit

/// A small seeded soak per adapter over real sockets (`switchboard soak` runs the big one): the
/// customer and the agent exchange 300 messages each way under the faults each emulator supports,
/// then the store is compared with the server's log.
@Suite(.timeLimit(.minutes(5)))
struct SoakTests {
    /// `convergeTimeout` is a watchdog against a hang, not a speed target: beside the failover
    /// test's three gateways and 300 sessions on two cores, a soak that takes 6 s alone took
    /// 95–104 s and its client was still sending when a 60 s watchdog ran out.
    static func soak(_ target: String, convergeTimeout: Duration = .seconds(180)) async throws -> SoakRun.Figures {
        let figures = try await Soak(messages: 300, seed: 0x50A4, progress: BenchProgress(enabled: false), convergeTimeout: convergeTimeout)
            .run(target)
        try #require(figures.count == 1)
        print("soak: \(figures[0])")
        // Counted when the client met them: links cut, events dropped, doubled, reordered or
        // held back, sends failed (the heal step's last disconnect among them).
        #expect(figures[0].applied.total >= 5, "faults took effect: \(figures[0].applied)")
        #expect(figures[0].applied[.disconnect] >= 1 && figures[0].applied[.failRequest] >= 1, "links were cut and sends failed")
        return figures[0]
    }

    @Test func voximplantLosesNothing() async throws {
        let figures = try await Self.soak("voximplant")
        #expect(figures.isClean, "nothing lost, duplicated or out of order")
        #expect(figures.messages == 600)
    }

    @Test func webimLosesNothing() async throws {
        let figures = try await Self.soak("webim")
        #expect(figures.isClean, "nothing lost, duplicated or out of order")
    }

    /// CXone has no sequences: a reconnect's thread recovery shows the newest page, and the engine
    /// pages back from it until it reaches what the store has (`WindowBackfillStateMachine`).
    @Test func cxoneLosesNothing() async throws {
        let figures = try await Self.soak("cxone")
        #expect(figures.isClean, "nothing lost, duplicated or out of order")
    }
}
