import SwitchboardTestRunWidth
import Testing

/// The bundle bounds how many test cases run at once (Tests/SwitchboardTestRunWidth): without the
/// bound, every case starts in the first second and the real-time watchdogs of the socket and
/// server tests measure the machine's load rather than the code.
@Suite struct TestRunWidthTests {
    @Test func theTestRunIsBounded() {
        let width = switchboard_test_run_width()
        print("test run width: \(width) test cases at once")
        #expect(width > 0, "SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH is set before the run is configured")
    }
}
