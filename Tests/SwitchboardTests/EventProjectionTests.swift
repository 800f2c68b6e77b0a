import Foundation
@testable import Switchboard
import Testing

/// The event-to-store projection, driven synchronously: the test plays the engine's part (reads
/// the rows asked for from a plain in-memory table, applies the writes) and checks the writes,
/// the events announced, the echoes and how often the store was read.
@Suite struct EventProjectionTests {
    typealias Projection = EventProjection

    /// The stored rows, and how many reads they answered.
    struct Table {
        var conversations: [ConversationID: ConversationInfo] = [:]
        var messages: [Message] = []
        var markers: [ParticipantID: ChatEvent.ReadMarker] = [:]
        var reads = 0

        mutating func apply(_ writes: [StoreWrite]) {
            for write in writes {
                switch write {
                case .saveConversation(let info): conversations[info.id] = info
                case .removeConversation(let id):
                    conversations[id] = nil
                    messages.removeAll { $0.conversationID == id }
                case .saveMessages(let saved):
                    for message in saved {
                        messages.removeAll {
                            ($0.serverID != nil && $0.serverID == message.serverID && $0.conversationID == message.conversationID)
                                || ($0.clientID != nil && $0.clientID == message.clientID)
                        }
                        messages.append(message)
                    }
                case .removeMessage(let id, let conversation): messages.removeAll { $0.serverID == id && $0.conversationID == conversation }
                case .removeAllMessages(let conversation): messages.removeAll { $0.conversationID == conversation }
                case .saveReadMarker(let marker, let participant, _): markers[participant] = marker
                default: Issue.record("the projection wrote \(write)")
                }
            }
        }

        mutating func answer(_ reads: Projection.Reads, into rows: inout Projection.Rows) {
            self.reads += 1
            let found = conversations.filter { reads.conversations.contains($0.key) }
            let messages = self.messages.filter { message in
                reads.messages.contains { conversation, keys in
                    (message.conversationID == conversation && message.serverID.map(keys.serverIDs.contains) == true)
                        || message.clientID.map(keys.clientIDs.contains) == true
                }
            }
            var newest: [ConversationID: [Message]] = [:]
            for id in reads.newest {
                newest[id] = Array(self.messages.filter { $0.conversationID == id }.sorted { $0.orderKey < $1.orderKey }.suffix(Projection.readDerivationWindow))
            }
            rows.add(reads, conversations: found, messages: messages, newest: newest)
        }

        /// Projects `events` as the engine does: one read for the run, a read more where an event
        /// asks, what was projected stored before it.
        mutating func project(
            _ events: [BackendEvent],
            known: Set<ConversationID> = [],
            held: [ConversationInfo] = [],
            settings: Projection.Settings = Projection.Settings()
        ) -> Projection.Output {
            var rows = Projection.Rows(existing: known.union(held.map(\.id)))
            for info in held { rows.conversations[info.id] = info }
            answer(Projection.reads(for: events, in: rows), into: &rows)
            var all = Projection.Output()
            var output = Projection.Output()
            for event in events {
                while case .needs(let reads) = Projection.project(event, rows: &rows, into: &output, now: EventProjectionTests.now, settings: settings) {
                    all.append(output)
                    apply(output.writes)
                    output = Projection.Output()
                    answer(reads, into: &rows)
                }
            }
            apply(output.writes)
            all.append(output)
            return all
        }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let conversation = ConversationID("c")
    static let customer = Participant(id: "me", role: .customer)
    static let agent = Participant(id: "bob", role: .agent, displayName: "Bob")

    static func message(_ index: Int, sequence: Int64? = nil, from role: Participant.Role = .agent, client: String? = nil) -> Message {
        Message(
            serverID: MessageID("m\(index)"), clientID: client.map { ClientMessageID($0) }, conversationID: conversation, sequence: sequence,
            senderRole: role, text: "m\(index)", time: Date(timeIntervalSince1970: Double(index))
        )
    }

    static func event(_ kind: BackendEvent.Kind, conversation: ConversationID? = Self.conversation) -> BackendEvent {
        BackendEvent(kind, conversation: conversation)
    }

