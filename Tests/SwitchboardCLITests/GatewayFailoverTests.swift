import ArgumentParser
import Foundation
import PostgresNIO
@_spi(TestKit) import Switchboard
@_spi(TestKit) import CXoneEmulator
import SwitchboardEmulation
import SwitchboardGateway
import SwitchboardPostgres
import SwitchboardWebim
@_spi(TestKit) import SwitchboardTestKit
import Testing
@_spi(TestKit) import VoximplantEmulator

@testable import switchboard
import SwitchboardCommandKit

/// The PostgreSQL database of the live tests (`eval "$(scripts/postgres.sh start)"` sets it): a
/// local run without it skips these tests, a CI run fails them (``LiveServer``).
let needsPostgres = ConditionTrait.enabled(if: LiveServer.postgres.runsTests, Comment(rawValue: LiveServer.postgres.skipNote))

extension CrashTests {
    /// How the test stops a gateway: kill -9, or the SIGTERM of a process supervisor, after which
    /// the gateway releases its sessions and exits 0.
    enum GatewayStop: String, CustomTestStringConvertible, CaseIterable, Sendable {
        case sigkill = "SIGKILL"
        case sigterm = "SIGTERM"

        var testDescription: String { rawValue }
    }

    /// The `switchboard` the failover test runs its gateways from: this build's, or the one
    /// `SWITCHBOARD_GATEWAY_EXECUTABLE` names (a release build, for take-over times as a
    /// deployment sees them: `swift build -c release --product switchboard`).
    static var gatewayExecutable: String? { ProcessInfo.processInfo.environment["SWITCHBOARD_GATEWAY_EXECUTABLE"] }

