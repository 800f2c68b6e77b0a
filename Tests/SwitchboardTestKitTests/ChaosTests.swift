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

    /// What a run proves, all of it decided by the seed when the engine keeps its guarantees.
    struct Figures: Equatable, CustomStringConvertible {
        var messages = 0
        var faults: [String: Int] = [:]
        var lost = 0
        var duplicated = 0
        var outOfOrder = 0
        var outboxLeft = 0

        var description: String {
            let faultList = faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "messages \(messages), faults [\(faultList)], lost \(lost), duplicated \(duplicated), out of order \(outOfOrder), outbox left \(outboxLeft)"
        }
    }

    @Test(arguments: [(0xC0FFEE as UInt64, Store.memory), (0xBADC0DE, .memory), (0x5A17E, .sqlite)])
    func thousandMessagesEachWayLoseNothing(seed: UInt64, storeKind: Store) async throws {
        let figures = try await Self.run(seed: seed, storeKind: storeKind)
        #expect(figures.lost == 0, "no message is missing on either side")
        #expect(figures.duplicated == 0, "nothing is duplicated on either side")
        #expect(figures.outOfOrder == 0, "every conversation keeps the server's order")
        #expect(figures.outboxLeft == 0)
        #expect(figures.faults.values.reduce(0, +) > 50, "the run injected real chaos")
    }

    @Test func aSeedReplaysTheSameFigures() async throws {
        let first = try await Self.run(seed: 0xFEED, storeKind: .memory, steps: 300)
        let second = try await Self.run(seed: 0xFEED, storeKind: .memory, steps: 300)
        print("chaos seed feed, twice on virtual time:\n  first:  \(first)\n  second: \(second)")
        #expect(first == second, "the same seed gives the same figures")
        #expect(first.lost == 0 && first.duplicated == 0 && first.outOfOrder == 0)
    }

    /// Runs `steps` messages each way through seeded faults on virtual time (an
    /// ``ImmediateClock``: every backoff and hold timeout passes at once), heals, waits for the
    /// client to converge, and measures it against the server's log.
    static func run(seed: UInt64, storeKind: Store, steps: Int = 1000) async throws -> Figures {
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
            clock: SessionClock(ImmediateClock()),
            random: SeededRandomNumberGenerator(seed: seed),
            logger: .quiet
        )
        var random = SeededRandomNumberGenerator(seed: seed)
        var faults: [String: Int] = [:]

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
            chaos seed \(String(seed, radix: 16)), \(storeKind.rawValue) store, virtual time: messages \(steps) customer→agent + \(steps) agent→customer = \(serverCount) on the server
              faults injected: \(faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
              server: \(counts.delivered) frames delivered, \(counts.dropped) events dropped, \(sends.duplicates) resends recognised by client id
              engine: \(statistics.connects) connects, \(statistics.retransmitRequests) retransmits (\(statistics.retransmittedEvents) events), \(statistics.duplicatesDropped) duplicates dropped, \(statistics.heldBack) held back, \(statistics.sendRetries) send retries
              result: lost \(lost + lostSends), duplicated \(duplicated + duplicatedSends), out of order \(outOfOrder), outbox left \(await session.pendingSends.count)
            """
        )
        return Figures(
            messages: serverCount,
            faults: faults,
            lost: lost + lostSends,
            duplicated: duplicated + duplicatedSends,
            outOfOrder: outOfOrder,
            outboxLeft: await session.pendingSends.count
        )
    }
}

