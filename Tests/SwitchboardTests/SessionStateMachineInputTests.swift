import Foundation
@testable import Switchboard
import SwitchboardTestKit
import Testing

/// The session's one entry, driven synchronously as the runner drives it: an input in, the effects
/// out, the store reads answered by the test, follow-ups fed back. No tasks, no clock, no store.
@Suite struct SessionStateMachineInputTests {
    typealias Machine = SessionStateMachine
    static let conversation = ConversationID("c")

    /// Performs inputs the way ``ChatSession`` does, recording the effects as text.
    struct Driver {
        var machine: Machine
        var now: Duration = .zero
        let date = Date(timeIntervalSince1970: 1_000)
        var random = SeededRandomNumberGenerator(seed: 1)
        /// What the store answers to a read.
        var store: (Machine.Read) -> Machine.Facts.Answer = { read in
            switch read {
            case .conversation: .conversation(nil)
            case .messages, .sentMessages, .allMessages: .messages([])
            case .allConversations: .conversations([])
            default: .message(nil)
            }
        }

        init(
            capabilities: BackendCapabilities = [.readMarkers, .historyPaging],
            sync: SyncModel = .sequenced(batchLimit: 100),
            limits: BackendLimits = BackendLimits(),
            configuration: SessionConfiguration = .fastForTests
        ) {
            machine = Machine(
                settings: Machine.Settings(descriptor: BackendDescriptor(name: "test", capabilities: capabilities, limits: limits, sync: sync), configuration: configuration)
            )
        }

        /// Handles `input`, then its follow-ups, then what waited for the commit; answers are given
        /// at once (the commit cannot fail here).
        mutating func take(_ input: Machine.Input) -> [String] {
            var facts = Machine.Facts()
            while true {
                switch machine.handle(input, facts: facts, at: Machine.Moment(now: now, date: date), using: &random) {
                case .needs(let read):
                    facts.answers[read] = store(read)
                case .perform(let effects):
                    var described: [String] = []
                    var afterCommit: [Machine.Input] = []
                    for effect in effects {
                        switch effect {
                        case .then(let next): described += take(next)
                        case .afterCommit(let next): afterCommit.append(next)
                        case .answer(let answer):
                            answer.complete(nil)
                            described.append("answer")
                        default: described.append(Self.describe(effect))
                        }
                    }
                    for next in afterCommit { described += take(next) }
                    return described
                }
            }
        }

        /// Opens link 0: resumed, started, opened.
        mutating func open() {
            _ = take(.started)
            _ = take(.command(.lifecycle(.resume, Reply { _ in })))
            _ = take(.linkOpened(0))
        }

        static func describe(_ effect: Machine.Effect) -> String {
            switch effect {
            case .deliver(let events): "deliver " + events.map { $0.sequence.map { "m\($0)" } ?? "?" }.joined(separator: " ")
            case .write(let writes): "write " + writes.map(describe).joined(separator: " ")
            case .publish(.connection(let state, _), _, _, _): "publish \(state)"
            case .publish(.fatal(let error), _, _, _): "publish fatal \(error.code)"
            case .publish(.messageAdded, _, _, _): "publish messageAdded"
            case .publish(.conversationAdded, _, _, _): "publish conversationAdded"
            case .publish(.typing(let who, let isTyping, _), _, _, _): "publish typing \(who) \(isTyping)"
            case .publish: "publish"
            case .report(let problem, _): "report \(problem.code)"
            case .answer: "answer"
            case .log(let level, _, _): "log \(level)"
            case .request(let link, let ticket, let request): "request \(ticket) \(request.name) on \(link)"
            case .startLink(let id): "startLink \(id)"
            case .finishJobs(let id): "finishJobs \(id)"
            case .abortConnect(let id): "abortConnect \(id)"
            case .reloadSyncState: "reloadSyncState"
            case .then, .afterCommit: "follow-up"
            }
        }

        static func describe(_ write: StoreWrite) -> String {
            switch write {
            case .saveConversation: "saveConversation"
            case .saveMessages(let messages): "saveMessages(\(messages.count))"
            case .saveOutboxEntry(let entry): "saveOutboxEntry"
                + (entry.attempts > 0 ? "(attempts \(entry.attempts))" : "")
            case .removeOutboxEntry: "removeOutboxEntry"
            case .saveSequence(let sequence, _): "saveSequence \(sequence)"
            case .saveCredentials: "saveCredentials"
            case .saveCursor: "saveCursor"
            case .removeAllMessages: "removeAllMessages"
            default: "\(write)"
            }
        }
    }

