import Foundation
import Switchboard
import Testing

@Suite struct JSONValueTests {
    @Test func roundTripsLosslessly() throws {
        let value: JSONValue = [
            "id": .int(9_007_199_254_740_993),
            "ratio": 0.1,
            "name": "Ёлка \"quoted\" \\ /",
            "flags": [true, false, nil],
            "nested": ["empty": [:], "list": []],
        ]
        let decoded = try JSONValue(parsing: value.jsonData())
        #expect(decoded == value)
        #expect(decoded["id"]?.intValue == 9_007_199_254_740_993, "integers beyond 2^53 survive")
        #expect(try JSONValue(parsing: decoded.jsonData()).jsonData() == value.jsonData(), "encoding is stable")
    }

    @Test func malformedJSONIsATypedError() {
        #expect { try JSONValue(parsing: "{\"a\": [1, 2") } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
        #expect { try JSONValue(parsing: "") } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
    }

    /// Every payload from the Webim and CXone SDKs' own test suites parses and round-trips, or
    /// is rejected with a typed error — never a crash.
    @Test(arguments: ["webim", "cxone"])
    func vendorFixturesRoundTrip(_ vendor: String) throws {
        let directory = fixturesDirectory.appendingPathComponent(vendor)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".json") }
            .sorted()
        try #require(files.count > 20, "fixtures for \(vendor) are in \(directory.path)")
        var parsed = 0
        var rejected: [String] = []
        for file in files {
            let data = try Data(contentsOf: directory.appendingPathComponent(file))
            do {
                let value = try JSONValue(parsing: data)
                #expect(try JSONValue(parsing: value.jsonData()) == value, "\(file) round-trips")
                parsed += 1
            } catch let error as SwitchboardError {
                #expect(error.code == .protocolViolation, "\(file) is rejected as a protocol violation")
                rejected.append(file)
            }
        }
        print("\(vendor) fixtures: \(files.count) files, \(parsed) parsed and round-tripped, \(rejected.count) rejected as malformed: \(rejected)")
        #expect(parsed >= files.count - 5)
    }
}

/// `Tests/Fixtures` in the repository (see its README for the sources).
let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()
    .deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// The hand-written parser behind `JSONValue(parsing:)`: RFC 8259 exactly, typed errors for
/// everything else, and the same values `JSONDecoder` gives on real payloads.
@Suite struct JSONParserTests {
    @Test(arguments: [
        ("0", JSONValue.int(0)), ("-0", .int(0)), ("42", .int(42)), ("-7", .int(-7)),
        ("9223372036854775807", .int(.max)), ("-9223372036854775808", .int(.min)),
        ("9223372036854775808", .double(9_223_372_036_854_775_808)), ("1.5", .double(1.5)), ("1e3", .double(1000)),
        ("-2.5E-3", .double(-0.0025)), ("1.0", .double(1)), ("true", .bool(true)), ("false", .bool(false)), ("null", .null),
        (" \n\t\r[ ] ", .array([])), ("{}", .object([:])), (#""""#, .string("")),
        (#""a\"b\\c\/d\b\f\n\r\t""#, .string("a\"b\\c/d\u{8}\u{c}\n\r\t")), (#""\u00e9\u0041""#, .string("éA")),
        (#""\ud83d\ude00 ok""#, .string("😀 ok")), (#""Ёлка""#, .string("Ёлка")),
        (#"{"a":1,"a":2}"#, .object(["a": 2])), (#"[1,[2,{"b":[]}]]"#, JSONValue.array([1, .array([2, .object(["b": .array([])])])])),
    ])
    func parses(_ text: String, _ expected: JSONValue) throws {
        #expect(try JSONValue(parsing: text) == expected)
        #expect(try JSONValue(parsing: Data(text.utf8)) == expected)
    }

    @Test(arguments: [
        "", " ", "01", "-", "1.", ".5", "1e", "1e+", "+1", "tru", "nul", "[1,]", "[1 2]", "{\"a\"}", "{\"a\":}", "{a:1}",
        "{\"a\":1,}", "[", "{", "\"abc", "\"a\u{1}b\"", #""\x""#, #""\u12""#, #""\ud800""#, #""\ud800\u0041""#, #""\udc00""#,
        "1e999", "-1e999", "[1]]", "nullx", "NaN", "Infinity",
    ])
    func rejectsWithATypedError(_ text: String) {
        #expect { try JSONValue(parsing: text) } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
    }

    @Test func rejectsInvalidUTF8InsideAString() {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0x5C, 0x6E, 0xFE, 0x22]] {
            #expect(throws: SwitchboardError.self) { try JSONValue(parsing: Data(bytes)) }
        }
    }

    @Test func nestingIsLimited() throws {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(try JSONValue(parsing: deepest).arrayValue != nil)
        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect { try JSONValue(parsing: tooDeep) } throws: { "\($0)".contains("nested deeper than 512") }
        // Hostile depth fails fast, without exhausting the stack.
        #expect(throws: SwitchboardError.self) { try JSONValue(parsing: String(repeating: "{\"a\":", count: 100_000)) }
    }

    /// The writer behind `jsonData()`: compact, sorted keys, minimal escapes; what it writes
    /// reads back as the same value, a whole double stays a double.
    @Test func writesCompactSortedTextThatReadsBack() throws {
        let value: JSONValue = [
            "b": 1, "a": .double(1), "c": .double(1e21), "d": .double(-0.5), "e": "q\"uote \\ slash/ é 😀 \u{1} \n\t",
            "f": [nil, true, false], "g": .double(.infinity), "h": .int(.min),
        ]
        let text = value.jsonString
        #expect(text == (#"{"a":1.0,"b":1,"c":1e+21,"d":-0.5,"e":"q\"uote \\ slash/ é 😀 \u0001 \n\t","f":[null,true,false],"g":null,"h":-9223372036854775808}"#))
        var finite = value
        if case .object(var members) = finite {
            members["g"] = nil
            finite = .object(members)
        }
        #expect(try JSONValue(parsing: finite.jsonData()) == finite)
        #expect(try JSONValue(parsing: value.jsonData())["g"] == .null, "a non-finite double is written as null")
    }

    /// On every vendor payload the parser agrees with `JSONDecoder` decoding a `JSONValue`.
    @Test(arguments: ["webim", "cxone"])
    func agreesWithJSONDecoderOnTheFixtures(_ vendor: String) throws {
        let directory = fixturesDirectory.appendingPathComponent(vendor)
        var compared = 0
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() where file.hasSuffix(".json") {
            let data = try Data(contentsOf: directory.appendingPathComponent(file))
            guard let reference = try? JSONDecoder().decode(JSONValue.self, from: data) else { continue }
            #expect(try JSONValue(parsing: data) == reference, "\(file)")
            compared += 1
        }
        print("\(vendor): the parser and JSONDecoder agree on \(compared) fixtures")
        #expect(compared > 20)
    }
}
