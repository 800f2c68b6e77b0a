import Foundation
@_spi(TestKit) import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// A backend that logs every request it performs in arrival order, can hold a request on the
/// wire until the test lets it go, answers sends, and can kill its link.
private final class RecordingBackend: ChatBackend {
    struct Connection: BackendConnection {
        let updates: AsyncThrowingStream<BackendUpdate, any Error>
        let backend: RecordingBackend
        let kill: AsyncThrowingStream<BackendUpdate, any Error>.Continuation

        func perform(_ request: BackendRequest) async throws -> BackendResponse {
            try await backend.perform(request, kill: kill)
        }
    }

    private struct State {
        var log: [String] = []
        var holding: Set<String> = []
        var held: [String: CheckedContinuation<Void, Never>] = [:]
        var connects = 0
        var nextServerID = 0
    }

    private let state = Locked(State())
    let arrived = AsyncSignal()
    let conversation = ConversationID("chat")
    /// Sends with this text close the link, as a server that drops the socket on a frame.
    let poison: String
    /// Whether a send is answered with the message (most servers) or only "done".
    let answersSendsWithMessage: Bool
    let descriptor: BackendDescriptor

    init(typingPolicy: TypingPolicy = .startEnd(autoStop: .seconds(5)), poison: String = "poison", answersSendsWithMessage: Bool = true) {
        self.poison = poison
        self.answersSendsWithMessage = answersSendsWithMessage
        self.descriptor = BackendDescriptor(
            name: "recording",
            capabilities: [.typing, .readMarkers],
            limits: BackendLimits(typingPolicy: typingPolicy)
        )
    }

    var log: [String] { state.withLock { $0.log } }
    var connects: Int { state.withLock { $0.connects } }

    /// The next request with this label waits on the wire until ``release(_:)``.
    func hold(_ label: String) { state.withLock { _ = $0.holding.insert(label) } }

    func release(_ label: String) {
        let waiter = state.withLock { $0.held.removeValue(forKey: label) }
        waiter?.resume()
    }

    func isHeld(_ label: String) -> Bool { state.withLock { $0.held[label] != nil } }

    static func label(_ request: BackendRequest) -> String {
        switch request {
        case .typing(_, let isTyping, _): "typing:\(isTyping)"
        case .markRead(_, .sequence(let sequence)): "read:\(sequence)"
        case .send(let message): "send:\(message.content.text)"
        default: request.name
        }
    }

    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        state.withLock { $0.connects += 1 }
        let (updates, continuation) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        let info = ConversationInfo(id: conversation, kind: .supportChat, state: .active)
        continuation.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info)], isComplete: true)))
        defer { continuation.finish() }
        return try await body(Connection(updates: updates, backend: self, kill: continuation))
    }

    private func perform(
        _ request: BackendRequest,
        kill: AsyncThrowingStream<BackendUpdate, any Error>.Continuation
    ) async throws -> BackendResponse {
        let label = Self.label(request)
        if case .send(let message) = request, message.content.text == poison {
            state.withLock { $0.log.append(label) }
            kill.finish(throwing: SwitchboardError(.connectionLost, "closed with 1009: message too big"))
            throw SwitchboardError(.connectionLost, "closed with 1009: message too big")
        }
        let mustHold = state.withLock { $0.holding.remove(label) != nil }
        if mustHold {
            await withCheckedContinuation { continuation in
                state.withLock { $0.held[label] = continuation }
                arrived.signal()
            }
        }
        state.withLock { $0.log.append(label) }
        arrived.signal()
        guard case .send(let message) = request, answersSendsWithMessage else { return .done }
        let serverID = state.withLock { state in
            state.nextServerID += 1
            return MessageID("m\(state.nextServerID)")
        }
        return .message(
            Message(
                serverID: serverID, clientID: message.clientID, conversationID: message.conversationID,
                senderRole: .customer, text: message.content.text, time: Date(), deliveryState: .sent
            )
        )
    }

    /// Waits until `check` holds, woken by each request's arrival.
    func waitUntil(_ what: String, _ check: @escaping @Sendable (RecordingBackend) -> Bool) async throws {
        try await SwitchboardTestKit.waitUntil(what, timeout: .seconds(15), signal: arrived) { check(self) }
    }
}

