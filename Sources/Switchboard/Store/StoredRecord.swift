import Foundation

// The binary records the durable stores keep (``StoredMessage``, ``StoredConversation``):
// integers are LEB128 varints (signed ones zigzagged), strings their UTF-8 length and bytes, a
// time the bits of its `timeIntervalSinceReferenceDate` (exact, as `JSONEncoder` stores it), an
// optional part a presence byte and the part, a rare vendor payload its JSON text.

struct StoredRecordWriter {
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
        case .text: byte(StoredMessage.Tag.Kind.text.rawValue)
        case .file: byte(StoredMessage.Tag.Kind.file.rawValue)
        case .system: byte(StoredMessage.Tag.Kind.system.rawValue)
        case .actionRequest: byte(StoredMessage.Tag.Kind.actionRequest.rawValue)
        case .agentBusy: byte(StoredMessage.Tag.Kind.agentBusy.rawValue)
        case .rich(let type):
            byte(StoredMessage.Tag.Kind.rich.rawValue)
            string(type)
        case .custom(let type):
            byte(StoredMessage.Tag.Kind.custom.rawValue)
            string(type)
        }
    }

    mutating func deliveryState(_ state: Message.DeliveryState) {
        switch state {
        case .pending: byte(StoredMessage.Tag.Delivery.pending.rawValue)
        case .sent: byte(StoredMessage.Tag.Delivery.sent.rawValue)
        case .delivered: byte(StoredMessage.Tag.Delivery.delivered.rawValue)
        case .read: byte(StoredMessage.Tag.Delivery.read.rawValue)
        case .failed(let reason):
            byte(StoredMessage.Tag.Delivery.failed.rawValue)
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

struct StoredRecordReader {
    let bytes: UnsafeRawBufferPointer
    /// The type the record holds, for the errors.
    let type: String
    var index = 0

    var isAtEnd: Bool { index == bytes.count }

    func corrupt(_ what: String) -> SwitchboardError {
        SwitchboardError(.storageFailure, "a stored \(type) does not decode: \(what)")
    }

    mutating func byte() throws -> UInt8 {
        guard index < bytes.count else { throw corrupt("cut short") }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            guard shift < 64 else { throw corrupt("an integer too long") }
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
        guard value <= UInt64(bytes.count - index) else { throw corrupt("a length past its end") }
        return Int(value)
    }

    mutating func double() throws -> Double {
        guard bytes.count - index >= 8 else { throw corrupt("cut short") }
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
        default: throw corrupt("an unknown presence byte")
        }
    }

    mutating func role() throws -> Participant.Role {
        let raw = try string()
        guard let role = Participant.Role(rawValue: raw) else { throw corrupt("an unknown role \(raw)") }
        return role
    }

    mutating func kind() throws -> Message.Kind {
        guard let tag = StoredMessage.Tag.Kind(rawValue: try byte()) else { throw corrupt("an unknown kind") }
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
        guard let tag = StoredMessage.Tag.Delivery(rawValue: try byte()) else { throw corrupt("an unknown delivery state") }
        switch tag {
        case .pending: return .pending
        case .sent: return .sent
        case .delivered: return .delivered
        case .read: return .read
        case .failed: return .failed(try string())
        }
    }

    /// A signed integer that fits an `Int`.
    mutating func int() throws -> Int {
        guard let value = Int(exactly: try signed()) else { throw corrupt("an integer out of range") }
        return value
    }

    /// A vendor payload, stored as its JSON text.
    mutating func json() throws -> JSONValue {
        do {
            return try JSONValue(parsing: try string())
        } catch {
            throw corrupt("data that is not JSON")
        }
    }

    /// An optional URL: a presence byte and its text.
    mutating func url() throws -> URL? {
        guard let text = try optional() else { return nil }
        return try url(from: text)
    }

    func url(from text: String) throws -> URL {
        guard let url = URL(string: text) else { throw corrupt("a URL that does not parse") }
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
            guard let width = Int(exactly: width), let height = Int(exactly: height) else { throw corrupt("an image size out of range") }
            imageSize = Message.Attachment.ImageSize(width: width, height: height)
        }
        let thumbnailURL = try self.url()
        return Message.Attachment(name: name, mimeType: mimeType, size: size, url: url, imageSize: imageSize, thumbnailURL: thumbnailURL)
    }
}
