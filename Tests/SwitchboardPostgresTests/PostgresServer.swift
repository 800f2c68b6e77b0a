import Foundation
import Logging
import PostgresNIO
import Switchboard
import SwitchboardPostgres
import Testing

/// The PostgreSQL server the live tests use: `SWITCHBOARD_POSTGRES_URL`, which
/// `eval "$(scripts/postgres.sh start)"` sets (`.ci/run` does). Without it the live tests are
/// skipped, saying so.
enum PostgresServer {
    static let url = ProcessInfo.processInfo.environment["SWITCHBOARD_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    static let isAvailable = url != nil

    static let skipped: Comment = """
        no PostgreSQL server: these live tests were skipped. Run `eval "$(scripts/postgres.sh start)"` \
        (Debian's postgresql package) or set SWITCHBOARD_POSTGRES_URL to a database this user may create schemas in.
        """

    static func configuration() throws -> PostgresClient.Configuration {
        guard let url else { throw SwitchboardError(.notConnected, "SWITCHBOARD_POSTGRES_URL is not set") }
        return try PostgresChatStore.configuration(url: url)
    }

    /// The same server for a single connection (the ownership's lock connection).
    static func connectionConfiguration() throws -> PostgresConnection.Configuration {
        guard let url, let components = URLComponents(string: url), let host = components.host, let user = components.user else {
            throw SwitchboardError(.notConnected, "SWITCHBOARD_POSTGRES_URL is not set")
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