    @Test func aMessageInAnUnknownConversationAddsTheConversationFirstAndIsStoredOnce() {
        var table = Table()
        let output = table.project([Self.event(.messageAdded(Self.message(1), position: .newest)), Self.event(.messageAdded(Self.message(1), position: .newest))])
        #expect(output.publications.map(\.kind.name) == ["conversationAdded", "messageAdded"])
        #expect(output.duplicates == 1, "the second copy is known from the first, without a read")
        #expect(table.reads == 1)
        #expect(table.conversations[Self.conversation]?.createdAt == Self.now)
        #expect(table.messages.map(\.text) == ["m1"])
        #expect(output.stored.map(\.0) == [Self.conversation])
    }

    @Test func aConversationTheSessionHoldsIsNotReadForAMessage() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        let output = table.project([Self.event(.messageAdded(Self.message(1), position: .newest))], held: [ConversationInfo(id: Self.conversation)])
        #expect(table.reads == 1, "one read of the message's key, none of the conversation")
        var held = Projection.Rows(existing: [Self.conversation])
        held.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        #expect(Projection.reads(for: [Self.event(.messageAdded(Self.message(2), position: .newest))], in: held).conversations.isEmpty)
        #expect(
            Projection.reads(for: [Self.event(.messageAdded(Self.message(2), position: .history))], in: Projection.Rows(existing: [Self.conversation])).conversations.isEmpty,
            "a history page moves nothing: known to be stored is enough"
        )
        #expect(output.writes.first == .saveMessages([Self.message(1)]))
        #expect(output.stored.isEmpty)
    }

    // MARK: What a list of conversations shows

    @Test func newMessagesFromOthersCountAsUnreadAndMoveTheConversation() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent], unreadCount: 1)
        var notice = Self.message(5, from: .system)
        notice.kind = .system
        _ = table.project([
            Self.event(.messageAdded(Self.message(2, sequence: 2), position: .newest)),
            Self.event(.messageAdded(Self.message(3, sequence: 3, from: .customer), position: .newest)),
            Self.event(.messageAdded(Self.message(1, sequence: 1), position: .history)),
            Self.event(.messageAdded(Self.message(4, sequence: 4), position: .newest)),
            Self.event(.messageAdded(notice, position: .newest)),
            Self.event(.messageAdded(Self.message(4, sequence: 4), position: .newest)),
        ])
        let info = table.conversations[Self.conversation]
        #expect(info?.unreadCount == 3, "1 + m2 + m4: the user's own, a page of history, a notice and a duplicate do not count")
        #expect(info?.updatedAt == Date(timeIntervalSince1970: 5))
        #expect(info?.lastSequence == 4)
        #expect(info?.lastMessage?.text == "m5")
        var peer = Message(serverID: "p1", conversationID: "peer", sender: "alice", senderRole: .user, text: "from my phone", time: Date(timeIntervalSince1970: 9))
        table.conversations["peer"] = ConversationInfo(id: "peer", kind: .direct)
        _ = table.project([Self.event(.messageAdded(peer, position: .newest), conversation: "peer")], settings: Projection.Settings(user: "alice"))
        #expect(table.conversations["peer"]?.unreadCount == 0, "the user's own message from another device")
        #expect(table.conversations["peer"]?.lastMessage?.isOwn == true)
        peer.serverID = "p2"
        peer.sender = "bob"
        _ = table.project([Self.event(.messageAdded(peer, position: .newest), conversation: "peer")], settings: Projection.Settings(user: "alice"))
        #expect(table.conversations["peer"]?.unreadCount == 1)
    }

    @Test func theHistoryAFirstSeenConversationComesWithIsNotNewsAndAReportedConversationKeepsTheEnginesCount() {
        var table = Table()
        let first = ConversationInfo(id: Self.conversation, updatedAt: Date(timeIntervalSince1970: 2))
        _ = table.project([
            Self.event(.conversationAdded(first)),
            Self.event(.messageAdded(Self.message(1), position: .newest)),
            Self.event(.messageAdded(Self.message(2), position: .newest)),
            Self.event(.messageAdded(Self.message(3), position: .newest)),
        ])
        #expect(table.conversations[Self.conversation]?.unreadCount == 1, "m1 and m2 were there when the conversation was first seen")
        var reported = first
        reported.title = "Renamed"
        reported.unreadCount = 7
        _ = table.project([Self.event(.conversationUpdated(reported))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 1, "a backend that does not count keeps the engine's")
        #expect(table.conversations[Self.conversation]?.updatedAt == Date(timeIntervalSince1970: 3), "activity does not move back")
        #expect(table.conversations[Self.conversation]?.lastMessage?.text == "m3")
        #expect(table.conversations[Self.conversation]?.title == "Renamed")
        _ = table.project([Self.event(.conversationUpdated(reported))], settings: Projection.Settings(backendCountsUnread: true))
        #expect(table.conversations[Self.conversation]?.unreadCount == 7, "a backend that counts wins when it reports")
        reported.unreadCount = 9
        _ = table.project(
            [Self.event(.conversationUpdated(reported)), Self.event(.messageAdded(Self.message(4), position: .newest)), Self.event(.messageAdded(Self.message(5), position: .newest))],
            settings: Projection.Settings(backendCountsUnread: true)
        )
        #expect(table.conversations[Self.conversation]?.unreadCount == 9, "its count takes in the messages that come with it")
        _ = table.project([Self.event(.messageAdded(Self.message(6), position: .newest))], settings: Projection.Settings(backendCountsUnread: true))
        #expect(table.conversations[Self.conversation]?.unreadCount == 10, "between its reports the engine counts")
    }

    @Test func theUsersOwnMarkerFromAnotherDeviceRecountsTheUnreadMessages() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent], unreadCount: 4)
        table.messages = (1...4).map { Self.message($0, sequence: Int64($0)) }
        _ = table.project([Self.event(.readMarker("me", .sequence(2)))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 2, "m3 and m4 came after the marker")
        _ = table.project([Self.event(.readMarker("me", .message("m4")))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 0)
        _ = table.project([Self.event(.readMarker("bob", .sequence(1)))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 0, "the agent's marker says nothing of the user's")
    }

    /// A CXone thread lists only its agents: the customer's own marker (seen on another device)
    /// reads the agent's messages for the count, and turns none of the customer's own read.
    @Test func theCustomersOwnMarkerInAThreadListingOnlyItsAgentsReadsNoneOfTheirMessages() {
        var table = Table()
        table.conversations["t"] = ConversationInfo(id: "t", kind: .thread, participants: [Self.agent], unreadCount: 1)
        let mine = Message(serverID: "c1", conversationID: "t", sender: "cust", senderRole: .customer, text: "mine", time: Date(timeIntervalSince1970: 1), deliveryState: .sent)
        let theirs = Message(serverID: "a1", conversationID: "t", sender: "bob", senderRole: .agent, text: "theirs", time: Date(timeIntervalSince1970: 2))
        table.messages = [mine, theirs]
        _ = table.project([BackendEvent(.readMarker("cust", .message("a1")), conversation: "t")], settings: Projection.Settings(user: "cust"))
        #expect(table.messages.first { $0.serverID == "c1" }?.deliveryState == .sent, "the customer's marker is not the agent's")
        #expect(table.conversations["t"]?.unreadCount == 0)
    }

    /// A receipt on an event the store does not hold as a message (a Matrix receipt on a
    /// membership change) says nothing of what is unread.
    @Test func theUsersOwnMarkerOnAnEventNotStoredLeavesTheCount() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent], unreadCount: 1)
        table.messages = (1...3).map { Self.message($0, sequence: Int64($0)) }
        _ = table.project([Self.event(.readMarker("me", .message("$membership")))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 1, "not 3: the marker's place is unknown")
    }

    @Test func theServersCopyOfASendUpdatesThePendingRowAndEndsItsOutboxEntry() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        var pending = Message(clientID: "c1", conversationID: Self.conversation, senderRole: .customer, text: "hi", time: Self.now, deliveryState: .pending)
        table.messages = [pending]
        pending.serverID = "s1"
        pending.deliveryState = .sent
        let output = table.project([Self.event(.messageAdded(pending, position: .newest))])
        #expect(output.publications.map(\.kind) == [.messageUpdated(pending)])
        #expect(output.echoed == ["c1"])
        #expect(table.messages == [pending])
    }

    @Test func aHistoryPageOnlyFillsIn() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        var edited = Self.message(1)
        table.messages = [edited]
        edited.text = "old text from history"
        let output = table.project([
            Self.event(.messageAdded(edited, position: .history)), Self.event(.messageAdded(Self.message(0), position: .history)),
        ])
        #expect(output.duplicates == 1, "what the store holds is newer than a history page")
        #expect(output.publications.map(\.kind) == [.messageAdded(Self.message(0), position: .history)])
        #expect(table.messages.map(\.text) == ["m1", "m0"])
    }

    @Test func aRemovalOfAnUnknownMessageIsSilentAndAKnownOneIsRemovedForTheRestOfTheRun() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        table.messages = [Self.message(1)]
        let output = table.project([
            Self.event(.messageRemoved("m9")), Self.event(.messageRemoved("m1")),
            Self.event(.messageAdded(Self.message(1), position: .newest)),
        ])
        #expect(output.publications.map(\.kind.name) == ["messageRemoved", "messageAdded"])
        #expect(
            output.writes.filter { if case .saveConversation = $0 { false } else { true } } == [.removeMessage("m1", in: Self.conversation), .saveMessages([Self.message(1)])]
        )
        #expect(table.reads == 1)
    }

    @Test func aRemovedUnreadMessageIsOneLessToReadAndARemovedReadOneChangesNothing() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent], unreadCount: 2)
        table.messages = [Self.message(1), Self.message(2, from: .customer), Self.message(3), Self.message(4)]
        _ = table.project([Self.event(.messageRemoved("m1"))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 2, "m1 was read already: m3 and m4 are the unread ones")
        _ = table.project([Self.event(.messageRemoved("m2"))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 2, "the user's own message never counted")
        _ = table.project([Self.event(.messageRemoved("m4"))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 1, "an unread message gone is one less to read")
        _ = table.project([Self.event(.messageRemoved("m3"))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 0)
        #expect(table.messages.isEmpty)
    }

    /// A message deleted in place (an update that says so) is one less to read, once.
    @Test func anUnreadMessageDeletedInPlaceIsOneLessToRead() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent], unreadCount: 2)
        table.messages = [Self.message(1), Self.message(2)]
        var deleted = Self.message(2)
        deleted.isDeleted = true
        _ = table.project([Self.event(.messageUpdated(deleted))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 1)
        #expect(table.messages.first { $0.serverID == "m2" }?.isDeleted == true, "the deletion is stored")
        _ = table.project([Self.event(.messageUpdated(deleted))])
        #expect(table.conversations[Self.conversation]?.unreadCount == 1, "the same deletion again changes nothing")
    }

    @Test func aConversationUpdateAnnouncesWhatChangedOrNothing() {
        var table = Table()
        let old = ConversationInfo(id: Self.conversation, state: .queued, participants: [Self.customer])
        table.conversations[Self.conversation] = old
        var new = old
        new.state = .active
        new.assignedAgent = Self.agent
        let output = table.project([Self.event(.conversationUpdated(old)), Self.event(.conversationUpdated(new)), Self.event(.conversationUpdated(new))])
        #expect(output.duplicates == 2)
        #expect(
            output.publications.map(\.kind.name) == ["conversationStateChanged", "agentChanged", "participantsAdded", "conversationUpdated"]
        )
        #expect(table.conversations[Self.conversation]?.participants.map(\.id) == ["me", "bob"], "the assigned agent takes part")
    }

    @Test func stateAgentAndParticipantEventsChangeTheStoredConversation() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, state: .queued, participants: [Self.customer])
        let output = table.project([
            Self.event(.conversationStateChanged(.active, previous: .none)), Self.event(.conversationStateChanged(.active, previous: .none)),
            Self.event(.agentChanged(Self.agent)),
            Self.event(.participantsUpdated([Participant(id: "bob", role: .agent, displayName: "Robert")])),
            Self.event(.participantsRemoved(["me"])),
        ])
        #expect(output.publications.first?.kind == .conversationStateChanged(.active, previous: .queued), "the previous state is the stored one")
        #expect(output.publications.count == 4, "a state it already has is not announced")
        let stored = table.conversations[Self.conversation]
        #expect(stored?.state == .active)
        #expect(stored?.assignedAgent == Self.agent)
        #expect(stored?.participants.map(\.displayName) == ["Robert"])
        #expect(table.reads == 1)
    }

    @Test func theAgentsReadMarkerTurnsTheCustomersSentMessagesReadUpToIt() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent])
        table.messages = [
            Self.message(1, sequence: 1, from: .customer), Self.message(2, sequence: 2, from: .agent),
            Self.message(3, sequence: 3, from: .customer), Self.message(4, sequence: 4, from: .customer),
        ]
        let output = table.project([Self.event(.readMarker("bob", .sequence(3)))])
        #expect(table.reads == 2, "the newest messages are read only once the marker is known to turn some read")
        #expect(table.markers["bob"] == .sequence(3))
        #expect(table.conversations[Self.conversation]?.participants.last?.lastReadSequence == 3)
        let read = table.messages.filter { $0.deliveryState == .read }.map(\.text)
        #expect(read == ["m1", "m3"])
        #expect(output.publications.map(\.kind.name) == ["readMarker", "messageUpdated", "messageUpdated"])
    }

    @Test func theCustomersOwnMarkerAndAPeerConversationsMarkerTurnNoMessagesRead() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent])
        table.conversations["peer"] = ConversationInfo(id: "peer", kind: .direct, participants: [Self.agent])
        table.messages = [Self.message(1, sequence: 1, from: .customer)]
        let output = table.project([
            Self.event(.readMarker("me", .sequence(1))),
            Self.event(.readMarker("bob", .sequence(1)), conversation: "peer"),
        ])
        #expect(table.reads == 2, "the newest messages are read once, to recount what the customer has not read")
        #expect(output.publications.map(\.kind.name) == ["readMarker", "readMarker"])
        #expect(table.messages.allSatisfy { $0.deliveryState == .sent })
    }

    @Test func aMarkerOnAMessageReadsUpToThatMessage() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent])
        table.messages = [Self.message(1, from: .customer), Self.message(2, from: .customer), Self.message(3, from: .customer)]
        let output = table.project([
            Self.event(.messageAdded(Self.message(4, from: .customer), position: .newest)),
            Self.event(.readMarker("bob", .message("m2"))),
            Self.event(.readMarker("bob", .message("m4"))),
        ])
        #expect(
            output.publications.map { [$0.kind.name, $0.kind.message?.text].compactMap { $0 }.joined(separator: " ") } == [
                "messageAdded m4", "readMarker", "messageUpdated m1", "messageUpdated m2", "readMarker", "messageUpdated m3", "messageUpdated m4",
            ]
        )
        #expect(table.messages.allSatisfy { $0.deliveryState == .read })
        #expect(table.reads == 3, "each marker that reads messages reads the newest ones, with what came before it stored")
    }

    @Test func removalsAndEventsWithoutAConversation() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        table.messages = [Self.message(1)]
        let output = table.project([
            Self.event(.historyCleared), Self.event(.messageRemoved("m1")),
            Self.event(.agentChanged(nil), conversation: nil),
            Self.event(.conversationRemoved), Self.event(.typing("bob", isTyping: true, draft: nil)),
        ])
        #expect(output.publications.map(\.kind.name) == ["historyCleared", "conversationRemoved", "typing"], "a removed message is not removed twice")
        #expect(output.problems.map(\.0.code) == [.protocolViolation], "an agent without a conversation")
        #expect(output.stored.map(\.1) == [false])
        #expect(table.conversations.isEmpty && table.messages.isEmpty)
    }
}

extension ChatEvent.Kind {
    /// The case's name: `messageAdded` for `.messageAdded(…)`.
    fileprivate var name: String { String(String(describing: self).prefix { $0 != "(" }) }

    fileprivate var message: Message? {
        switch self {
        case .messageAdded(let message, _), .messageUpdated(let message): message
        default: nil
        }
    }
}

extension EventProjection.Output {
    fileprivate mutating func append(_ other: Self) {
        writes += other.writes
        publications += other.publications
        echoed += other.echoed
        stored += other.stored
        duplicates += other.duplicates
        problems += other.problems
    }
}
