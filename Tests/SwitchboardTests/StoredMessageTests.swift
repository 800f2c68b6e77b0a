import Foundation
@_spi(TestKit) import Switchboard
import SwitchboardTestKit
import Testing

/// The binary form the durable stores keep messages in.
struct StoredMessageTests {
    static let time = Date(timeIntervalSince1970: 1_700_000_000.123_456)

    /// Every part a message has, each optional one present and absent, every kind and state.
    static let messages: [Message] = {
        let full = Message(
            serverID: "s-1", clientID: "c-1", conversationID: "conv", sequence: 42, sender: "agent-7", senderRole: .agent,
            senderName: "Ann Agent", kind: .text, text: "Hello, world — привет 👋",
            attachments: [
                Message.Attachment(
                    name: "photo.jpg", mimeType: "image/jpeg", size: 123_456, url: URL(string: "https://files.example/p.jpg?x=1&y=2"),
                    imageSize: .init(width: 640, height: 480), thumbnailURL: URL(string: "https://files.example/t.jpg")
                ),
                Message.Attachment(name: ""),
            ],
            payload: .object(["type": .string("quickReplies"), "options": .array([.string("Yes"), .int(2), .double(2.5), .bool(true), .null])]),
            time: time, isEdited: true, isDeleted: true,
            quote: Message.Quote(messageID: "s-0", senderName: "Carl", text: "earlier"), deliveryState: .read
        )
        var messages = [full, Message(conversationID: "", text: "", time: Date(timeIntervalSinceReferenceDate: 0))]
        let kinds: [Message.Kind] = [.text, .file, .system, .actionRequest, .agentBusy, .rich("listPicker"), .custom("vendor/x"), .rich("")]
        let states: [Message.DeliveryState] = [.pending, .sent, .delivered, .read, .failed("too long"), .failed("")]
        for (index, kind) in kinds.enumerated() {
            var message = full
            message.kind = kind
            message.deliveryState = states[index % states.count]
            messages.append(message)
        }
        for state in states {
            var message = full
            message.deliveryState = state
            message.quote = Message.Quote()
            messages.append(message)
        }
        for sequence in [Int64.min, -1, 0, 1, 127, 128, Int64.max] {
            var message = full
            message.sequence = sequence
            message.attachments = [Message.Attachment(name: "a", size: sequence, imageSize: .init(width: -1, height: Int.max))]
            messages.append(message)
        }
        var bare = full
        bare.serverID = nil
        bare.sender = nil
        bare.senderRole = nil
        bare.senderName = nil
        bare.payload = nil
        bare.quote = nil
        bare.isEdited = false
        bare.text = String(repeating: "long text ", count: 5_000)
        messages.append(bare)
        for role in [Participant.Role.customer, .agent, .bot, .system, .user] {
            var message = bare
            message.senderRole = role
            message.time = Date(timeIntervalSinceReferenceDate: -1e9)
            messages.append(message)
        }
        return messages
    }()

    @Test func everyMessageComesBackAsItWent() throws {
        for message in Self.messages {
            let stored = try StoredValue.encode(message)
            #expect(stored.first == StoredMessage.format)
            #expect(try StoredValue.decode(Message.self, stored) == message)
        }
        let typical = Message(serverID: "s1", conversationID: "c1", sequence: 1, senderRole: .agent, text: "a sentence of ordinary length", time: Self.time)
        print(
            "stored messages: \(Self.messages.count) round-tripped; a typical one is \(StoredMessage.encode(typical).count) bytes, "
                + "\(try JSONEncoder().encode(typical).count) as JSON"
        )
    }

    /// Rows written before the binary form are JSON: they still read.
    @Test func aMessageStoredAsJSONStillDecodes() throws {
        for message in Self.messages {
            #expect(try StoredValue.decode(Message.self, try JSONEncoder().encode(message)) == message)
        }
    }

