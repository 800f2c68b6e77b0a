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
