@testable import Switchboard
import SwitchboardTestKit
import Testing

@Suite struct ReconnectStateMachineTests {
    let policy = BackoffPolicy(initial: .milliseconds(500), multiplier: 2, maximum: .seconds(30))

    @Test func ceilingDoublesUpToTheMaximum() {
        let ceilings = (0..<10).map { policy.ceiling(forAttempt: $0) }
        #expect(ceilings.prefix(7) == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30)])
        #expect(ceilings.dropFirst(6).allSatisfy { $0 == .seconds(30) })
    }

    @Test func jitteredDelaysStayWithinHalfToFullCeiling() {
        var random = SeededRandomNumberGenerator(seed: 7)
        for attempt in 0..<12 {
            let ceiling = policy.ceiling(forAttempt: attempt)
            for _ in 0..<50 {
                let delay = policy.delay(forAttempt: attempt, using: &random)
                #expect(delay <= ceiling && delay >= ceiling / 2)
            }
        }
    }

    @Test func sameSeedSameSchedule() {
        func schedule() -> [Duration] {
            var machine = ReconnectStateMachine(policy: policy)
            var random = SeededRandomNumberGenerator(seed: 42)
            return (0..<6).map { _ in
                guard case .retry(let delay, _) = machine.failed(SwitchboardError(.connectionLost, "x"), using: &random)
                else { return .zero }
                return delay
            }
        }
        #expect(schedule() == schedule())
    }

    @Test func transientFailuresBackOffAndASuccessResets() {
        var machine = ReconnectStateMachine(policy: policy)
        var random = SeededRandomNumberGenerator(seed: 1)
        var delays: [Duration] = []
        for _ in 0..<3 {
            if case .retry(let delay, false) = machine.failed(SwitchboardError(.timedOut, "x"), using: &random) {
                delays.append(delay)
            }
        }
        #expect(delays.count == 3)
        #expect(delays[2] >= .seconds(1), "the third delay draws from the 2 s ceiling")
        machine.connected()
        guard case .retry(let afterReset, _) = machine.failed(SwitchboardError(.timedOut, "x"), using: &random) else {
            Issue.record("expected a retry")
            return
        }
        #expect(afterReset <= .milliseconds(500))
    }

    @Test func rateLimitWaitsAtLeastRetryAfter() {
        var machine = ReconnectStateMachine(policy: policy)
        var random = SeededRandomNumberGenerator(seed: 1)
        let error = SwitchboardError(.rateLimited, "slow down", retryAfter: .seconds(12))
        #expect(machine.failed(error, using: &random) == .retry(after: .seconds(12), clearCredentials: false))
    }

    @Test func authenticationIsRetriedOnceWithClearedCredentialsThenFatal() {
        var machine = ReconnectStateMachine(policy: policy)
        var random = SeededRandomNumberGenerator(seed: 1)
        let error = SwitchboardError(.authenticationFailed, "token expired")
        #expect(machine.failed(error, using: &random) == .retry(after: .zero, clearCredentials: true))
        guard case .giveUp(let fatal) = machine.failed(error, using: &random) else {
            Issue.record("a second authentication failure must be fatal")
            return
        }
        #expect(fatal.code == .fatal)
        #expect(machine.state == .failed)
    }

    @Test func fatalErrorsGiveUpAtOnce() {
        var machine = ReconnectStateMachine(policy: policy)
        var random = SeededRandomNumberGenerator(seed: 1)
        let error = SwitchboardError(.fatal, "account blocked")
        #expect(machine.failed(error, using: &random) == .giveUp(error))
    }

    /// A configuration the backend refuses (a channel that does not exist) does not get better
    /// by retrying.
    @Test func aRefusedConfigurationGivesUpAtOnce() {
        var machine = ReconnectStateMachine(policy: policy)
        var random = SeededRandomNumberGenerator(seed: 1)
        let error = SwitchboardError(.invalidArgument, "brand 1386 has no channel chat_typo (HTTP 404)")
        #expect(machine.failed(error, using: &random) == .giveUp(error))
    }

    @Test func maxAttemptsEndsTheSession() {
        var machine = ReconnectStateMachine(policy: BackoffPolicy(maxAttempts: 2))
        var random = SeededRandomNumberGenerator(seed: 1)
        let error = SwitchboardError(.connectionLost, "down")
        #expect(machine.failed(error, using: &random) != .giveUp(error))
        #expect(machine.failed(error, using: &random) != .giveUp(error))
        guard case .giveUp = machine.failed(error, using: &random) else {
            Issue.record("the third failure is over the limit")
            return
        }
    }
}

@Suite struct LifecycleStateMachineTests {
    @Test func createdPausedResumePauseClose() throws {
        var machine = LifecycleStateMachine()
        #expect(machine.state == .created)
        #expect(!machine.wantsConnection)
        #expect(try machine.resume() == .connect)
        #expect(try machine.resume() == .none)
        #expect(try machine.pause() == .disconnect)
        #expect(try machine.resume() == .connect)
        #expect(machine.close() == .shutDown)
        #expect(machine.close() == .none)
    }

    @Test func everyCallAfterCloseFails() {
        var machine = LifecycleStateMachine()
        _ = machine.close()
        #expect { try machine.resume() } throws: { ($0 as? SwitchboardError)?.code == .sessionClosed }
        #expect { try machine.pause() } throws: { ($0 as? SwitchboardError)?.code == .sessionClosed }
        #expect { try machine.checkOpen() } throws: { ($0 as? SwitchboardError)?.code == .sessionClosed }
    }
}
