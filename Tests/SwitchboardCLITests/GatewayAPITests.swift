import Foundation
@testable import SwitchboardGateway
import PostgresNIO
@_spi(TestKit) import Switchboard
import SwitchboardEmulation
import SwitchboardPostgres
@_spi(TestKit) import SwitchboardTestKit
import Testing
@_spi(TestKit) import VoximplantEmulator

/// The Python tools of `scripts/python-tools.sh` (requests and websocket-client in
/// `.build-python/venv`): a local run without them skips the tests that drive the project from
/// Python, a CI run fails them (``LiveServer``).
let pythonTools = LiveServer(
    name: "Python test client (requests, websocket-client)",
    address: FileManager.default.isExecutableFile(atPath: repositoryRoot.appendingPathComponent(".build-python/venv/bin/python").path)
        ? repositoryRoot.appendingPathComponent(".build-python/venv/bin/python").path : nil,
    howToStart: "Run scripts/python-tools.sh install (PyPI into .build-python/; CI does), then swift test."
)

/// The clone this test file is in.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

extension CrashTests {
    /// A program written in Python drives a fleet of two `switchboard gateway` processes through
    /// the API (`Tests/Python/gateway_api_client.py`): gateway B runs the session, the client
    /// talks to gateway A. It is refused without the token (HTTP and WebSocket); sends through A
    /// into B's session and reads the confirmation and the agent's answer on A's event stream;
    /// cuts the stream, sends through B meanwhile, resumes after the last event it saw and gets
    /// exactly what it missed (checked against one stream read from the start); pages the
    /// history; repeats a send (nothing is sent twice); marks the conversation read through A.
    /// The test then compares the emulator's log with every row the store holds.
    @Test(needsPostgres, .enabled(if: pythonTools.runsTests, Comment(rawValue: pythonTools.skipNote)))
    func aPythonClientDrivesTwoGatewaysThroughTheAPI() async throws {
        let url = try LiveServer.postgres.require()
        let python = try pythonTools.require()
        let token = "test-token-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let server = VoximplantServer()
        let (_, customers) = try Self.customers(1, on: server)
        let customer = customers[0]
        server.autoReply(as: "agent@\(server.configuration.domain)") { _, text in "re: \(text)" }
        try await Self.withScratch("api") { schema, file in try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
            try await Self.withWriteSignal(on: store) { written in
                try await VoximplantEmulator(server: server, logger: .quiet).withRunning { emulatorURL in
                    try Self.write(Self.sessions(customers, url: emulatorURL), to: file)
                    let holdings = Holdings()
                    func start(_ name: String) throws -> Child {
                        let child = try Child.start(
                            [
                                "gateway", "--postgres", url, "--schema", schema, "--sessions", file.path, "--name", name, "--interval-ms", "250",
                                "--http", "127.0.0.1:0", "--api-token-env", "SWITCHBOARD_TEST_API_TOKEN",
                            ],
                            environment: ["SWITCHBOARD_TEST_API_TOKEN": token]
                        )
                        holdings.follow(child, as: name)
                        return child
                    }
                    func base(of name: String) async throws -> String {
                        try await waitUntil("\(name)'s http line", timeout: .seconds(60), signal: holdings.changed) {
                            holdings.otherLines(of: name).contains { $0.hasPrefix("http ") }
                        }
                        let line = holdings.otherLines(of: name).first { $0.hasPrefix("http ") }!
                        return "http://" + String(line.dropFirst(5).prefix { $0 != " " })
                    }
                    // B first, so that B runs the one session; A joins and runs none.
                    let gatewayB = try start("gwB")
                    defer { gatewayB.kill() }
                    let baseB = try await base(of: "gwB")
                    try await waitUntil("B runs the session", timeout: .seconds(60), signal: holdings.changed) { holdings.keys(of: "gwB").count == 1 }
                    let key = holdings.keys(of: "gwB").first!
                    let gatewayA = try start("gwA")
                    defer { gatewayA.kill() }
                    let baseA = try await base(of: "gwA")

                    let client = try Child.start(
                        [
                            repositoryRoot.appendingPathComponent("Tests/Python/gateway_api_client.py").path, "--a", baseA, "--b", baseB, "--token", token,
                            "--session", key, "--process-b", "gwB", "--conversation", customer.conversation,
                        ],
                        mergingOutput: true,
                        executable: python
                    )
                    defer { client.kill() }
                    var lines: [String] = []
                    while let line = try? await client.nextLine() {
                        print("python: \(line)")
                        lines.append(line)
                    }
                    await client.waitForExit()
                    #expect(client.ending == "exit 0", "the Python client: \(lines.last ?? "no output")")
                    #expect(lines.contains { $0.hasPrefix("summary ") })
                    #expect(holdings.keys(of: "gwA").isEmpty && holdings.keys(of: "gwB") == [key], "the session stayed in B")

                    // The client stops once the unread count is 0, which is stored before the marker is
                    // sent; the request's row goes once the server took it.
                    try await waitUntil("the read marker on the server", timeout: .seconds(60), signal: server.changes) {
                        server.readLog.contains { $0.user == customer.user && $0.conversation == customer.conversation }
                    }
                    try await waitUntil("every request run and removed", timeout: .seconds(60), signal: written) {
                        try await Self.count("command", in: store) == 0
                    }
                    // The emulator's log against every row of the store.
                    let onServer = server.messages(in: customer.conversation).map(\.text)
                    let settled = try await Self.confirmedAndSettled(store: store)
                    var scopes: [StoreScope] = []
                    for try await (backend, account, user) in try await store.client.query("SELECT backend, account, user_id FROM \(unescaped: schema).gateway_session").decode((String, String, String).self) {
                        scopes.append(StoreScope(backend: BackendName(backend), account: account, user: user))
                    }
                    #expect(scopes.count == 1, "the directory has the one session")
                    let stored = try await store.fetchMessages(in: ConversationID(customer.conversation), before: nil, limit: .max, scope: try #require(scopes.first)).map(\.text)
                    let reads = server.readLog.filter { $0.user == customer.user && $0.conversation == customer.conversation }.count
                    let fromCustomer = server.messages(in: customer.conversation).filter { $0.sender == customer.user }.map(\.text)
                    print(
                        "gateway API: server \(onServer.count) messages, \(fromCustomer.count) from the customer (\(fromCustomer)); store \(stored.count) rows, "
                            + "\(settled) confirmed and settled; read markers on the server \(reads)"
                    )
                    #expect(fromCustomer == ["hello from python", "while cut"], "each send once, in order")
                    #expect(stored == onServer, "the store holds exactly the server's messages")
                    #expect(settled == onServer.count, "nothing pending, no outbox left")
                    #expect(reads >= 1, "the read marker reached the server")

                    gatewayA.signal(SIGTERM)
                    gatewayB.signal(SIGTERM)
                    await gatewayA.waitForExit()
                    await gatewayB.waitForExit()
                    #expect(gatewayA.ending == "exit 0" && gatewayB.ending == "exit 0")
                }
            }
            try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
        } }
    }
}

