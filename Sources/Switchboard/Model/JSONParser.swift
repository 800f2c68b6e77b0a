/// A JSON parser (RFC 8259) straight to ``JSONValue``: one pass over the UTF-8 bytes, no
/// intermediate tree, no `Codable` round.
///
/// `JSONDecoder` decoding a `JSONValue` tries each case in turn and throws for every miss; this
/// is what every adapter's inbound path and every stored payload goes through, so it is written
/// out by hand (Docs/Benchmarks.md, "decode + normalize").
///
/// - A number without a fraction or an exponent that fits in `Int64` is `.int`; any other
///   number is `.double` (a literal too large even for a double is an error).
/// - Strings must be valid UTF-8; escapes include `\u` surrogate pairs (a lone surrogate is
///   an error).
/// - Nesting is limited to ``maximumDepth`` levels, so hostile input cannot exhaust the stack.
/// - Duplicate object keys: the last one wins.
struct JSONParser: ~Copyable {
    static let maximumDepth = 512

    struct Failure: Error, CustomStringConvertible {
        var reason: String
        var offset: Int
        var description: String { "\(reason) at byte \(offset)" }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Parses one JSON text: a value with nothing but whitespace around it.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes)
        parser.skipWhitespace()
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected data after the value") }
        return value
    }

    private func failure(_ reason: String) -> Failure { Failure(reason: reason, offset: index) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func value() throws(Failure) -> JSONValue {
        guard let byte = current else { throw failure("unexpected end of data") }
        switch byte {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) throws(Failure) -> JSONValue {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw failure("unexpected end of data") }
        let matches = word.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw failure("unexpected character") }
        index += count
        return value
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        if depth > Self.maximumDepth { throw failure("nested deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func object() throws(Failure) -> JSONValue {
        try enter()
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            guard current == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            members[key] = try value()
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return .object(members)
            default:
                throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func array() throws(Failure) -> JSONValue {
        try enter()
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            elements.append(try value())
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return .array(elements)
            default:
                throw failure("expected ',' or ']'")
            }
        }
    }

    /// A string; `index` is at its opening quote.
    private mutating func string() throws(Failure) -> String {
        index += 1
        let start = index
        // The common case: no escapes, so the bytes between the quotes are the string.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return try validated(raw, at: start)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("a control character in a string") }
            index += 1
        }
        var scalars = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try scalars.withUnsafeBufferPointer { buffer throws(Failure) in try validated(buffer, at: start) }
            case UInt8(ascii: "\\"):
                index += 1
                guard let escape = current else { throw failure("unexpected end of data") }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"): appendUTF8(try unicodeEscape(), to: &scalars)
                default: throw failure("an invalid escape")
                }
            case 0..<0x20:
                throw failure("a control character in a string")
            default:
                scalars.append(byte)
                index += 1
            }
        }
        throw failure("an unterminated string")
    }

    private func validated(_ raw: UnsafeBufferPointer<UInt8>, at offset: Int) throws(Failure) -> String {
        guard let string = String(validating: raw, as: UTF8.self) else {
            throw Failure(reason: "a string that is not UTF-8", offset: offset)
        }
        return string
    }

    /// `XXXX` after `\u`, with the low half of a surrogate pair when it is one.
    private mutating func unicodeEscape() throws(Failure) -> Unicode.Scalar {
        let high = try hex4()
        if (0xD800..<0xDC00).contains(high) {
            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("a lone surrogate")
            }
            index += 2
            let low = try hex4()
            guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate") }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
        }
        guard let scalar = Unicode.Scalar(high) else { throw failure("a lone surrogate") }
        return scalar
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - index >= 4 else { throw failure("unexpected end of data") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("an invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to bytes: inout [UInt8]) {
        for unit in UTF8.encode(scalar)! { bytes.append(unit) }
    }

    private mutating func number() throws(Failure) -> JSONValue {
        let start = index
        var isInteger = true
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { throw failure("a number without digits") }
        if first == UInt8(ascii: "0") {
            index += 1
        } else {
            skipDigits()
        }
        if current == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard skipDigits() > 0 else { throw failure("a number without digits after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard skipDigits() > 0 else { throw failure("a number without digits in its exponent") }
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
        if isInteger, let integer = Self.int64(text) { return .int(integer) }
        // Only ASCII digits, signs, '.', 'e' reach here.
        guard let double = Double(String(decoding: text, as: UTF8.self)), double.isFinite else {
            throw Failure(reason: "a number out of range", offset: start)
        }
        return .double(double)
    }

    @discardableResult
    private mutating func skipDigits() -> Int {
        let start = index
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        return index - start
    }

    /// The integer in `text` (an optional '-' and digits), or `nil` when it overflows `Int64`.
    private static func int64(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var digits = text[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        var value: Int64 = 0
        for byte in digits {
            let digit = Int64(byte - UInt8(ascii: "0"))
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            value = next
        }
        return value
    }
}

/// JSON text from a ``JSONValue``, written directly (`JSONEncoder` walks `Codable` containers for
/// every value): compact, object keys sorted so equal values give equal bytes, `/` not escaped,
/// non-finite doubles written as `null`.
enum JSONWriter {
    static func write(_ value: JSONValue) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        write(value, into: &bytes)
        return bytes
    }

    private static func write(_ value: JSONValue, into bytes: inout [UInt8]) {
        switch value {
        case .null: bytes.append(contentsOf: "null".utf8)
        case .bool(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .int(let number): bytes.append(contentsOf: String(number).utf8)
        case .double(let number):
            // `description` is the shortest text that reads back as the same double, and keeps a
            // fraction or an exponent, so it reads back as a double.
            bytes.append(contentsOf: (number.isFinite ? number.description : "null").utf8)
        case .string(let text): writeString(text, into: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element, into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                write(members[key]!, into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private static func writeString(_ text: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0x08: bytes.append(contentsOf: #"\b"#.utf8)
            case 0x0C: bytes.append(contentsOf: #"\f"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
