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
        mutating func project(_ events: [BackendEvent], known: Set<ConversationID> = []) -> Projection.Output {
            var rows = Projection.Rows(existing: known)
            answer(Projection.reads(for: events, in: rows), into: &rows)
            var all = Projection.Output()
            var output = Projection.Output()
            for event in events {
                while case .needs(let reads) = Projection.project(event, rows: &rows, into: &output, now: EventProjectionTests.now) {
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

    static func event(_ kind: ChatEvent.Kind, conversation: ConversationID? = Self.conversation) -> BackendEvent {
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

    @Test func aConversationKnownToBeStoredIsNotReadForAMessage() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation)
        let output = table.project([Self.event(.messageAdded(Self.message(1), position: .newest))], known: [Self.conversation])
        let reads = Projection.reads(for: [Self.event(.messageAdded(Self.message(2), position: .newest))], in: Projection.Rows(existing: [Self.conversation]))
        #expect(reads.conversations.isEmpty)
        #expect(output.writes == [.saveMessages([Self.message(1)])])
        #expect(output.stored.isEmpty)
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
        #expect(output.writes == [.removeMessage("m1", in: Self.conversation), .saveMessages([Self.message(1)])])
        #expect(table.reads == 1)
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

    @Test func theCustomersOwnMarkerAndAPeerConversationsMarkerReadNoMessages() {
        var table = Table()
        table.conversations[Self.conversation] = ConversationInfo(id: Self.conversation, participants: [Self.customer, Self.agent])
        table.conversations["peer"] = ConversationInfo(id: "peer", kind: .direct, participants: [Self.agent])
        table.messages = [Self.message(1, sequence: 1, from: .customer)]
        let output = table.project([
            Self.event(.readMarker("me", .sequence(1))),
            Self.event(.readMarker("bob", .sequence(1)), conversation: "peer"),
        ])
        #expect(table.reads == 1, "no newest messages read")
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
            Self.event(.agentChanged(nil), conversation: nil), Self.event(.gap(dropped: 1)),
            Self.event(.conversationRemoved), Self.event(.typing("bob", isTyping: true, draft: nil)),
        ])
        #expect(output.publications.map(\.kind.name) == ["historyCleared", "conversationRemoved", "typing"], "a removed message is not removed twice")
        #expect(output.problems.map(\.0.code) == [.protocolViolation, .protocolViolation])
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