    /// Other values stay JSON.
    @Test func otherValuesAreStillJSON() throws {
        let marker = ChatEvent.ReadMarker.message("s-1")
        let stored = try StoredValue.encode(marker)
        #expect(stored.first == UInt8(ascii: "{"))
        #expect(try StoredValue.decode(ChatEvent.ReadMarker.self, stored) == marker)
    }

    /// A damaged record is a typed `storageFailure`, never a crash or a wrong message: cut at
    /// every length, with a byte too many, with an unknown tag.
    @Test func aDamagedRecordIsAStorageFailure() throws {
        let record = StoredMessage.encode(Self.messages[0])
        let failures = Self.refuseCutsAndExtension(of: record) { _ = try StoredMessage.decode($0) }
        var unknownFormat = record
        unknownFormat[0] = 0x02
        #expect(throws: SwitchboardError.self) { try StoredMessage.decode(unknownFormat) }
        let bare = StoredMessage.encode(Message(conversationID: "c", text: "t", time: Self.time))
        // A flag this version does not know (bit 10, the varint's second byte).
        var unknownPart = bare
        unknownPart.replaceSubrange(1...1, with: [0x80 | bare[1], 0x08])
        #expect(throws: SwitchboardError.self) { try StoredMessage.decode(unknownPart) }
        // format, flags, conversation (1 + 1), then the kind's tag.
        var unknownKind = bare
        unknownKind[4] = 0xEE
        #expect(throws: SwitchboardError.self) { try StoredMessage.decode(unknownKind) }
        do {
            _ = try StoredValue.decode(Message.self, record.prefix(10))
            Issue.record("a cut record decoded")
        } catch let error as SwitchboardError {
            #expect(error.code == .storageFailure)
        }
        print("damaged stored messages: \(failures + 4) refused as storageFailure, 0 decoded")
    }

    /// Records with random bytes changed, from a seeded generator: each decodes to some message
    /// or fails as `storageFailure`; none crashes or fails another way.
    @Test func randomlyDamagedRecordsNeverCrash() throws {
        let (refused, decoded) = Self.damageAtRandom(Self.messages.prefix(12).map(StoredMessage.encode), seed: 29) { _ = try StoredMessage.decode($0) }
        print("randomly damaged stored messages: 20000, \(refused) refused as storageFailure, \(decoded) decoded to some message, 0 crashed")
    }

    /// Expects `decode` to refuse `record` cut at every length and with a byte too many; returns
    /// how many it was given. A failure is reported where the caller stands.
    static func refuseCutsAndExtension(
        of record: Data,
        sourceLocation: SourceLocation = #_sourceLocation,
        decode: (Data) throws -> Void
    ) -> Int {
        for length in 0..<record.count {
            #expect(throws: SwitchboardError.self, "cut to \(length) bytes", sourceLocation: sourceLocation) { try decode(record.prefix(length)) }
        }
        var longer = record
        longer.append(0)
        #expect(throws: SwitchboardError.self, "a byte too many", sourceLocation: sourceLocation) { try decode(longer) }
        return record.count + 1
    }

