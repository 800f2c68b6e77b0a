import Foundation
@testable import Switchboard
import Testing

/// The app's read marker and history paging, driven synchronously: input in, decision out.
@Suite struct ReadMarkerStateMachineTests {
    typealias Machine = ReadMarkerStateMachine
    static let failure = SwitchboardError(.invalidArgument, "the server refused the marker")

    @Test func markRead_withoutAMarker_readsUpToTheNewestMessageByItsBestPosition() {
        let time = Date(timeIntervalSince1970: 5)
        #expect(Machine.marker(upTo: Message(serverID: "s", conversationID: "c", sequence: 7, text: "", time: time)) == .sequence(7))
        #expect(Machine.marker(upTo: Message(serverID: "s", conversationID: "c", text: "", time: time)) == .message("s"))
        #expect(Machine.marker(upTo: Message(clientID: "p", conversationID: "c", text: "", time: time, deliveryState: .pending)) == .time(time))
    }

    @Test func aMarkerNeverMovesBack() {
        var machine = Machine()
        #expect(machine.mark(.sequence(5), times: [:]) == .send(.sequence(5)))
        #expect(machine.mark(.sequence(5), times: [:]) == .alreadyRead, "the one on its way reads as far")
        #expect(machine.mark(.sequence(3), times: [:]) == .alreadyRead)
        machine.taken(.sequence(5))
        #expect(machine.pending == nil && machine.sent == .sequence(5))
        #expect(machine.mark(.sequence(4), times: [:]) == .alreadyRead, "nor behind the one the server took")
        #expect(machine.mark(.sequence(6), times: [:]) == .send(.sequence(6)))
    }

    @Test func anExplicitMarkerBehindMovesBackWhereTheBackendAllowsAndIsRefusedWhereItDoesNot() {
        var machine = Machine()
        _ = machine.mark(.sequence(5), times: [:])
        machine.taken(.sequence(5))
        guard case .refused(let error) = machine.mark(.sequence(3), times: [:], isExplicit: true) else {
            Issue.record("a marker behind is refused, not dropped in silence")
            return
        }
        #expect(error.code == .invalidArgument)
        #expect(machine.pending == nil, "a refused marker changes nothing")
        #expect(machine.mark(.sequence(5), times: [:], isExplicit: true) == .alreadyRead, "the same marker again is nothing to do")
        #expect(machine.mark(.sequence(3), times: [:], isExplicit: true, mayMoveBack: true) == .send(.sequence(3)))
        #expect(machine.mark(.sequence(2), times: [:], isExplicit: false, mayMoveBack: true) == .alreadyRead, "\"up to the newest\" never moves back")
    }

    @Test func markersOfDifferentKindsArePlacedByTheTimesOfTheMessagesTheyName() {
        var machine = Machine()
        #expect(machine.messagesToPlace(.message("a")).isEmpty, "nothing set: nothing to compare with")
        #expect(machine.mark(.message("b"), times: [:]) == .send(.message("b")))
        #expect(machine.messagesToPlace(.message("a")) == ["a", "b"])
        let times: [MessageID: Date] = ["a": Date(timeIntervalSince1970: 1), "b": Date(timeIntervalSince1970: 2)]
        #expect(machine.mark(.message("a"), times: times) == .alreadyRead)
        #expect(machine.mark(.time(Date(timeIntervalSince1970: 1.5)), times: times) == .alreadyRead)
        #expect(machine.mark(.time(Date(timeIntervalSince1970: 2)), times: times) == .alreadyRead, "the time of the message already marked")
        #expect(machine.mark(.time(Date(timeIntervalSince1970: 3)), times: times) == .send(.time(Date(timeIntervalSince1970: 3))))
        #expect(machine.mark(.message("unknown"), times: times) == .send(.message("unknown")), "one that cannot be placed counts as further")
    }

    @Test func aTransientFailureKeepsTheMarkerForTheNextLinkAndAnyOtherIsReported() {
        var machine = Machine()
        _ = machine.mark(.sequence(2), times: [:])
        #expect(machine.failed(SwitchboardError(.connectionLost, "gone")) == nil)
        #expect(machine.pending == .sequence(2), "sent again on the next link")
        let problem = machine.failed(Self.failure)
        #expect(problem?.code == .invalidArgument)
        #expect(problem?.message == "marking read failed")
        #expect(machine.pending == nil)
        #expect(machine.mark(.sequence(1), times: [:]) == .send(.sequence(1)), "a dropped marker does not hold the next one back")
        machine.forget()
        #expect(machine == Machine())
    }
}

@Suite struct HistoryPagingStateMachineTests {
    typealias Machine = HistoryPagingStateMachine<Int>
    static let conversation = ConversationID("c")

    @Test func theFirstPageStartsBelowTheOldestConfirmedStoredMessage() {
        let machine = Machine()
        #expect(machine.next(in: Self.conversation, limit: 20, isLinkOpen: true) == .readOldestStored)
        let sequenced = Message(serverID: "s", conversationID: Self.conversation, sequence: 40, text: "", time: Date(timeIntervalSince1970: 9))
        #expect(machine.next(in: Self.conversation, limit: 20, isLinkOpen: true, oldestStored: .some(sequenced)) == .ask(HistoryQuery(conversationID: Self.conversation, before: .sequence(40), limit: 20)))
        let timed = Message(serverID: "s", conversationID: Self.conversation, text: "", time: Date(timeIntervalSince1970: 9))
        #expect(machine.next(in: Self.conversation, limit: 20, isLinkOpen: true, oldestStored: .some(timed)) == .ask(HistoryQuery(conversationID: Self.conversation, before: .time(Date(timeIntervalSince1970: 9)), limit: 20)))
        #expect(machine.next(in: Self.conversation, limit: 20, isLinkOpen: true, oldestStored: .some(nil)) == .ask(HistoryQuery(conversationID: Self.conversation, before: nil, limit: 20)), "an empty store asks for the newest page")
        #expect(machine.next(in: Self.conversation, limit: 20, isLinkOpen: false) == .answerNow, "no link: what is stored is the answer")
    }

    @Test func aSecondCallJoinsThePageOnItsWayAndTheBackendsAnchorWins() {
        var machine = Machine()
        machine.join(1)
        #expect(machine.next(in: Self.conversation, limit: 20, isLinkOpen: true) == .join)
        machine.join(2)
        #expect(machine.pageArrived(HistoryPage(messages: [], hasMore: true, nextAnchor: .token("p2"))) == [1, 2])
        #expect(machine.waiters.isEmpty)
        #expect(machine.next(in: Self.conversation, limit: 10, isLinkOpen: true) == .ask(HistoryQuery(conversationID: Self.conversation, before: .token("p2"), limit: 10)), "no store read")
        machine.join(3)
        #expect(machine.pageFailed() == [3])
        #expect(machine.pageArrived(HistoryPage(messages: [], hasMore: false)) == [])
        #expect(machine.isExhausted)
        #expect(machine.next(in: Self.conversation, limit: 10, isLinkOpen: true) == .answerNow)
    }
}
