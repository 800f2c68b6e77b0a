import Foundation
import Observation
@testable import Switchboard
import SwitchboardTestKit
import Testing

/// The inbox: the conversations of several sessions on one bus, newest activity first, with their
/// unread counts, as ordered diffs through one sequence, and as an `@Observable` model.
@Suite(.timeLimit(.minutes(1)))
struct InboxTests {
    static func item(_ session: String, _ conversation: String, at seconds: Double, unread: Int = 0) -> InboxItem {
        InboxItem(
            session: SessionID(session),
            conversation: ConversationInfo(id: ConversationID(conversation), unreadCount: unread, updatedAt: Date(timeIntervalSince1970: seconds))
        )
    }

    @Test func theStateKeepsTheNewestActivityFirstAndSaysEachChangeAsDiffs() {
        var state = InboxState()
        var list: [InboxItem] = []
        list.apply(state.reset([Self.item("s", "old", at: 1), Self.item("s", "new", at: 3, unread: 2)]))
        #expect(state.items.map(\.conversation.id) == ["new", "old"])
        #expect(state.unreadTotal == 2)
        list.apply(state.upsert(Self.item("t", "middle", at: 2, unread: 1)))
        #expect(state.items.map(\.conversation.id) == ["new", "middle", "old"])
        let inPlace = state.upsert(Self.item("s", "old", at: 1, unread: 4))
        #expect(inPlace == [.update(Self.item("s", "old", at: 1, unread: 4), at: 2)], "a change that keeps its place is an update")
        list.apply(inPlace)
        let moved = state.upsert(Self.item("s", "old", at: 9, unread: 5))
        #expect(moved == [.remove(at: 2), .insert(Self.item("s", "old", at: 9, unread: 5), at: 0)], "new activity moves it to the top")
        list.apply(moved)
        #expect(state.upsert(Self.item("s", "old", at: 9, unread: 5)).isEmpty, "nothing changed, nothing to say")
        list.apply(state.remove(InboxItem.ID(session: "t", conversation: "middle")))
        #expect(state.unreadTotal == 7)
        #expect(list == state.items, "a list kept from the diffs matches")
    }

    /// Whole-second timestamps (the Voximplant-style protocol) tie: the conversation that became
    /// active last is the newest of its second, whatever its id.
    @Test func aTieInActivityGoesToTheOneThatChangedLast() {
        var state = InboxState()
        var list: [InboxItem] = []
        list.apply(state.reset([Self.item("s", "b-support", at: 5)]))
        list.apply(state.upsert(Self.item("s", "z-billing", at: 5, unread: 1)))
        #expect(state.items.map(\.conversation.id) == ["z-billing", "b-support"], "a new conversation of the same second goes first")
        list.apply(state.upsert(Self.item("s", "a-other", at: 4)))
        list.apply(state.upsert(Self.item("s", "a-other", at: 5)))
        #expect(state.items.map(\.conversation.id) == ["a-other", "z-billing", "b-support"], "so does one whose activity reached that second")
        let inPlace = state.upsert(Self.item("s", "b-support", at: 5, unread: 2))
        #expect(inPlace == [.update(Self.item("s", "b-support", at: 5, unread: 2), at: 2)], "a change that is not activity keeps its place")
        list.apply(inPlace)
        #expect(list == state.items)
    }

    /// Two sessions on one bus, each on a backend the test drives.
    func withTwoSessions(_ body: @Sendable (EventBus, [ChatSession], [TestBackend.Link], [EventRecorder]) async throws -> Void) async throws {
        let bus = EventBus()
        let backends = [
            TestBackend(descriptor: BackendDescriptor(name: "a", capabilities: [.readMarkers], sync: .snapshots)),
            TestBackend(descriptor: BackendDescriptor(name: "b", capabilities: [.readMarkers], sync: .snapshots)),
        ]
        let sessions = zip(["first", "second"], backends).map { id, backend in
            ChatSession(id: SessionID(id), backend: backend, bus: bus, clock: SessionClock(TestClock()), logger: .quiet)
        }
        try await withRecording(sessions[0]) { first in
            try await withRecording(sessions[1]) { second in
                var links: [TestBackend.Link] = []
                for (session, backend) in zip(sessions, backends) {
                    try await session.resume()
                    links.append(try await backend.nextLink())
                }
                try await body(bus, sessions, links, [first, second])
            }
        }
    }

    static func listing(_ conversation: ConversationID, at seconds: Double) -> BackendUpdate {
        .snapshot(
            BackendSnapshot(conversations: [ConversationSnapshot(conversation: ConversationInfo(id: conversation, updatedAt: Date(timeIntervalSince1970: seconds)))], isComplete: true)
        )
    }

    static func agentMessage(_ id: MessageID, in conversation: ConversationID, at seconds: Double) -> BackendUpdate {
        let message = Message(serverID: id, conversationID: conversation, senderRole: .agent, text: "hello \(id)", time: Date(timeIntervalSince1970: seconds))
        return .event(BackendEvent(.messageAdded(message, position: .newest), conversation: conversation))
    }

