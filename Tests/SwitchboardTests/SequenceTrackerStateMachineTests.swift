import Switchboard
import Testing

@Suite struct SequenceTrackerStateMachineTests {
    typealias Tracker = SequenceTrackerStateMachine<String>

    @Test func deliversInOrderEventsAtOnce() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        let outcome = tracker.receive(sequence: 1, event: "a")
        #expect(outcome.deliver.map(\.event) == ["a"])
        #expect(outcome.retransmit.isEmpty)
        #expect(!outcome.startHoldTimer)
        #expect(tracker.delivered == 1)
    }

    @Test func gapIsRequestedInChunksOfTheBatchLimit() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        let outcome = tracker.receive(sequence: 251, event: "late")
        #expect(outcome.deliver.isEmpty)
        #expect(outcome.retransmit == [1...100, 101...200, 201...250])
        #expect(outcome.startHoldTimer)
        #expect(tracker.heldCount == 1)
    }

    @Test func heldEventsAreReleasedInOrderWhenTheGapFills() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        _ = tracker.receive(sequence: 3, event: "c")
        _ = tracker.receive(sequence: 2, event: "b")
        let outcome = tracker.receive(sequence: 1, event: "a")
        #expect(outcome.deliver.map(\.sequence) == [1, 2, 3])
        #expect(outcome.deliver.map(\.event) == ["a", "b", "c"])
        #expect(tracker.heldCount == 0)
        #expect(!tracker.hasGap)
    }

    @Test func duplicatesAreDroppedWhetherDeliveredOrHeld() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        _ = tracker.receive(sequence: 1, event: "a")
        #expect(tracker.receive(sequence: 1, event: "a").duplicates == 1)
        _ = tracker.receive(sequence: 5, event: "e")
        let again = tracker.receive(sequence: 5, event: "e")
        #expect(again.duplicates == 1)
        #expect(again.retransmit.isEmpty, "a duplicate plans nothing new")
    }

    @Test func requestedRangesAreNotAskedTwice() {
        var tracker = Tracker(delivered: 0, batchLimit: 10)
        #expect(tracker.receive(sequence: 6, event: "f").retransmit == [1...5])
        #expect(tracker.receive(sequence: 8, event: "h").retransmit == [7...7])
        #expect(tracker.pendingRetransmits == [1...5, 7...7])
    }

    @Test func catchUpPlansFromTheStoredCursorToTheHead() {
        var tracker = Tracker(delivered: 5, batchLimit: 100)
        let outcome = tracker.headObserved(1005)
        #expect(outcome.retransmit.count == 10)
        #expect(outcome.retransmit.first == 6...105)
        #expect(outcome.retransmit.last == 906...1005)
        #expect(outcome.retransmit.allSatisfy { $0.count <= 100 })
        #expect(tracker.headObserved(1005).retransmit.isEmpty, "the same head plans nothing twice")
    }

    @Test func headAtTheCursorPlansNothing() {
        var tracker = Tracker(delivered: 7, batchLimit: 100)
        let outcome = tracker.headObserved(7)
        #expect(outcome.retransmit.isEmpty)
        #expect(!outcome.startHoldTimer)
    }

    @Test func retransmitResultsFillTheGap() {
        var tracker = Tracker(delivered: 0, batchLimit: 2)
        _ = tracker.receive(sequence: 4, event: "d")
        #expect(tracker.pendingRetransmits == [1...2, 3...3])
        var delivered: [String] = []
        delivered += tracker.receive(sequence: 1, event: "a").deliver.map(\.event)
        delivered += tracker.receive(sequence: 2, event: "b").deliver.map(\.event)
        _ = tracker.retransmitCompleted(1...2)
        delivered += tracker.receive(sequence: 3, event: "c").deliver.map(\.event)
        _ = tracker.retransmitCompleted(3...3)
        #expect(delivered == ["a", "b", "c", "d"])
        #expect(tracker.pendingRetransmits.isEmpty)
    }

    @Test func sequencesMissingFromACompletedRetransmitAreSteppedOver() {
        // An "uber" conversation hides what was posted while away: the server answers without
        // those sequences, and waiting for them would block the conversation for ever.
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        _ = tracker.receive(sequence: 5, event: "e")
        _ = tracker.receive(sequence: 2, event: "b")
        let outcome = tracker.retransmitCompleted(1...4)
        #expect(outcome.deliver.map(\.event) == ["b", "e"])
        #expect(tracker.delivered == 5)
    }

    @Test func holdTimerDoesNotRepeatRequestsInFlight() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        #expect(tracker.receive(sequence: 3, event: "c").startHoldTimer)
        #expect(tracker.isHoldTimerRunning)
        let retry = tracker.holdTimerFired()
        #expect(retry.retransmit.isEmpty, "1...2 is still being fetched")
        #expect(retry.startHoldTimer, "the wait goes on while something is missing")
    }

    @Test func failedRetransmitWaitsForTheTimer() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        _ = tracker.receive(sequence: 3, event: "c")
        let failed = tracker.retransmitFailed(1...2)
        #expect(failed.retransmit.isEmpty)
        #expect(tracker.pendingRetransmits.isEmpty)
        #expect(tracker.holdTimerFired().retransmit == [1...2])
    }

    @Test func lostConnectionForgetsInFlightRequests() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        _ = tracker.receive(sequence: 10, event: "j")
        tracker.connectionLost()
        #expect(tracker.pendingRetransmits.isEmpty)
        #expect(tracker.headObserved(10).retransmit == [1...9])
    }
}
