import Foundation
import SwitchboardTestKit
import Testing

@testable import switchboard

/// A small seeded soak per adapter over real sockets (`switchboard soak` runs the big one): the
/// customer and the agent exchange 300 messages each way under the faults each emulator supports,
/// then the store is compared with the server's log.
@Suite(.timeLimit(.minutes(5)))
struct SoakTests {
    static func soak(_ target: SoakCommand.Target, convergeTimeout: Duration = .seconds(60)) async throws -> SoakRun.Figures {
        let figures = try await Soak(messages: 300, seed: 0x50A4, progress: BenchProgress(enabled: false), convergeTimeout: convergeTimeout)
            .run(target)
        try #require(figures.count == 1)
        print("soak: \(figures[0])")
        #expect(figures[0].faults.values.reduce(0, +) >= 5, "the run injected faults")
        return figures[0]
    }

    @Test func voximplantLosesNothing() async throws {
        let figures = try await Self.soak(.voximplant)
        #expect(figures.isClean, "nothing lost, duplicated or out of order")
        #expect(figures.messages == 600)
    }

    /// On a loaded machine one customer send sometimes ends `failed("the connection closed 5 times
    /// while this message was being sent")`: the soak's injected send failures (a dropped
    /// connection mid-answer) and disconnects all land on the same message while it is retried,
    /// and the poison-send rule (`maxLinkLossesPerSend`) takes it for a message that kills the link.
    @Test func webimLosesNothing() async throws {
        let figures = try await Self.soak(.webim, convergeTimeout: .seconds(30))
        #expect(figures.duplicated == 0 && figures.outOfOrder == 0)
        withKnownIssue("the poison-send rule can fire on a send that absorbs all the injected faults (issue #12)", isIntermittent: true) {
            #expect(figures.lost == 0)
        }
    }

    /// Known loss: agent messages that arrive around a reconnect are lost (a thread's recovery
    /// brings one page and nothing pages back over a longer gap; see Docs/Reliability.md).
    @Test func cxoneAfterLongDisconnects() async throws {
        let figures = try await Self.soak(.cxone, convergeTimeout: .seconds(15))
        #expect(figures.duplicated == 0 && figures.outOfOrder == 0)
        withKnownIssue("CXone loses agent messages around reconnects (issue #12)", isIntermittent: true) {
            #expect(figures.lost == 0)
        }
    }
}
