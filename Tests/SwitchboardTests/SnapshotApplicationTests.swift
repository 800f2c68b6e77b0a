import Foundation
@testable import Switchboard
import Testing

/// What a snapshot does to the engine's per-conversation state, decided synchronously from the
/// stored rows: which events are stored now, which windows are filled first, which wait for a
/// fill already open.
@Suite struct SnapshotApplicationTests {
    static let conversation = ConversationID("c")
    static let application = SnapshotApplication(pageLimit: 4, maxPages: 10, fillsWindows: true)

    static func message(_ index: Int) -> Message {
        Message(serverID: MessageID("m\(index)"), conversationID: conversation, text: "m\(index)", time: Date(timeIntervalSince1970: Double(index)))
    }

    /// A recent window of the conversation: messages `range`, not all of them.
    static func window(_ range: ClosedRange<Int>, skippedAfter: HistoryQuery.Anchor? = nil, lastSequence: Int64? = nil) -> BackendSnapshot {
        BackendSnapshot(
            conversations: [
                ConversationSnapshot(
                    conversation: ConversationInfo(id: conversation, lastSequence: lastSequence), messages: range.map(message), skippedAfter: skippedAfter
                )
            ],
            isComplete: false
        )
    }

    /// The stored rows: the conversation (with `lastSequence`, as the window will say) and
    /// messages `stored`.
    static func stored(_ stored: [Int], lastSequence: Int64? = nil) -> SnapshotDiff.Stored {
        SnapshotDiff.Stored(
            conversations: [conversation: ConversationInfo(id: conversation, lastSequence: lastSequence)],
            messages: [conversation: Dictionary(uniqueKeysWithValues: stored.map { (MessageID("m\($0)"), message($0)) })]
        )
    }

    static func texts(_ events: [BackendEvent]) -> [String] {
        events.compactMap {
            if case .messageAdded(let message, _) = $0.kind { return message.text }
            return nil
        }
    }

    @Test func aWindowThatStartsWithAStoredMessageIsStoredAtOnce() {
        var states = ConversationStates()
        let snapshot = Self.window(5...8)
        #expect(Self.application.windowsToPlace(snapshot, stored: Self.stored([1, 5]), states: states).isEmpty, "no read of the oldest stored")
        let plan = Self.application.apply(snapshot, stored: Self.stored([1, 5]), storedOldest: [:], to: &states)
        #expect(Self.texts(plan.deliver) == ["m6", "m7", "m8"])
        #expect(plan.newFills.isEmpty && states[Self.conversation].windowFill == nil)
    }

    @Test func aWindowAboveAGapHoldsItsMessagesUntilTheGapIsFilled() {
        var states = ConversationStates()
        let snapshot = Self.window(5...8)
        #expect(Self.application.windowsToPlace(snapshot, stored: Self.stored([1, 2]), states: states) == [Self.conversation])
        let plan = Self.application.apply(snapshot, stored: Self.stored([1, 2]), storedOldest: [Self.conversation: Self.message(1)], to: &states)
        #expect(plan.newFills == [Self.conversation])
        #expect(Self.texts(plan.deliver).isEmpty)
        #expect(Self.texts(states[Self.conversation].windowFill?.heldEvents ?? []) == ["m5", "m6", "m7", "m8"])
    }

    @Test func aWindowWithNothingOlderStoredHasNoGap() {
        var states = ConversationStates()
        let plan = Self.application.apply(Self.window(5...8), stored: Self.stored([]), storedOldest: [:], to: &states)
        #expect(plan.newFills.isEmpty)
        #expect(Self.texts(plan.deliver) == ["m5", "m6", "m7", "m8"])
        var newer = ConversationStates()
        let plan2 = Self.application.apply(Self.window(5...8), stored: Self.stored([]), storedOldest: [Self.conversation: Self.message(9)], to: &newer)
        #expect(plan2.newFills.isEmpty, "the store's oldest is newer than the window: nothing to fill down to")
    }

    @Test func aWindowThatSaysWhatItSkippedIsFilledDownToThereEvenFromAStoredMessage() {
        var states = ConversationStates()
        let snapshot = Self.window(5...8, skippedAfter: .token("after-2"))
        #expect(Self.application.windowsToPlace(snapshot, stored: Self.stored([2, 5]), states: states) == [Self.conversation])
        let plan = Self.application.apply(snapshot, stored: Self.stored([2, 5]), storedOldest: [Self.conversation: Self.message(2)], to: &states)
        #expect(plan.newFills == [Self.conversation])
        #expect(states[Self.conversation].windowFill?.lowerBound == .token("after-2"))
    }

    @Test func aWindowWhileAFillIsOpenWaitsItsTurnWithTheEventsAfterIt() {
        var states = ConversationStates()
        _ = Self.application.apply(Self.window(5...8), stored: Self.stored([1]), storedOldest: [Self.conversation: Self.message(1)], to: &states)
        let second = Self.window(10...12)
        #expect(Self.application.windowsToPlace(second, stored: Self.stored([1]), states: states).isEmpty, "a fill is open: no new one")
        let plan = Self.application.apply(second, stored: Self.stored([1]), storedOldest: [:], to: &states)
        #expect(plan.newFills.isEmpty && Self.texts(plan.deliver).isEmpty)
        #expect(states[Self.conversation].queuedWindows.map { Self.texts($0.events) } == [["m10", "m11", "m12"]])
        #expect(Self.texts(states[Self.conversation].windowFill?.heldEvents ?? []) == ["m5", "m6", "m7", "m8"], "the open fill holds only its own window")
    }

    @Test func aCompleteListRemovesWhatItDoesNotNameExceptAConversationStartedHere() {
        var states = ConversationStates()
        states["new"].startedLocally = true
        states[Self.conversation].startedLocally = true
        var stored = Self.stored([])
        stored.conversations["new"] = ConversationInfo(id: "new")
        stored.conversations["gone"] = ConversationInfo(id: "gone")
        let snapshot = BackendSnapshot(conversations: [ConversationSnapshot(conversation: ConversationInfo(id: Self.conversation))], isComplete: true)
        let plan = Self.application.apply(snapshot, stored: stored, storedOldest: [:], to: &states)
        #expect(plan.deliver.map(\.kind) == [.conversationRemoved])
        #expect(plan.deliver.map(\.conversationID) == ["gone"])
        #expect(!states[Self.conversation].startedLocally, "listed: the backend knows it")
        #expect(states["new"].startedLocally)
    }

    @Test func sequencedBackendsFillNoWindowsAndObserveTheirHeads() {
        var states = ConversationStates()
        let application = SnapshotApplication(pageLimit: 4, maxPages: 10, fillsWindows: false)
        let snapshot = Self.window(5...8, lastSequence: 8)
        #expect(application.windowsToPlace(snapshot, stored: Self.stored([1]), states: states).isEmpty)
        let plan = application.apply(snapshot, stored: Self.stored([1], lastSequence: 8), storedOldest: [Self.conversation: Self.message(1)], to: &states)
        #expect(plan.newFills.isEmpty)
        #expect(Self.texts(plan.deliver) == ["m5", "m6", "m7", "m8"])
        #expect(plan.heads.map(\.0) == [Self.conversation] && plan.heads.map(\.1) == [8])
    }
}
