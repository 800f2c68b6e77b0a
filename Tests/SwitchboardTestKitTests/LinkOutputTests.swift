import Foundation
import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The link skeleton every adapter uses: one end, what waits failing with it, the heartbeat on a
/// test clock.
@Suite(.timeLimit(.minutes(1)))
struct LinkOutputTests {
    @Test func aLinkEndsOnceAndWhatWaitsFailsWithTheFirstError() async throws {
        let ends = Locked<[SwitchboardError.Code]>([])
        let output = LinkOutput { error in ends.withLock { $0.append(error.code) } }
        output.yield(.cursor(.token("a")))
        #expect(output.endedWith == nil)
        try output.checkOpen()
        output.end(SwitchboardError(.connectionLost, "first"))
        output.end(SwitchboardError(.fatal, "second"))
        #expect(ends.withLock { $0 } == [.connectionLost], "the first end wins, and runs once")
        #expect(throws: SwitchboardError.self) { try output.checkOpen() }
        var received: [BackendUpdate] = []
        do {
            for try await update in output.updates { received.append(update) }
            Issue.record("the stream ended without the link's error")
        } catch let error as SwitchboardError {
            #expect(error.code == .connectionLost)
        }
        #expect(received == [.cursor(.token("a"))], "what was yielded before the end is read first")
    }

    @Test func theLoopsRunWhileTheBodyRunsAndStopWithIt() async throws {
        let output = LinkOutput()
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        // Nothing is ever yielded here: the loop waits until it is cancelled.
        let (never, keepOpen) = AsyncStream.makeStream(of: Void.self)
        let stopped = Locked(false)
        let result = try await output.whileRunning([
            {
                start.yield()
                for await _ in never {}
                withExtendedLifetime(keepOpen) { stopped.withLock { $0 = Task.isCancelled } }
            },
        ]) { () async throws -> Int in
            for await _ in started { break }
            return 7
        }
        #expect(result == 7)
        #expect(stopped.withLock { $0 }, "the loop was cancelled when the body returned")
    }

    /// Pings after silence; a pong keeps the link; none within the timeout ends it `timedOut`.
    @Test func theHeartbeatEndsALinkThatStopsAnswering() async throws {
        let clock = TestClock()
        let output = LinkOutput()
        let heard = Locked<Duration>(.zero)
        let pings = Locked(0)
        let answers = Locked(true)
        let sessionClock = SessionClock(clock)
        let heartbeat = Heartbeat(interval: .seconds(10), pongTimeout: .seconds(5), onlyWhenSilent: true)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await heartbeat.run(
                    clock: sessionClock, lastHeard: { heard.withLock { $0 } },
                    ping: {
                        pings.withLock { $0 += 1 }
                        if answers.withLock({ $0 }) { heard.withLock { $0 = sessionClock.now } }
                    },
                    ending: output
                )
            }
            // Silent for 10 s: a ping, answered at once; the link stays.
            #expect(await clock.waitForSleepers(1))
            clock.advance(by: .seconds(10))
            #expect(await clock.waitForSleepers(1))
            clock.advance(by: .seconds(5))
            #expect(await clock.waitForSleepers(1))
            #expect(pings.withLock { $0 } == 1 && output.endedWith == nil)
            // A frame heard 4 s before the next beat: not silent for 10 s, no ping.
            heard.withLock { $0 = .seconds(21) }
            clock.advance(by: .seconds(10))
            #expect(await clock.waitForSleepers(1))
            #expect(pings.withLock { $0 } == 1, "no ping while the link is heard")
            // Now the peer stops answering: the next ping goes unanswered and the link ends.
            answers.withLock { $0 = false }
            clock.advance(by: .seconds(10))
            #expect(await clock.waitForSleepers(1))
            clock.advance(by: .seconds(5))
            try await group.next()
            print("heartbeat: \(pings.withLock { $0 }) pings, the link ended with \(String(describing: output.endedWith?.code))")
            #expect(pings.withLock { $0 } == 2)
            #expect(output.endedWith?.code == .timedOut)
        }
    }
}
