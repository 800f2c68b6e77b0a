@_spi(Benchmarks) @testable import Switchboard
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

    @Test func aHugeSequenceIsRefusedInsteadOfFreezingTheSession() {
        var tracker = Tracker(delivered: 3, batchLimit: 100, maxJump: 1_000_000)
        let clock = ContinuousClock()
        let started = clock.now
        let outcome = tracker.receive(sequence: Int64.max - 1, event: "absurd")
        let spent = clock.now - started
        #expect(outcome.refused == Int64.max - 1)
        #expect(outcome.retransmit.isEmpty && outcome.deliver.isEmpty)
        #expect(tracker.head == 3 && tracker.heldCount == 0, "nothing is kept of it")
        #expect(tracker.headObserved(Int64.max / 2).refused == Int64.max / 2)
        print("a frame with sequence Int64.max - 1: refused in \(spent)")
    }

    @Test func aLargeGapIsPlannedOverRunsWithABoundInFlight() {
        var tracker = Tracker(delivered: 0, batchLimit: 100, maxInFlight: 4, maxJump: 10_000_000)
        let outcome = tracker.receive(sequence: 5_000_000, event: "far")
        #expect(outcome.retransmit == [1...100, 101...200, 201...300, 301...400], "four at a time, the rest later")
        #expect(tracker.pendingRetransmits.count == 4)
        // As one completes, the next is planned.
        for sequence in Int64(1)...100 { _ = tracker.receive(sequence: sequence, event: "e\(sequence)") }
        let next = tracker.retransmitCompleted(1...100)
        #expect(next.retransmit == [401...500])
        #expect(tracker.pendingRetransmits.count == 4)
    }

    @Test func theHeldBufferIsBoundedAndOverflowIsAskedForAgain() {
        var tracker = Tracker(delivered: 0, batchLimit: 100, maxHeld: 3)
        var overflowed = 0
        for sequence in Int64(2)...10 { overflowed += tracker.receive(sequence: sequence, event: "e\(sequence)").overflowed }
        #expect(tracker.heldCount == 3)
        #expect(overflowed == 6)
        #expect(tracker.head == 10, "the dropped events are known to exist")
        // The gap fills: what was held is delivered, and the rest is still asked for.
        let filled = tracker.receive(sequence: 1, event: "e1")
        #expect(filled.deliver.map(\.sequence) == [1, 2, 3, 4])
        _ = tracker.retransmitCompleted(1...1)
        tracker.connectionLost()
        #expect(tracker.headObserved(10).retransmit == [5...10])
    }

    @Test func onlyACompleteReplyProvesAbsence() {
        var tracker = Tracker(delivered: 0, batchLimit: 100)
        _ = tracker.receive(sequence: 5, event: "e")
        _ = tracker.receive(sequence: 2, event: "b")
        // A short reply that the adapter does not vouch for: 1, 3 and 4 may still exist.
        let short = tracker.retransmitCompleted(1...4, complete: false)
        #expect(short.deliver.isEmpty)
        #expect(tracker.delivered == 0)
        #expect(tracker.isHoldTimerRunning)
        #expect(tracker.holdTimerFired().retransmit == [1...1, 3...4], "the rest is asked for again")
        _ = tracker.retransmitCompleted(1...1, complete: true)
        #expect(tracker.delivered == 2)
    }
}
