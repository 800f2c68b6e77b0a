import Foundation
import SwitchboardTestKit
import Testing

@testable import switchboard
import SwitchboardBench
import SwitchboardCommandKit
import SwitchboardLoadKit

/// A small load run per adapter (`switchboard load` runs 2,000 sessions by hand): 50 sessions in
/// one process, each its own customer, exchanging messages at once; every session's store is
/// compared with the server's log.
@Suite(.timeLimit(.minutes(5)))
struct LoadTests {
    @Test(arguments: BenchCommand.rigs.map(\.name))
    func fiftySessionsAtOnceLoseNothing(_ target: String) async throws {
        // A session that does not converge within 2 minutes is reported with its audit, well
        // inside the suite's limit.
        let figures = try await Load(sessions: 50, messages: 3, progress: BenchProgress(enabled: false), convergeTimeout: .seconds(120))
            .run(target)
        print("load: \(figures)")
        #expect(figures.sessions == 50)
        #expect(figures.messages >= 50 * 6, "every session's messages reached the server")
        #expect(figures.isClean, "every stored row matches the server's log: nothing lost, duplicated, phantom, left pending or out of order")
    }
}
