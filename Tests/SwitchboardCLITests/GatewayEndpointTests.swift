import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PostgresNIO
@_spi(TestKit) import Switchboard
import SwitchboardEmulation
import SwitchboardPostgres
@_spi(TestKit) import SwitchboardTestKit
import Testing
@_spi(TestKit) import VoximplantEmulator

extension CrashTests {
    /// `switchboard gateway --http 127.0.0.1:0` serves `/health`, `/ready` and `/metrics` while it
    /// runs three sessions that each send two messages the agent answers: the test scrapes the
    /// metrics once the store has every message and checks them against the emulator's own
    /// counts; after SIGTERM the process exits 0.
    @Test(needsPostgres)
    func aGatewayServesHealthReadinessAndMetrics() async throws {
        let url = try LiveServer.postgres.require()
        let sends = 2
        let server = VoximplantServer()
        let (_, customers) = try Self.customers(3, on: server)
        server.autoReply(as: "agent@\(server.configuration.domain)") { _, text in "re: \(text)" }
        try await Self.withScratch("endpoints") { schema, file in try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
            // Every write to the store's messages and outbox signals `stored`: the test waits on it
            // instead of polling.
            try await Self.withWriteSignal(on: store) { stored in
                try await VoximplantEmulator(server: server, logger: .quiet).withRunning { emulatorURL in
                    try Self.write(Self.sessions(customers, url: emulatorURL), to: file)
                    let gateway = try Child.start([
                        "gateway", "--postgres", url, "--schema", schema, "--sessions", file.path, "--name", "gw1",
                        "--interval-ms", "250", "--send", "\(sends)", "--send-interval-ms", "50", "--http", "127.0.0.1:0",
                    ])
                    defer { gateway.kill() }
                    let holdings = Holdings()
                    holdings.follow(gateway, as: "gw1")
                    try await waitUntil("the http line", timeout: .seconds(60), signal: holdings.changed) {
                        holdings.otherLines(of: "gw1").contains { $0.hasPrefix("http ") }
                    }
                    let line = holdings.otherLines(of: "gw1").first { $0.hasPrefix("http ") }!
                    let base = "http://" + String(line.dropFirst(5).prefix { $0 != " " })
                    let health = try await Self.get(base + "/health")
                    #expect(health.status == 200 && health.body == "alive\n")

                    // Everything on the server and in the store: 3 × (2 sends + 2 answers).
                    let expected = customers.count * sends * 2
                    try await waitUntil("every message stored and confirmed", timeout: .seconds(120), signal: stored) {
                        try await Self.confirmedAndSettled(store: store) == expected
                    }
                    let ready = try await Self.get(base + "/ready")
                    #expect(ready.status == 200 && ready.body == "ready: 3 sessions held\n", "\(ready)")
                    let scrape = try await Self.get(base + "/metrics")
                    #expect(scrape.status == 200)
                    let metrics = Self.samples(scrape.body)
                    let sent = customers.reduce(0) { total, customer in total + server.messages(in: customer.conversation).filter { $0.sender == customer.user }.count }
                    let answered = customers.reduce(0) { total, customer in total + server.messages(in: customer.conversation).filter { $0.sender != customer.user }.count }
                    print(
                        "gateway endpoints: \(base); /health \(health.status), /ready \(ready.status) \(ready.body.trimmingCharacters(in: .newlines)); "
                            + "metrics \(metrics.filter { !$0.key.contains("bucket") }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")); "
                            + "the emulator: \(sent) sent by the customers, \(answered) by the agent"
                    )
                    #expect(metrics["switchboard_gateway_sessions_running"] == 3)
                    #expect(metrics["switchboard_gateway_links_up"] == 3)
                    #expect(metrics["switchboard_gateway_messages_out_total"] == Double(sent), "every send the server has, counted once")
                    #expect(metrics["switchboard_gateway_messages_in_total"] == Double(answered), "every answer, counted once")
                    #expect(metrics["switchboard_gateway_sends_failed_total"] == 0)
                    #expect((metrics["switchboard_gateway_store_write_seconds_count"] ?? 0) >= Double(expected), "each stored message was a timed write")

                    gateway.signal(SIGTERM)
                    await gateway.waitForExit()
                    #expect(gateway.ending == "exit 0")
                }
                try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
            }
        } }
    }

    /// One GET: the status and the body as text.
    static func get(_ url: String) async throws -> (status: UInt, body: String) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (response.status.code, String(buffer: body))
    }

    /// The samples of a Prometheus text exposition, by name (with its labels).
    static func samples(_ text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let value = Double(parts[1]) else { continue }
            samples[String(parts[0])] = value
        }
        return samples
    }
}
