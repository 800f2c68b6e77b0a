import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim
import Testing

#if canImport(Glibc)
import Glibc

/// `switchboard emulate` in a terminal: Ctrl-C (the byte 0x03 typed at the terminal, which its
/// line discipline turns into SIGINT) and SIGTERM end the process at once with exit status 0,
/// even while the agent console waits for a line on standard input and an app holds a
/// long-poll open.
@Suite(.timeLimit(.minutes(2)), .serialized)
struct EmulateSignalTests {
    enum Stop: String, CustomTestStringConvertible, CaseIterable {
        case ctrlC = "Ctrl-C"
        case sigterm = "SIGTERM"

        var testDescription: String { rawValue }

        func send(to child: TerminalChild) {
            switch self {
            case .ctrlC: child.type([0x03])
            case .sigterm: child.signal(SIGTERM)
            }
        }
    }

    /// How long a signalled emulator may take to be gone: far less than a held long-poll (20 s),
    /// with room for a loaded machine.
    static let exitLimit: Duration = .seconds(5)

    @Test(arguments: Stop.allCases)
    func aSignalEndsTheEmulatorAndItsConsole(_ stop: Stop) async throws {
        let child = try TerminalChild(["emulate", "voximplant", "--port", "0"])
        let banner = await child.read(until: "emulator at", within: .seconds(60))
        guard banner.text.contains("emulator at") else {
            _ = await child.reap(killingFirst: true)
            Issue.record("no banner: \(banner.text)")
            return
        }
        child.closeOwnSlave()
        let (ending, elapsed) = try await Self.stop(child, with: stop)
        print("emulate voximplant, \(stop.rawValue) at the console's prompt: \(ending) after \(elapsed)")
        #expect(ending == .exited(0))
    }

    /// The Webim emulator holds each long-poll for 20 s; a signal must not wait for it.
    @Test(arguments: Stop.allCases)
    func aSignalDoesNotWaitForAHeldLongPoll(_ stop: Stop) async throws {
        let child = try TerminalChild(["emulate", "webim", "--port", "0", "--hold", "20"])
        let banner = await child.read(until: "(location mobile)", within: .seconds(60))
        guard let url = banner.text.firstMatch(of: /emulator at (\S+) \(location mobile\)/)?.1 else {
            _ = await child.reap(killingFirst: true)
            Issue.record("no banner: \(banner.text)")
            return
        }
        child.closeOwnSlave()
        // The app reaches the emulator through a proxy that says when a long-poll (a delta
        // request other than init) has gone through to the emulator, where it is held.
        let (polls, pollArrived) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (ending, elapsed) = try await FaultProxy.withRunning(upstream: String(url), logger: .quiet) { proxy, proxied in
            proxy.inject(.cut, count: 0, where: { request in
                if request.path.hasSuffix("/delta"), !request.uri.contains("event=init") { pollArrived.yield() }
                return false
            })
            let session = ChatSession(
                backend: try WebimBackend(configuration: WebimConfiguration(accountName: proxied)),
                configuration: .fastForTests, logger: .quiet
            )
            return try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                for await _ in polls { break }
                let result = try await Self.stop(child, with: stop)
                await session.close()
                return result
            }
        }
        print("emulate webim, \(stop.rawValue) with an app's long-poll held (20 s): \(ending) after \(elapsed)")
        #expect(ending == .exited(0))
    }

    /// The users `emulate voximplant` prints sign in with the tokens it prints (the spec's golden
    /// frames' `secret-a`, `secret-b`, `secret-c`), at the address its `connect with:` line gives;
    /// a wrong token is refused.
    @Test func theVoximplantEmulatorsPrintedUsersSignIn() async throws {
        let child = try TerminalChild(["emulate", "voximplant", "--port", "0"])
        let banner = await child.read(until: "connect with:", within: .seconds(60))
        let users = banner.text.matches(of: /(\w+@[\w.]+) \/ (secret-\w)/).map { (String($0.1), String($0.2)) }
        guard let url = banner.text.firstMatch(of: /--url (\S+) --user/)?.1, users.count == 3 else {
            _ = await child.reap(killingFirst: true)
            Issue.record("no banner with a url and three users: \(banner.text)")
            return
        }
        child.closeOwnSlave()
        func signIn(_ user: String, _ token: String) async throws -> Bool {
            let backend = VoximplantBackend(configuration: VoximplantConfiguration(url: String(url), user: user, token: token), logger: .quiet)
            let session = ChatSession(backend: backend, configuration: .fastForTests, logger: .quiet)
            return try await withRecording(session) { recorder in
                try await session.resume()
                // A refused token: the engine tries once more, then ends the session as fatal.
                let outcome = try await recorder.first("signed in or refused") {
                    if $0.isConnected { return true }
                    if case .fatal = $0.kind { return true }
                    return false
                }
                await session.close()
                return outcome.isConnected
            }
        }
        for (user, token) in users {
            #expect(try await signIn(user, token), "\(user) / \(token)")
        }
        #expect(try await !signIn(users[0].0, "wrong"), "a wrong token is refused")
        print("emulate voximplant: \(users.map(\.0)) signed in with their printed tokens at \(url); a wrong token refused")
        _ = try await Self.stop(child, with: .sigterm)
    }

    /// Stops `child` and waits (at most ``exitLimit``) for it to be gone; one that is not is
    /// killed and recorded as an issue.
    static func stop(_ child: TerminalChild, with stop: Stop) async throws -> (TerminalChild.Ending, Duration) {
        let start = ContinuousClock.now
        stop.send(to: child)
        let rest = await child.read(until: nil, within: exitLimit)
        let elapsed = ContinuousClock.now - start
        guard rest.closed else {
            let ending = await child.reap(killingFirst: true)
            Issue.record("\(stop.rawValue): still running after \(elapsed) (then \(ending)); it wrote: \(rest.text)")
            return (ending, elapsed)
        }
        let ending = await child.reap()
        // The terminal closes as the process exits: reaping it takes no longer.
        return (ending, ContinuousClock.now - start)
    }
}
#endif
