import Foundation
import PostgresNIO
import Switchboard
import SynapseHarness
import MatrixCommands
import SwitchboardCommandKit
import SwitchboardGateway
import SwitchboardPostgres
import SwitchboardTestKit
import Testing

/// `switchboard gateway`'s Matrix sessions against a real Synapse, on a real PostgreSQL store: the
/// sessions a gateway reads from its file, each logging in with its password, sending its traffic
/// into its room and storing what the agent answers; started again, each resumes from its stored
/// `since`.
@Suite(
    Synapse.needed,
    .enabled(if: LiveServer.postgres.runsTests, Comment(rawValue: LiveServer.postgres.skipNote)),
    .timeLimit(.minutes(3))
)
struct MatrixGatewayTests {
    @Test func aGatewayRunsMatrixSessions() async throws {
        let url = try LiveServer.postgres.require()
        let sends = 3
        try await Synapse.withUsers(customer: "customer0") { server, agent, first in
            var registered = [first]
            for index in 1..<3 { registered.append(try await server.register("customer\(index)")) }
            var opened: [ConversationID] = []
            for customer in registered {
                let room = try await agent.createRoom(name: "Support \(customer.localPart)", inviting: [customer.userID])
                try await customer.join(room)
                opened.append(room)
            }
            let (customers, rooms) = (registered, opened)
            // The gateway's own file and its reading of it.
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-matrix-gateway-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("sessions.json")
            let entries = zip(customers, rooms).map { customer, room in
                ["backend": "matrix", "url": server.baseURL, "user": customer.localPart, "password": customer.password, "conversation": room.rawValue]
            }
            try JSONSerialization.data(withJSONObject: entries).write(to: file)
            let sessions = try GatewaySessionsFile.load(file.path, kinds: [MatrixCommands.entry.gatewayKind(traffic: GatewayTraffic(messages: sends, interval: .milliseconds(50)))])
            #expect(sessions.map(\.key) == customers.map { "matrix/\($0.localPart)" })

            let schema = "switchboard_matrix_gateway_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            try await PostgresChatStore.withStore(url: url, schema: schema, logger: .quiet) { store in
                // The file's sessions on the shared store around `body`, which gets their events;
                // then stopped, as a gateway that ends or dies lets them go.
                let runGateway: (_ body: (EventRecorder) async throws -> Void) async throws -> Void = { body in
                    let bus = EventBus()
                    let recorder = EventRecorder(bus.subscribe(filter: .all, buffering: .unbounded), patience: .seconds(60))
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { await recorder.run() }
                        for session in sessions {
                            group.addTask {
                                try await session.run(store: store, bus: bus, logger: .quiet)
                            }
                        }
                        try await body(recorder)
                        group.cancelAll()
                    }
                }
                let received: @Sendable (ConversationID, String, [ChatEvent]) -> Int = { room, prefix, events in
                    events.filter { $0.conversationID == room && $0.addedMessage?.text.hasPrefix(prefix) == true }.count
                }
                try await runGateway { recorder in
                    // Every session's sends confirmed by the server, then the agent answers each.
                    let confirmed: @Sendable (ConversationID, [ChatEvent]) -> Set<String> = { room, events in
                        Set(events.compactMap { event in
                            guard event.conversationID == room, let message = event.updatedMessage ?? event.addedMessage,
                                message.serverID != nil, message.clientID != nil
                            else { return nil }
                            return message.text
                        })
                    }
                    try await recorder.waitUntil("every session's \(sends) sends confirmed") { events in
                        zip(customers, rooms).allSatisfy { customer, room in
                            confirmed(room, events) == Set((1...sends).map { "\(customer.localPart) \($0)" })
                        }
                    }
                    for (customer, room) in zip(customers, rooms) {
                        for index in 1...sends { _ = try await agent.send("You wrote: \(customer.localPart) \(index)", in: room) }
                    }
                    try await recorder.waitUntil("every answer received") { events in
                        rooms.allSatisfy { received($0, "You wrote", events) >= sends }
                    }
                }
                // While no gateway runs, the agent writes again; a gateway that starts the sessions
                // anew (a restart, or another process taking them over) resumes each from its stored
                // `since`, receives that message, and sends nothing again.
                for room in rooms { _ = try await agent.send("While you were away", in: room) }
                try await runGateway { recorder in
                    try await recorder.waitUntil("every session's missed message") { events in
                        rooms.allSatisfy { received($0, "While you were away", events) == 1 }
                    }
                }
                // The shared store and the server agree: each room's sends once each and in order,
                // then the answers, then what came while no gateway ran.
                var storedCount = 0
                var duplicated = 0
                var outOfOrder = 0
                for (customer, room) in zip(customers, rooms) {
                    let scope = StoreScope(backend: "matrix", account: customer.localPart, user: customer.localPart)
                    let stored = try await store.fetchMessages(in: room, before: nil, limit: .max, scope: scope).map(\.text)
                    let onServer = try await agent.texts(in: room)
                    let expected = (1...sends).map { "\(customer.localPart) \($0)" } + (1...sends).map { "You wrote: \(customer.localPart) \($0)" }
                        + ["While you were away"]
                    storedCount += stored.count
                    duplicated += stored.count - Set(stored).count + onServer.count - Set(onServer).count
                    if stored != expected || onServer != expected { outOfOrder += 1 }
                }
                print(
                    "gateway, Matrix on Synapse: \(customers.count) sessions from the file, \(customers.count * sends) sent, "
                        + "\(customers.count * sends) answered, \(customers.count) written while stopped and received after the restart; "
                        + "stored \(storedCount) in PostgreSQL, duplicated \(duplicated), rooms out of order \(outOfOrder)"
                )
                #expect(storedCount == customers.count * (2 * sends + 1))
                #expect(duplicated == 0 && outOfOrder == 0)
                try await store.client.run("DROP SCHEMA \(unescaped: schema) CASCADE")
            }
        }
    }
}