/// A sequenced backend whose one conversation has `head` events; it announces only the head
/// and answers retransmits completely, logging the ranges asked for.
private final class SequencedBackend: ChatBackend {
    struct Connection: BackendConnection {
        let updates: AsyncThrowingStream<BackendUpdate, any Error>
        let backend: SequencedBackend
        func perform(_ request: BackendRequest) async throws -> BackendResponse {
            guard case .retransmit(let conversation, let range) = request else { return .done }
            backend.ranges.withLock { $0.append(range) }
            let events = range.map { sequence in
                BackendEvent(
                    .messageAdded(Message(serverID: MessageID("m\(sequence)"), conversationID: conversation, sequence: sequence, text: "\(sequence)", time: Date(timeIntervalSince1970: Double(sequence))), position: .newest),
                    conversation: conversation, sequence: sequence
                )
            }
            return .retransmitted(events, isComplete: true)
        }
    }

    let head: Int64
    let ranges = Locked<[ClosedRange<Int64>]>([])
    let descriptor = BackendDescriptor(name: "sequenced", capabilities: [.sequences])

    init(head: Int64) { self.head = head }

    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (updates, continuation) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        continuation.yield(.conversationHead("big", lastSequence: head))
        defer { continuation.finish() }
        return try await body(Connection(updates: updates, backend: self))
    }
}

/// A backend whose first send reply is lost after the server applied it; the server's copy
/// then comes without the client id (as a re-read list does), and the resend is answered with
/// the stored message, both ids on it.
private final class LostReplyBackend: ChatBackend {
    struct Connection: BackendConnection {
        let updates: AsyncThrowingStream<BackendUpdate, any Error>
        let push: AsyncThrowingStream<BackendUpdate, any Error>.Continuation
        let backend: LostReplyBackend
        func perform(_ request: BackendRequest) async throws -> BackendResponse {
            guard case .send(let outgoing) = request else { return .done }
            var stored = Message(
                serverID: "s1", conversationID: outgoing.conversationID, senderRole: .customer,
                text: outgoing.content.text, time: Date(timeIntervalSince1970: 100), deliveryState: .sent
            )
            let attempt = backend.attempts.withLock { attempts in defer { attempts += 1 }; return attempts }
            if attempt == 0 {
                push.yield(.event(BackendEvent(.messageAdded(stored, position: .newest), conversation: outgoing.conversationID)))
                throw SwitchboardError(.timedOut, "the reply was lost")
            }
            stored.clientID = outgoing.clientID
            return .message(stored)
        }
    }

    let attempts = Locked(0)
    let conversation = ConversationID("chat")
    let descriptor = BackendDescriptor(name: "lost-reply", capabilities: [])

    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (updates, continuation) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        let info = ConversationInfo(id: conversation, kind: .supportChat, state: .active)
        continuation.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info)], isComplete: true)))
        defer { continuation.finish() }
        return try await body(Connection(updates: updates, push: continuation, backend: self))
    }
}

@Suite(.timeLimit(.minutes(1)))
struct EngineLoopTests {
    /// Applies a timeline's diffs to a list, as a UI does, until `done` holds for the list.
    static func rows(of timeline: Timeline, until done: ([Message]) -> Bool) async -> [Message] {
        var list: [Message] = []
        for await update in timeline {
            list.apply(update.diffs)
            if done(list) { break }
        }
        return list
    }