    /// A reply whose answer the test reads.
    final class Answered<Value: Sendable>: Sendable {
        let result = Locked<Result<Value, any Error>?>(nil)
        var reply: Reply<Value> { Reply { [result] outcome in result.withLock { $0 = outcome } } }
        var value: Value? { result.withLock { try? $0?.get() } }
        var errorCode: SwitchboardError.Code? {
            result.withLock { outcome in
                guard case .failure(let error as SwitchboardError)? = outcome else { return nil }
                return error.code
            }
        }
    }

    /// A windowed link's pushed events wait for its first snapshot, then follow it in the order
    /// they came; a link that sends none has them applied at the window timeout.
    @Test func aWindowedLinksEventsWaitForItsWindow() {
        var driver = Driver(capabilities: [.historyPaging], sync: .windowed(pageSize: 50))
        driver.open()
        let chat = Self.conversation
        let info = ConversationInfo(id: chat, kind: .thread, state: .active)
        func pushed(_ index: Int) -> Machine.Input {
            let message = Message(serverID: MessageID("p\(index)"), conversationID: chat, senderRole: .agent, text: "p\(index)", time: Date(timeIntervalSince1970: Double(index)))
            // The sequence only names the event in the driver's log: a windowed backend has none.
            return .update(0, .event(BackendEvent(.messageAdded(message, position: .newest), conversation: chat, sequence: Int64(index))))
        }
        #expect(driver.take(pushed(1)).isEmpty, "held: the window has not come")
        #expect(driver.take(.update(0, .cursor(.token("t1")))).isEmpty, "a cursor waits with the events it follows")
        #expect(driver.take(pushed(2)).isEmpty)
        #expect(driver.machine.window?.held.count == 3)
        let window = driver.take(.update(0, .snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info)], isComplete: false))))
        print("a windowed link's window, then what waited for it: \(window)")
        #expect(window == ["deliver ?", "deliver m1", "write saveCursor", "deliver m2"], "the window first, then what waited, in order")
        #expect(driver.machine.window == nil && driver.machine.deadlines[.window] == nil)
        #expect(driver.take(pushed(3)) == ["deliver m3"], "after the window, events go at once")

        // The next link sends no snapshot: at the timeout its events go as they came.
        _ = driver.take(.linkFailed(0, SwitchboardError(.connectionLost, "dropped")))
        _ = driver.take(.linkClosed(0, nil))
        driver.now = driver.machine.deadlines[.reconnect] ?? driver.now
        _ = driver.take(.tick(sleeper: 1))
        _ = driver.take(.linkOpened(1))
        #expect(driver.take(.update(1, pushed(4).updateValue)).isEmpty)
        guard let timeout = driver.machine.deadlines[.window] else {
            Issue.record("a windowed link waits for its window with a deadline")
            return
        }
        driver.now = timeout
        let released = driver.take(.tick(sleeper: 2))
        #expect(released == ["log warning", "deliver m4"])
        #expect(driver.machine.window == nil)
    }

    @Test func aLinkThatIsNotWindowedHoldsNothing() {
        var driver = Driver(capabilities: [.historyPaging], sync: .snapshots)
        driver.open()
        let message = Message(serverID: "p1", conversationID: Self.conversation, senderRole: .agent, text: "p1", time: Date(timeIntervalSince1970: 1))
        #expect(driver.take(.update(0, .event(BackendEvent(.messageAdded(message, position: .newest), conversation: Self.conversation)))) == ["deliver ?"])
        #expect(driver.machine.window == nil)
    }

    @Test func theLinkOpensBacksOffAndOpensAgainWhenTheClockReachesTheDeadline() {
        var driver = Driver()
        #expect(driver.take(.started).isEmpty, "a session starts paused")
        #expect(driver.take(.command(.lifecycle(.resume, Reply { _ in }))) == ["publish connecting", "startLink 0", "answer"])
        #expect(driver.take(.linkOpened(0)) == ["publish connected"])
        #expect(driver.machine.connection.isLinkOpen)
        let lost = SwitchboardError(.connectionLost, "dropped")
        #expect(driver.take(.linkFailed(0, lost)) == ["finishJobs 0"])
        #expect(driver.take(.linkClosed(0, nil)) == ["publish waitingToReconnect"])
        guard let deadline = driver.machine.deadlines[.reconnect] else {
            Issue.record("a failed link backs off")
            return
        }
        #expect(driver.machine.nextDeadline == deadline)
        driver.now = deadline - .milliseconds(1)
        #expect(driver.take(.tick(sleeper: 1)).isEmpty, "nothing is due before the deadline")
        driver.now = deadline
        #expect(driver.take(.tick(sleeper: 2)) == ["publish connecting", "startLink 1"])
        #expect(driver.machine.statistics.connects == 1 && driver.machine.statistics.connectionFailures == 1)
    }

    @Test func aFatalAnswerOutranksWhatTheLinkThrewAndEndsTheSession() {
        var driver = Driver()
        driver.open()
        let request = Answered<BackendResponse>()
        #expect(driver.take(.command(.request(.vendor(VendorCall(NamedCall())), .nothing, request.reply))) == ["request 0 vendor(x) on 0"])
        let fatal = SwitchboardError(.fatal, "the account is gone")
        let effects = driver.take(.requestFinished(0, ticket: 0, .failure(fatal)))
        #expect(effects.contains("finishJobs 0") && effects.contains("answer"))
        #expect(request.errorCode == .fatal)
        #expect(driver.take(.linkClosed(0, SwitchboardError(.connectionLost, "torn down"))).contains("publish fatal fatal"))
        #expect(driver.machine.connection.lifecycle.state == .closed)
        #expect(driver.machine.deadlines[.reconnect] == nil, "a fatal error does not reconnect")
    }

    @Test func aSendIsStoredThenQueuedAndItsLaneCarriesTheNextOneAfterItsAnswer() {
        var driver = Driver()
        driver.open()
        let first = Answered<Message>()
        #expect(
            driver.take(.command(.send(MessageDraft(text: "one"), in: Self.conversation, clientID: nil, trace: nil, first.reply))) == [
                "write saveConversation", "publish conversationAdded", "write saveMessages(1) saveOutboxEntry", "publish messageAdded", "answer",
                "request 0 send on 0",
            ],
            "the conversation the backend never announced is stored first; the send goes once its entry is stored"
        )
        guard let sent = first.value, let clientID = sent.clientID else {
            Issue.record("the caller gets the pending message")
            return
        }
        #expect(sent.deliveryState == .pending)
        let second = Answered<Message>()
        #expect(
            driver.take(.command(.send(MessageDraft(text: "two"), in: Self.conversation, clientID: nil, trace: nil, second.reply))) == [
                "write saveMessages(1) saveOutboxEntry", "publish messageAdded", "answer",
            ],
            "known to be stored now; the second waits in the conversation's lane"
        )
        var confirmed = sent
        confirmed.serverID = "s1"
        confirmed.deliveryState = .sent
        #expect(driver.take(.requestFinished(0, ticket: 0, .success(.message(confirmed)))) == ["deliver ?", "write removeOutboxEntry", "request 1 send on 0"])
        #expect(driver.machine.outbox.entries.map(\.clientID) == [second.value?.clientID].compactMap { $0 })
        #expect(clientID != second.value?.clientID)
        #expect(driver.machine.statistics.messagesSent == 1)
    }

    /// On a backend that takes one file per message, a draft with text and two files is three
    /// messages, stored with their three outbox entries in one write, each sent in turn.
    @Test func aDraftOverTheFilesPerMessageIsStoredAsItsPartsInOneWrite() {
        var driver = Driver(capabilities: [.readMarkers, .files], limits: BackendLimits(attachmentsPerMessage: 1))
        driver.open()
        let files = [Message.Attachment(name: "a.pdf", mimeType: "application/pdf", data: Data([1, 2])), Message.Attachment(name: "b.png", url: URL(fileURLWithPath: "/tmp/b.png"))]
        let answer = Answered<Message>()
        #expect(
            driver.take(.command(.send(MessageDraft(text: "see these", attachments: files), in: Self.conversation, clientID: nil, trace: nil, answer.reply))) == [
                "write saveConversation", "publish conversationAdded", "write saveMessages(3) saveOutboxEntry saveOutboxEntry saveOutboxEntry",
                "publish messageAdded", "publish messageAdded", "publish messageAdded", "answer", "request 0 send on 0",
            ]
        )
        let entries = driver.machine.outbox.entries
        #expect(entries.map(\.message.content.text) == ["see these", "", ""])
        #expect(entries.map { $0.message.content.attachments.map(\.name) } == [[], ["a.pdf"], ["b.png"]])
        #expect(entries.dropFirst().first?.message.content.attachments.first?.data == Data([1, 2]), "the bytes stay with the entry")
        #expect(Set(entries.map(\.clientID)).count == 3)
        #expect(answer.value?.text == "see these" && answer.value?.clientID == entries.first?.clientID, "the caller gets the first part")
        // Within the limit, or with no limit, a draft is one message.
        #expect(MessageDraft(text: "", attachments: [files[0]]).parts(attachmentsPerMessage: 1).count == 1)
        #expect(MessageDraft(text: "x", attachments: files).parts(attachmentsPerMessage: nil).count == 1)
        #expect(MessageDraft(text: "x", attachments: files + files).parts(attachmentsPerMessage: 3).map(\.attachments.count) == [0, 3, 1])
        #expect(MessageDraft(text: "x", attachments: files).parts(attachmentsPerMessage: 2).count == 1, "text beside files within a limit above one stays together")
    }

    @Test func twoHistoryCallsShareOnePageAndBothHearOnceItIsStored() {
        var driver = Driver(capabilities: [.historyPaging], sync: .windowed(pageSize: 50))
        driver.open()
        let first = Answered<Void>()
        let second = Answered<Void>()
        #expect(driver.take(.command(.history(Self.conversation, limit: 10, first.reply))) == ["request 0 history on 0"])
        #expect(driver.take(.command(.history(Self.conversation, limit: 10, second.reply))).isEmpty, "the second joins the page on its way")
        let page = HistoryPage(messages: [Message(serverID: "h1", conversationID: Self.conversation, text: "old", time: .distantPast)], hasMore: false)
        #expect(driver.take(.requestFinished(0, ticket: 0, .success(.history(page)))) == ["deliver ?", "answer", "answer"])
        #expect(first.value != nil && second.value != nil)
        let third = Answered<Void>()
        #expect(driver.take(.command(.history(Self.conversation, limit: 10, third.reply))) == ["answer"], "no older history: answered at once")
    }

    @Test func whatALinkCarriedWhenItWentIsAnsweredAndTheOutboxSendsItAgain() {
        var driver = Driver()
        driver.open()
        let request = Answered<BackendResponse>()
        _ = driver.take(.command(.send(MessageDraft(text: "one"), in: Self.conversation, clientID: nil, trace: nil, Answered<Message>().reply)))
        #expect(driver.take(.command(.request(.vendor(VendorCall(NamedCall())), .nothing, request.reply))) == ["request 1 vendor(x) on 0"])
        _ = driver.take(.linkFailed(0, SwitchboardError(.connectionLost, "dropped")))
        #expect(driver.take(.linkClosed(0, nil)).contains("answer"))
        #expect(request.errorCode == .connectionLost, "an app request fails: its caller decides")
        #expect(driver.machine.lanes.count == 0)
        #expect(driver.machine.outbox.entries.count == 1, "the send stays in the outbox")
        guard let deadline = driver.machine.deadlines[.reconnect] else {
            Issue.record("the link backs off")
            return
        }
        driver.now = deadline
        _ = driver.take(.tick(sleeper: 1))
        #expect(driver.take(.linkOpened(1)).contains("request 2 send on 1"), "the next link sends it again")
    }

    @Test func aRequestTheGoingLinkDidNotTakeWaitsInItsLaneUntilTheLinkHasGone() {
        var driver = Driver()
        driver.open()
        let request = Answered<BackendResponse>()
        #expect(driver.take(.command(.request(.vendor(VendorCall(NamedCall())), .nothing, request.reply))) == ["request 0 vendor(x) on 0"])
        #expect(driver.take(.requestNotTaken(0, ticket: 0)).isEmpty, "not an answer: nothing is decided on it")
        #expect(request.result.withLock { $0 } == nil)
        #expect(driver.machine.lanes.count == 1)
        _ = driver.take(.linkFailed(0, SwitchboardError(.connectionLost, "dropped")))
        _ = driver.take(.linkClosed(0, nil))
        #expect(request.errorCode == .connectionLost, "the link went before it was sent")
        #expect(driver.machine.lanes.count == 0)
    }

    @Test func aFailedRetransmitIsAskedForAgainWhenTheHoldDeadlineIsReached() {
        var configuration = SessionConfiguration.fastForTests
        configuration.newConversationCatchUp = 0
        var driver = Driver(configuration: configuration)
        driver.store = { read in
            if case .conversation = read { return .conversation(ConversationInfo(id: Self.conversation)) }
            return .message(nil)
        }
        driver.open()
        #expect(driver.take(.update(0, .conversationHead(Self.conversation, lastSequence: 1))) == ["write saveSequence 1"])
        #expect(driver.take(.update(0, .event(SessionStateMachineTests.message(3)))) == ["request 0 retransmit on 0"])
        let hold = driver.machine.deadlines[.hold(Self.conversation)]
        #expect(hold == driver.now + configuration.holdTimeout)
        #expect(driver.take(.requestFinished(0, ticket: 0, .failure(SwitchboardError(.connectionLost, "no answer")))).contains("report connectionLost"))
        driver.now = (hold ?? .zero) - .milliseconds(1)
        #expect(driver.take(.tick(sleeper: 1)).isEmpty)
        driver.now = hold ?? .zero
        #expect(driver.take(.tick(sleeper: 2)) == ["request 1 retransmit on 0"])
        #expect(driver.machine.deadlines[.hold(Self.conversation)] == nil || driver.machine.deadlines[.hold(Self.conversation)]! > driver.now)
        #expect(
            driver.take(.requestFinished(0, ticket: 1, .success(.retransmitted([], isComplete: true)))) == ["deliver m3", "write saveSequence 3"],
            "a complete answer without #2 proves it absent: the held event goes on"
        )
    }

    @Test func whoWasTypingStopsWhenTheConversationClosesOrTheyLeave() {
        var driver = Driver()
        func published(_ kinds: ChatEvent.Kind...) -> Machine.Input {
            var output = EventProjection.Output()
            output.publications = kinds.map { EventProjection.Publication(kind: $0, conversation: Self.conversation, sequence: nil, time: nil) }
            return .projected(output)
        }
        #expect(driver.take(published(.typing("bob", isTyping: true, draft: nil), .typing("eve", isTyping: true, draft: nil))) == [
            "publish typing bob true", "publish typing eve true",
        ])
        #expect(driver.take(published(.participantsRemoved(["eve"]))) == ["publish", "publish typing eve false"], "eve left: her typing ends")
        #expect(driver.take(published(.typing("bob", isTyping: false, draft: nil), .typing("bob", isTyping: true, draft: nil))).count == 2)
        #expect(
            driver.take(published(.conversationStateChanged(.closed, previous: .active))) == ["publish", "publish typing bob false"],
            "a closed chat has nobody typing"
        )
        #expect(driver.take(published(.conversationStateChanged(.closed, previous: .active))) == ["publish"], "said once")
        _ = driver.take(published(.typing("bot", isTyping: true, draft: nil)))
        #expect(driver.take(published(.agentChanged(Participant(id: "bob", role: .agent)))) == ["publish", "publish typing bot false"], "the bot handed over")
    }

    @Test func theSameInputsReplayTheSameEffects() {
        func run() -> [String] {
            var driver = Driver()
            driver.open()
            var effects: [String] = []
            for text in ["one", "two"] {
                effects += driver.take(.command(.send(MessageDraft(text: text), in: Self.conversation, clientID: nil, trace: nil, Answered<Message>().reply)))
            }
            effects += driver.take(.linkFailed(0, SwitchboardError(.connectionLost, "dropped")))
            effects += driver.take(.linkClosed(0, nil))
            effects += ["reconnect at \(driver.machine.deadlines[.reconnect].map { "\($0)" } ?? "-")"]
            effects += driver.machine.outbox.entries.map(\.clientID.rawValue)
            return effects
        }
        let first = run()
        #expect(first == run(), "a seed and a list of inputs replay the session")
        #expect(first.count > 6)
    }
}

/// A vendor call the machine only routes: it never reaches a link in these tests.
private struct NamedCall: VendorRequest {
    var name: String { "x" }
    func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
        throw SwitchboardError(.unsupported, "never performed")
    }
}

extension SessionStateMachine.Input {
    /// The update of an `.update` input.
    fileprivate var updateValue: BackendUpdate {
        guard case .update(_, let update) = self else { preconditionFailure("not an update") }
        return update
    }
}
