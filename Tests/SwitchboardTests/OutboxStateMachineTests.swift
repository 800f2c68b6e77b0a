import Foundation
@testable import Switchboard
import SwitchboardTestKit
import Testing

@Suite struct OutboxStateMachineTests {
    var random = SeededRandomNumberGenerator(seed: 3)

    func entry(_ id: String, in conversation: ConversationID = "c1", at seconds: Double = 0) -> OutboxEntry {
        OutboxEntry(
            message: OutgoingMessage(clientID: ClientMessageID(id), conversationID: conversation, content: MessageDraft(text: id)),
            createdAt: Date(timeIntervalSince1970: seconds)
        )
    }

    @Test func sendsOlderThanTheDeadlineFailAsExpiredButNotTheOneInFlight() {
        var outbox = OutboxStateMachine()
        _ = outbox.enqueue(entry("old", at: 0))
        _ = outbox.enqueue(entry("older", in: "c2", at: 1))
        _ = outbox.enqueue(entry("new", at: 100))
        let expired = outbox.expire(createdBefore: Date(timeIntervalSince1970: 50))
        #expect(expired == [.fail(entry("old", at: 0), reason: "expired"), .fail(entry("older", in: "c2", at: 1), reason: "expired")])
        #expect(outbox.entries.map(\.clientID) == ["new"])
        #expect(outbox.connected() == [.send(entry("new", at: 100))])
        #expect(outbox.expire(createdBefore: Date(timeIntervalSince1970: 500)).isEmpty, "the send in flight waits for its result")
    }

    @Test func nothingIsSentWhileDisconnected() {
        var outbox = OutboxStateMachine()
        #expect(outbox.enqueue(entry("a")).isEmpty)
        #expect(outbox.entries.map(\.clientID) == ["a"])
    }

    @Test func fifoWithOneInFlightPerConversation() {
        var outbox = OutboxStateMachine()
        _ = outbox.enqueue(entry("a"))
        _ = outbox.enqueue(entry("b"))
        _ = outbox.enqueue(entry("x", in: "c2"))
        let first = outbox.connected()
        #expect(first == [.send(entry("a")), .send(entry("x", in: "c2"))])
        #expect(outbox.enqueue(entry("c")).isEmpty, "c waits behind a and b")
        #expect(outbox.succeeded("a") == [.complete(entry("a")), .send(entry("b"))])
        #expect(outbox.succeeded("b") == [.complete(entry("b")), .send(entry("c"))])
    }

    @Test mutating func transientFailureRetriesTheSameMessageAfterBackoff() {
        var outbox = OutboxStateMachine(backoff: BackoffPolicy(initial: .seconds(1), maximum: .seconds(8)))
        _ = outbox.enqueue(entry("a"))
        _ = outbox.enqueue(entry("b"))
        _ = outbox.connected()
        let actions = outbox.failed("a", error: SwitchboardError(.timedOut, "slow"), using: &random)
        var retried = entry("a")
        retried.attempts = 1
        #expect(actions.first == .persist(retried))
        guard case .scheduleRetry("c1", let delay) = actions.last else {
            Issue.record("expected a retry to be scheduled, got \(actions)")
            return
        }
        #expect(delay <= .seconds(1))
        #expect(outbox.enqueue(entry("c")).isEmpty, "nothing overtakes a message waiting to be retried")
        #expect(outbox.retryTimerFired("c1") == [.send(retried)])
    }

    @Test mutating func permanentFailureFailsTheMessageAndMovesOn() {
        var outbox = OutboxStateMachine()
        _ = outbox.enqueue(entry("a"))
        _ = outbox.enqueue(entry("b"))
        _ = outbox.connected()
        let actions = outbox.failed("a", error: SwitchboardError(.messageRejected, "spam"), using: &random)
        #expect(actions == [.fail(entry("a"), reason: "spam"), .send(entry("b"))])
    }

    @Test func echoBeforeReplyCompletesTheSend() {
        var outbox = OutboxStateMachine()
        _ = outbox.enqueue(entry("a"))
        _ = outbox.connected()
        #expect(outbox.echoed("a") == [.complete(entry("a"))])
        #expect(outbox.succeeded("a").isEmpty, "the late reply changes nothing")
        #expect(outbox.isEmpty)
    }

    @Test func aSendWhoseLinkDiedGoesAgainOnTheNextLink() {
        var outbox = OutboxStateMachine()
        _ = outbox.enqueue(entry("a"))
        #expect(outbox.connected() == [.send(entry("a"))])
        outbox.disconnected()
        #expect(outbox.connected() == [.send(entry("a"))], "same client id, same message")
    }

