public import Switchboard

/// How a JSON value an emulator serves compares with a vendor's own payload (a fixture from the
/// vendor SDK's tests): an emulator meets its adapter on the vendor's payloads, not on the
/// adapter's reading of them.
public struct FixtureShape: Sendable {
    /// Field names the emulator may leave `null` where the fixture has a value (each with its
    /// reason where the list is made).
    public var mayBeNull: Set<String>
    /// Names of objects whose keys are data (a locale, an id), not field names: one value is
    /// compared with one.
    public var mapsByKey: Set<String>

    public init(mayBeNull: Set<String> = [], mapsByKey: Set<String> = []) {
        self.mayBeNull = mayBeNull
        self.mapsByKey = mapsByKey
    }

    /// Fields of `fixture` that `served` lacks, or has with another JSON type, by path. A `null`
    /// in the fixture matches anything; a `null` served where the fixture has a value is a
    /// difference unless the field is in ``mayBeNull``; numbers match numbers; arrays compare
    /// their first items.
    public func differences(_ served: JSONValue, _ fixture: JSONValue, at path: String = "$") -> [String] {
        let field = String(path.split(separator: ".").last ?? "")
        switch (served, fixture) {
        case (_, .null): return []
        case (.null, _):
            return mayBeNull.contains(field) ? [] : ["\(path): null where the vendor's payload has \(Self.kind(fixture))"]
        case (.int, .int), (.int, .double), (.double, .int), (.double, .double), (.string, .string), (.bool, .bool): return []
        case (.object(let got), .object(let wanted)) where mapsByKey.contains(field):
            guard let first = got.values.first, let wantedFirst = wanted.values.first else { return [] }
            return differences(first, wantedFirst, at: "\(path).*")
        case (.object(let got), .object(let wanted)):
            return wanted.keys.sorted().flatMap { key -> [String] in
                guard let value = got[key] else { return ["\(path).\(key) missing"] }
                return differences(value, wanted[key]!, at: "\(path).\(key)")
            }
        case (.array(let got), .array(let wanted)):
            guard let first = got.first, let wantedFirst = wanted.first else { return [] }
            return differences(first, wantedFirst, at: "\(path)[0]")
        default:
            return ["\(path): \(Self.kind(served)) where the vendor's payload has \(Self.kind(fixture))"]
        }
    }

    /// The value at `path` (`a.b[].c`: `[]` is an array's first item), or `nil`.
    public static func value(at path: String, in json: JSONValue) -> JSONValue? {
        var current: JSONValue? = json
        for part in path.split(separator: ".") {
            let isArray = part.hasSuffix("[]")
            current = current?[String(isArray ? part.dropLast(2) : part)]
            if isArray { current = current?.arrayValue?.first }
        }
        return current
    }

    /// The keys at `paths` (what a vendor SDK's decoding requires) that `served` lacks, or has
    /// with another JSON type than `fixture`, where the fixture has a value there. For payloads
    /// that carry many keys no client reads.
    public static func differences(_ served: JSONValue, _ fixture: JSONValue, requiring paths: [String]) -> [String] {
        paths.compactMap { path in
            guard let wanted = value(at: path, in: fixture), wanted != .null else { return nil }
            guard let got = value(at: path, in: served), got != .null else { return "\(path) missing" }
            let (a, b) = (kind(got), kind(wanted))
            return a == b ? nil : "\(path): \(a) where the vendor's payload has \(b)"
        }
    }

    /// A value's JSON type, as the differences name it.
    public static func kind(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "bool"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}
