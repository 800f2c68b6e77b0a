import Switchboard
import SwitchboardTestKit
import Testing

/// The whole conformance suite against the reference backend: the kit's own self-test.
@Suite(.timeLimit(.minutes(2)))
struct InMemoryConformanceTests {
    @Test(arguments: ConformanceSuite.cases)
    func conformance(_ conformanceCase: ConformanceCase) async throws {
        let outcome = try await conformanceCase.run(ConformanceContext(emulator: InMemoryEmulator()))
        #expect(outcome == .passed, "InMemoryBackend supports everything, so no case may be skipped")
    }

    @Test func suiteHasEnoughCases() {
        #expect(ConformanceSuite.cases.count >= 15)
        #expect(Set(ConformanceSuite.cases.map(\.name)).count == ConformanceSuite.cases.count)
    }
}
