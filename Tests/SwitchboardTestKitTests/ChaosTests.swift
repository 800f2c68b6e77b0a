import Foundation
@_spi(TestKit) import Switchboard
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
        /// Faults injected, by the test's name for them.
        var faults: [String: Int] = [:]
        /// Faults that took effect on the client's traffic, counted by the server.
        var applied = AppliedFaults()
        var repliesLost = 0
        var lost = 0
        var duplicated = 0
        var outOfOrder = 0
        /// Stored rows the server never backed, and pending copies beside sends it has.
        var phantoms = 0
        var leftovers = 0
        var outboxLeft = 0

        var description: String {
            let faultList = faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "messages \(messages), faults injected [\(faultList)], took effect [\(applied), lost replies \(repliesLost)], lost \(lost), duplicated \(duplicated), out of order \(outOfOrder), phantom \(phantoms), leftover pending \(leftovers), outbox left \(outboxLeft)"
        }
    }

    @Test(arguments: [(0xC0FFEE as UInt64, Store.memory), (0xBADC0DE, .memory), (0x5A17E, .sqlite)])
    func thousandMessagesEachWayLoseNothing(seed: UInt64, storeKind: Store) async throws {
        let (figures, _) = try await Self.run(seed: seed, storeKind: storeKind)
        #expect(figures.lost == 0, "no message is missing on either side")
        #expect(figures.duplicated == 0, "nothing is duplicated on either side")
        #expect(figures.outOfOrder == 0, "every conversation keeps the server's order")
        #expect(figures.phantoms == 0 && figures.leftovers == 0, "every stored row is one the server has, none left pending")
        #expect(figures.outboxLeft == 0)
        for kind: EmulatorFault.Kind in [.disconnect, .dropEvents, .duplicateEvents, .reorderEvents, .delayEvents, .failRequest] {
            #expect(figures.applied[kind] > 0, "the client met \(kind.rawValue) faults, not only the server armed them")
        }
        #expect(figures.repliesLost > 0, "replies were lost after the server applied the request")
        #expect(figures.applied.total > 100, "the chaos took effect")
    }

    /// What the engine did in a run, in the order it did it: every request the server handled
    /// (with its answer), every event the session published, and every row the store holds at
    /// the end (conversations, messages with their ids, times and states in the store's order,
    /// sequences, the outbox).
    struct Replay: Equatable {
        var requests: [InMemoryServer.HandledRequest] = []
        var events: [ChatEvent] = []
        var conversations: [ConversationInfo] = []
        var messages: [Message] = []
        var sequences: [ConversationID: Int64] = [:]
        var outbox: [OutboxEntry] = []

        var sortedSequences: [String] {
            sequences.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key) \($0.value)" }
        }

        /// Where `other` first departs from this run, part by part; empty when it does not.
        func differences(from other: Replay) -> [String] {
            [
                ChaosTests.firstDifference("requests", requests, other.requests),
                ChaosTests.firstDifference("events", events, other.events),
                ChaosTests.firstDifference("conversations", conversations, other.conversations),
                ChaosTests.firstDifference("messages", messages, other.messages),
                ChaosTests.firstDifference("sequences", sortedSequences, other.sortedSequences),
                ChaosTests.firstDifference("outbox", outbox, other.outbox),
            ].compactMap { $0 }
        }
    }

    /// A seed fixes what the engine does, not only the figures it ends with. Two runs of one seed
    /// on virtual time, each on one thread (`withSerialExecution`: every job of the test, the
    /// session and its child tasks runs in the order it was enqueued), send the server the same
    /// requests in the same order with the same answers, publish the same events and leave the
    /// same rows in the store: ids, texts, times, delivery states, order.
    ///
    /// Scheduling is the one input a seed cannot fix. On the shared thread pool the app's sends
    /// race the link's updates, and two runs part within the first few requests (the server's
    /// message ids and every count after them differ), so this test pins the scheduling and
    /// compares everything else. It fails when a decision of the engine draws on anything but
    /// the seed, the clock and its inputs: backoff jitter from the system's random source moves
    /// virtual time, and with it every later timestamp and timer. The in-memory store only: a
    /// SQLite store answers from its own queue, in real time.
    @available(macOS 15.0, iOS 18.0, *)
    @Test func aSeedReplaysWhatTheEngineDid() async throws {
        let first = try await withSerialExecution { try await Self.run(seed: 0xFEED, storeKind: .memory, steps: 300) }
        let second = try await withSerialExecution { try await Self.run(seed: 0xFEED, storeKind: .memory, steps: 300) }
        let differences = first.replay.differences(from: second.replay)
        let replay = first.replay
        print(
            """
            chaos seed feed, twice on one thread and virtual time: \(replay.requests.count) requests, \(replay.events.count) events, \
            \(replay.conversations.count) conversations, \(replay.messages.count) stored messages, \(replay.sequences.count) sequences, \
            outbox \(replay.outbox.count): \(differences.isEmpty ? "identical" : "different")
              first:  \(first.figures)
              second: \(second.figures)
            """
        )
        for difference in differences { print("  \(difference)") }
        #expect(differences.isEmpty, "the same seed makes the engine do the same: \(differences.joined(separator: "; "))")
        #expect(first.figures == second.figures, "the same seed gives the same figures")
        #expect(first.figures.lost == 0 && first.figures.duplicated == 0 && first.figures.outOfOrder == 0)
        #expect(replay.requests.count > 300 && replay.messages.count == 600, "the run did its work")
    }

    /// Where two runs' records of one part first differ: the record's index and the first value
    /// in it that differs, by its path; `nil` when the same.
    static func firstDifference<T: Equatable>(_ part: String, _ first: [T], _ second: [T]) -> String? {
        guard first != second else { return nil }
        guard let index = zip(first.indices, second.indices).first(where: { first[$0.0] != second[$0.1] })?.0 else {
            return "\(part): the same \(min(first.count, second.count)), then \(first.count) against \(second.count)"
        }
        let (path, one, other) = firstDifferingValue(first[index], second[index]) ?? ("", "\(first[index])", "\(second[index])")
        return "\(part) #\(index) of \(first.count), \(path.isEmpty ? "the record" : path): \(one) against \(other)"
    }

    /// The first value, depth first, that differs between two values of one type, with its path.
    /// Times are compared and shown to the nanosecond (a `Date`'s description stops at seconds).
    static func firstDifferingValue(_ first: Any, _ second: Any, path: String = "") -> (path: String, first: String, second: String)? {
        if let one = first as? Date, let other = second as? Date {
            return one == other ? nil : (path, "\(one.timeIntervalSince1970)", "\(other.timeIntervalSince1970)")
        }
        let one = Mirror(reflecting: first)
        let other = Mirror(reflecting: second)
        if one.children.isEmpty || one.children.count != other.children.count {
            let (a, b) = (String(reflecting: first), String(reflecting: second))
            return a == b ? nil : (path, a, b)
        }
        for (index, (a, b)) in zip(one.children, other.children).enumerated() {
            if let found = firstDifferingValue(a.value, b.value, path: path + "." + (a.label ?? "\(index)")) { return found }
        }
        return nil
    }

    /// Runs `steps` messages each way through seeded faults on virtual time (an
    /// ``ImmediateClock``: every backoff and hold timeout passes at once), heals, waits for the
    /// client to converge, and measures it against the server's log.
    static func run(seed: UInt64, storeKind: Store, steps: Int = 1000) async throws -> (figures: Figures, replay: Replay) {
        // Timestamps move with virtual time from a fixed date, so a replay has the same ones.
        let virtual = ImmediateClock()
        let clock = SessionClock(virtual, wallClock: { Date(timeIntervalSince1970: 1_800_000_000 + virtual.now.offset.seconds) })
        let server = InMemoryServer(clock: clock)
        let agent = server.agent(Self.agentParticipant.id, name: "Agent")
        let conversations = (0..<4).map {
            server.createConversation(title: "chaos \($0)", participants: [Self.customer, Self.agentParticipant]).id
        }
        let store: any ChatStore = storeKind == .sqlite ? try SQLiteChatStore.inMemory() : InMemoryChatStore()
        let session = ChatSession(
            backend: InMemoryBackend(server: server, user: Self.customer.id),
            store: store,
            configuration: .fastForTests,
            clock: clock,
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

        // The proof, against the server's own log: every stored row (StoreAudit), then what the
        // bus announced.
        var audit = StoreAudit()
        var duplicated = 0
        var outOfOrder = 0
        for id in conversations {
            let stored = try await store.fetchMessages(in: id, before: nil, limit: .max, scope: session.scope)
            audit.add(StoreAudit.compare(server: server.log(of: id, customer: Self.customer.id), stored: stored))
            // Announcements: each agent message added once, in sequence order.
            let announced = events.filter { $0.conversationID == id }.compactMap(\.addedMessage).filter { $0.serverID != nil }
            duplicated += announced.count - Set(announced.compactMap(\.serverID)).count
            let sequences = announced.compactMap(\.sequence)
            outOfOrder += zip(sequences, sequences.dropFirst()).filter { $0 >= $1 }.count
        }
        let (lost, serverCount) = (audit.lost, audit.messages)
        duplicated += audit.duplicated
        outOfOrder += audit.outOfOrder
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
              faults that took effect: \(server.appliedFaults), lost replies \(server.repliesLost)
              server: \(counts.delivered) frames delivered, \(counts.dropped) events dropped, \(sends.duplicates) resends recognised by client id
              engine: \(statistics.connects) connects, \(statistics.retransmitRequests) retransmits (\(statistics.retransmittedEvents) events), \(statistics.duplicatesDropped) duplicates dropped, \(statistics.heldBack) held back, \(statistics.sendRetries) send retries
              result: lost \(lost + lostSends), duplicated \(duplicated + duplicatedSends), out of order \(outOfOrder), phantom \(audit.phantoms), leftover pending \(audit.leftovers), outbox left \(await session.pendingSends.count)
            """
        )
        let figures = Figures(
            messages: serverCount,
            faults: faults,
            applied: server.appliedFaults,
            repliesLost: server.repliesLost,
            lost: lost + lostSends,
            duplicated: duplicated + duplicatedSends,
            outOfOrder: outOfOrder,
            phantoms: audit.phantoms,
            leftovers: audit.leftovers,
            outboxLeft: await session.pendingSends.count
        )
        var replay = Replay(requests: server.handledRequests, events: events)
        replay.conversations = try await store.fetchConversations(scope: session.scope)
        for id in conversations {
            replay.messages += try await store.fetchMessages(in: id, before: nil, limit: .max, scope: session.scope)
        }
        replay.sequences = try await store.fetchSequences(scope: session.scope)
        replay.outbox = try await store.fetchOutbox(scope: session.scope)
        return (figures, replay)
    }
}

