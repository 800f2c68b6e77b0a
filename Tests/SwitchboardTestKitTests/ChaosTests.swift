import Switchboard
import SwitchboardSQLite
import SwitchboardTestKit
import Testing

/// 1,000 messages each way across four conversations while the server drops, duplicates,
/// reorders and delays events, fails sends and retransmits, loses replies to applied sends,
/// and cuts the link — all from a
/// seed. The client's store is then compared with the server's own log.
@Suite(.timeLimit(.minutes(5)))
struct ChaosTests {
    static let customer = Participant(id: "customer", role: .customer, displayName: "Customer")
    static let agentParticipant = Participant(id: "agent", role: .agent, displayName: "Agent")

    /// Where the client keeps what it learns: the in-memory store, or SQLite (the durable one).
    enum Store: String, Sendable, CustomTestStringConvertible {
        case memory, sqlite
        var testDescription: String { rawValue }
    }

    @Test(arguments: [(0xC0FFEE as UInt64, Store.memory), (0xBADC0DE, .memory), (0x5A17E, .sqlite)])
    func thousandMessagesEachWayLoseNothing(seed: UInt64, storeKind: Store) async throws {
        let server = InMemoryServer()
        let agent = server.agent(Self.agentParticipant.id, name: "Agent")
        let conversations = (0..<4).map {
            server.createConversation(title: "chaos \($0)", participants: [Self.customer, Self.agentParticipant]).id
        }
        let store: any ChatStore = storeKind == .sqlite ? try SQLiteChatStore.inMemory() : InMemoryChatStore()
        let session = ChatSession(
            backend: InMemoryBackend(server: server, user: Self.customer.id),
            store: store,
            configuration: .fastForTests,
            random: SeededRandomNumberGenerator(seed: seed),
            logger: .quiet
        )
        var random = SeededRandomNumberGenerator(seed: seed)
        var faults: [String: Int] = [:]
        let steps = 1000

        let events = try await withRecording(session) { recorder in
            try await session.resume()
            for id in conversations {
                try await recorder.first("conversation \(id)") { $0.conversationID == id }
            }
            let customerTarget = InMemoryServer.FaultTarget.clientsOf(Self.customer.id)
            for step in 0..<steps {
                let mine = conversations[Int.random(in: 0..<conversations.count, using: &random)]
                try await session.conversation(mine).send(text: "customer \(step)")
                let theirs = conversations[Int.random(in: 0..<conversations.count, using: &random)]
                try agent.send("agent \(step)", in: theirs)
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<2:
                    server.disconnectAll()
                    faults["disconnect", default: 0] += 1
                case 2..<6:
                    server.dropNext(Int.random(in: 1...5, using: &random), for: customerTarget)
                    faults["drop", default: 0] += 1
                case 6..<10:
                    server.duplicateNext(Int.random(in: 1...3, using: &random), for: customerTarget)
                    faults["duplicate", default: 0] += 1
                case 10..<14:
                    server.reorderNext(Int.random(in: 2...4, using: &random), for: customerTarget)
                    faults["reorder", default: 0] += 1
                case 14..<16:
                    server.delayNext(Int.random(in: 1...3, using: &random), for: customerTarget)
                    faults["delay", default: 0] += 1
                case 16..<17:
                    server.releaseDelayed()
                case 17..<19:
                    server.failNextRequest(SwitchboardError(.connectionLost, "chaos"), named: "send")
                    faults["failed send", default: 0] += 1
                case 19..<20:
                    server.failNextRequest(SwitchboardError(.serverError, "chaos"), named: "retransmit")
                    faults["failed retransmit", default: 0] += 1
                case 20..<22:
                    server.loseNextReply(named: "send")
                    faults["lost reply", default: 0] += 1
                default:
                    break
                }
                if step % 25 == 0 { await Task.yield() }
            }
            // Heal: stop the faults, hand over what they hold, and make the client catch up once more.
            server.clearFaults()
            server.releaseDelayed()
            server.disconnectAll()
            try await recorder.waitUntil("the client converges on the server's log", timeout: .seconds(180)) {
                for id in conversations {
                    let truth = server.messages(in: id).map(\.serverID)
                    let stored = try await session.conversation(id).storedMessages(before: nil, limit: .max).map(\.serverID)
                    if truth != stored { return false }
                }
                return true
            }
            return recorder.events
        }

        // The proof, against the server's own log.
        var lost = 0
        var duplicated = 0
        var outOfOrder = 0
        var serverCount = 0
        for id in conversations {
            let truth = server.messages(in: id)
            serverCount += truth.count
            let stored = try await store.fetchMessages(in: id, before: nil, limit: .max, scope: session.scope)
            let storedIDs = stored.compactMap(\.serverID)
            lost += Set(truth.compactMap(\.serverID)).subtracting(storedIDs).count
            duplicated += storedIDs.count - Set(storedIDs).count
            outOfOrder += zip(storedIDs, truth.compactMap(\.serverID)).filter { $0 != $1 }.count
            // Announcements: each agent message added once, in sequence order.
            let announced = events.filter { $0.conversationID == id }.compactMap(\.addedMessage).filter { $0.serverID != nil }
            duplicated += announced.count - Set(announced.compactMap(\.serverID)).count
            let sequences = announced.compactMap(\.sequence)
            outOfOrder += zip(sequences, sequences.dropFirst()).filter { $0 >= $1 }.count
        }
        let customerTexts = conversations.flatMap { server.messages(in: $0) }.filter { $0.sender == Self.customer.id }.map(\.text)
        let lostSends = steps - Set(customerTexts).count
        let duplicatedSends = customerTexts.count - Set(customerTexts).count
        let statistics = await session.statistics
        let counts = server.deliveryCounts
        let sends = server.sendCounts
        print(
            """
            chaos seed \(String(seed, radix: 16)), \(storeKind.rawValue) store: messages \(steps) customer→agent + \(steps) agent→customer = \(serverCount) on the server
              faults injected: \(faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
              server: \(counts.delivered) frames delivered, \(counts.dropped) events dropped, \(sends.duplicates) resends recognised by client id
              engine: \(statistics.connects) connects, \(statistics.retransmitRequests) retransmits (\(statistics.retransmittedEvents) events), \(statistics.duplicatesDropped) duplicates dropped, \(statistics.heldBack) held back, \(statistics.sendRetries) send retries
              result: lost \(lost + lostSends), duplicated \(duplicated + duplicatedSends), out of order \(outOfOrder), outbox left \(await session.pendingSends.count)
            """
        )
        #expect(lost == 0, "no server message is missing from the client")
        #expect(lostSends == 0, "every customer send reached the server")
        #expect(duplicated == 0 && duplicatedSends == 0, "nothing is duplicated on either side")
        #expect(outOfOrder == 0, "every conversation keeps the server's order")
        #expect(await session.pendingSends.isEmpty)
        #expect(faults.values.reduce(0, +) > 50, "the run injected real chaos")
    }
}

