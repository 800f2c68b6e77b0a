import Foundation
@testable import Switchboard
import SwitchboardTestKit
import Testing

/// Client ids and session ids: version-4 UUID strings drawn from the session's generator, so a
/// seeded run makes the same ids.
@Suite
struct IdentifierTests {
    @Test func aRandomIDIsAVersion4UUIDDrawnFromTheGenerator() throws {
        var first = SeededRandomNumberGenerator(seed: 42)
        var second = SeededRandomNumberGenerator(seed: 42)
        var ids: Set<String> = []
        for _ in 0..<1_000 {
            let id = UUIDString.random(using: &first)
            #expect(UUIDString.random(using: &second) == id, "the same seed, the same ids")
            let parsed = try #require(UUID(uuidString: id), "\(id) is a UUID")
            #expect(parsed.uuidString.lowercased() == id, "lowercase, hyphenated as 8-4-4-4-12")
            let bytes = parsed.uuid
            #expect(bytes.6 >> 4 == 4, "version 4: \(id)")
            #expect(bytes.8 >> 6 == 0b10, "the RFC 4122 variant: \(id)")
            ids.insert(id)
        }
        #expect(ids.count == 1_000)
    }

    /// Every byte comes from the generator: a generator that draws only ones gives the UUID of
    /// all ones but the version and variant bits.
    @Test func everyByteButTheVersionAndVariantComesFromTheGenerator() {
        struct Ones: RandomNumberGenerator {
            mutating func next() -> UInt64 { .max }
        }
        var ones = Ones()
        #expect(UUIDString.random(using: &ones) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
    }
}