    /// Three `switchboard gateway` processes share 300 Voximplant-style sessions through one
    /// PostgreSQL database; while the agent writes to every conversation and every session sends
    /// its own messages, one gateway is killed with SIGKILL. Its sessions move to the other two,
    /// which resume them from the shared store. The emulator's log and every stored row must
    /// agree: nothing lost, nothing twice, nothing left pending, in order.
    ///
    /// Sends in flight in the killed gateway: the server applies the sends of one customer in
    /// twenty and withholds its answers, so those sessions hold their first send applied and
    /// unanswered and the rest in their outboxes when the gateway that holds most of them is
    /// killed. Each must be delivered exactly once by the process that takes the session over.
    /// Takeover is timed from the kill to each moved session's delivery of a message the agent
    /// wrote after it.
    ///
    /// Run twice: with SIGKILL, and with SIGTERM, after which the gateway must release every
    /// session, say it stopped and exit 0; the proof is the same for both.
    @Test(needsPostgres, .serialized, arguments: GatewayStop.allCases)
    func threeGatewaysShareSessionsAndSurviveAKill(_ stop: GatewayStop) async throws {
        let url = try LiveServer.postgres.require()
        let sessions = 300
        let sends = 4
        let agentMessages = 4
        let server = VoximplantServer()
        let (agent, customers) = try Self.customers(sessions, on: server)
        let unanswered = Set(customers.enumerated().filter { $0.offset % 20 == 0 }.map(\.element.user))
        server.withholdSendAnswers(of: unanswered)
        try await Self.withScratch("failover") { schema, file in try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
            // Every write to the store's messages and outbox signals `stored`: the test waits on it
            // instead of polling.
            try await Self.withWriteSignal(on: store) { stored in
                try await VoximplantEmulator(server: server, logger: .quiet).withRunning { emulatorURL in
                    try Self.write(Self.sessions(customers, url: emulatorURL), to: file)
                    let holdings = Holdings()
                    let names = ["gw1", "gw2", "gw3"]
                    var gateways: [String: Child] = [:]
                    for name in names {
                        let child = try Child.start([
                            "gateway", "--postgres", url, "--schema", schema, "--sessions", file.path, "--name", name,
                            "--interval-ms", "250", "--send", "\(sends)", "--send-interval-ms", "150",
                        ], executable: Self.gatewayExecutable)
                        gateways[name] = child
                        holdings.follow(child, as: name)
                    }
                    // A failed wait must not leave the gateways running after the test.
                    let started = Array(gateways.values)
                    defer { for child in started { child.kill() } }
                    let allKeys = Set(customers.map { "voximplant/\($0.user)" })
                    try await waitUntil("300 sessions held once each", timeout: .seconds(120), signal: holdings.changed) {
                        holdings.heldOnce(of: allKeys, by: names)
                    }
                    // Every session has read its conversation (and its head) once: what the agent
                    // writes from here on is news to it, not history from before its first link.
                    try await waitUntil("every session connected once", timeout: .seconds(120), signal: stored) {
                        let conversations = try await Self.count("conversation", in: store)
                        let sequences = try await Self.count("sequence", in: store)
                        return conversations == sessions && sequences == sessions
                    }
                    // The unanswered sessions hold every send: the first applied by the server, the
                    // rest waiting behind it in the outbox.
                    // (The server's side wakes on the server's changes, the outboxes on the store's.)
                    let unansweredCustomers = customers.filter { unanswered.contains($0.user) }
                    try await waitUntil("the unanswered sessions' first sends applied", timeout: .seconds(120), signal: server.changes) {
                        unansweredCustomers.allSatisfy { customer in server.messages(in: customer.conversation).contains { $0.sender == customer.user } }
                    }
                    try await waitUntil("the unanswered sessions' sends in their outboxes", timeout: .seconds(120), signal: stored) {
                        for customer in unansweredCustomers {
                            guard try await store.fetchOutbox(scope: StoreScope(backend: "voximplant", account: customer.user, user: customer.user)).count == sends
                            else { return false }
                        }
                        return true
                    }
                    print("failover: \(sessions) sessions over 3 gateways, each connected once: \(holdings.counts(names))")
                    // Sessions per process: each gateway's resident memory with its share, and
                    // again in the two that took the killed one's sessions.
                    let residentBefore = try names.map { try gateways[$0]!.residentBytes() }

                    // The agent writes while the sessions send; the gateway holding most of the
                    // unanswered sessions dies mid-traffic.
                    for round in 1...agentMessages / 2 {
                        for customer in customers { try agent.send("agent \(round)", in: customer.conversation) }
                    }
                    let unansweredKeys = Set(unanswered.map { "voximplant/\($0)" })
                    let victimName = names.max {
                        holdings.keys(of: $0).intersection(unansweredKeys).count < holdings.keys(of: $1).intersection(unansweredKeys).count
                    }!
                    let survivors = names.filter { $0 != victimName }
                    let victim = holdings.keys(of: victimName)
                    // What the gateway to be killed has in flight: its unanswered sessions'
                    // outboxes, the head of each applied by the server and unanswered. Read just
                    // before the kill: after it, a session taken over may already have moved on.
                    let moved = customers.filter { victim.contains("voximplant/\($0.user)") }
                    var inFlight: [String] = []
                    var appliedUnanswered = 0
                    for customer in moved where unanswered.contains(customer.user) {
                        let texts = try await store.fetchOutbox(scope: StoreScope(backend: "voximplant", account: customer.user, user: customer.user)).map(\.message.content.text)
                        let onServer = Set(server.messages(in: customer.conversation).map(\.text))
                        inFlight += texts
                        appliedUnanswered += texts.filter(onServer.contains).count
                    }
                    let clock = ContinuousClock()
                    let killedAt = clock.now
                    switch stop {
                    case .sigkill: gateways[victimName]?.kill()
                    case .sigterm: gateways[victimName]?.signal(SIGTERM)
                    }
                    if stop == .sigterm {
                        // A graceful stop that hangs is a failure with what the gateway said, not
                        // the test's time limit.
                        let exited = AsyncSignal()
                        let victimChild = gateways[victimName]
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask {
                                await victimChild?.waitForExit()
                                exited.signal()
                            }
                            defer { group.cancelAll() }
                            do {
                                try await waitUntil("\(victimName) exits after SIGTERM", timeout: .seconds(60), signal: exited) { victimChild?.ending != "running" }
                            } catch {
                                Issue.record("\(victimName) still runs after SIGTERM; its lines: \(holdings.otherLines(of: victimName).suffix(20))")
                                victimChild?.kill()
                                throw error
                            }
                        }
                    }
                    await gateways[victimName]?.waitForExit()
                    let exitedAfter = clock.now - killedAt
                    let ending = gateways[victimName]?.ending ?? "?"
                    // A graceful stop said it released each session and stopped; a killed one
                    // said nothing.
                    if stop == .sigterm {
                        // Its last lines are read after its exit is seen.
                        do {
                            try await waitUntil("the stopped gateway's last line", timeout: .seconds(30), signal: holdings.changed) { holdings.stopped(victimName) }
                        } catch {
                            Issue.record("\(victimName) ended (\(gateways[victimName]?.ending ?? "?")) without saying it stopped; its lines: \(holdings.otherLines(of: victimName).suffix(20))")
                            throw error
                        }
                    }
                    let releasedAll = holdings.keys(of: victimName).isEmpty, saidStopped = holdings.stopped(victimName)
                    holdings.forget(victimName)
                    server.answerSends(of: unanswered)

                    // The agent writes to every conversation at once; a moved session delivers it
                    // only once another gateway runs it.
                    let round = agentMessages / 2 + 1
                    for customer in customers { try agent.send("agent \(round)", in: customer.conversation) }
                    let awaited = Dictionary(uniqueKeysWithValues: moved.map { customer in
                        (server.messages(in: customer.conversation).last { $0.text == "agent \(round)" }!.uuid, customer.user)
                    })
                    let deliveries = Locked([Duration]())
                    // From a survivor's take of a moved session to its delivery: the start's share.
                    let startups = Locked([Duration]())
                    let seen = Locked(Set<String>())
                    // A row seen stored and missing at a later look (the final audit below still
                    // requires every row): printed, not hidden.
                    let vanished = Locked(Set<String>())
                    do {
                        try await waitUntil("every moved session delivers the agent's next message", timeout: .seconds(120), signal: stored) {
                            let now = clock.now
                            let found = try await Self.storedServerIDs(Array(awaited.keys), in: store)
                            for id in found where seen.withLock({ $0.insert(id).inserted }) {
                                deliveries.withLock { $0.append(now - killedAt) }
                                if let user = awaited[id], let took = holdings.tookAt("voximplant/\(user)"), took > killedAt {
                                    startups.withLock { $0.append(now - took) }
                                }
                            }
                            let gone = seen.withLock { $0 }.subtracting(found)
                            vanished.withLock { $0.formUnion(gone) }
                            return seen.withLock(\.count) == awaited.count
                        }
                    } catch {
                        let missing = awaited.filter { !seen.withLock { $0 }.contains($0.key) }.map(\.value).sorted()
                        let found = try await Self.storedServerIDs(Array(awaited.keys), in: store)
                        let said = survivors.flatMap { holdings.otherLines(of: $0) }.filter { !$0.hasPrefix("connected") }
                        Issue.record("delivered \(seen.withLock(\.count)) of \(awaited.count), stored now \(found.count); not yet: \(missing.prefix(10)) (unanswered among them: \(missing.filter(unanswered.contains).count)): \(error); the survivors said: \(said.suffix(10))")
                    }
                    try await waitUntil("every session held once by the survivors", timeout: .seconds(120), signal: holdings.changed) {
                        holdings.heldOnce(of: allKeys, by: survivors)
                    }
                    let delivered = deliveries.withLock { $0.sorted() }
                    let startupTimes = startups.withLock { $0.sorted() }
                    let takes = moved.compactMap { holdings.tookAt("voximplant/\($0.user)") }.filter { $0 > killedAt }.map { $0 - killedAt }.sorted()
                    func spread(_ durations: [Duration]) -> String {
                        guard let first = durations.first, let last = durations.last else { return "none" }
                        return "first \(first), median \(durations[durations.count / 2]), last \(last) (\(durations.count) of \(moved.count) moved sessions)"
                    }
                    print(
                        """
                        failover: gateways \(Self.gatewayExecutable ?? "of this build (debug unless built otherwise)"); \
                        \(victimName) stopped with \(stop.rawValue) holding \(victim.count) sessions: \(ending) after \(exitedAfter), \
                        released every session \(releasedAll), said stopped \(saidStopped); from the signal to each moved session's \
                        delivery: \(spread(delivered)); from the signal to a survivor's take: \(spread(takes)); from the take to the \
                        delivery: \(spread(startupTimes)); \
                        in flight in it: \(inFlight.count) sends in its unanswered sessions' outboxes, \(appliedUnanswered) of them \
                        applied by the server and unanswered (\(server.withheldSendAnswers) answers withheld in all); \
                        delivered rows missing at a later look \(vanished.withLock(\.count))
                        """
                    )
                    for round in round + 1...agentMessages {
                        for customer in customers { try agent.send("agent \(round)", in: customer.conversation) }
                    }

                    // Everything on the server and in the store.
                    let expectedOnServer = sessions * (sends + agentMessages)
                    try await waitUntil("every session's messages on the server", timeout: .seconds(180), signal: server.changes) {
                        customers.reduce(0) { $0 + server.messages(in: $1.conversation).count } >= expectedOnServer
                    }
                    do {
                        try await waitUntil("every message stored and confirmed", timeout: .seconds(180), signal: stored) {
                            try await Self.confirmedAndSettled(store: store) == expectedOnServer
                        }
                    } catch {
                        var missing: [String] = []
                        for customer in customers {
                            let scope = StoreScope(backend: "voximplant", account: customer.user, user: customer.user)
                            let rows = Set(try await store.fetchMessages(in: ConversationID(customer.conversation), before: nil, limit: .max, scope: scope).compactMap(\.serverID?.rawValue))
                            for message in server.messages(in: customer.conversation) where !rows.contains(message.uuid) {
                                missing.append("\(customer.user) seq \(message.sequence) \"\(message.text)\" by \(message.sender)\(victim.contains("voximplant/\(customer.user)") ? " (moved)" : "")")
                            }
                        }
                        Issue.record("not settled: \(try await Self.unsettled(store: store)); expected \(expectedOnServer) confirmed; missing \(missing.prefix(10)): \(error)")
                    }

                    // The proof: the emulator's log against every stored row, conversation by
                    // conversation, and each send that was in flight on the server once.
                    var audit = StoreAudit()
                    var outbox = 0
                    var inFlightOnServer: [String: Int] = [:]
                    for customer in customers {
                        let truth = server.log(of: customer.conversation, customer: customer.user)
                        let scope = StoreScope(backend: "voximplant", account: customer.user, user: customer.user)
                        let rows = try await store.fetchMessages(in: ConversationID(customer.conversation), before: nil, limit: .max, scope: scope)
                        audit.add(StoreAudit.compare(server: truth, stored: rows, sent: (1...sends).map { "\(customer.user) \($0)" }))
                        for message in truth where inFlight.contains(message.text) { inFlightOnServer[message.text, default: 0] += 1 }
                        outbox += try await store.fetchOutbox(scope: scope).count
                    }
                    let residentAfter = try survivors.map { try gateways[$0]!.residentBytes() }
                    for child in gateways.values { child.kill() }
                    for child in gateways.values { await child.waitForExit() }
                    let megabytes = { (bytes: Int) in String(format: "%.1f MB", Double(bytes) / 1_048_576) }
                    let shareBefore = sessions / names.count, shareAfter = sessions / survivors.count
                    let survivorsBefore = survivors.map { residentBefore[names.firstIndex(of: $0)!] }
                    let perSession = zip(survivorsBefore, residentAfter).map { before, after in
                        String(format: "%.0f KB", Double(after - before) / 1024 / Double(shareAfter - shareBefore))
                    }
                    print(
                        """
                        failover: gateway memory — \(shareBefore) sessions each: \(residentBefore.map(megabytes).joined(separator: ", ")) resident; \
                        \(survivors.joined(separator: " and ")) with \(shareAfter) each after the traffic: \(residentAfter.map(megabytes).joined(separator: ", ")), \
                        \(perSession.joined(separator: " and ")) more per session taken over
                        """
                    )
                    let onceEach = inFlight.filter { inFlightOnServer[$0] == 1 }.count
                    print(
                        """
                        failover: \(sessions) sessions, 3 gateways, 1 stopped with \(stop.rawValue) mid-traffic (\(victim.count) sessions moved); \
                        \(audit), outbox left \(outbox); in flight at the kill \(inFlight.count), on the server once each \(onceEach), \
                        resends the server recognised \(server.counts.duplicateSends)
                        """
                    )
                    #expect(audit.messages == expectedOnServer)
                    #expect(audit.isClean, "every stored row matches the server's log")
                    #expect(outbox == 0)
                    #expect(appliedUnanswered > 0 && inFlight.count > appliedUnanswered, "the killed gateway had sends in flight, applied and not yet sent")
                    #expect(onceEach == inFlight.count, "each send in flight in the killed gateway is on the server once")
                    switch stop {
                    case .sigkill:
                        #expect(ending == "signal 9")
                    case .sigterm:
                        #expect(ending == "exit 0", "a gateway stopped by SIGTERM exits 0")
                        #expect(releasedAll && saidStopped, "it released every session before it exited")
                    }
                }
                try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
            }
        } }
    }

    /// A gateway started with `--bridge` carries its sessions' events to the other processes on
    /// the database: `switchboard events`, in a process of its own, prints every session's
    /// messages — its own sends and the agent's — in each conversation's order.
    @Test(needsPostgres)
    func aGatewaysEventsReachTheEventsCommandThroughTheBridge() async throws {
        let url = try LiveServer.postgres.require()
        let sessions = 5
        let sends = 3
        let server = VoximplantServer()
        let (agent, customers) = try Self.customers(sessions, on: server)
        try await Self.withScratch("events") { schema, file in try await VoximplantEmulator(server: server, logger: .quiet).withRunning { emulatorURL in
            try Self.write(Self.sessions(customers, url: emulatorURL), to: file)
            let observer = try Child.start(["events", "--postgres", url, "--schema", schema, "--jsonl"], mergingOutput: true)
            defer { observer.kill() }
            let lines = EventLines()
            lines.follow(observer)
            // Events from before a bridge listens are not replayed: the gateway starts after.
            try await waitUntil("the events command listening", timeout: .seconds(60), signal: lines.changed) { lines.isListening }
            let gateway = try Child.start([
                "gateway", "--postgres", url, "--schema", schema, "--sessions", file.path, "--name", "gw1", "--interval-ms", "250",
                "--send", "\(sends)", "--send-interval-ms", "50", "--bridge",
            ])
            defer { gateway.kill() }
            let own: @Sendable (String) -> [String] = { user in (1...sends).map { "\(user) \($0)" } }
            try await waitUntil("every session's sends confirmed on the observer's bus", timeout: .seconds(120), signal: lines.changed) {
                customers.allSatisfy { lines.confirmedTexts(in: $0.conversation) == own($0.user) }
            }
            for customer in customers { try agent.send("agent 1", in: customer.conversation) }
            try await waitUntil("the agent's messages on the observer's bus", timeout: .seconds(120), signal: lines.changed) {
                customers.allSatisfy { lines.confirmedTexts(in: $0.conversation).last == "agent 1" }
            }
            gateway.kill()
            observer.kill()
            await gateway.waitForExit()
            await observer.waitForExit()
            var (messages, outOfOrder) = (0, 0)
            for customer in customers {
                let texts = lines.confirmedTexts(in: customer.conversation)
                messages += texts.count
                if texts != own(customer.user) + ["agent 1"] { outOfOrder += 1 }
            }
            let sessionsSeen = lines.sessions.count
            print(
                "bridge: 1 gateway (--bridge), \(sessions) sessions, `switchboard events` in another process — \(lines.count) events heard " +
                    "from \(sessionsSeen) sessions, \(messages) messages confirmed (\(sessions * sends) sent by the sessions, \(sessions) by the agent), " +
                    "conversations out of order \(outOfOrder)"
            )
            #expect(sessionsSeen == sessions)
            #expect(messages == sessions * (sends + 1))
            #expect(outOfOrder == 0)
            try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
                try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
            }
        } }
    }

    /// CXone sessions in a gateway: each customer's thread started by the gateway (none is named),
    /// its sends on the server once each and in the shared store, the agent's answers stored.
    @Test(needsPostgres)
    func aGatewayRunsCXoneSessions() async throws {
        let url = try LiveServer.postgres.require()
        let customers = (0..<4).map { "gateway-customer-\($0)" }
        let sends = 3
        let server = CXoneServer()
        let agent = server.agent()
        server.autoReply(as: agent) { "You wrote: \($0)" }
        try await Self.withScratch("cxone") { schema, file in try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
            try await CXoneEmulator(server: server, logger: .quiet).withRunning { endpoints in
                try Self.write(customers.map {
                    [
                        "backend": "cxone", "url": endpoints.chatURL, "socket": endpoints.socketURL, "brand": server.configuration.brandID,
                        "channel": server.configuration.channelID, "customer": $0,
                    ]
                }, to: file)
                let gateway = try Child.start([
                    "gateway", "--postgres", url, "--schema", schema, "--sessions", file.path, "--name", "gw1", "--interval-ms", "250",
                    "--send", "\(sends)", "--send-interval-ms", "50",
                ])
                defer { gateway.kill() }
                let texts: @Sendable (String) -> [String] = { customer in
                    server.threads(of: customer).flatMap { server.messages(inThread: $0).map(\.text) }
                }
                try await waitUntil("every customer's sends and their answers on the server", timeout: .seconds(120), signal: server.changes) {
                    customers.allSatisfy { texts($0).count == 2 * sends }
                }
                // The gateway stores what the server has: its sends confirmed, the answers received.
                let stored = Locked(0)
                try await waitUntil("every message in the shared store", timeout: .seconds(120), signal: server.changes) {
                    var count = 0
                    for customer in customers {
                        let scope = StoreScope(backend: "cxone", account: customer, user: customer)
                        for conversation in try await store.fetchConversations(scope: scope) {
                            count += try await store.fetchMessages(in: conversation.id, before: nil, limit: .max, scope: scope).filter { $0.serverID != nil }.count
                        }
                    }
                    stored.withLock { $0 = count }
                    return count == customers.count * 2 * sends
                }
                gateway.kill()
                await gateway.waitForExit()
                let threads = customers.map { server.threads(of: $0).count }
                let onServer = customers.map(texts)
                let duplicated = onServer.reduce(0) { $0 + $1.count - Set($1).count }
                let outOfOrder = zip(customers, onServer).filter { customer, texts in
                    texts.filter { !$0.hasPrefix("You wrote") } != (1...sends).map { "\(customer) \($0)" }
                }.count
                print(
                    "gateway, CXone: \(customers.count) customers, a thread each started by the gateway (threads \(threads)); " +
                        "on the server \(onServer.joined().count) (\(customers.count * sends) sent, as many answers), stored \(stored.withLock { $0 }), " +
                        "duplicated \(duplicated), out of order \(outOfOrder)"
                )
                #expect(threads == customers.map { _ in 1 })
                #expect(duplicated == 0 && outOfOrder == 0)
            }
            try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
        } }
    }

    /// A schema of its own for a gateway test, and where its file of sessions goes (a directory
    /// removed after `body`).
    static func withScratch<T>(_ label: String, _ body: (_ schema: String, _ sessionsFile: URL) async throws -> T) async throws -> T {
        let schema = "switchboard_\(label)_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(schema, directory.appendingPathComponent("sessions.json"))
    }

    static func write(_ sessions: [[String: Any]], to file: URL) throws {
        try JSONSerialization.data(withJSONObject: sessions).write(to: file)
    }

    /// `count` customers of a Voximplant-style server, each with a conversation with its agent.
    static func customers(_ count: Int, on server: VoximplantServer) throws -> (VoximplantRobot, [(user: String, token: String, conversation: String)]) {
        let agent = server.robot(server.addUser("agent", token: "agent-token", displayName: "Agent"))
        let customers = try (0..<count).map { index in
            let user = server.addUser("customer\(index)", token: "token-\(index)", displayName: "Customer \(index)")
            return (user: user, token: "token-\(index)", conversation: try agent.createConversation(title: "Support \(index)", with: [user]))
        }
        return (agent, customers)
    }

    /// The gateway's file entries for `customers` on the emulator at `url`.
    static func sessions(_ customers: [(user: String, token: String, conversation: String)], url: String) -> [[String: Any]] {
        customers.map { ["backend": "voximplant", "url": url, "user": $0.user, "token": $0.token, "conversation": $0.conversation] }
    }

    /// Runs `body` with a signal that fires after every write to the store's messages, outbox,
    /// conversations, sequences and API requests (a trigger and a `LISTEN`).
    static func withWriteSignal<T: Sendable>(on store: PostgresChatStore, _ body: (AsyncSignal) async throws -> T) async throws -> T {
        let stored = AsyncSignal()
        let schema = store.schema
        try await notifyOnWrites(store: store)
        return try await withThrowingTaskGroup(of: Void.self) { listeners in
            listeners.addTask {
                try await store.client.withConnection { connection in
                    try await connection.listen(on: "\(schema)_writes") { notes in for try await _ in notes { stored.signal() } }
                }
            }
            defer { listeners.cancelAll() }
            return try await body(stored)
        }
    }

    /// A trigger on the store's messages, outbox, conversations, sequences and API requests that
    /// notifies `<schema>_writes` per statement.
    static func notifyOnWrites(store: PostgresChatStore) async throws {
        let schema = store.schema
        try await store.client.run(
            """
            CREATE FUNCTION \(unescaped: schema).notify_writes() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('\(unescaped: schema)_writes', ''); RETURN NULL; END $$
            """
        )
        for table in ["message", "outbox", "conversation", "sequence", "command"] {
            try await store.client.run(
                """
                CREATE TRIGGER notify_writes AFTER INSERT OR UPDATE OR DELETE ON \(unescaped: schema).\(unescaped: table)
                FOR EACH STATEMENT EXECUTE FUNCTION \(unescaped: schema).notify_writes()
                """
            )
        }
    }

    /// The rows of one of the store's tables.
    static func count(_ table: String, in store: PostgresChatStore) async throws -> Int {
        var count = 0
        for try await value in try await store.client.query("SELECT count(*) FROM \(unescaped: store.schema).\(unescaped: table)").decode(Int64.self) {
            count = Int(value)
        }
        return count
    }

    /// Which of `ids` the store holds as server ids of messages.
    static func storedServerIDs(_ ids: [String], in store: PostgresChatStore) async throws -> Set<String> {
        var found: Set<String> = []
        let rows = try await store.client.query("SELECT server_id FROM \(unescaped: store.schema).message WHERE server_id = ANY(\(ids))")
        for try await id in rows.decode(String.self) { found.insert(id) }
        return found
    }

    /// Messages with a server id, once nothing is pending and every outbox is empty; -1 before.
    /// What keeps the store from settling: the confirmed count, and the accounts with pending
    /// messages or outbox entries.
    static func unsettled(store: PostgresChatStore) async throws -> String {
        let schema = store.schema
        var lines: [String] = []
        let rows = try await store.client.query(
            """
            SELECT 'confirmed', '', count(*) FROM \(unescaped: schema).message WHERE server_id IS NOT NULL
            UNION ALL SELECT 'pending', account, count(*) FROM \(unescaped: schema).message WHERE pending GROUP BY account
            UNION ALL SELECT 'outbox', account, count(*) FROM \(unescaped: schema).outbox GROUP BY account
            """
        )
        for try await (kind, account, count) in rows.decode((String, String, Int64).self) { lines.append("\(kind) \(account) \(count)") }
        return lines.prefix(20).joined(separator: ", ")
    }

    static func confirmedAndSettled(store: PostgresChatStore) async throws -> Int {
        let schema = store.schema
        var counts: [Int64] = []
        let rows = try await store.client.query(
            """
            SELECT (SELECT count(*) FROM \(unescaped: schema).message WHERE server_id IS NOT NULL),
                   (SELECT count(*) FROM \(unescaped: schema).message WHERE pending),
                   (SELECT count(*) FROM \(unescaped: schema).outbox)
            """
        )
        for try await (confirmed, pending, outbox) in rows.decode((Int64, Int64, Int64).self) { counts = [confirmed, pending, outbox] }
        guard counts.count == 3, counts[1] == 0, counts[2] == 0 else { return -1 }
        return Int(counts[0])
    }
}