/// The OpenAPI document describes exactly what the gateway serves: every route of its HTTP
/// address is in the document, and every path and method of the document is a route.
@Test func theOpenAPIDocumentDescribesEveryRouteTheGatewayServes() throws {
    let gateway = try Gateway(
        configuration: .init(postgresURL: "postgres://nobody@127.0.0.1:1/none", processName: "doc", http: ("127.0.0.1", 0), apiToken: "t"),
        sessions: []
    )
    let served = Set(gateway.routes.map { $0.replacing(/\{(\w+)\}/) { ":\($0.1)" } })
    var documented = Set<String>()
    var path: String?
    for line in GatewayOpenAPI.document.split(separator: "\n") {
        if let match = line.wholeMatch(of: /\ {2}(\/[^:]*):/) {
            path = String(match.1).replacing(/\{(\w+)\}/) { ":\($0.1)" }
        } else if let path, let match = line.wholeMatch(of: /\ {4}(get|post|put|delete|patch):/) {
            documented.insert("\(match.1.uppercased()) \(path)")
        } else if !line.hasPrefix("    ") {
            path = nil
        }
    }
    print("gateway routes: \(served.count) served, \(documented.count) documented")
    #expect(served.subtracting(documented).isEmpty, "served but not documented: \(served.subtracting(documented).sorted())")
    #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served).sorted())")
    #expect(served.contains("GET /v1/events"))
}
