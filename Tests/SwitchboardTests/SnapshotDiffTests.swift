import Foundation
@testable import Switchboard
import SwitchboardTestKit
import Testing

@Suite struct SnapshotDiffTests {
    let time = Date(timeIntervalSince1970: 1_700_000_000)

    func message(_ id: String, _ text: String, sequence: Int64) -> Message {
        Message(serverID: MessageID(id), conversationID: "c1", sequence: sequence, text: text, time: time)
    }

    func stored(_ conversations: [ConversationInfo], messages: [Message] = []) -> SnapshotDiff.Stored {
        SnapshotDiff.Stored(
            conversations: Dictionary(uniqueKeysWithValues: conversations.map { ($0.id, $0) }),
            messages: ["c1": Dictionary(uniqueKeysWithValues: messages.map { ($0.serverID!, $0) })]
        )
    }

    @Test func aReInitWithNothingNewProducesNoEvents() {
        let chat = ConversationInfo(id: "c1", state: .active)
        let messages = [message("m1", "hi", sequence: 1), message("m2", "there", sequence: 2)]
        let snapshot = BackendSnapshot(
            conversations: [ConversationSnapshot(conversation: chat, messages: messages, messagesAreComplete: true)],
            isComplete: true
        )
        #expect(SnapshotDiff.events(from: snapshot, against: stored([chat], messages: messages)).isEmpty)
    }

    @Test func anAgentNamedOnlyAsTheAssigneeIsNotRemoved() {
        // The engine stored the agent as a participant when it was assigned; the next snapshot
        // names it only as the assignee (Webim's and CXone's full updates do).
        let agent = Participant(id: "a1", role: .agent)
        let stored = ConversationInfo(id: "c1", state: .active, participants: [agent], assignedAgent: agent)
        var fromServer = stored
        fromServer.participants = []
        let changes = SnapshotDiff.conversationChanges(from: stored, to: fromServer)
        #expect(changes.isEmpty, "no spurious participantsRemoved([agent]): \(changes.map(\.kind))")
        var reassigned = fromServer
        reassigned.assignedAgent = Participant(id: "a2", role: .agent)
        let kinds = SnapshotDiff.conversationChanges(from: stored, to: reassigned).map(\.kind)
        #expect(kinds.contains(.agentChanged(reassigned.assignedAgent)))
        #expect(kinds.contains(.participantsRemoved(["a1"])), "a former agent no longer named anywhere leaves")
    }

    @Test func newThingsAreAddedChangedThingsUpdated() {
        let old = ConversationInfo(id: "c1", state: .queued)
        var new = old
        new.state = .active
        new.assignedAgent = Participant(id: "a1", role: .agent)
        new.participants = [Participant(id: "a1", role: .agent)]
        var edited = message("m1", "hi", sequence: 1)
        edited.text = "hi (edited)"
        edited.isEdited = true
        let snapshot = BackendSnapshot(
            conversations: [ConversationSnapshot(conversation: new, messages: [edited, message("m2", "new", sequence: 2)])],
            isComplete: false
        )
        let kinds = SnapshotDiff.events(from: snapshot, against: stored([old], messages: [message("m1", "hi", sequence: 1)]))
            .map(\.kind)
        #expect(kinds.count == 6)
        #expect(kinds[0] == .conversationStateChanged(.active, previous: .queued))
        #expect(kinds[1] == .agentChanged(Participant(id: "a1", role: .agent)))
        #expect(kinds[2] == .participantsAdded([Participant(id: "a1", role: .agent)]))
        #expect(kinds[3] == .conversationUpdated(new))
        #expect(kinds[4] == .messageUpdated(edited))
        #expect(kinds[5] == .messageAdded(message("m2", "new", sequence: 2), position: .newest))
    }

