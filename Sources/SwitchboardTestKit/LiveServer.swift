import Foundation
import Switchboard

/// A real server that live tests need (PostgreSQL, a Matrix homeserver), found from the
/// environment or missing.
///
/// A plain local `swift test` skips the tests whose server is missing and says so. When the `CI`
/// environment variable is set, they run and fail at once, naming the server and how to start
/// it: a CI run whose server did not start must not be green with its live tests skipped.
///
/// ```swift
/// @Suite(.enabled(if: LiveServer.postgres.runsTests, Comment(rawValue: LiveServer.postgres.skipNote)))
/// struct MyStoreTests {
///     @Test func roundTrip() async throws {
///         let url = try LiveServer.postgres.require()
///         …
///     }
/// }
/// ```
public struct LiveServer: Sendable {
    /// What the server is, as a sentence names it: "PostgreSQL server".
    public var name: String
    /// Where the tests find it (a URL, an installation's path), or `nil` when it is missing.
    public var address: String?
    /// How to provide it: the command that starts or installs it, or the variable to set.
    public var howToStart: String

    public init(name: String, address: String?, howToStart: String) {
        self.name = name
        self.address = address.flatMap { $0.isEmpty ? nil : $0 }
        self.howToStart = howToStart
    }

    public var isAvailable: Bool { address != nil }

    /// Whether tests that need this server run: when it is available, or when the run is CI's,
    /// where a missing server fails them (``require()``) instead of skipping them.
    public var runsTests: Bool { isAvailable || Self.isCI }

    /// The note a skipped test shows.
    public var skipNote: String { "no \(name): skipped. \(howToStart)" }

    /// The server's address; throws, naming the server and how to start it, when it is missing.
    public func require() throws -> String {
        guard let address else {
            throw SwitchboardError(
                .notConnected,
                "\(Self.isCI ? "CI is set and there is " : "")no \(name), which this live test needs. \(howToStart)"
            )
        }
        return address
    }

    /// Whether this is a CI run: `CI` is set to anything but empty, `0` or `false` (the value
    /// CI services set is `true`).
    public static var isCI: Bool {
        guard let value = ProcessInfo.processInfo.environment["CI"]?.lowercased() else { return false }
        return !["", "0", "false", "no"].contains(value)
    }

    /// The PostgreSQL database of the live tests: `SWITCHBOARD_POSTGRES_URL`, which
    /// `eval "$(scripts/postgres.sh start)"` sets (`.ci/run` does).
    public static let postgres = LiveServer(
        name: "PostgreSQL server",
        address: ProcessInfo.processInfo.environment["SWITCHBOARD_POSTGRES_URL"],
        howToStart: """
            Run `eval "$(scripts/postgres.sh start)"` (Debian's postgresql package) or set SWITCHBOARD_POSTGRES_URL \
            to a database this user may create schemas in.
            """
    )
}
