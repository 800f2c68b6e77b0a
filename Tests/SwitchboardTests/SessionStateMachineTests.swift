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
            name: "test", capabilities: sequenced ? [.readMarkers] : [.historyPaging],
            sync: sequenced ? .sequenced(batchLimit: 3) : .windowed(pageSize: 50)
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
            case .requestPage(let query, _): "requestPage \(query.before.map { "\($0)" } ?? "newest")"
            case .placeQueuedWindows: "placeQueuedWindows"
            case .observeHead(_, let head): "observeHead \(head)"
            case .sendReadMarker(.message(let id), _): "sendReadMarker \(id.rawValue)"
            case .sendReadMarker(let marker, _): "sendReadMarker \(marker)"
            case .send(let entry): "send \(entry.clientID.rawValue)"
            case .saveOutboxEntry(let entry): "saveOutboxEntry \(entry.clientID.rawValue) attempts \(entry.attempts) losses \(entry.linkLosses)"
            case .removeOutboxEntry(let clientID): "removeOutboxEntry \(clientID.rawValue)"
            case .failSend(let entry, _): "failSend \(entry.clientID.rawValue)"
            case .startRetryTimer: "startRetryTimer"
            case .sendTyping(let isTyping, let draft, _): "sendTyping \(isTyping) \(draft ?? "-")"
            case .startTypingTimer(_, let instant): "startTypingTimer \(instant)"
            case .updateConversation(let info): "updateConversation unread \(info.unreadCount)"
            case .poll: "poll"
            case .startPollTimer(let delay): "startPollTimer \(delay)"
            case .cancelLinkTimers: "cancelLinkTimers"
            }
        }
    }

    /// The store's answers to a step's reads.
    static func facts(_ answers: (Machine.Read, Machine.Facts.Answer)...) -> Machine.Facts {
        var facts = Machine.Facts()
        for (read, answer) in answers { facts.answers[read] = answer }
        return facts
    }

    /// The store holds the conversation.
    static let knownConversation = facts((.conversation(conversation), .conversation(ConversationInfo(id: conversation))))

    static func perform(_ step: Machine.Step) -> [String] {
        guard case .perform(let actions) = step else {
            Issue.record("the step asked for \(step)")
            return []
        }
        return describe(actions)
    }

    @Test func aKnownConversationStartsAtItsHeadAndOneNeverSeenCatchesUpItsNewest() {
        var machine = Self.machine()
        guard case .needs(.conversation(Self.conversation)) = machine.head(of: Self.conversation, lastSequence: 10) else {
            Issue.record("a conversation without a tracker asks whether it is stored")
            return
        }
        #expect(Self.perform(machine.head(of: Self.conversation, lastSequence: 10, facts: Self.knownConversation)) == ["saveSequence 10"], "older events are history")
        var fresh = Self.machine()
        #expect(Self.perform(fresh.head(of: Self.conversation, lastSequence: 10, facts: Self.facts((.conversation(Self.conversation), .conversation(nil))))) == ["saveSequence 8", "retransmit 9...10", "startHoldTimer"])
    }

    @Test func aGapIsAskedForInBatchesAndFilledInOrder() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 1, facts: Self.knownConversation)
        #expect(Self.perform(machine.event(Self.message(2))) == ["deliver m2", "saveSequence 2"])
        #expect(Self.perform(machine.event(Self.message(7))) == ["retransmit 3...5", "retransmit 6...6", "startHoldTimer"])
        #expect(machine.statistics.heldBack == 1 && machine.statistics.gapsDetected == 1 && machine.statistics.retransmitRequests == 2)
        let answer = BackendResponse.retransmitted([3, 4, 5].map { Self.message($0) }, isComplete: true)
        #expect(Self.describe(machine.retransmitFinished(3...5, in: Self.conversation, result: .success(answer))) == ["deliver m3 m4 m5", "saveSequence 5"])
        #expect(Self.describe(machine.retransmitFinished(6...6, in: Self.conversation, result: .success(.retransmitted([Self.message(6)], isComplete: true)))) == ["deliver m6 m7", "saveSequence 7"])
        #expect(Self.perform(machine.event(Self.message(7), facts: Self.facts((.message(atSequence: 7, in: Self.conversation), .message(nil))))) == [], "a duplicate")
        #expect(machine.statistics.duplicatesDropped == 1)
    }

    @Test func aRetransmitThatFailsOrCannotBeSentIsAskedForAgainWhenTheHoldTimerFires() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 1, facts: Self.knownConversation)
        _ = machine.event(Self.message(4))
        machine.retransmitNotSent(2...3, in: Self.conversation)
        #expect(Self.describe(machine.holdTimerFired(in: Self.conversation)) == ["retransmit 2...3", "startHoldTimer"])
        let failed = machine.retransmitFinished(2...3, in: Self.conversation, result: .failure(SwitchboardError(.timedOut, "no answer")))
        #expect(Self.describe(failed) == ["report timedOut"], "the hold timer runs already")
        #expect(Self.describe(machine.holdTimerFired(in: Self.conversation)) == ["retransmit 2...3", "startHoldTimer"])
        #expect(Self.describe(machine.linkDropped(interrupted: true, inFlightSends: [])) == ["cancelLinkTimers"])
        #expect(Self.perform(machine.head(of: Self.conversation, lastSequence: 4)) == ["retransmit 2...3", "startHoldTimer"], "the next link plans again")
    }

    @Test func aHeadBelowWhatWasDeliveredIsAServerThatForgot() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 5, facts: Self.knownConversation)
        _ = machine.conversations[Self.conversation].readMarker.mark(.sequence(5), times: [:])
        #expect(Self.perform(machine.head(of: Self.conversation, lastSequence: 3)) == ["report protocolViolation", "clearHistory", "saveSequence 1", "retransmit 2...3", "startHoldTimer"])
        #expect(machine.conversations[Self.conversation].readMarker == ReadMarkerStateMachine(), "markers of the old numbering are forgotten")
        #expect(machine.statistics.resynchronizations == 1)
    }

    @Test func aNewMessageAtADeliveredSequenceIsCheckedAgainstTheStoredOne() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 5, facts: Self.knownConversation)
        guard case .needs(.message(atSequence: 4, in: Self.conversation)) = machine.event(Self.message(4)) else {
            Issue.record("a message at a delivered sequence asks for the stored one")
            return
        }
        let same = Message(serverID: "m4", conversationID: Self.conversation, sequence: 4, text: "m4", time: Date(timeIntervalSince1970: 4))
        #expect(Self.perform(machine.event(Self.message(4), facts: Self.facts((.message(atSequence: 4, in: Self.conversation), .message(same))))) == [], "the same message again: a duplicate")
        #expect(Self.perform(machine.event(Self.message(4), facts: Self.facts((.message(atSequence: 4, in: Self.conversation), .message(nil))))) == [], "nothing stored there (history not paged): a duplicate")
        #expect(
            Self.perform(machine.event(Self.message(4, id: "other"), facts: Self.facts((.message(atSequence: 4, in: Self.conversation), .message(same)))))
                == ["report protocolViolation", "clearHistory", "saveSequence 2", "retransmit 3...3", "startHoldTimer"],
            "another message where the store has one: the server numbers afresh"
        )
    }

    @Test func anAbsurdJumpIsRefusedAndSaidSo() {
        var machine = Self.machine()
        _ = machine.head(of: Self.conversation, lastSequence: 1, facts: Self.knownConversation)
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

    // MARK: Windows (backends without sequences)

    static func windowed(_ range: ClosedRange<Int>) -> BackendSnapshot {
        BackendSnapshot(conversations: [ConversationSnapshot(conversation: ConversationInfo(id: conversation), messages: range.map(windowMessage))], isComplete: false)
    }

    static func windowMessage(_ index: Int) -> Message {
        Message(serverID: MessageID("w\(index)"), conversationID: conversation, text: "w\(index)", time: Date(timeIntervalSince1970: Double(index)))
    }

    static func stored(_ indices: [Int]) -> SnapshotDiff.Stored {
        SnapshotDiff.Stored(
            conversations: [conversation: ConversationInfo(id: conversation)],
            messages: [conversation: Dictionary(uniqueKeysWithValues: indices.map { (MessageID("w\($0)"), windowMessage($0)) })]
        )
    }

    @Test func aWindowAboveAGapIsFilledPageByPageAndTheWindowsThatWaitedArePlacedAfter() {
        var machine = Self.machine(sequenced: false)
        let first = Self.windowed(5...6)
        #expect(machine.windowsToPlace(first, stored: Self.stored([1])) == [Self.conversation])
        let opened = machine.snapshot(first, stored: Self.stored([1]), storedOldest: [Self.conversation: Self.windowMessage(1)], isLinkOpen: true)
        #expect(Self.describe(opened) == ["deliver ", "requestPage time(1970-01-01 00:00:05 +0000)"], "the window's messages wait for the fill")
        // A second window while the fill is open waits its turn.
        _ = machine.snapshot(Self.windowed(9...10), stored: Self.stored([1]), storedOldest: [:], isLinkOpen: true)
        #expect(machine.conversations[Self.conversation].queuedWindows.count == 1)
        // The page reaches what the store has: the fill stores everything, oldest first.
        let page = HistoryPage(messages: [Self.windowMessage(1), Self.windowMessage(3), Self.windowMessage(4)], hasMore: true)
        guard case .needs(.messages(let ids, _)) = machine.pageFinished(in: Self.conversation, result: .success(.history(page)), isLinkOpen: true) else {
            Issue.record("a page asks which of its messages are stored")
            return
        }
        #expect(Set(ids) == ["w1", "w3", "w4"])
        let closed = machine.pageFinished(in: Self.conversation, result: .success(.history(page)), isLinkOpen: true, facts: Self.facts((.messages(ids, in: Self.conversation), .messages([Self.windowMessage(1)]))))
        guard case .perform(let actions) = closed, case .deliver(let events) = actions.first else {
            Issue.record("the fill closes with what it holds")
            return
        }
        #expect(events.compactMap { if case .messageAdded(let m, _) = $0.kind { m.text } else { nil } } == ["w3", "w4", "w5", "w6"])
        #expect(Self.describe(Array(actions.dropFirst())) == ["placeQueuedWindows"])
        // The queued window: its oldest is stored (the fill just stored... not w9): asked, then placed.
        #expect(machine.hasQueuedWindowToPlace(in: Self.conversation))
        guard case .needs(.storedMessage("w9", _)) = machine.placeQueuedWindow(in: Self.conversation, isLinkOpen: true) else {
            Issue.record("placing a window asks whether its oldest message is stored")
            return
        }
        guard case .needs(.oldestConfirmedMessage) = machine.placeQueuedWindow(in: Self.conversation, isLinkOpen: true, facts: Self.facts((.storedMessage("w9", in: Self.conversation), .message(nil)))) else {
            Issue.record("an oldest message not stored asks for the store's oldest")
            return
        }
        let placed = machine.placeQueuedWindow(in: Self.conversation, isLinkOpen: true, facts: Self.facts((.storedMessage("w9", in: Self.conversation), .message(nil)), (.oldestConfirmedMessage(in: Self.conversation), .message(Self.windowMessage(1)))))
        #expect(Self.perform(placed) == ["requestPage time(1970-01-01 00:00:09 +0000)"], "a gap of its own: filled in turn")
        #expect(machine.statistics.gapsDetected == 2 && machine.statistics.backfillRequests == 2)
    }

    @Test func aFillGoesOnAcrossLinksAndAFailedPageStoresWhatItHolds() {
        var machine = Self.machine(sequenced: false)
        _ = machine.snapshot(Self.windowed(5...6), stored: Self.stored([1]), storedOldest: [Self.conversation: Self.windowMessage(1)], isLinkOpen: false)
        _ = machine.conversations[Self.conversation].readMarker.mark(.message("w5"), times: [:])
        #expect(Self.describe(machine.linkOpened()) == ["sendReadMarker w5", "requestPage time(1970-01-01 00:00:05 +0000)"], "the marker set offline goes, the fill asks")
        machine.backfillNotSent(in: Self.conversation)
        #expect(Self.describe(machine.linkOpened()).last == "requestPage time(1970-01-01 00:00:05 +0000)", "asked again on the next link")
        #expect(Self.perform(machine.pageFinished(in: Self.conversation, result: .failure(SwitchboardError(.connectionLost, "gone")), isLinkOpen: false)) == [])
        #expect(machine.conversations[Self.conversation].windowFill != nil, "a link lost half-way loses nothing")
        let serverError = SwitchboardError(.serverError, "500")
        #expect(serverError.isTransient)
        #expect(Self.perform(machine.pageFinished(in: Self.conversation, result: .failure(serverError), isLinkOpen: true)) == ["requestPage time(1970-01-01 00:00:05 +0000)"], "a transient failure is asked again")
        _ = machine.pageFinished(in: Self.conversation, result: .failure(serverError), isLinkOpen: true)
        let failed = machine.pageFinished(in: Self.conversation, result: .failure(serverError), isLinkOpen: true)
        #expect(Self.perform(failed) == ["report protocolViolation", "deliver ? ?", "placeQueuedWindows"], "the third stores what the fill holds (its window), and says the gap stays")
        #expect(machine.conversations[Self.conversation].windowFill == nil)
    }

    // MARK: Sends and typing

    static func entry(_ id: String) -> OutboxEntry {
        OutboxEntry(message: OutgoingMessage(clientID: ClientMessageID(id), conversationID: conversation, content: MessageDraft(text: id)), createdAt: Date(timeIntervalSince1970: 0))
    }

    @Test func aSendsAnswerReplacesThePendingCopyAndEndsItsEntry() {
        var machine = Self.machine()
        var random = SeededRandomNumberGenerator(seed: 1)
        #expect(Self.describe(machine.outbox { $0.connected() }).isEmpty)
        #expect(Self.describe(machine.outbox { $0.enqueue(Self.entry("a")) }) == ["send a"])
        var confirmed = Self.entry("a").pendingMessage
        confirmed.serverID = "s-a"
        confirmed.clientID = nil  // the server's copy without the client id gets it back
        let answered = machine.sendFinished(Self.entry("a"), result: .success(.message(confirmed)), using: &random)
        guard case .perform(let actions) = answered, case .deliver(let events) = actions.first, case .messageUpdated(let stored) = events.first?.kind else {
            Issue.record("the server's copy is stored")
            return
        }
        #expect(stored.clientID == "a" && stored.serverID == "s-a")
        #expect(Self.describe(Array(actions.dropFirst())) == ["removeOutboxEntry a"])
        #expect(machine.statistics.messagesSent == 1 && machine.outbox.isEmpty)
    }

    @Test func anAnswerWithoutTheMessageMarksThePendingCopySentUnlessItsEchoCameFirst() {
        var machine = Self.machine()
        var random = SeededRandomNumberGenerator(seed: 1)
        _ = machine.outbox { $0.connected() }
        _ = machine.outbox { $0.enqueue(Self.entry("a")) }
        guard case .needs(.sentMessage("a", in: Self.conversation)) = machine.sendFinished(Self.entry("a"), result: .success(.done), using: &random) else {
            Issue.record("an answer without the message asks for the stored copy")
            return
        }
        let pending = Self.entry("a").pendingMessage
        #expect(Self.perform(machine.sendFinished(Self.entry("a"), result: .success(.done), facts: Self.facts((.sentMessage("a", in: Self.conversation), .message(pending))), using: &random)) == ["deliver ?", "removeOutboxEntry a"])
        _ = machine.outbox { $0.enqueue(Self.entry("b")) }
        var echoed = Self.entry("b").pendingMessage
        echoed.deliveryState = .sent
        #expect(Self.perform(machine.sendFinished(Self.entry("b"), result: .success(.done), facts: Self.facts((.sentMessage("b", in: Self.conversation), .message(echoed))), using: &random)) == ["removeOutboxEntry b"])
    }

    @Test func aSendThatKeepsKillingTheLinkFailsAndTheNextOneGoes() {
        var machine = Self.machine()
        var random = SeededRandomNumberGenerator(seed: 1)
        _ = machine.outbox { $0.connected() }
        _ = machine.outbox { $0.enqueue(Self.entry("poison")) }
        _ = machine.outbox { $0.enqueue(Self.entry("next")) }
        var last: [String] = []
        for _ in 1...SessionConfiguration.fastForTests.maxLinkLossesPerSend {
            last = Self.describe(machine.linkDropped(interrupted: true, inFlightSends: ["poison"]))
            _ = machine.outbox { $0.connected() }
        }
        #expect(last.contains("failSend poison") && last.last == "cancelLinkTimers", "\(last)")
        #expect(machine.statistics.sendAttemptsFailed == SessionConfiguration.fastForTests.maxLinkLossesPerSend)
        #expect(machine.statistics.sendFailures == 1)
        #expect(machine.outbox.entries.map(\.clientID) == ["next"])
        let transient = machine.sendFinished(Self.entry("next"), result: .failure(SwitchboardError(.serverError, "503")), using: &random)
        #expect(Self.perform(transient) == ["saveOutboxEntry next attempts 1 losses 0", "startRetryTimer"])
        #expect(machine.statistics.sendAttemptsFailed == SessionConfiguration.fastForTests.maxLinkLossesPerSend + 1)
    }

    @Test func typingFollowsTheBackendsPolicy() {
        var machine = Self.machine()  // the default policy: at most one "typing" per 10 s
        let (first, sent) = machine.typing(true, draft: "h", in: Self.conversation, now: .seconds(1))
        #expect(first == .sent && Self.describe(sent) == ["sendTyping true h"])
        let (second, none) = machine.typing(true, draft: "hi", in: Self.conversation, now: .seconds(5))
        #expect(second == .throttled && none.isEmpty)
        var configuration = SessionConfiguration.fastForTests
        configuration.typingPolicy = .coalesce(interval: .seconds(1), autoStop: .seconds(5))
        var coalescing = Machine(settings: Machine.Settings(descriptor: BackendDescriptor(name: "w", capabilities: [.typing], sync: .snapshots), configuration: configuration))
        #expect(Self.describe(coalescing.typing(true, draft: "h", in: Self.conversation, now: .seconds(1)).1) == ["sendTyping true h", "startTypingTimer 2.0 seconds"])
        let (later, nothing) = coalescing.typing(true, draft: "he", in: Self.conversation, now: .milliseconds(1500))
        #expect(later == .coalesced && nothing.isEmpty, "the latest draft waits for the timer set already")
        #expect(Self.describe(coalescing.typingTimerFired(in: Self.conversation, now: .seconds(2))) == ["sendTyping true he", "startTypingTimer 3.0 seconds"])
    }

    // MARK: Marking read

    @Test func markingReadWithoutAMarkerReadsUpToTheNewestMessageFromOthersAndClearsTheUnreadCount() {
        var machine = Self.machine()
        guard case .needs(.newestMessages(in: Self.conversation)) = machine.markRead(nil, in: Self.conversation) else {
            Issue.record("no marker: the newest stored messages are asked for")
            return
        }
        #expect(Self.perform(machine.markRead(nil, in: Self.conversation, facts: Self.facts((.newestMessages(in: Self.conversation), .messages([]))))) == [], "nothing stored: nothing to mark")
        let theirs = Message(serverID: "m9", conversationID: Self.conversation, sequence: 9, senderRole: .agent, text: "", time: Date(timeIntervalSince1970: 9))
        let mine = Message(serverID: "m10", conversationID: Self.conversation, sequence: 10, senderRole: .customer, text: "", time: Date(timeIntervalSince1970: 10))
        let failed = Message(clientID: "f", conversationID: Self.conversation, senderRole: .customer, text: "", time: Date(timeIntervalSince1970: 11), deliveryState: .failed("no"))
        let unread = ConversationInfo(id: Self.conversation, unreadCount: 3)
        let facts = Self.facts((.newestMessages(in: Self.conversation), .messages([theirs, mine, failed])), (.conversation(Self.conversation), .conversation(unread)))
        #expect(
            Self.perform(machine.markRead(nil, in: Self.conversation, facts: facts)) == ["updateConversation unread 0", "sendReadMarker sequence(9)"],
            "the user's own messages, sent or failed, are no place to mark"
        )
        guard case .refuse(let refused) = machine.markRead(.sequence(8), in: Self.conversation, facts: facts) else {
            Issue.record("an explicit marker behind the one on its way is refused on a backend that does not move markers back")
            return
        }
        #expect(refused.code == .invalidArgument)
        #expect(Self.perform(machine.markRead(nil, in: Self.conversation, facts: facts)) == [], "\"up to the newest\" reads as far already")
        #expect(Self.describe(machine.readMarkerAnswered(.sequence(9), in: Self.conversation, result: .success(.done))).isEmpty)
        #expect(machine.conversations[Self.conversation].readMarker.sent == .sequence(9))
    }

    @Test func aMarkerTheServerRefusesIsReportedAndAFailedReadChangesNothing() {
        var machine = Self.machine()
        let theirs = (5...6).map { Message(serverID: MessageID("m\($0)"), conversationID: Self.conversation, sequence: Int64($0), senderRole: .agent, text: "", time: Date(timeIntervalSince1970: Double($0))) }
        let known = Self.facts(
            (.conversation(Self.conversation), .conversation(ConversationInfo(id: Self.conversation, unreadCount: 6))),
            (.newestMessages(in: Self.conversation), .messages(theirs))
        )
        #expect(
            Self.perform(machine.markRead(.sequence(4), in: Self.conversation, facts: known)) == ["updateConversation unread 2", "sendReadMarker sequence(4)"],
            "what came from others after the marker stays unread"
        )
        #expect(Self.describe(machine.readMarkerAnswered(.sequence(4), in: Self.conversation, result: .failure(SwitchboardError(.invalidArgument, "no"))))
            == ["report invalidArgument"])
        var failed = Machine.Facts()
        failed.answers[.conversation(Self.conversation)] = .failed(SwitchboardError(.storageFailure, "disk"))
        failed.answers[.newestMessages(in: Self.conversation)] = .messages([])
        #expect(Self.perform(machine.markRead(.sequence(5), in: Self.conversation, facts: failed)) == [])
        #expect(machine.conversations[Self.conversation].readMarker.pending == nil, "nothing was marked")
    }

    @Test func theOutboxIsRepairedAtLoad() {
        var machine = Self.machine()
        var orphan = Message(clientID: "orphan", conversationID: Self.conversation, text: "typed before a crash", time: Date(timeIntervalSince1970: 7), deliveryState: .pending)
        orphan.senderRole = .customer
        let repairs = machine.restoreOutbox([Self.entry("kept"), Self.entry("lost-message")], withMessage: ["kept"], pending: [orphan, Self.entry("kept").pendingMessage])
        #expect(repairs.count == 2)
        #expect(repairs.first == .saveMessages([Self.entry("lost-message").pendingMessage]), "an entry whose message is gone gets it back")
        guard case .saveOutboxEntry(let entry) = repairs.last else {
            Issue.record("a pending message with no entry gets one")
            return
        }
        #expect(entry.clientID == "orphan" && entry.message.content.text == "typed before a crash" && entry.createdAt == orphan.time)
        #expect(machine.outbox.entries.map(\.clientID) == ["kept", "lost-message", "orphan"])
    }

    // MARK: Polling and app requests

    @Test func aBackendThatPushesNothingIsPolledOnceAtATimeAndAgainAfterTheInterval() {
        var configuration = SessionConfiguration.fastForTests
        configuration.pollInterval = .seconds(30)
        var machine = Machine(settings: Machine.Settings(descriptor: BackendDescriptor(name: "p", capabilities: [], sync: .polled), configuration: configuration))
        #expect(Self.describe(machine.pollDue(isLinkOpen: false)).isEmpty, "no link: the next one polls when it opens")
        #expect(Self.describe(machine.pollDue(isLinkOpen: true)) == ["poll"])
        #expect(Self.describe(machine.pollDue(isLinkOpen: true)).isEmpty, "one is queued already")
        #expect(Self.describe(machine.pollFinished(isLinkOpen: true)) == ["startPollTimer 30.0 seconds"])
        #expect(Self.describe(machine.pollDue(isLinkOpen: true)) == ["poll"])
        machine.pollAbandoned()
        #expect(Self.describe(machine.pollFinished(isLinkOpen: false)).isEmpty)
        #expect(machine.statistics.polls == 2)
        var pushing = Self.machine()
        #expect(Self.describe(pushing.pollDue(isLinkOpen: true)).isEmpty, "a backend that pushes is not polled")
    }

    @Test func anAppRequestsAnswerIsStoredAsItSays() {
        var machine = Self.machine()
        let edited = Message(serverID: "m1", conversationID: Self.conversation, text: "edited", time: .distantPast, isEdited: true)
        #expect(Self.perform(machine.appRequestAnswered(.message(edited), as: .response(in: Self.conversation))) == ["deliver ?"])
        #expect(Self.perform(machine.appRequestAnswered(.done, as: .nothing)) == [])
        var changes = ConversationChanges()
        changes.title = "Renamed"
        let asks = machine.appRequestAnswered(.done, as: .changes(changes, to: Self.conversation))
        guard case .needs(.conversation(Self.conversation)) = asks else {
            Issue.record("a bare \"done\" applies the changes to the stored conversation")
            return
        }
        let stored = Self.facts((.conversation(Self.conversation), .conversation(ConversationInfo(id: Self.conversation, title: "Old"))))
        guard case .perform(let actions) = machine.appRequestAnswered(.done, as: .changes(changes, to: Self.conversation), facts: stored),
            case .deliver(let events) = actions.first, case .conversationUpdated(let info) = events.first?.kind
        else {
            Issue.record("the changed conversation is stored")
            return
        }
        #expect(info.title == "Renamed")
    }

    @Test func aQueuedWindowWhoseReadFailedIsStoredAsItIsAndSaidSo() {
        var machine = Self.machine(sequenced: false)
        _ = machine.snapshot(Self.windowed(5...6), stored: Self.stored([1]), storedOldest: [Self.conversation: Self.windowMessage(1)], isLinkOpen: true)
        _ = machine.snapshot(Self.windowed(9...10), stored: Self.stored([1]), storedOldest: [:], isLinkOpen: true)
        machine.conversations[Self.conversation].windowFill = nil  // the first fill closed
        var failed = Machine.Facts()
        failed.answers[.storedMessage("w9", in: Self.conversation)] = .failed(SwitchboardError(.storageFailure, "disk"))
        let placed = machine.placeQueuedWindow(in: Self.conversation, isLinkOpen: true, facts: failed)
        #expect(Self.perform(placed) == ["report storageFailure", "deliver ? ?"], "no fill opened on a read that failed")
        #expect(machine.conversations[Self.conversation].windowFill == nil)
    }
}

