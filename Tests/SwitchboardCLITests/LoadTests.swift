import Foundation
import SwitchboardTestKit
import Testing

@testable import switchboard

/// A small load run per WebSocket adapter (`switchboard load` runs 2,000 sessions by hand): 50
/// sessions in one process, each its own customer, exchanging messages at once; every session's
/// store is compared with the server's log. (Webim is not here yet: one run in a few hangs at
/// 20 sessions, under investigation in issue #12.)
@Suite(.timeLimit(.minutes(5)))
struct LoadTests {
    @Test(arguments: [LoadCommand.Target.voximplant, .cxone])
    func fiftySessionsAtOnceLoseNothing(_ target: LoadCommand.Target) async throws {
        let figures = try await Load(sessions: 50, messages: 3, progress: BenchProgress(enabled: false)).run(target)
        print("load: \(figures)")
        #expect(figures.sessions == 50)
        #expect(figures.messages >= 50 * 6, "every session's messages reached the server")
        #expect(figures.isClean, "nothing lost, duplicated or out of order")
    }
}