/// Which gateway holds which session, from the lines the gateways print.
final class Holdings: Sendable {
    let changed = AsyncSignal()
    private let held = Locked([String: Set<String>]())
    private let stoppedNames = Locked(Set<String>())
    private let others = Locked([String: [String]]())
    private let tookAt = Locked([String: ContinuousClock.Instant]())

    /// When the test last read that some process took `key`.
    func tookAt(_ key: String) -> ContinuousClock.Instant? { tookAt.withLock { $0[key] } }

    /// The lines of `name` other than takes and releases: what to show when it misbehaves.
    func otherLines(of name: String) -> [String] { others.withLock { $0[name] ?? [] } }

    /// Whether `name` printed that it stopped gracefully.
    func stopped(_ name: String) -> Bool { stoppedNames.withLock { $0.contains(name) } }

    /// Reads `child`'s lines until it ends.
    func follow(_ child: Child, as name: String) {
        Task.detached { [self] in
            while let line = try? await child.nextLine() {
                if !line.hasPrefix("took "), !line.hasPrefix("released ") {
                    others.withLock { $0[name, default: []].append(line) }
                    changed.signal()
                }
                if line == "stopped" {
                    stoppedNames.withLock { _ = $0.insert(name) }
                } else if line.hasPrefix("took ") {
                    let key = String(line.dropFirst(5))
                    tookAt.withLock { $0[key] = .now }
                    held.withLock { _ = $0[name, default: []].insert(key) }
                } else if line.hasPrefix("released ") {
                    held.withLock { _ = $0[name, default: []].remove(String(line.dropFirst(9))) }
                } else {
                    continue
                }
                changed.signal()
            }
        }
    }

