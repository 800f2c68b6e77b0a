import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

/// A store bound to one scope reads and writes that scope's rows only; a session's store is
/// bound to the session's scope.
@Suite(.timeLimit(.minutes(1)))
struct ScopedChatStoreTests {
    @Test func aBoundStoreSeesOnlyItsScope() async throws {
        let base = InMemoryChatStore()
        let alice = base.scoped(to: StoreScope(backend: "test", account: "shop", user: "alice"))
        let bob = base.scoped(to: StoreScope(backend: "test", account: "shop", user: "bob"))
        let chat = ConversationInfo(id: "chat", kind: .supportChat, state: .active)
        let pending = Message(
            clientID: "c-1", conversationID: "chat", sender: "alice", senderRole: .customer, text: "hi",
            time: Date(timeIntervalSince1970: 1_700_000_000), deliveryState: .pending
        )
        let outgoing = OutgoingMessage(clientID: "c-1", conversationID: "chat", content: MessageDraft(text: "hi"))
        try await alice.apply([
            .saveConversation(chat), .saveMessages([pending]), .saveOutboxEntry(OutboxEntry(message: outgoing, createdAt: pending.time)),
            .saveSequence(4, for: "chat"), .saveCredentials(Credentials(["token": "t"])),
        ])
        #expect(try await alice.fetchConversations().map(\.id) == ["chat"])
        #expect(try await alice.fetchMessage(clientID: "c-1")?.text == "hi")
        #expect(try await alice.countMessages(in: "chat") == 1)
        #expect(try await alice.fetchOutbox().map(\.message.clientID) == ["c-1"])
        #expect(try await alice.fetchSequences() == ["chat": 4])
        #expect(try await alice.fetchCredentials()["token"] == "t")
        #expect(try await bob.fetchConversations().isEmpty, "another user's scope of the same store")
        #expect(try await bob.fetchMessage(clientID: "c-1") == nil)
        #expect(try await bob.fetchOutbox().isEmpty)
        #expect(try await bob.fetchSequences().isEmpty)
        #expect(try await bob.fetchCredentials().isEmpty)
        #expect(try await base.fetchConversations(scope: alice.scope).map(\.id) == ["chat"], "the same rows as the store's own reads")
    }

    @Test func aSessionsStoreIsBoundToItsScope() async throws {
        let base = InMemoryChatStore()
        let backend = TestBackend()
        let session = ChatSession(backend: backend, account: "shop", store: base, clock: SessionClock(ImmediateClock()), logger: .quiet)
        #expect(session.store.scope == session.scope)
        try await withRecording(session) { recorder in
            try await session.resume()
            let link = try await backend.nextLink()
            let chat = ConversationInfo(id: "chat", kind: .supportChat, state: .active)
            link.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: chat)], isComplete: true)))
            try await recorder.first("the conversation") { $0.conversationID == "chat" }
            #expect(try await session.store.fetchConversations().map(\.id) == ["chat"])
            #expect(try await base.fetchConversations(scope: StoreScope(backend: session.scope.backend, account: "another")).isEmpty)
        }
    }
}