    @Test func removalsOnlyWhereTheSnapshotIsComplete() {
        let one = ConversationInfo(id: "c1")
        let two = ConversationInfo(id: "c2")
        let kept = message("m1", "kept", sequence: 1)
        let gone = message("m2", "gone", sequence: 2)
        let partial = BackendSnapshot(conversations: [ConversationSnapshot(conversation: one, messages: [kept])], isComplete: false)
        #expect(SnapshotDiff.events(from: partial, against: stored([one, two], messages: [kept, gone])).isEmpty)

        let complete = BackendSnapshot(
            conversations: [ConversationSnapshot(conversation: one, messages: [kept], messagesAreComplete: true)],
            isComplete: true
        )
        let events = SnapshotDiff.events(from: complete, against: stored([one, two], messages: [kept, gone]))
        #expect(events.map(\.kind) == [.messageRemoved("m2"), .conversationRemoved])
        #expect(events.map(\.conversationID) == ["c1", "c2"])
    }
}

@Suite struct MessageReconcilerTests {
    let time = Date(timeIntervalSince1970: 1_700_000_000)

    @Test func unknownMessagesAreInserted() {
        let message = Message(serverID: "m1", conversationID: "c1", text: "hi", time: time)
        #expect(MessageReconciler.reconcile(message, byServerID: nil, byClientID: nil) == .insert(message))
    }

    @Test func theSameMessageAgainIsADuplicate() {
        let message = Message(serverID: "m1", conversationID: "c1", sequence: 4, text: "hi", time: time)
        #expect(MessageReconciler.reconcile(message, byServerID: message, byClientID: nil) == .duplicate)
    }

    @Test func anEchoConfirmsTheLocalMessage() {
        let local = Message(clientID: "k1", conversationID: "c1", text: "hi", time: time, deliveryState: .pending)
        let echo = Message(serverID: "m1", clientID: "k1", conversationID: "c1", sequence: 9, text: "hi", time: time)
        guard case .update(let old, let merged) = MessageReconciler.reconcile(echo, byServerID: nil, byClientID: local) else {
            Issue.record("an echo updates the local message")
            return
        }
        #expect(old == local)
        #expect(merged.serverID == "m1" && merged.sequence == 9 && merged.deliveryState == .sent)
    }

    @Test func aCopyWithAnotherTimeMovesTheMessage() {
        // An adapter that makes times (XMPP's archive clock, over whole-second stamps) gives each
        // link's messages times in order among themselves: the newest copy's time is the one
        // that fits its neighbours, so it replaces the stored one.
        let stored = Message(serverID: "m1", conversationID: "c1", text: "hi", time: time)
        let again = Message(serverID: "m1", conversationID: "c1", text: "hi", time: time.addingTimeInterval(-0.4))
        guard case .update(_, let merged) = MessageReconciler.reconcile(again, byServerID: stored, byClientID: nil) else {
            Issue.record("a copy with another time updates the stored message")
            return
        }
        #expect(merged.time == again.time)
    }

    @Test func aLocalEchoTakesTheServersTime() {
        let local = Message(clientID: "k1", conversationID: "c1", text: "hi", time: time, deliveryState: .pending)
        let confirmed = Message(serverID: "m1", clientID: "k1", conversationID: "c1", text: "hi", time: time.addingTimeInterval(2))
        guard case .update(_, let merged) = MessageReconciler.reconcile(confirmed, byServerID: nil, byClientID: local) else {
            Issue.record("the server's copy confirms the local echo")
            return
        }
        #expect(merged.time == confirmed.time)
    }

    @Test func deliveryStateNeverGoesBack() {
        let read = Message(serverID: "m1", conversationID: "c1", text: "hi", time: time, deliveryState: .read)
        let stale = Message(serverID: "m1", conversationID: "c1", text: "hi", time: time, deliveryState: .sent)
        #expect(MessageReconciler.reconcile(stale, byServerID: read, byClientID: nil) == .duplicate)
    }

