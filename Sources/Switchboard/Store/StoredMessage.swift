package import Foundation

/// The stored form of a ``Message``: a compact binary record the durable stores keep in place of
/// the message's JSON, because a history page's time went almost all to `JSONDecoder`.
///
/// The record starts with a format byte that JSON text never starts with, so a store reads rows
/// written in either form: ``StoredValue/decode(_:_:)`` tells them apart by that byte, and rows
/// written before the binary form need no migration. Integers are LEB128 varints (signed ones
/// zigzagged), strings their UTF-8 length and bytes, the time the bits of its
/// `timeIntervalSinceReferenceDate` (exact, as `JSONEncoder` stores it), the rare vendor payload
/// its JSON text.
package enum StoredMessage {
    /// The first byte of a record in this form.
    package static let format: UInt8 = 0x01

    package static func encode(_ message: Message) -> Data {
        var writer = StoredRecordWriter()
        writer.bytes.reserveCapacity(64 + message.text.utf8.count)
        writer.byte(format)
        var flags: UInt64 = 0
        if message.serverID != nil { flags |= Flag.serverID }
        if message.clientID != nil { flags |= Flag.clientID }
        if message.sequence != nil { flags |= Flag.sequence }
        if message.sender != nil { flags |= Flag.sender }
        if message.senderRole != nil { flags |= Flag.senderRole }
        if message.senderName != nil { flags |= Flag.senderName }
        if message.payload != nil { flags |= Flag.payload }
        if message.isEdited { flags |= Flag.edited }
        if message.isDeleted { flags |= Flag.deleted }
        if message.quote != nil { flags |= Flag.quote }
        writer.varint(flags)
        if let serverID = message.serverID { writer.string(serverID.rawValue) }
        if let clientID = message.clientID { writer.string(clientID.rawValue) }
        writer.string(message.conversationID.rawValue)
        if let sequence = message.sequence { writer.signed(sequence) }
        if let sender = message.sender { writer.string(sender.rawValue) }
        if let role = message.senderRole { writer.string(role.rawValue) }
        if let name = message.senderName { writer.string(name) }
        writer.kind(message.kind)
        writer.string(message.text)
        writer.varint(UInt64(message.attachments.count))
        for attachment in message.attachments { writer.attachment(attachment) }
        if let payload = message.payload { writer.string(payload.jsonString) }
        writer.double(message.time.timeIntervalSinceReferenceDate)
        if let quote = message.quote {
            writer.optional(quote.messageID?.rawValue)
            writer.optional(quote.senderName)
            writer.optional(quote.text)
        }
        writer.deliveryState(message.deliveryState)
        return Data(writer.bytes)
    }

    /// - Throws: `storageFailure` when the record is cut short, has bytes after its end, or holds
    ///   a value no message has (an unknown tag, a bad URL, a payload that is not JSON).
    package static func decode(_ data: Data) throws -> Message {
        try data.withUnsafeBytes { raw in
            var reader = StoredRecordReader(bytes: raw, type: "Message")
            guard try reader.byte() == format else { throw reader.corrupt("an unknown format") }
            let flags = try reader.varint()
            guard flags & ~Flag.known == 0 else { throw reader.corrupt("parts this version does not know") }
            let serverID = flags & Flag.serverID != 0 ? MessageID(try reader.string()) : nil
            let clientID = flags & Flag.clientID != 0 ? ClientMessageID(try reader.string()) : nil
            let conversationID = ConversationID(try reader.string())
            let sequence = flags & Flag.sequence != 0 ? try reader.signed() : nil
            let sender = flags & Flag.sender != 0 ? ParticipantID(try reader.string()) : nil
            let senderRole = flags & Flag.senderRole != 0 ? try reader.role() : nil
            let senderName = flags & Flag.senderName != 0 ? try reader.string() : nil
            let kind = try reader.kind()
            let text = try reader.string()
            var attachments: [Message.Attachment] = []
            let attachmentCount = try reader.count()
            attachments.reserveCapacity(attachmentCount)
            for _ in 0..<attachmentCount { attachments.append(try reader.attachment()) }
            // Not a `?:` with `nil`: `JSONValue` is `ExpressibleByNilLiteral` (JSON's null).
            var payload: JSONValue?
            if flags & Flag.payload != 0 { payload = try reader.json() }
            let time = Date(timeIntervalSinceReferenceDate: try reader.double())
            var quote: Message.Quote?
            if flags & Flag.quote != 0 {
                quote = Message.Quote(
                    messageID: try reader.optional().map(MessageID.init),
                    senderName: try reader.optional(),
                    text: try reader.optional()
                )
            }
            let deliveryState = try reader.deliveryState()
            guard reader.isAtEnd else { throw reader.corrupt("bytes after its end") }
            return Message(
                serverID: serverID, clientID: clientID, conversationID: conversationID, sequence: sequence,
                sender: sender, senderRole: senderRole, senderName: senderName, kind: kind, text: text,
                attachments: attachments, payload: payload, time: time, isEdited: flags & Flag.edited != 0,
                isDeleted: flags & Flag.deleted != 0, quote: quote, deliveryState: deliveryState
            )
        }
    }

    /// Which of a message's optional parts the record holds.
    private enum Flag {
        static let serverID: UInt64 = 1 << 0
        static let clientID: UInt64 = 1 << 1
        static let sequence: UInt64 = 1 << 2
        static let sender: UInt64 = 1 << 3
        static let senderRole: UInt64 = 1 << 4
        static let senderName: UInt64 = 1 << 5
        static let payload: UInt64 = 1 << 6
        static let edited: UInt64 = 1 << 7
        static let deleted: UInt64 = 1 << 8
        static let quote: UInt64 = 1 << 9
        static let known: UInt64 = (1 << 10) - 1
    }

    /// The tags of the enumerations' cases. Never renumbered: stored records keep them.
    enum Tag {
        enum Kind: UInt8 { case text, file, system, actionRequest, agentBusy, rich, custom }
        enum Delivery: UInt8 { case pending, sent, delivered, read, failed }
    }
}
