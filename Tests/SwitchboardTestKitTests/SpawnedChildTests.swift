import Foundation
import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// The live tests' child processes: an exit code waited for without polling, a child that runs
/// too long killed, and a free loopback port.
@Suite(.timeLimit(.minutes(1)))
struct SpawnedChildTests {
    func output() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("spawned-\(UUID().uuidString).log").path
    }

    @Test func theExitCodeAndOutputOfAChildThatEnds() async throws {
        let log = output()
        defer { try? FileManager.default.removeItem(atPath: log) }
        let child = try SpawnedChild(["/bin/sh", "-c", "echo spawned; exit 3"], output: log)
        let code = try await child.waitForExit(within: .seconds(30))
        #expect(code == 3)
        #expect(!child.isRunning && child.exitCode == 3)
        #expect(try String(contentsOfFile: log, encoding: .utf8) == "spawned\n")
        // Waiting again answers at once.
        #expect(try await child.waitForExit(within: .seconds(1)) == 3)
    }

    @Test func aChildThatRunsTooLongIsKilled() async throws {
        let log = output()
        defer { try? FileManager.default.removeItem(atPath: log) }
        let child = try SpawnedChild(["/bin/sleep", "60"], output: log)
        #expect(child.isRunning)
        await #expect(throws: SwitchboardError.self) { try await child.waitForExit(within: .milliseconds(200)) }
        #expect(!child.isRunning)
        #expect(child.exitCode == Int32(128 + 9), "SIGKILL")
    }

    @Test func aKilledChildIsReapedOnce() async throws {
        let log = output()
        defer { try? FileManager.default.removeItem(atPath: log) }
        let child = try SpawnedChild(["/bin/sleep", "60"], output: log)
        async let code = child.waitForExit(within: .seconds(30))
        child.kill()
        child.kill()
        #expect(try await code == Int32(128 + 9), "SIGKILL")
    }

    @Test func aFreeLoopbackPortIsOneNobodyListensOn() throws {
        let port = try freeLoopbackPort()
        #expect((1024...65535).contains(port))
    }
}