    @Test func deletedAndEditedMarksStick() {
        let deleted = Message(serverID: "m1", conversationID: "c1", text: "", time: time, isDeleted: true)
        let replay = Message(serverID: "m1", conversationID: "c1", text: "", time: time)
        #expect(MessageReconciler.reconcile(replay, byServerID: deleted, byClientID: nil) == .duplicate)
    }
}

@Suite struct TimelineStateTests {
    @Test func aMergedMessageLeavesOneRow() {
        // A lost send reply, then a reconnect: the server's copy arrived without the client id,
        // the pending copy is still there; the resend's answer carries both ids.
        let time = Date(timeIntervalSince1970: 1_700_000_000)
        let pending = Message(clientID: "c1", conversationID: "x", text: "hi", time: time, deliveryState: .pending)
        let serverCopy = Message(serverID: "s1", conversationID: "x", sequence: 4, text: "hi", time: time)
        var timeline = TimelineState(items: [pending, serverCopy])
        var merged = serverCopy
        merged.clientID = "c1"
        var list = timeline.items
        let diffs = timeline.upsert(merged)
        list.apply(diffs)
        #expect(timeline.items == [merged], "one row: \(diffs)")
        #expect(list == timeline.items)
    }

    @Test func theWindowIsTrimmedFromTheOldestEnd() {
        let time = Date(timeIntervalSince1970: 1_700_000_000)
        let messages = (1...5).map { Message(serverID: MessageID("s\($0)"), conversationID: "x", sequence: Int64($0), text: "\($0)", time: time) }
        var timeline = TimelineState(items: Array(messages.prefix(3)))
        var list = timeline.items
        for message in messages.dropFirst(3) {
            list.apply(timeline.upsert(message) + timeline.trim(to: 3))
        }
        #expect(timeline.items.map(\.text) == ["3", "4", "5"])
        #expect(list == timeline.items)
    }

    let time = Date(timeIntervalSince1970: 1_700_000_000)

    func message(_ id: String, sequence: Int64) -> Message {
        Message(serverID: MessageID(id), conversationID: "c1", sequence: sequence, text: id, time: time)
    }

    @Test func insertsAtTheirSortedIndex() {
        var timeline = TimelineState()
        #expect(timeline.upsert(message("b", sequence: 2)) == [.insert(message("b", sequence: 2), at: 0)])
        #expect(timeline.upsert(message("d", sequence: 4)) == [.insert(message("d", sequence: 4), at: 1)])
        #expect(timeline.upsert(message("c", sequence: 3)) == [.insert(message("c", sequence: 3), at: 1)])
        #expect(timeline.upsert(message("a", sequence: 1)) == [.insert(message("a", sequence: 1), at: 0)])
        #expect(timeline.items.map(\.text) == ["a", "b", "c", "d"])
        #expect(timeline.upsert(message("c", sequence: 3)).isEmpty, "the same message again changes nothing")
    }

    @Test func aConfirmedLocalMessageMovesToItsSequence() {
        var timeline = TimelineState(items: [message("a", sequence: 1), message("c", sequence: 3)])
        let pending = Message(clientID: "k", conversationID: "c1", text: "mine", time: time, deliveryState: .pending)
        #expect(timeline.upsert(pending) == [.insert(pending, at: 2)])
        var confirmed = pending
        confirmed.serverID = "b"
        confirmed.sequence = 2
        confirmed.deliveryState = .sent
        #expect(timeline.upsert(confirmed) == [.remove(at: 2), .insert(confirmed, at: 1)])
        #expect(timeline.items.map(\.text) == ["a", "mine", "c"])
    }

    @Test func updatesInPlaceAndRemoves() {
        var timeline = TimelineState(items: [message("a", sequence: 1), message("b", sequence: 2)])
        var edited = message("a", sequence: 1)
        edited.text = "a!"
        #expect(timeline.upsert(edited) == [.update(edited, at: 0)])
        #expect(timeline.remove("b") == [.remove(at: 1)])
        #expect(timeline.remove("zz").isEmpty)
        #expect(timeline.updateIfPresent(message("q", sequence: 9)).isEmpty)
    }
}