    func forget(_ name: String) {
        held.withLock { $0[name] = nil }
        changed.signal()
    }

    func keys(of name: String) -> Set<String> { held.withLock { $0[name] ?? [] } }

    func counts(_ names: [String]) -> [String: Int] {
        held.withLock { held in Dictionary(uniqueKeysWithValues: names.map { ($0, held[$0]?.count ?? 0) }) }
    }

    /// Every key held, by exactly one of `names`.
    func heldOnce(of keys: Set<String>, by names: [String]) -> Bool {
        held.withLock { held in
            let sets = names.map { held[$0] ?? [] }
            return sets.reduce(0) { $0 + $1.count } == keys.count && sets.reduce(Set<String>()) { $0.union($1) } == keys
        }
    }
}

/// What `switchboard events --jsonl` printed: each conversation's messages as they were last
/// announced (confirmed, with their server id), in the order first seen.
private final class EventLines: Sendable {
    private struct State {
        var listening = false
        var count = 0
        var sessions: Set<String> = []
        /// Per conversation: message ids in first-seen order, and each one's text once confirmed.
        var order: [String: [String]] = [:]
        var confirmed: [String: String] = [:]
    }

    let changed = AsyncSignal()
    private let state = Locked(State())

    /// Reads `child`'s lines until it ends.
    func follow(_ child: Child) {
        Task.detached { [self] in
            while let line = try? await child.nextLine() {
                read(line)
                changed.signal()
            }
        }
    }

