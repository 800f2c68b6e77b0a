@testable import Switchboard
import SwitchboardTestKit
import Testing

/// The connection's rules, driven synchronously: input in, actions out; no tasks, no clock.
@Suite struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    static let backoff = BackoffPolicy(initial: .seconds(1), multiplier: 2, maximum: .seconds(30))
    static let stable = Duration.seconds(10)

    static let lost = SwitchboardError(.connectionLost, "the socket closed")
    static let fatal = SwitchboardError(.fatal, "the account was deactivated")

    /// A machine with link 0 open.
    static func open() throws -> Machine {
        var machine = Machine(backoff: backoff, stableLinkDuration: stable)
        _ = try machine.resume()
        _ = machine.ready()
        _ = machine.linkOpened(0)
        return machine
    }

    /// The delay of a reconnect timer among `actions`.
    static func reconnectDelay(_ actions: [Machine.Action]) -> Duration? {
        for case .setReconnectTimer(let delay) in actions { return delay }
        return nil
    }

    @Test func aLinkOpensOnlyOnceTheStateIsLoadedAndTheAppResumes() throws {
        var machine = Machine(backoff: Self.backoff, stableLinkDuration: Self.stable)
        #expect(try machine.resume() == [], "not ready: the stored credentials are not loaded yet")
        #expect(machine.ready() == [.publish(.connecting, nil), .startLink(0)])
        #expect(machine.linkOpened(0) == [.publish(.connected, nil), .setStableTimer(link: 0, after: Self.stable), .linkEstablished])
        #expect(machine.openLinkID == 0)
        #expect(machine.linkOpened(0) == [], "an open link does not open twice")
        #expect(machine.linkOpened(7) == [], "another link's news is ignored")
    }

    @Test func pausingAnIdleLinkEndsItAtOnce() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        #expect(try machine.pause() == [.finishJobs(0)])
        #expect(machine.openLinkID == nil, "a going link takes no work")
        #expect(machine.linkClosed(0, thrown: nil, using: &random) == [
            .cancelStableTimer(link: 0), .linkDropped(interrupted: false), .publish(.disconnected, .userInitiated),
        ])
        #expect(machine.state == .idle)
        #expect(try machine.resume() == [.publish(.connecting, nil), .startLink(1)])
    }

    @Test func pausingWithRequestsInFlightLetsThemAnswerFirst() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        machine.requestDispatched(0)
        machine.requestDispatched(0)
        #expect(try machine.pause() == [], "draining: the link keeps its requests")
        guard case .draining = machine.state else { Issue.record("not draining: \(machine.state)"); return }
        #expect(machine.requestFinished(0, failure: nil) == [])
        #expect(machine.requestFinished(0, failure: nil) == [.finishJobs(0)], "the last answer lets the link close")
        let closed = machine.linkClosed(0, thrown: nil, using: &random)
        #expect(closed.contains(.linkDropped(interrupted: false)))
        #expect(Self.reconnectDelay(closed) == nil, "ended on purpose: no backoff")
    }

    @Test func aRequestTheLinkDidNotTakeIsNotWaitedForByADrain() throws {
        var machine = try Self.open()
        machine.requestDispatched(0)
        machine.requestDispatched(0)
        #expect(try machine.pause() == [])
        #expect(machine.requestFinished(0, failure: nil) == [])
        #expect(machine.requestNotTaken(0) == [.finishJobs(0)], "the one left was never out")
        #expect(machine.requestNotTaken(7) == [], "another link's news is ignored")
    }

    @Test func aPausedLinkStillConnectingIsAbortedNotWaitedFor() throws {
        var machine = Machine(backoff: Self.backoff, stableLinkDuration: Self.stable)
        _ = try machine.resume()
        _ = machine.ready()
        #expect(try machine.pause() == [.finishJobs(0), .abortConnect(0)])
    }

    @Test func aFailedLinkBacksOffAndTheTimerOpensTheNext() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        #expect(machine.linkFailed(0, Self.lost) == [.finishJobs(0)])
        let closed = machine.linkClosed(0, thrown: nil, using: &random)
        let delay = try #require(Self.reconnectDelay(closed))
        #expect(closed == [
            .cancelStableTimer(link: 0), .linkDropped(interrupted: true), .publish(.waitingToReconnect, .connectionLost(Self.lost)),
            .setReconnectTimer(after: delay),
        ])
        #expect(delay >= .milliseconds(500) && delay <= .seconds(1), "the first delay is within [initial/2, initial]: \(delay)")
        #expect(try machine.resume() == [], "resuming while backing off waits for the timer")
        #expect(machine.reconnectTimerFired() == [.publish(.connecting, nil), .startLink(1)])
    }

    /// A link that dies right after it opens does not reset the backoff; one that heard an update
    /// and lasted, or carried a request through, does.
    @Test func onlyALinkThatProvedHealthyResetsTheBackoff() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        var ceilings: [Duration] = []
        for id in 0..<3 {
            _ = machine.linkFailed(id, Self.lost)
            ceilings.append(try #require(Self.reconnectDelay(machine.linkClosed(id, thrown: nil, using: &random))))
            _ = machine.reconnectTimerFired()
            _ = machine.linkOpened(id + 1)
            machine.updateArrived(id + 1)
        }
        #expect(ceilings[1] >= Self.backoff.initial && ceilings[2] >= Self.backoff.ceiling(forAttempt: 1), "growing: \(ceilings)")
        // Link 3 heard an update; the stable timer proves it healthy.
        machine.stableTimerFired(3)
        _ = machine.linkFailed(3, Self.lost)
        let afterStable = try #require(Self.reconnectDelay(machine.linkClosed(3, thrown: nil, using: &random)))
        #expect(afterStable <= Self.backoff.initial, "afresh after a stable link: \(afterStable)")
        // Link 4: the timer fired before any update came; only the update then proves it.
        _ = machine.reconnectTimerFired()
        _ = machine.linkOpened(4)
        machine.stableTimerFired(4)
        _ = machine.linkFailed(4, Self.lost)
        _ = machine.linkClosed(4, thrown: nil, using: &random)
        _ = machine.reconnectTimerFired()
        _ = machine.linkOpened(5)
        machine.updateArrived(5)
        machine.requestDispatched(5)
        _ = machine.requestFinished(5, failure: nil)
        _ = machine.linkFailed(5, Self.lost)
        let afterRequest = try #require(Self.reconnectDelay(machine.linkClosed(5, thrown: nil, using: &random)))
        #expect(afterRequest <= Self.backoff.initial, "a request carried through proves it too: \(afterRequest)")
    }

    @Test func whatEndsTheLinkSaysMostInOrder() throws {
        func cause(heard: SwitchboardError?, thrown: SwitchboardError?, fatalLater: Bool = false) throws -> DisconnectReason? {
            var machine = try Self.open()
            var random = SeededRandomNumberGenerator(seed: 1)
            if let heard { _ = machine.linkFailed(0, heard) } else { _ = try machine.pause() }
            if fatalLater {
                machine.requestDispatched(0)
                _ = machine.requestFinished(0, failure: Self.fatal)
            }
            for case .publish(_, let reason) in machine.linkClosed(0, thrown: thrown, using: &random) { return reason }
            return nil
        }
        let thrown = SwitchboardError(.timedOut, "the adapter's scope threw")
        #expect(try cause(heard: Self.lost, thrown: nil) == .connectionLost(Self.lost))
        #expect(try cause(heard: Self.lost, thrown: thrown) == .connectionLost(thrown), "what the adapter threw outranks what the updates said")
        #expect(try cause(heard: Self.lost, thrown: SwitchboardError(.cancelled, "torn down")) == .connectionLost(Self.lost), "a teardown says nothing")
        #expect(try cause(heard: Self.lost, thrown: thrown, fatalLater: true) == .fatal(Self.fatal), "a fatal error heard as it went outranks both")
        #expect(try cause(heard: nil, thrown: nil) == .userInitiated)
    }

    @Test func aFatalAnswerClosesTheSession() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        machine.requestDispatched(0)
        #expect(machine.requestFinished(0, failure: Self.fatal) == [.finishJobs(0)])
        let closed = machine.linkClosed(0, thrown: nil, using: &random)
        #expect(closed == [.cancelStableTimer(link: 0), .linkDropped(interrupted: true), .gaveUp(Self.fatal), .publish(.disconnected, .fatal(Self.fatal))])
        #expect(machine.isFinished && machine.lifecycle.state == .closed)
        #expect(throws: SwitchboardError.self) { try machine.resume() }
    }

    /// A fatal error heard while a pause drains does not cut the drain short, and still ends the
    /// session once the link has closed.
    @Test func aFatalErrorDuringADrainEndsTheSessionAfterIt() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        machine.requestDispatched(0)
        machine.requestDispatched(0)
        _ = try machine.pause()
        #expect(machine.requestFinished(0, failure: Self.fatal) == [], "the other request still answers")
        #expect(machine.requestFinished(0, failure: nil) == [.finishJobs(0)])
        #expect(machine.linkClosed(0, thrown: nil, using: &random).contains(.gaveUp(Self.fatal)))
    }

    @Test func aRefusedLoginClearsTheCredentialsOnceThenGivesUp() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        let refused = SwitchboardError(.authenticationFailed, "token expired")
        _ = machine.linkFailed(0, refused)
        let first = machine.linkClosed(0, thrown: nil, using: &random)
        #expect(first.contains(.clearCredentials) && Self.reconnectDelay(first) == .zero)
        _ = machine.reconnectTimerFired()
        _ = machine.linkFailed(1, refused)
        let second = machine.linkClosed(1, thrown: nil, using: &random)
        #expect(second.contains { if case .gaveUp(let error) = $0 { return error.code == .fatal } else { return false } })
        #expect(machine.state == .closed)
    }

    @Test func closingWhileBackingOffCancelsTheTimerAndFinishes() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        _ = machine.linkFailed(0, Self.lost)
        _ = machine.linkClosed(0, thrown: nil, using: &random)
        #expect(machine.close() == [.cancelReconnectTimer, .publish(.disconnected, .userInitiated)])
        #expect(machine.isFinished)
        #expect(machine.reconnectTimerFired() == [], "a timer that fires late opens nothing")
    }

    @Test func cancellationCutsADrainAndNothingReconnects() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        machine.requestDispatched(0)
        _ = try machine.pause()
        #expect(machine.cancelled() == [.finishJobs(0)])
        let closed = machine.linkClosed(0, thrown: SwitchboardError(.cancelled, "cancelled"), using: &random)
        #expect(closed == [.cancelStableTimer(link: 0), .linkDropped(interrupted: false)])
        #expect(machine.isFinished)
    }

    @Test func aLinkFailingWhilePausedIsNotRetried() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        var machine = try Self.open()
        machine.requestDispatched(0)
        _ = try machine.pause()
        #expect(machine.linkFailed(0, Self.lost) == [.finishJobs(0)], "the drain's requests fail with the link")
        let closed = machine.linkClosed(0, thrown: nil, using: &random)
        #expect(Self.reconnectDelay(closed) == nil && closed.contains(.linkDropped(interrupted: false)), "paused on purpose: \(closed)")
    }
}
