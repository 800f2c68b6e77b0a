import Foundation
@_spi(TestKit) import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// A link that implements nothing but its updates: every request answers "unsupported" on its own.
private struct BareLink: BackendConnection {
    let updates = BackendUpdates(AsyncThrowingStream { $0.finish() })
}

/// A link of another backend, for a vendor request to look for and not find.
private struct OtherLink: BackendConnection {
    let updates = BackendUpdates(AsyncThrowingStream { $0.finish() })
}

/// A backend whose close yields the conversation's new state on the link and answers only that it
/// did it (as XMPP's room close yields the room's cursor): the change travels in the engine's
/// reader of the link, the answer in the request's task of its own.
private struct YieldingBackend: ChatBackend {
    let rooms: [ConversationID]
    var descriptor: BackendDescriptor { BackendDescriptor(name: "yielding", capabilities: [.conversationLifecycle], sync: .snapshots) }

    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (updates, continuation) = BackendUpdates.makeStream()
        let rooms = rooms.map { ConversationSnapshot(conversation: ConversationInfo(id: $0, kind: .group, state: .active)) }
        continuation.yield(.snapshot(BackendSnapshot(conversations: rooms, isComplete: true)))
        defer { continuation.finish() }
        return try await body(YieldingLink(updates: updates, continuation: continuation))
    }
}

private struct YieldingLink: BackendConnection {
    let updates: BackendUpdates
    let continuation: BackendUpdates.Continuation

    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        // Typing first, so the reader has more to hand the engine than its window takes at once.
        for _ in 0..<20 { continuation.yield(.event(BackendEvent(.typing("agent", isTyping: true, draft: nil), conversation: conversation))) }
        continuation.yield(.event(BackendEvent(.conversationStateChanged(.closed, previous: .active), conversation: conversation)))
        return .done
    }
}

/// A vendor call of the "other" backend: it answers only on an `OtherLink`.
private struct OtherCall: VendorRequest {
    var name: String { "other.call" }
    func perform(on connection: any BackendConnection) async throws -> VendorResult<Int> {
        _ = try link(connection, as: OtherLink.self)
        return VendorResult(7)
    }
}

/// A vendor call that joins a conversation: its typed reply and an update the engine applies
/// before the caller hears back.
private struct JoinCall: VendorRequest {
    var conversation: ConversationID
    var name: String { "join" }
    func perform(on connection: any BackendConnection) async throws -> VendorResult<ConversationID> {
        let info = ConversationInfo(id: conversation, kind: .group, state: .active)
        return VendorResult(conversation, updates: [.event(BackendEvent(.conversationAdded(info), conversation: conversation))])
    }
}

@Suite struct BackendSeamTests {
    @Test func aRequestALinkDoesNotImplementAnswersUnsupported() async throws {
        let link = BareLink()
        let chat = ConversationID("chat")
        let requests: [BackendRequest] = [
            .send(OutgoingMessage(clientID: "c1", conversationID: chat, content: MessageDraft(text: "hi"))),
            .edit(chat, "m1", text: "x", payload: nil),
            .delete(chat, "m1"),
            .typing(chat, isTyping: true, draft: nil),
            .markRead(chat, upTo: .sequence(1)),
            .startConversation(ConversationDraft()),
            .closeConversation(chat),
            .archiveConversation(chat),
            .updateConversation(chat, ConversationChanges(title: "t")),
            .rateAgent(chat, agent: nil, rating: 5, comment: nil),
            .setCustomFields(nil, ["a": "b"]),
            .addParticipants(chat, []),
            .updateParticipants(chat, []),
            .removeParticipants(chat, []),
            .history(HistoryQuery(conversationID: chat, before: nil, limit: 10)),
            .retransmit(chat, 1...3),
            .poll(forced: false),
            .vendor(VendorCall(OtherCall())),
        ]
        var unsupported: [String] = []
        for request in requests {
            do {
                let response = try await link.perform(request)
                Issue.record("\(request.name) answered \(response)")
            } catch let error as SwitchboardError {
                #expect(error.code == .unsupported, "\(request.name): \(error)")
                if error.code == .unsupported { unsupported.append(request.name) }
            }
        }
        print("a link that implements nothing answers unsupported to: \(unsupported.joined(separator: ", "))")
        #expect(unsupported.count == requests.count)
    }