    private func read(_ line: String) {
        if line.hasPrefix("listening on ") {
            state.withLock { $0.listening = true }
            return
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else { return }
        state.withLock { state in
            state.count += 1
            if let session = object["session"] as? String { state.sessions.insert(session) }
            guard let conversation = object["conversation"] as? String, let message = object["message"] as? [String: Any],
                let id = message["id"] as? String, let text = message["text"] as? String
            else { return }
            if state.confirmed[id] == nil { state.order[conversation, default: []].append(id) }
            state.confirmed[id] = text
        }
    }

    var isListening: Bool { state.withLock(\.listening) }
    var count: Int { state.withLock(\.count) }
    var sessions: Set<String> { state.withLock(\.sessions) }

    func confirmedTexts(in conversation: String) -> [String] {
        state.withLock { state in (state.order[conversation] ?? []).compactMap { state.confirmed[$0] } }
    }
}

/// `switchboard gateway`'s session file, without a server.
struct GatewaySessionFileTests {
    func load(_ json: String) throws -> [GatewaySession] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try GatewayCommand.sessions(in: file.path)
    }

    @Test func sessionsAreKeyedByBackendAndAccount() throws {
        let sessions = try load(
            """
            [{"backend": "voximplant", "url": "ws://127.0.0.1:1/ws", "user": "u1@app.acc", "token": "t", "conversation": "c1"},
             {"backend": "webim", "url": "http://127.0.0.1:2", "visitor": "{\\"fields\\":{\\"id\\":\\"v\\"}}", "name": "visitor-1"},
             {"backend": "cxone", "url": "http://127.0.0.1:3/chat", "socket": "ws://127.0.0.1:3/ws", "brand": 1386, "channel": "ch", "customer": "k1"},
             {"backend": "matrix", "url": "http://127.0.0.1:4", "user": "alice", "password": "p", "conversation": "!r:h"},
             {"backend": "matrix", "url": "http://127.0.0.1:4", "token": "syt_x", "name": "bot"}]
            """
        )
        #expect(sessions.map(\.key) == ["voximplant/u1@app.acc", "webim/visitor-1", "cxone/k1", "matrix/alice", "matrix/bot"])
    }

