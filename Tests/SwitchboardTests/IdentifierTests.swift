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

    /// Every byte comes from the generator, the first draw's eight, then the second's, lowest
    /// byte first: 122 random bits, the version and variant bits set over them.
    @Test func everyByteButTheVersionAndVariantComesFromTheGenerator() {
        struct Counting: RandomNumberGenerator {
            var draws: [UInt64] = [0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908]
            mutating func next() -> UInt64 { draws.removeFirst() }
        }
        var counting = Counting()
        #expect(UUIDString.random(using: &counting) == "00010203-0405-4607-8809-0a0b0c0d0e0f")
        #expect(counting.draws.isEmpty, "two draws")
        struct Ones: RandomNumberGenerator {
            mutating func next() -> UInt64 { .max }
        }
        var ones = Ones()
        #expect(UUIDString.random(using: &ones) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
    }
}
