import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// Requests that wait for their replies by id: the reply resumes the waiting task itself, the
/// timeout is an action scheduled on the clock, and no task is started per request.
@Suite(.timeLimit(.minutes(1)))
struct PendingRepliesTests {
    struct TimedOut: Error {}
    struct Refused: Error, Equatable { let label: String }

    private static func request(_ replies: PendingReplies<String>, _ id: String, clock: TestClock, timeout: Duration = .seconds(10), send: () async throws -> Void = {}) async throws -> String {
        try await replies.request(id, label: "ask-\(id)", timeout: timeout, clock: SessionClock(clock), timedOut: { TimedOut() }, send: send)
    }

    @Test func aReplyResumesItsRequestOnce() async throws {
        let replies = PendingReplies<String>()
        let clock = TestClock()
        async let answer = Self.request(replies, "1", clock: clock)
        // Its timeout is on the clock once it is sent (the reply may come before or after it
        // waits: either way it is the answer).
        try await clock.waitForSleeper(dueIn: .seconds(10))
        #expect(clock.sleepingTaskCount == 0, "the timeout is a scheduled action, no task asleep")
        #expect(replies.resolve("1", with: "one"))
        #expect(!replies.resolve("1", with: "again"), "a request is answered once")
        #expect(try await answer == "one")
        #expect(clock.sleeperCount == 0, "the timeout is cancelled with the answer")
    }

    @Test func aReplyThatComesWhileTheRequestIsSentIsKept() async throws {
        let replies = PendingReplies<String>()
        let answer = try await Self.request(replies, "1", clock: TestClock()) {
            #expect(replies.resolve("1", with: "fast"))
        }
        #expect(answer == "fast")
    }

    @Test func noReplyInTimeIsTheTimeoutAndALateReplyIsNotTaken() async throws {
        let replies = PendingReplies<String>()
        let clock = TestClock()
        let answer = Task { try await Self.request(replies, "1", clock: clock) }
        try await clock.advance(toSleeperDueIn: .seconds(10))
        await #expect(throws: TimedOut.self) { try await answer.value }
        #expect(!replies.resolve("1", with: "late"))
    }

    @Test func aFailureNamesTheRequestAndACloseFailsTheRestAndLaterOnes() async throws {
        let replies = PendingReplies<String>()
        let clock = TestClock()
        let failed = Task { try await Self.request(replies, "1", clock: clock) }
        let closed = Task { try await Self.request(replies, "2", clock: clock) }
        #expect(await clock.waitForSleepers(2), "two requests wait")
        #expect(replies.fail("1") { Refused(label: $0) })
        await #expect(throws: Refused(label: "ask-1")) { try await failed.value }
        replies.close(Refused(label: "closed"))
        await #expect(throws: Refused(label: "closed")) { try await closed.value }
        await #expect(throws: Refused(label: "closed")) { try await Self.request(replies, "3", clock: clock) }
    }

    @Test func aCloseWhileTheRequestIsSentFailsIt() async throws {
        let replies = PendingReplies<String>()
        await #expect(throws: Refused(label: "closed")) {
            try await Self.request(replies, "1", clock: TestClock()) { replies.close(Refused(label: "closed")) }
        }
    }

    @Test func aRequestCancelledBeforeItWaitsEnds() async throws {
        let replies = PendingReplies<String>()
        let request = Task {
            try await Self.request(replies, "1", clock: TestClock()) { withUnsafeCurrentTask { $0?.cancel() } }
        }
        await #expect(throws: CancellationError.self) { try await request.value }
        #expect(!replies.resolve("1", with: "after"))
    }

    /// Ids are the adapter's to keep apart; a request under the id of one that waits ends that one
    /// (it would wait for ever: its reply, its timeout and its cancel all go by its id) and
    /// takes the replies from then on.
    @Test func aLaterRequestUnderTheSameIDEndsTheOneThatWaits() async throws {
        let replies = PendingReplies<String>()
        let clock = TestClock()
        let first = Task { try await Self.request(replies, "x", clock: clock) }
        try await clock.waitForSleeper(dueIn: .seconds(10))
        let second = Task { try await Self.request(replies, "x", clock: clock, timeout: .seconds(20)) }
        let error = await #expect(throws: SwitchboardError.self) { try await first.value }
        #expect(error?.code == .invalidState && error?.message.contains("ask-x") == true, "\(String(describing: error))")
        try await clock.waitForSleeper(dueIn: .seconds(20))
        #expect(replies.resolve("x", with: "for the second"))
        #expect(try await second.value == "for the second")
    }

    /// The same, when the first had its reply but had not waited yet: it keeps its reply.
    @Test func aRequestWhoseIDIsTakenBeforeItWaitsKeepsTheReplyItGot() async throws {
        let replies = PendingReplies<String>()
        let clock = TestClock()
        let answer = try await Self.request(replies, "x", clock: clock) {
            #expect(replies.resolve("x", with: "for the first"))
            let second = Task { try await Self.request(replies, "x", clock: clock, timeout: .seconds(20)) }
            try await clock.waitForSleeper(dueIn: .seconds(20))
            #expect(replies.resolve("x", with: "for the second"))
            #expect(try await second.value == "for the second")
        }
        #expect(answer == "for the first")
    }

    @Test func aCancelledRequestEndsAndForgetsItsID() async throws {
        let replies = PendingReplies<String>()
        let clock = TestClock()
        let waiting = Task { try await Self.request(replies, "1", clock: clock) }
        try await clock.waitForSleeper(dueIn: .seconds(10))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(!replies.resolve("1", with: "after"), "nothing waits for it any more")
    }

    /// On a clock that cannot schedule, a task sleeps beside the wait: the immediate clock's
    /// sleep returns at once, so the request times out unless its reply came first.
    @Test func onAClockThatCannotScheduleATaskTimesTheRequestOut() async throws {
        let replies = PendingReplies<String>()
        let clock = SessionClock(ImmediateClock())
        await #expect(throws: TimedOut.self) {
            try await replies.request("1", label: "ask", timeout: .seconds(10), clock: clock, timedOut: { TimedOut() }, send: {})
        }
        let answer = try await replies.request("2", label: "ask", timeout: .seconds(10), clock: clock, timedOut: { TimedOut() }) {
            replies.resolve("2", with: "first")
        }
        #expect(answer == "first")
    }
}