    @Test func theInboxListsEverySessionsConversationsAndMovesTheOneAMessageArrivesIn() async throws {
        try await withTwoSessions { bus, sessions, links, recorders in
            links[0].yield(Self.listing("a1", at: 1))
            links[1].yield(Self.listing("b1", at: 2))
            for (recorder, id) in zip(recorders, ["a1", "b1"]) {
                try await recorder.first("the conversation is stored") { $0.conversationID == ConversationID(id) }
            }
            let inbox = try await Inbox(bus: bus, sessions: sessions)
            var updates = inbox.makeAsyncIterator()
            let initial = try #require(await updates.next())
            #expect(initial.items.map(\.conversation.id) == ["b1", "a1"], "newest activity first, across sessions")
            #expect(initial.items.map(\.session) == ["second", "first"])
            links[0].yield(Self.agentMessage("m1", in: "a1", at: 3))
            let moved = try #require(await updates.next())
            let top = try #require(moved.items.first)
            #expect(moved.diffs == [.remove(at: 1), .insert(top, at: 0)])
            #expect(top.conversation.id == "a1" && top.conversation.unreadCount == 1 && top.conversation.lastMessage?.text == "hello m1")
            #expect(moved.unreadTotal == 1)
            links[1].yield(Self.agentMessage("m2", in: "b1", at: 4))
            let second = try #require(await updates.next())
            #expect(second.unreadTotal == 2 && second.items.map(\.conversation.id) == ["b1", "a1"])
            // The call returns when the backend answers; the inbox shows the read at once.
            let chat = try await sessions[0].conversation("a1")
            let marking = Task { try await chat.markRead(upTo: .message("m1")) }
            let read = try #require(await updates.next())
            marking.cancel()
            #expect(read.unreadTotal == 1, "marking read in one session lowers the total")
            #expect(read.diffs.count == 1, "it keeps its place: one update")
            var list: [InboxItem] = []
            for update in [initial, moved, second, read] { list.apply(update.diffs) }
            #expect(list == inbox.items, "a list kept from the diffs matches the inbox")
        }
    }

    /// An inbox that falls behind reloads and says so with a reset; a session closed since lists
    /// nothing (before, its closed store failed the reload, and the list stayed stale for good).
    @Test func anInboxThatFellBehindReloadsWithoutTheClosedSessions() async throws {
        try await withTwoSessions { bus, sessions, links, recorders in
            links[0].yield(Self.listing("a1", at: 1))
            links[1].yield(Self.listing("b1", at: 2))
            for (recorder, id) in zip(recorders, ["a1", "b1"]) {
                try await recorder.first("the conversation is stored") { $0.conversationID == ConversationID(id) }
            }
            let inbox = try await Inbox(bus: bus, sessions: sessions, buffering: .bounded(1))
            var updates = inbox.makeAsyncIterator()
            let initial = try #require(await updates.next())
            #expect(initial.items.count == 2)
            await sessions[0].close()
            for (index, seconds) in [3.0, 4.0, 5.0].enumerated() { links[1].yield(Self.agentMessage(MessageID("m\(index)"), in: "b1", at: seconds)) }
            try await recorders[1].waitUntil("three messages stored") { events in events.compactMap(\.addedMessage).count == 3 }
            // The buffer holds the first change, then says the rest fell behind.
            var reloaded = try #require(await updates.next())
            for _ in 0..<3 where reloaded.diffs != [.reset(reloaded.items)] { reloaded = try #require(await updates.next()) }
            #expect(reloaded.diffs == [.reset(reloaded.items)], "a reset, not diffs it cannot vouch for")
            #expect(reloaded.items.map(\.conversation.id) == ["b1"], "the closed session's conversation is gone")
            #expect(reloaded.unreadTotal == 3)
        }
    }

    /// Waits until `condition` holds, registering for the next change of what `tracking` reads
    /// each time it does not (both on the main actor, where the models change).
    @MainActor
    static func waitUntil(_ condition: @MainActor () -> Bool, tracking: @MainActor () -> Void) async {
        while !condition() {
            await withCheckedContinuation { (changed: CheckedContinuation<Void, Never>) in
                withObservationTracking({ tracking() }, onChange: { changed.resume() })
            }
        }
    }

    @Test func theModelsTellTheirObserversWhenWhatTheyShowChangeAndRunAgainAfterACancel() async throws {
        try await withTwoSessions { bus, sessions, links, recorders in
            links[0].yield(Self.listing("a1", at: 1))
            try await recorders[0].first("the conversation is stored") { $0.conversationID == "a1" }
            let chat = try await sessions[0].conversation("a1")
            let (inbox, timeline) = await MainActor.run { (InboxModel(bus: bus, sessions: sessions), TimelineModel(conversation: chat, limit: 10)) }
            for (round, message) in [MessageID("m1"), "m2"].enumerated() {
                // Each round runs the models as a view's `.task` would, then cancels them.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await inbox.run() }
                    group.addTask { try await timeline.run() }
                    await Self.waitUntil({ inbox.items.count == 1 }, tracking: { _ = inbox.items })
                    links[0].yield(Self.agentMessage(message, in: "a1", at: Double(3 + round)))
                    await Self.waitUntil({ inbox.unreadTotal == round + 1 }, tracking: { _ = inbox.unreadTotal })
                    await Self.waitUntil({ timeline.items.count == round + 1 }, tracking: { _ = timeline.items })
                    #expect(await timeline.items.last?.text == "hello \(message)")
                    group.cancelAll()
                }
            }
        }
    }
}
