@_spi(TestKit) import SwitchboardTestKit
import SynapseHarness
import Testing

extension Synapse {
    /// The live suites' condition: a local run without the installation skips them, a CI run
    /// fails them (``LiveServer``).
    static var needed: ConditionTrait { .enabled(if: live.runsTests, Comment(rawValue: live.skipNote)) }
}