    @Test func aVendorRequestFindsItsOwnBackendsLinkOnly() async throws {
        await #expect(throws: SwitchboardError.self) { try await OtherCall().perform(on: BareLink()) }
        let answer = try await BareLink().perform(.vendor(VendorCall(JoinCall(conversation: "room"))))
        guard case .vendor(let vendor) = answer else {
            Issue.record("a vendor call answered \(answer)")
            return
        }
        #expect(vendor.reply(as: ConversationID.self) == "room")
        #expect(vendor.reply(as: Int.self) == nil, "the reply keeps its own type")
        #expect(try await OtherCall().perform(on: OtherLink()).reply == 7)
    }

    @Test func aSessionHandsBackAVendorReplyTypedAfterStoringWhatItChanged() async throws {
        let backend = TestBackend(name: "vendor", capabilities: [.vendorRequests])
        backend.onConnect { $0.yield(.snapshot(BackendSnapshot(conversations: [], isComplete: true))) }
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("connected") { $0.isConnected }
            let room: ConversationID = try await session.perform(JoinCall(conversation: "room"))
            #expect(room == "room")
            // Stored before the caller heard back: no wait.
            #expect(try await session.conversations().map(\.id) == ["room"])
            await #expect(throws: SwitchboardError.self, "another backend's call") { try await session.perform(OtherCall()) }
        }
        let unsupported = TestBackend(name: "no-vendor")
        let plain = ChatSession(backend: unsupported, clock: SessionClock(TestClock()), logger: .quiet)
        do {
            _ = try await plain.perform(JoinCall(conversation: "room"))
            Issue.record("a vendor call ran on a backend without vendorRequests")
        } catch let error as SwitchboardError {
            #expect(error.code == .unsupported)
        }
    }

    @Test func anAdapterCannotSayWhatOnlyTheEngineSays() {
        let error = SwitchboardError(.serverError, "x")
        let engineOnly: [ChatEvent.Kind] = [
            .connection(.connected, reason: nil), .error(error), .fatal(error), .gap(dropped: 1),
        ]
        #expect(engineOnly.allSatisfy { BackendEvent.Kind($0) == nil })
        let adapterKinds: [BackendEvent.Kind] = [
            .conversationAdded(ConversationInfo(id: "c")), .conversationRemoved, .agentChanged(nil),
            .messageAdded(Message(conversationID: "c", text: "hi", time: Date(timeIntervalSince1970: 1)), position: .newest), .messageRemoved("m1"), .historyCleared,
            .typing("bob", isTyping: true, draft: nil), .readMarker("bob", .sequence(3)), .availability(.online),
            .queuePosition(2), .settingsChanged([:]), .custom(name: "x", payload: .null),
        ]
        #expect(adapterKinds.allSatisfy { BackendEvent.Kind($0.published) == $0 }, "each kind goes to the bus and back unchanged")
    }

    /// A close the server answers by deleting the conversation (a Webim appeal): gone from the
    /// store before `close()` returns.
    @Test func aConversationTheServerDeletesOnCloseIsGoneWhenCloseReturns() async throws {
        let backend = TestBackend(name: "deleting", capabilities: [.conversationLifecycle])
        let chat = ConversationInfo(id: "appeal", kind: .supportChat, state: .active)
        backend.onConnect { $0.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: chat)], isComplete: true))) }
        backend.answerAutomatically { pending in
            guard case .closeConversation(let id) = pending.request else { return .success(.done) }
            return .success(.updates([.event(BackendEvent(.conversationRemoved, conversation: id))]))
        }
        let session = ChatSession(backend: backend, clock: SessionClock(TestClock()), logger: .quiet)
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the appeal") { $0.conversationID == "appeal" }
            try await session.conversation("appeal").close()
            #expect(try await session.conversations().isEmpty)
        }
    }

    /// A request's answer waits behind what its link yielded before it returned: each close's
    /// new state is stored when `close()` returns, though the link yields it (behind 20 typing
    /// events, with a window of one update) in the reader's task and answers `.done` in the
    /// request's.
    @Test func anAnswerReachesTheSessionAfterWhatItsLinkYieldedFirst() async throws {
        let rooms = (0..<40).map { ConversationID("room-\($0)") }
        let session = ChatSession(
            backend: YieldingBackend(rooms: rooms),
            configuration: SessionConfiguration(inboundWindow: 1),
            clock: SessionClock(TestClock()),
            logger: .quiet
        )
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the rooms") { $0.conversationID == rooms.last }
            var stale = 0
            for room in rooms {
                try await session.conversation(room).close()
                if try await session.conversation(room).info().state != .closed { stale += 1 }
            }
            print("answer after yield: \(rooms.count) closes, \(stale) answered before the state they yielded was stored")
            #expect(stale == 0)
        }
    }
}