    @Test mutating func aLinkCountsOnceAgainstASendHoweverOftenItsRequestsFail() {
        var outbox = OutboxStateMachine(maxLinkLosses: 2)
        _ = outbox.enqueue(entry("a"))
        _ = outbox.connected()
        // A Webim action is a request of its own: it may fail several times on one link.
        for _ in 1...4 {
            let actions = outbox.failed("a", error: SwitchboardError(.connectionLost, "reset"), using: &random)
            #expect(!actions.contains { if case .fail = $0 { true } else { false } }, "one link, one loss: \(actions)")
            _ = outbox.retryTimerFired("c1")
        }
        #expect(outbox.disconnected(interrupting: ["a"]).isEmpty, "its own failure on this link counted already")
        _ = outbox.connected()
        let second = outbox.failed("a", error: SwitchboardError(.connectionLost, "reset"), using: &random)
        #expect(second.first.map { if case .fail(_, let reason) = $0 { reason.contains("2 times") } else { false } } == true, "\(second)")
    }

    @Test func restoredEntriesKeepTheirOrder() {
        var outbox = OutboxStateMachine()
        outbox.restore([entry("b", at: 2), entry("a", at: 1)])
        #expect(outbox.connected() == [.send(entry("a", at: 1))])
    }

    @Test func theSameClientIDIsQueuedOnce() {
        var outbox = OutboxStateMachine()
        _ = outbox.enqueue(entry("a"))
        _ = outbox.enqueue(entry("a"))
        #expect(outbox.entries.count == 1)
    }
}

@Suite struct TypingThrottleStateMachineTests {
    @Test func coalesceSendsAtMostOncePerIntervalAndStopsAfterSilence() {
        var typing = TypingThrottleStateMachine(policy: .coalesce(interval: .seconds(1), autoStop: .seconds(5)))
        #expect(typing.userTyping(draft: "h", now: .zero) == [.send(isTyping: true, draft: "h"), .scheduleTimer(at: .seconds(1))])
        #expect(typing.userTyping(draft: "he", now: .milliseconds(300)).isEmpty)
        #expect(typing.userTyping(draft: "hel", now: .milliseconds(600)).isEmpty)
        #expect(typing.timerFired(now: .seconds(1)) == [.send(isTyping: true, draft: "hel"), .scheduleTimer(at: .seconds(2))])
        #expect(typing.timerFired(now: .seconds(2)) == [.scheduleTimer(at: .milliseconds(5600))])
        #expect(typing.timerFired(now: .milliseconds(5600)) == [.send(isTyping: false, draft: "hel")], "an automatic stop keeps the draft")
    }

    @Test func coalesceStopIsImmediate() {
        var typing = TypingThrottleStateMachine(policy: .coalesce(interval: .seconds(1), autoStop: .seconds(5)))
        _ = typing.userTyping(draft: "h", now: .zero)
        #expect(typing.userStopped(now: .milliseconds(200)) == [.send(isTyping: false, draft: nil)])
        #expect(typing.timerFired(now: .seconds(1)).isEmpty, "the stale timer does nothing")
        #expect(typing.userStopped(now: .seconds(2)).isEmpty, "stopping twice sends once")
    }

    @Test func minimumIntervalSendsOncePerTenSecondsAndNeverStops() {
        var typing = TypingThrottleStateMachine(policy: .minimumInterval(.seconds(10)))
        var sent = 0
        for tenth in stride(from: 0, to: 250, by: 3) {
            sent += typing.userTyping(draft: nil, now: .milliseconds(tenth * 100)).count
        }
        #expect(sent == 3, "keystrokes over 25 s send at 0 s, 10 s and 20 s")
        #expect(typing.userStopped(now: .seconds(26)).isEmpty)
    }

    @Test func startEndSendsStartOnceAndEndAfterSilence() {
        var typing = TypingThrottleStateMachine(policy: .startEnd(autoStop: .seconds(3)))
        #expect(typing.userTyping(draft: nil, now: .zero) == [.send(isTyping: true, draft: nil), .scheduleTimer(at: .seconds(3))])
        #expect(typing.userTyping(draft: nil, now: .seconds(2)).isEmpty)
        #expect(typing.timerFired(now: .seconds(3)) == [.scheduleTimer(at: .seconds(5))])
        #expect(typing.timerFired(now: .seconds(5)) == [.send(isTyping: false, draft: nil)])
        #expect(typing.userTyping(draft: nil, now: .seconds(6)).first == .send(isTyping: true, draft: nil))
        #expect(typing.userStopped(now: .seconds(7)) == [.send(isTyping: false, draft: nil)])
    }
}