    /// The account is the same rule for every backend (name, user, customer, visitor, url), and a
    /// file saved with a byte-order mark reads as without.
    @Test func theAccountRuleIsOneForEveryBackendAndABOMIsSkipped() throws {
        let json = #"[{"backend": "webim", "url": "http://127.0.0.1:2", "user": "w-user", "visitor": "{\"fields\":{\"id\":\"v\"}}"}]"#
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString).json")
        try (Data([0xEF, 0xBB, 0xBF]) + Data(json.utf8)).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try GatewayCommand.sessions(in: file.path).map(\.key) == ["webim/w-user"])
        let error = #expect(throws: SwitchboardError.self) { try load(#"[{"backend": "voximplant", "url": "ws://h/ws", "user": "u", "token": "t"}, {"backend": "irc", "url": "x"}]"#) }
        #expect(error?.message.contains("session 2: gateway runs voximplant, webim, cxone, matrix and xmpp sessions; not irc") == true, "\(String(describing: error))")
    }

    /// A field may come from the environment (`{"env": "NAME"}`), and errors name the file's line,
    /// the session and the field: a missing variable, a syntax error, an entry its backend refuses.
    @Test func credentialsComeFromTheEnvironmentAndErrorsNameTheLine() throws {
        let seen = Locked([JSONValue]())
        let kind = GatewaySessionKind(name: "voximplant") { entry in
            seen.withLock { $0.append(entry) }
            guard entry["token"]?.stringValue != nil else { throw SwitchboardError(.invalidArgument, "needs \"token\"") }
            return GatewaySession(backend: "voximplant", account: entry["user"]?.stringValue ?? "") { _ in throw SwitchboardError(.unsupported, "not in this test") }
        }
        let file = Data(
            """
            [
              {"backend": "voximplant", "user": "u1", "token": "plain"},

              {"backend": "voximplant", "user": "u2",
               "token": {"env": "SB_TOKEN_U2"}}
            ]
            """.utf8
        )
        let sessions = try GatewaySessionsFile.read(file, from: "s.json", kinds: [kind], environment: ["SB_TOKEN_U2": "from-env"])
        #expect(sessions.map(\.key) == ["voximplant/u1", "voximplant/u2"])
        #expect(seen.withLock { $0 }.map { $0["token"]?.stringValue } == ["plain", "from-env"], "the backend gets the variable's value")
        let missing = #expect(throws: SwitchboardError.self) { try GatewaySessionsFile.read(file, from: "s.json", kinds: [kind], environment: [:]) }
        #expect(missing?.message == "s.json:4: session 2: \"token\" names the environment variable SB_TOKEN_U2, which is not set")
        let syntax = #expect(throws: SwitchboardError.self) {
            try GatewaySessionsFile.read(Data("[\n  {\"backend\": \"voximplant\",\n  }\n]".utf8), from: "s.json", kinds: [kind], environment: [:])
        }
        #expect(syntax?.message.hasPrefix("s.json:3: not a JSON array of sessions") == true, "\(String(describing: syntax))")
        let refused = #expect(throws: SwitchboardError.self) {
            try GatewaySessionsFile.read(Data("[{\"backend\": \"voximplant\", \"user\": \"a\", \"token\": \"t\"},\n {\"backend\": \"voximplant\", \"user\": \"b\"}]".utf8), from: "s.json", kinds: [kind], environment: [:])
        }
        #expect(refused?.message == "s.json:2: session 2: needs \"token\"")
        print("sessions file errors: \(missing?.message ?? "-") | \(syntax?.message ?? "-") | \(refused?.message ?? "-")")
    }

    /// `--http` is HOST:PORT; anything else is refused before the gateway starts.
    @Test func theHTTPAddressIsHostAndPort() throws {
        #expect(GatewayCommand.endpoint("127.0.0.1:9090")! == ("127.0.0.1", 9090))
        #expect(GatewayCommand.endpoint("[::1]:0")! == ("::1", 0))
        for wrong in ["9090", ":9090", "localhost", "localhost:http", "127.0.0.1:70000"] {
            #expect(GatewayCommand.endpoint(wrong) == nil, "\(wrong)")
            #expect(throws: (any Error).self) { try GatewayCommand.parse(["--postgres", "postgres://u@h/d", "--sessions", "s.json", "--http", wrong]) }
        }
    }

    @Test(arguments: [
        #"[{"backend": "cxone", "url": "x"}]"#,
        #"[{"backend": "cxone", "url": "http://h/chat", "socket": "ws://h/ws", "brand": 1, "channel": "c"}]"#,
        #"[{"backend": "matrix", "url": "http://h", "user": "u"}]"#,
        #"[{"backend": "matrix", "url": "http://h", "user": "u", "password": "p", "token": "t"}]"#,
        #"[{"backend": "irc", "url": "irc://h"}]"#,
        #"[{"backend": "voximplant", "url": "ws://h/ws", "user": "u"}]"#,
        #"[{"backend": "voximplant", "url": "ws://h/ws", "user": "u", "token": "t"}, {"backend": "voximplant", "url": "ws://i/ws", "user": "u", "token": "s"}]"#,
        #"{"backend": "webim"}"#,
        "not json",
    ])
    func aBadFileIsRefusedWithItsReason(_ json: String) {
        let error = #expect(throws: SwitchboardError.self) { try load(json) }
        #expect(error?.code == .invalidArgument)
    }
}
