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
        var writer = Writer()
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
            var reader = Reader(bytes: raw)
            guard try reader.byte() == format else { throw Reader.corrupt("an unknown format") }
            let flags = try reader.varint()
            guard flags & ~Flag.known == 0 else { throw Reader.corrupt("parts this version does not know") }
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
            var payload: JSONValue?
            if flags & Flag.payload != 0 {
                do {
                    payload = try JSONValue(parsing: try reader.string())
                } catch {
                    throw Reader.corrupt("a payload that is not JSON")
                }
            }
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
            guard reader.isAtEnd else { throw Reader.corrupt("bytes after its end") }
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
    private enum Tag {
        enum Kind: UInt8 { case text, file, system, actionRequest, agentBusy, rich, custom }
        enum Delivery: UInt8 { case pending, sent, delivered, read, failed }
    }

    private struct Writer {
        var bytes: [UInt8] = []

        mutating func byte(_ value: UInt8) { bytes.append(value) }

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

        mutating func double(_ value: Double) {
            var bits = value.bitPattern.littleEndian
            withUnsafeBytes(of: &bits) { bytes.append(contentsOf: $0) }
        }

        mutating func string(_ value: String) {
            varint(UInt64(value.utf8.count))
            bytes.append(contentsOf: value.utf8)
        }

        mutating func present(_ isPresent: Bool) { byte(isPresent ? 1 : 0) }

        mutating func optional(_ value: String?) {
            present(value != nil)
            if let value { string(value) }
        }

        mutating func kind(_ kind: Message.Kind) {
            switch kind {
            case .text: byte(Tag.Kind.text.rawValue)
            case .file: byte(Tag.Kind.file.rawValue)
            case .system: byte(Tag.Kind.system.rawValue)
            case .actionRequest: byte(Tag.Kind.actionRequest.rawValue)
            case .agentBusy: byte(Tag.Kind.agentBusy.rawValue)
            case .rich(let type):
                byte(Tag.Kind.rich.rawValue)
                string(type)
            case .custom(let type):
                byte(Tag.Kind.custom.rawValue)
                string(type)
            }
        }

        mutating func deliveryState(_ state: Message.DeliveryState) {
            switch state {
            case .pending: byte(Tag.Delivery.pending.rawValue)
            case .sent: byte(Tag.Delivery.sent.rawValue)
            case .delivered: byte(Tag.Delivery.delivered.rawValue)
            case .read: byte(Tag.Delivery.read.rawValue)
            case .failed(let reason):
                byte(Tag.Delivery.failed.rawValue)
                string(reason)
            }
        }

        mutating func attachment(_ attachment: Message.Attachment) {
            string(attachment.name)
            optional(attachment.mimeType)
            present(attachment.size != nil)
            if let size = attachment.size { signed(size) }
            optional(attachment.url?.absoluteString)
            present(attachment.imageSize != nil)
            if let imageSize = attachment.imageSize {
                signed(Int64(imageSize.width))
                signed(Int64(imageSize.height))
            }
            optional(attachment.thumbnailURL?.absoluteString)
        }
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var isAtEnd: Bool { index == bytes.count }

        static func corrupt(_ what: String) -> SwitchboardError {
            SwitchboardError(.storageFailure, "a stored Message does not decode: \(what)")
        }

        mutating func byte() throws -> UInt8 {
            guard index < bytes.count else { throw Self.corrupt("cut short") }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let next = try byte()
                guard shift < 64 else { throw Self.corrupt("an integer too long") }
                value |= UInt64(next & 0x7F) << shift
                if next < 0x80 { return value }
                shift += 7
            }
        }

        mutating func signed() throws -> Int64 {
            let raw = try varint()
            return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
        }

        mutating func count() throws -> Int {
            let value = try varint()
            guard value <= UInt64(bytes.count - index) else { throw Self.corrupt("a length past its end") }
            return Int(value)
        }

        mutating func double() throws -> Double {
            guard bytes.count - index >= 8 else { throw Self.corrupt("cut short") }
            var bits: UInt64 = 0
            withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[index..<index + 8])) }
            index += 8
            return Double(bitPattern: UInt64(littleEndian: bits))
        }

        mutating func string() throws -> String {
            let length = try count()
            defer { index += length }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[index..<index + length]), as: UTF8.self)
        }

        mutating func optional() throws -> String? {
            try present() ? try string() : nil
        }

        mutating func present() throws -> Bool {
            switch try byte() {
            case 0: return false
            case 1: return true
            default: throw Self.corrupt("an unknown presence byte")
            }
        }

        mutating func role() throws -> Participant.Role {
            let raw = try string()
            guard let role = Participant.Role(rawValue: raw) else { throw Self.corrupt("an unknown role \(raw)") }
            return role
        }

        mutating func kind() throws -> Message.Kind {
            guard let tag = Tag.Kind(rawValue: try byte()) else { throw Self.corrupt("an unknown kind") }
            switch tag {
            case .text: return .text
            case .file: return .file
            case .system: return .system
            case .actionRequest: return .actionRequest
            case .agentBusy: return .agentBusy
            case .rich: return .rich(try string())
            case .custom: return .custom(try string())
            }
        }

        mutating func deliveryState() throws -> Message.DeliveryState {
            guard let tag = Tag.Delivery(rawValue: try byte()) else { throw Self.corrupt("an unknown delivery state") }
            switch tag {
            case .pending: return .pending
            case .sent: return .sent
            case .delivered: return .delivered
            case .read: return .read
            case .failed: return .failed(try string())
            }
        }

        mutating func url() throws -> URL? {
            guard let text = try optional() else { return nil }
            guard let url = URL(string: text) else { throw Self.corrupt("a URL that does not parse") }
            return url
        }

        mutating func attachment() throws -> Message.Attachment {
            let name = try string()
            let mimeType = try optional()
            let size = try present() ? try signed() : nil
            let url = try self.url()
            var imageSize: Message.Attachment.ImageSize?
            if try present() {
                let width = try signed()
                let height = try signed()
                guard let width = Int(exactly: width), let height = Int(exactly: height) else { throw Self.corrupt("an image size out of range") }
                imageSize = Message.Attachment.ImageSize(width: width, height: height)
            }
            let thumbnailURL = try self.url()
            return Message.Attachment(name: name, mimeType: mimeType, size: size, url: url, imageSize: imageSize, thumbnailURL: thumbnailURL)
        }
    }
}
