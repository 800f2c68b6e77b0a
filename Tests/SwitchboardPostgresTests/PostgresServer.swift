import Foundation
import Logging
import PostgresNIO
import Switchboard
import SwitchboardPostgres
import SwitchboardTestKit
import Testing

/// The PostgreSQL server the live tests use: `SWITCHBOARD_POSTGRES_URL`, which
/// `eval "$(scripts/postgres.sh start)"` sets (`.ci/run` does). Without it a local run skips the
/// live tests, saying so, and a CI run fails them (``LiveServer``).
enum PostgresServer {
    /// The suites' condition: they run when the server is there, or under CI, where they fail.
    static let needed = ConditionTrait.enabled(if: LiveServer.postgres.runsTests, Comment(rawValue: LiveServer.postgres.skipNote))

    static func configuration() throws -> PostgresClient.Configuration {
        try PostgresChatStore.configuration(url: try LiveServer.postgres.require())
    }

    /// The same server for a single connection (the ownership's lock connection).
    static func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let url = try LiveServer.postgres.require()
        guard let components = URLComponents(string: url), let host = components.host, let user = components.user else {
            throw SwitchboardError(.invalidArgument, "SWITCHBOARD_POSTGRES_URL is not a postgres:// URL with a host and a user")
        }
        return PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: String(components.path.dropFirst()), tls: .disable
        )
    }

    /// Runs a client to the test server around `body`; every schema `body` asks for with
    /// `Schemas.fresh()` is dropped after it.
    static func withClient<T: Sendable>(_ body: @Sendable (PostgresClient, Schemas) async throws -> T) async throws -> T {
        let client = PostgresClient(configuration: try configuration())
        let schemas = Schemas()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            do {
                let result = try await body(client, schemas)
                try await schemas.dropAll(on: client)
                return result
            } catch {
                try? await schemas.dropAll(on: client)
                throw error
            }
        }
    }

    /// Names of new schemas, one per store, so tests never see each other's rows.
    final class Schemas: Sendable {
        private let names = Locked([String]())

        func fresh() -> String {
            let name = "switchboard_test_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            names.withLock { $0.append(name) }
            return name
        }

        func dropAll(on client: PostgresClient) async throws {
            for name in names.withLock({ $0 }) {
                try await client.run("DROP SCHEMA IF EXISTS \(unescaped: name) CASCADE")
            }
        }
    }
}
