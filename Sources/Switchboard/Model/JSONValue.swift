public import Foundation

/// A JSON value that round-trips losslessly through `Codable`.
///
/// Vendor data the normalized model does not cover travels as a `JSONValue`, never dropped.
/// Integers are kept apart from floating-point numbers, so a 64-bit id survives a round trip
/// exactly; object keys are unordered, as in JSON itself.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let int = try? container.decode(Int64.self) {
            self = .int(int)
        } else if let double = try? container.decode(Double.self) {
            self = .double(double)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else if let object = try? container.decode([String: JSONValue].self) {
            self = .object(object)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a JSON value")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue {
    /// Parses JSON text.
    ///
    /// - Throws: ``SwitchboardError`` with code ``SwitchboardError/Code/protocolViolation`` when
    ///   the data is not JSON.
    public init(parsing data: Data) throws {
        self = try data.withUnsafeBytes { raw in try Self.parse(raw.bindMemory(to: UInt8.self)) }
    }

    /// Parses JSON text from a string.
    public init(parsing text: String) throws {
        if let parsed = try text.utf8.withContiguousStorageIfAvailable(Self.parse) {
            self = parsed
        } else {
            try self.init(parsing: Data(text.utf8))
        }
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws -> JSONValue {
        do {
            return try JSONParser.parse(bytes)
        } catch {
            throw SwitchboardError(.protocolViolation, "malformed JSON (\(bytes.count) bytes): \(error)", underlying: error)
        }
    }

    /// Compact JSON text with sorted keys, so equal values encode to equal bytes. Non-finite
    /// doubles are written as `null`.
    public func jsonData() -> Data {
        Data(JSONWriter.write(self))
    }

    /// Compact JSON text with sorted keys.
    public var jsonString: String { String(decoding: JSONWriter.write(self), as: UTF8.self) }

    /// The member `key` of an object, or `nil`.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The element at `index` of an array, or `nil`.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var intValue: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e18: return Int64(value)
        default: return nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var isNull: Bool { self == .null }

    /// `nil` for JSON `null`, the value otherwise. (`JSONValue` is `ExpressibleByNilLiteral`, so a
    /// bare `nil` where a `JSONValue?` is expected can silently mean `.null`; this says it plainly.)
    public var nonNull: JSONValue? {
        if case .null = self { return Optional.none }
        return self
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { jsonString }
}

extension JSONValue {
    /// This object with `other`'s keys set to `other`'s values (a shallow merge); anything but
    /// two objects is `other`.
    public func merging(_ other: JSONValue) -> JSONValue {
        guard case .object(var merged) = self, case .object(let changes) = other else { return other }
        merged.merge(changes) { _, new in new }
        return .object(merged)
    }
}
