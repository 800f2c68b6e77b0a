import Foundation
@testable import Switchboard
import SwitchboardTestKit
import Testing

/// The session's rules for what arrives, driven synchronously: an input in, the actions out (and
/// the store facts a step asks for, answered by the test). No tasks, no clock, no store.
@Suite struct SessionStateMachineTests {
    typealias Machine = SessionStateMachine
    static let conversation = ConversationID("c")

    /// A sequenced backend with retransmits of at most 3 events; a conversation first seen
    /// catches up its 2 newest events.
    static func machine(sequenced: Bool = true) -> Machine {
        var configuration = SessionConfiguration.fastForTests
        configuration.newConversationCatchUp = 2
        let descriptor = BackendDescriptor(
            name: "test", capabilities: sequenced ? [.sequences, .readMarkers] : [.historyPaging], limits: BackendLimits(maxRetransmitBatch: 3)
        )
        return Machine(settings: Machine.Settings(descriptor: descriptor, configuration: configuration))
    }

    static func message(_ sequence: Int64, id: String? = nil) -> BackendEvent {
        let message = Message(serverID: MessageID(id ?? "m\(sequence)"), conversationID: conversation, sequence: sequence, text: "m\(sequence)", time: Date(timeIntervalSince1970: Double(sequence)))
        return BackendEvent(.messageAdded(message, position: .newest), conversation: conversation, sequence: sequence)
    }