    @Test func aLostReplyThenTheServersCopyThenTheResendShowOneMessageEverywhere() async throws {
        let backend = LostReplyBackend()
        let store = InMemoryChatStore()
        let session = ChatSession(
            backend: backend, store: store, configuration: .fastForTests,
            clock: SessionClock(ImmediateClock()), logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == backend.conversation }
            let chat = try await session.conversation(backend.conversation)
            let timeline = try await chat.timeline(limit: 10)
            let sent = try await chat.send(text: "hello")
            try await recorder.first("the merge") {
                $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID == "s1"
            }
            // The timeline: pending row, server copy, then the merge into one row.
            let list = await Self.rows(of: timeline) { rows in
                rows.count == 1 && rows.first?.clientID != nil && rows.first?.serverID != nil
            }
            let stored = try await chat.storedMessages(before: nil, limit: 10)
            print("lost reply: store \(stored.map { "\($0.serverID?.rawValue ?? "-")/\($0.clientID != nil)" }), timeline \(list.count) row(s)")
            #expect(stored.count == 1 && stored.first?.serverID == "s1" && stored.first?.clientID == sent.clientID)
            #expect(list.map(\.serverID) == ["s1"] && timeline.items == list, "the timeline shows one message")
            #expect(await session.pendingSends.isEmpty)
        }
    }

    @Test func aConversationFirstSeenWithALargeHeadCatchesUpOnlyItsNewestEvents() async throws {
        let backend = SequencedBackend(head: 50_000)
        let session = ChatSession(
            backend: backend,
            configuration: SessionConfiguration(newConversationCatchUp: 100),
            clock: SessionClock(TestClock()),
            logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.waitUntil("the newest 100") { $0.compactMap(\.addedMessage).count == 100 }
            let added = recorder.events.compactMap(\.addedMessage).compactMap(\.sequence)
            let ranges = backend.ranges.withLock { $0 }
            print("first seen at 50,000: asked for \(ranges), delivered \(added.first!)...\(added.last!)")
            #expect(ranges == [49_901...50_000])
            #expect(added == Array(49_901...50_000))
            #expect(await session.statistics.retransmittedEvents == 100)
        }
    }

    /// Runs a session on `backend` (on a test clock nobody advances) and hands `body` its one
    /// conversation once the session knows it.
    private func withChat(
        _ backend: RecordingBackend,
        _ body: @Sendable (ChatSession, EventRecorder, any Conversation) async throws -> Void
    ) async throws {
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == backend.conversation }
            try await body(session, recorder, try await session.conversation(backend.conversation))
        }
    }

    @Test func typingStartsAgainAfterAnOfflinePeriod() async throws {
        let backend = RecordingBackend()
        try await withChat(backend) { session, recorder, chat in
            try await chat.userTyping(draft: nil)
            try await backend.waitUntil("typing started") { $0.log == ["typing:true"] }
            // Offline while the "ended" timer is pending: the timer dies with the link.
            try await session.pause()
            try await recorder.first("offline") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
            try await session.resume()
            try await recorder.waitUntil("online again") { $0.filter(\.isConnected).count == 2 }
            try await chat.userTyping(draft: nil)
            try await backend.waitUntil("typing started again") { $0.log.count == 2 }
            try await chat.userStoppedTyping()
            try await backend.waitUntil("typing ended") { $0.log.count == 3 }
            print("typing across an offline period: \(backend.log)")
            #expect(backend.log == ["typing:true", "typing:true", "typing:false"])
        }
    }

    @Test func aStopNeverOvertakesItsTypingAndMarkersNeverMoveBack() async throws {
        let backend = RecordingBackend()
        try await withChat(backend) { _, _, chat in
            // "typing" is slow on the wire; "stopped" is given while it is still there.
            backend.hold("typing:true")
            try await chat.userTyping(draft: nil)
            try await backend.waitUntil("typing on the wire") { $0.isHeld("typing:true") }
            try await chat.userStoppedTyping()
            try await chat.markRead(upTo: .sequence(5))
            try await chat.markRead(upTo: .sequence(3))
            try await chat.markRead(upTo: .sequence(7))
            backend.release("typing:true")
            try await backend.waitUntil("everything sent") { $0.log.count == 4 }
            print("one conversation's requests on the wire: \(backend.log)")
            #expect(backend.log == ["typing:true", "typing:false", "read:5", "read:7"])
        }
    }

    @Test func aSendThatKeepsKillingTheLinkFailsAndTheNextOneGoes() async throws {
        let clock = TestClock()
        let backend = RecordingBackend()
        let configuration = SessionConfiguration(
            reconnectBackoff: BackoffPolicy(initial: .seconds(1), maximum: .seconds(64)),
            maxLinkLossesPerSend: 4,
            stableLinkDuration: .seconds(3600)
        )
        let session = ChatSession(
            backend: backend, configuration: configuration, clock: SessionClock(clock),
            random: SeededRandomNumberGenerator(seed: 7), logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == backend.conversation }
            let chat = try await session.conversation(backend.conversation)
            let poison = try await chat.send(text: "poison")
            let next = try await chat.send(text: "after")
            // Virtual time moves in steps of 50 ms until the poison send fails, and then until
            // the next send is confirmed; the connection events' times give the delays waited.
            let failed = try await advance(clock, until: recorder, "the poison send fails") {
                $0.updatedMessage?.clientID == poison.clientID && $0.updatedMessage?.deliveryState.isFailed == true
            }
            _ = try await advance(clock, until: recorder, "the next send goes") {
                $0.updatedMessage?.clientID == next.clientID && $0.updatedMessage?.serverID != nil
            }
            var delays: [Duration] = []
            var waitingSince: Date?
            for event in recorder.events {
                switch event.kind.connectionState {
                case .waitingToReconnect: waitingSince = event.time
                case .connecting:
                    if let since = waitingSince { delays.append(.milliseconds(Int((event.time.timeIntervalSince(since) * 1000).rounded()))) }
                    waitingSince = nil
                default: break
                }
            }
            print("poison send: \(backend.connects) links, reconnect delays \(delays), \(failed.updatedMessage!.deliveryState)")
            #expect(failed.updatedMessage?.deliveryState == .failed("the connection closed 4 times while this message was being sent"))
            #expect(backend.log.filter { $0 == "send:poison" }.count == 4)
            #expect(backend.log.last == "send:after")
            // Reset to its floor after each link, every delay would be within [0.5 s, 1 s].
            #expect(delays.count >= 3 && delays[2] >= .seconds(2), "the backoff keeps growing when each link dies right after it opens: \(delays)")
        }
    }

    @Test func aSendAnsweredDoneIsSentAndLeavesTheOutboxInOneWrite() async throws {
        let backend = RecordingBackend(answersSendsWithMessage: false)
        let store = InMemoryChatStore()
        let session = ChatSession(backend: backend, store: store, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == backend.conversation }
            let chat = try await session.conversation(backend.conversation)
            let pending = try await chat.send(text: "hello")
            let sent = try await recorder.first("sent") { $0.updatedMessage?.clientID == pending.clientID }
            #expect(sent.updatedMessage?.deliveryState == .sent, "a send the server took is sent, not pending for ever")
            #expect(try await chat.storedMessages(before: nil, limit: 10).map(\.deliveryState) == [.sent])
            #expect(await store.fetchOutbox(scope: session.scope).isEmpty)
        }
    }

    @Test func runCalledTwiceThrowsATypedError() async throws {
        let backend = RecordingBackend()
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("running") { $0.isConnected }
            await #expect {
                try await session.run()
            } throws: { ($0 as? SwitchboardError)?.code == .invalidState }
        }
        await #expect {
            try await session.run()
        } throws: { ($0 as? SwitchboardError)?.code == .invalidState }
    }

    @Test func errorsAreEqualOnlyWhenTheySayTheSame() {
        #expect(SwitchboardError(.connectionLost, "a") == SwitchboardError(.connectionLost, "a"))
        #expect(SwitchboardError(.connectionLost, "a") != SwitchboardError(.connectionLost, "b"))
        #expect(SwitchboardError(.rateLimited, "a", retryAfter: .seconds(1)) != SwitchboardError(.rateLimited, "a", retryAfter: .seconds(2)))
        #expect(SwitchboardError(.fatal, "a", vendorCode: "1") != SwitchboardError(.fatal, "a", vendorCode: "2"))
        #expect(
            SwitchboardError(.fatal, "a", underlying: SwitchboardError(.timedOut, "x"))
                != SwitchboardError(.fatal, "a", underlying: SwitchboardError(.timedOut, "y"))
        )
    }

    @Test func commandsAfterTheSessionEndedThrowSessionClosed() async throws {
        let backend = RecordingBackend()
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        let chat = try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == backend.conversation }
            return try await session.conversation(backend.conversation)
        }
        await #expect {
            try await chat.userTyping(draft: nil)
        } throws: { ($0 as? SwitchboardError)?.code == .sessionClosed }
    }
}

/// Moves virtual time in steps, letting the engine run between them (yielding, never sleeping),
/// until an event matches; returns it.
private func advance(
    _ clock: TestClock,
    within horizon: Duration = .seconds(64),
    until recorder: EventRecorder,
    _ what: String,
    _ matches: @Sendable (ChatEvent) -> Bool
) async throws -> ChatEvent {
    // The engine runs until it waits on the clock for something due within `horizon` (a
    // reconnect, a retry); then time moves to that deadline, exactly. Steps of fixed virtual
    // time with a fixed number of yields between them took 48–59 s of a 60 s limit with every
    // suite at once: each step waited its yields whether or not the engine had anything to do.
    for _ in 0..<1_000 {
        var due: Duration?
        for _ in 0..<1_000_000 {
            if let event = recorder.events.first(where: matches) { return event }
            due = clock.pendingDeadlines.first { $0 <= horizon }
            if due != nil { break }
            await Task.yield()
        }
        guard let due else { break }
        clock.advance(by: due)
    }
    throw ConformanceFailure("virtual time ran out waiting for \(what)")
}

extension ChatEvent.Kind {
    fileprivate var connectionState: ConnectionState? {
        if case .connection(let state, _) = self { return state }
        return nil
    }
}
