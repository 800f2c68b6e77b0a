import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

/// An app's fake conversation implements the required ten; the rest answer "unsupported", and a
/// timeline is built from what it has.
private struct FakeConversation: Conversation {
    let id: ConversationID = "fake"
    let sessionID: SessionID = "fake-session"
    let messages: [Message]

    func info() async throws -> ConversationInfo { ConversationInfo(id: id, kind: .supportChat, state: .active) }
    func send(_ draft: MessageDraft) async throws -> Message {
        Message(conversationID: id, text: draft.text, time: Date(timeIntervalSince1970: 100))
    }
    func userTyping(draft: String?) async throws -> TypingOutcome { .sent }
    func userStoppedTyping() async throws {}
    func markRead(upTo marker: ChatEvent.ReadMarker?) async throws {}
    func storedMessages(before: MessageOrderKey?, limit: Int) async throws -> [Message] { Array(messages.suffix(limit)) }
    func history(before: MessageOrderKey?, limit: Int) async throws -> [Message] { [] }
    func events(buffering: EventBus.BufferingPolicy) -> EventStream { EventBus().subscribe(buffering: buffering) }
}

@Suite struct ConversationFakeTests {
    @Test func aFakeImplementsTheRequiredTenAndTheRestAnswerUnsupported() async throws {
        let messages = (1...3).map { Message(serverID: MessageID("m\($0)"), conversationID: "fake", text: "m\($0)", time: Date(timeIntervalSince1970: Double($0))) }
        let fake: any Conversation = FakeConversation(messages: messages)
        let timeline = try await fake.timeline(limit: 10)
        #expect(timeline.items.map(\.text) == ["m1", "m2", "m3"], "a timeline from the stored messages")
        var unsupported = 0
        for call in [
            { try await fake.edit("m1", text: "x") }, { try await fake.delete("m1") }, { _ = try await fake.send(MessageDraft(text: "x"), clientID: "c1") }, { try await fake.close() },
            { try await fake.archive() }, { try await fake.update(ConversationChanges(title: "t")) },
            { try await fake.setCustomFields([:]) }, { try await fake.rateAgent(nil, rating: 5, comment: nil) },
            { try await fake.addParticipants([]) }, { try await fake.updateParticipants([]) }, { try await fake.removeParticipants([]) },
        ] as [@Sendable () async throws -> Void] {
            do {
                try await call()
            } catch let error as SwitchboardError where error.code == .unsupported {
                unsupported += 1
            }
        }
        #expect(unsupported == 11)
    }
}