    /// The actions in a form tests compare: `deliver m1 m2`, `saveSequence 2`, `retransmit 3...5`.
    static func describe(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .deliver(let events): "deliver " + events.map { $0.sequence.map { "m\($0)" } ?? "?" }.joined(separator: " ")
            case .saveSequence(let sequence, _): "saveSequence \(sequence)"
            case .retransmit(let range, _): "retransmit \(range)"
            case .startHoldTimer: "startHoldTimer"
            case .report(let problem, _): "report \(problem.code)"
            case .clearHistory: "clearHistory"
            case .saveCursor(let cursor): "saveCursor \(cursor)"
            }
        }
    }

    static func perform(_ step: Machine.Step) -> [String] {
        guard case .perform(let actions) = step else {
            Issue.record("the step asked for \(step)")
            return []
        }
        return describe(actions)
    }

    @Test func aKnownConversationStartsAtItsHeadAndOneNeverSeenCatchesUpItsNewest() {
        var machine = Self.machine()
        guard case .needs(.conversationIsStored(Self.conversation)) = machine.head(of: Self.conversation, lastSequence: 10) else {
            Issue.record("a conversation without a tracker asks whether it is stored")
            return
        }
        #expect(Self.perform(machine.head(of: Self.conversation, lastSequence: 10, isStored: true)) == ["saveSequence 10"], "older events are history")
        var fresh = Self.machine()
        #expect(Self.perform(fresh.head(of: Self.conversation, lastSequence: 10, isStored: false)) == ["saveSequence 8", "retransmit 9...10", "startHoldTimer"])
    }

    @Test func aGapIsAskedForInBatchesAndFilledInOrder() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 1, isStored: true)
        #expect(Self.perform(machine.event(Self.message(2))) == ["deliver m2", "saveSequence 2"])
        #expect(Self.perform(machine.event(Self.message(7))) == ["retransmit 3...5", "retransmit 6...6", "startHoldTimer"])
        #expect(machine.statistics.heldBack == 1 && machine.statistics.gapsDetected == 1 && machine.statistics.retransmitRequests == 2)
        let answer = BackendResponse.retransmitted([3, 4, 5].map { Self.message($0) }, isComplete: true)
        #expect(Self.describe(machine.retransmitFinished(3...5, in: Self.conversation, result: .success(answer))) == ["deliver m3 m4 m5", "saveSequence 5"])
        #expect(Self.describe(machine.retransmitFinished(6...6, in: Self.conversation, result: .success(.retransmitted([Self.message(6)], isComplete: true)))) == ["deliver m6 m7", "saveSequence 7"])
        #expect(Self.perform(machine.event(Self.message(7), storedAtSequence: .some(nil))) == [], "a duplicate")
        #expect(machine.statistics.duplicatesDropped == 1)
    }

    @Test func aRetransmitThatFailsOrCannotBeSentIsAskedForAgainWhenTheHoldTimerFires() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 1, isStored: true)
        _ = machine.event(Self.message(4))
        machine.retransmitNotSent(2...3, in: Self.conversation)
        #expect(Self.describe(machine.holdTimerFired(in: Self.conversation)) == ["retransmit 2...3", "startHoldTimer"])
        let failed = machine.retransmitFinished(2...3, in: Self.conversation, result: .failure(SwitchboardError(.timedOut, "no answer")))
        #expect(Self.describe(failed) == ["report timedOut"], "the hold timer runs already")
        #expect(Self.describe(machine.holdTimerFired(in: Self.conversation)) == ["retransmit 2...3", "startHoldTimer"])
        machine.linkLost()
        #expect(Self.perform(machine.head(of: Self.conversation, lastSequence: 4)) == ["retransmit 2...3", "startHoldTimer"], "the next link plans again")
    }

    @Test func aHeadBelowWhatWasDeliveredIsAServerThatForgot() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 5, isStored: true)
        _ = machine.conversations[Self.conversation].readMarker.mark(.sequence(5), times: [:])
        #expect(Self.perform(machine.head(of: Self.conversation, lastSequence: 3)) == ["report protocolViolation", "clearHistory", "saveSequence 1", "retransmit 2...3", "startHoldTimer"])
        #expect(machine.conversations[Self.conversation].readMarker == ReadMarkerStateMachine(), "markers of the old numbering are forgotten")
        #expect(machine.statistics.resynchronizations == 1)
    }

    @Test func aNewMessageAtADeliveredSequenceIsCheckedAgainstTheStoredOne() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 5, isStored: true)
        guard case .needs(.message(atSequence: 4, in: Self.conversation)) = machine.event(Self.message(4)) else {
            Issue.record("a message at a delivered sequence asks for the stored one")
            return
        }
        let same = Message(serverID: "m4", conversationID: Self.conversation, sequence: 4, text: "m4", time: Date(timeIntervalSince1970: 4))
        #expect(Self.perform(machine.event(Self.message(4), storedAtSequence: .some(same))) == [], "the same message again: a duplicate")
        #expect(Self.perform(machine.event(Self.message(4), storedAtSequence: .some(nil))) == [], "nothing stored there (history not paged): a duplicate")
        #expect(
            Self.perform(machine.event(Self.message(4, id: "other"), storedAtSequence: .some(same)))
                == ["report protocolViolation", "clearHistory", "saveSequence 2", "retransmit 3...3", "startHoldTimer"],
            "another message where the store has one: the server numbers afresh"
        )
    }

    @Test func anAbsurdJumpIsRefusedAndSaidSo() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 1, isStored: true)
        let jump = Self.message(1 + SessionConfiguration.fastForTests.maxSequenceJump + 1)
        #expect(Self.perform(machine.event(jump)) == ["report protocolViolation"])
    }

    @Test func whileAWindowIsFilledItsMessagesWaitAndTheCursorIsNotStored() {
        var machine = Self.machine(sequenced: false)
        let event = BackendEvent(.messageAdded(Message(serverID: "x", conversationID: Self.conversation, text: "x", time: .distantPast), position: .newest), conversation: Self.conversation, cursor: .token("c2"))
        machine.conversations[Self.conversation].windowFill = WindowBackfillStateMachine(conversation: Self.conversation, window: [], pageLimit: 4, maxPages: 4)
        #expect(Self.perform(machine.event(event)) == [], "held, and the cursor kept back")
        #expect(machine.conversations[Self.conversation].windowFill?.heldEvents == [event])
        #expect(Self.perform(machine.event(BackendEvent(.typing("bob", isTyping: true, draft: nil), conversation: Self.conversation))) == ["deliver ?"], "only message events wait")
        machine.conversations[Self.conversation].windowFill = nil
        #expect(Self.describe(machine.cursorToStore()) == ["saveCursor token(\"c2\")"])
        #expect(Self.describe(machine.cursorArrived(.token("c2"))) == [], "the same cursor again")
    }
}