    /// Decodes 20,000 copies of `records` with 1 to 4 bytes (after the format byte) changed at
    /// random, from a seeded generator: each decodes or fails as `storageFailure`.
    static func damageAtRandom(_ records: [Data], seed: UInt64, decode: (Data) throws -> Void) -> (refused: Int, decoded: Int) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var refused = 0
        var decoded = 0
        for _ in 0..<20_000 {
            var record = records.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                record[Int.random(in: 1..<record.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            do {
                try decode(record)
                decoded += 1
            } catch let error as SwitchboardError {
                #expect(error.code == .storageFailure)
                refused += 1
            } catch {
                Issue.record("a damaged record failed as \(error), not as storageFailure")
            }
        }
        return (refused, decoded)
    }

    /// Many messages from a seeded generator, each field drawn independently.
    @Test func seededMessagesRoundTrip() throws {
        var random = SeededRandomNumberGenerator(seed: 17)
        func text() -> String {
            let alphabet = Array("ab é😀\u{0}\"\\\n")
            return String((0..<Int.random(in: 0...12, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
        }
        func maybe<T>(_ make: () -> T) -> T? { Bool.random(using: &random) ? make() : nil }
        var count = 0
        for _ in 0..<1_000 {
            let message = Message(
                serverID: maybe { MessageID(text()) }, clientID: maybe { ClientMessageID(text()) }, conversationID: ConversationID(text()),
                sequence: maybe { Int64.random(in: .min ... .max, using: &random) }, sender: maybe { ParticipantID(text()) },
                senderRole: maybe { [.customer, .agent, .bot, .system, .user].randomElement(using: &random)! }, senderName: maybe(text),
                kind: [.text, .file, .rich(text()), .custom(text())].randomElement(using: &random)!, text: text(),
                attachments: (0..<Int.random(in: 0...2, using: &random)).map { _ in Message.Attachment(name: text(), mimeType: maybe(text), size: maybe { Int64.random(in: 0...1 << 40, using: &random) }) },
                payload: maybe { .string(text()) }, time: Date(timeIntervalSinceReferenceDate: Double.random(in: -1e10...1e10, using: &random)),
                isEdited: Bool.random(using: &random), isDeleted: Bool.random(using: &random),
                quote: maybe { Message.Quote(messageID: maybe { MessageID(text()) }, text: maybe(text)) },
                deliveryState: [.pending, .sent, .delivered, .read, .failed(text())].randomElement(using: &random)!
            )
            #expect(try StoredMessage.decode(StoredMessage.encode(message)) == message)
            count += 1
        }
        print("seeded stored messages: \(count) round-tripped")
    }
}

/// The binary form the durable stores keep conversations in.
struct StoredConversationTests {
    static let time = StoredMessageTests.time

    /// Every part a conversation has, each optional one present and absent, every kind and state,
    /// participants with each permission alone, previews of each delivery state.
    static let conversations: [ConversationInfo] = {
        let agent = Participant(
            id: "agent-7", role: .agent, displayName: "Ann Agent — Анна", avatarURL: URL(string: "https://files.example/a.png?s=64"),
            permissions: .owner, lastReadSequence: 41, payload: .object(["team": .string("billing"), "level": .int(2)])
        )
        let preview = MessagePreview(
            Message(serverID: "s-9", clientID: "c-9", conversationID: "conv", sequence: 9, sender: "agent-7", senderRole: .agent,
                    senderName: "Ann", text: "the newest 👋", attachments: [Message.Attachment(name: "a"), Message.Attachment(name: "b")],
                    time: time, deliveryState: .delivered),
            isOwn: false
        )
        let full = ConversationInfo(
            id: "conv", kind: .thread, title: "Billing question", state: .active,
            participants: [Participant(id: "me", role: .customer), agent], assignedAgent: agent, lastSequence: 9, unreadCount: 3,
            customData: .array([.string("x"), .null, .bool(false), .double(1.5)]), flags: [.direct, .uber, .publicJoin],
            createdAt: Date(timeIntervalSinceReferenceDate: -1e9), updatedAt: time, lastMessage: preview
        )
        var conversations = [full, ConversationInfo(id: "")]
        let states: [ConversationInfo.State] = [.none, .queued, .active, .invitation, .closedByAgent, .closedByCustomer, .closed, .archived, .unknown("vendor-x"), .unknown("")]
        let kinds: [ConversationInfo.Kind] = [.supportChat, .thread, .direct, .group]
        for (index, state) in states.enumerated() {
            var conversation = full
            conversation.state = state
            conversation.kind = kinds[index % kinds.count]
            conversations.append(conversation)
        }
        let permissions: [WritableKeyPath<Participant.Permissions, Bool>] = [
            \.canWrite, \.canEditOwn, \.canEditAll, \.canRemoveOwn, \.canRemoveAll, \.canManageParticipants, \.isOwner,
        ]
        for keyPath in permissions {
            var alone = Participant.Permissions(canWrite: false, canEditOwn: false, canRemoveOwn: false)
            alone[keyPath: keyPath] = true
            var conversation = full
            conversation.participants = [Participant(id: "p", role: .bot, permissions: alone)]
            conversation.assignedAgent = nil
            conversations.append(conversation)
        }
        for state in [Message.DeliveryState.pending, .sent, .read, .failed("too long")] {
            var conversation = full
            var own = preview
            own.deliveryState = state
            own.isOwn = true
            own.serverID = nil
            own.sender = nil
            own.senderRole = nil
            own.senderName = nil
            own.attachmentCount = 0
            conversation.lastMessage = own
            conversations.append(conversation)
        }
        for count in [Int.min, -1, 0, 127, 128, Int.max] {
            var conversation = full
            conversation.unreadCount = count
            conversation.lastSequence = Int64(count)
            conversation.flags = ConversationInfo.Flags(rawValue: count)
            conversations.append(conversation)
        }
        // JSON's null is a value, not an absence (`JSONValue` is `ExpressibleByNilLiteral`).
        var nulls = full
        nulls.id = "nulls"
        nulls.customData = .null
        nulls.participants = [Participant(id: "p", role: .user, payload: .null)]
        conversations.append(nulls)
        var bare = full
        bare.title = nil
        bare.assignedAgent = nil
        bare.lastSequence = nil
        bare.customData = nil
        bare.createdAt = nil
        bare.updatedAt = nil
        bare.lastMessage = nil
        bare.participants = (0..<200).map { Participant(id: ParticipantID("member-\($0)"), role: .user) }
        conversations.append(bare)
        return conversations
    }()

    /// The store's path for a value of any type (the generic `encode`).
    static func encodedAsAnyValue<T: Encodable>(_ value: T) throws -> Data { try StoredValue.encode(value) }

    @Test func everyConversationComesBackAsItWent() throws {
        for conversation in Self.conversations {
            let stored = try Self.encodedAsAnyValue(conversation)
            #expect(stored.first == StoredConversation.format)
            #expect(try StoredValue.decode(ConversationInfo.self, stored) == conversation)
            #expect(StoredValue.encode(conversation) == stored)
        }
        let typical = Self.conversations[0]
        print(
            "stored conversations: \(Self.conversations.count) round-tripped; a typical one is \(StoredConversation.encode(typical).count) bytes, "
                + "\(try JSONEncoder().encode(typical).count) as JSON"
        )
    }

    /// Rows written before the binary form are JSON: they still read.
    @Test func aConversationStoredAsJSONStillDecodes() throws {
        // JSON cannot tell a null from an absence: the binary form can, JSON never could.
        for conversation in Self.conversations where conversation.id != "nulls" {
            #expect(try StoredValue.decode(ConversationInfo.self, try JSONEncoder().encode(conversation)) == conversation)
        }
    }

    /// A damaged record is a typed `storageFailure`: cut at every length, with a byte too many,
    /// with another record's format, with bytes changed at random (from a seeded generator): each
    /// decodes to some conversation or fails as `storageFailure`, none crashes.
    @Test func aDamagedRecordIsAStorageFailure() throws {
        let record = StoredConversation.encode(Self.conversations[0])
        let refused = StoredMessageTests.refuseCutsAndExtension(of: record) { _ = try StoredConversation.decode($0) }
        #expect(throws: SwitchboardError.self) { try StoredConversation.decode(StoredMessage.encode(StoredMessageTests.messages[0])) }
        let (damaged, decoded) = StoredMessageTests.damageAtRandom([record], seed: 31) { _ = try StoredConversation.decode($0) }
        print("damaged stored conversations: \(refused + 1) cut, extended or of another type refused; 20000 randomly changed, \(damaged) refused as storageFailure, \(decoded) decoded, 0 crashed")
    }
}
