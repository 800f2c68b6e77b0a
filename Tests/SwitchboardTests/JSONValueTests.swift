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
