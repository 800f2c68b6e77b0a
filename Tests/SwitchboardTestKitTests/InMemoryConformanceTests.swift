import Switchboard
import SwitchboardTestKit
import Testing

/// The whole conformance suite against the reference backend: the kit's own self-test.
@Suite(.timeLimit(.minutes(2)))
struct InMemoryConformanceTests {
    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        // Virtual time: no case waits on the wall clock.
        let context = ConformanceContext(emulator: InMemoryEmulator(), makeClock: { SessionClock(ImmediateClock()) })
        let outcome = try await conformanceCase.run(context)
        #expect(outcome == .passed, "InMemoryBackend supports everything, so no case may be skipped")
    }

    @Test func suiteHasEnoughCases() {
        #expect(ConformanceSuite.cases.count >= 15)
        #expect(Set(ConformanceSuite.cases.map(\.name)).count == ConformanceSuite.cases.count)
    }
}
