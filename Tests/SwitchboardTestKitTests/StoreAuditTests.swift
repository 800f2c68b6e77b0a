import Foundation
import Switchboard
import SwitchboardSQLite
import SwitchboardTestKit
import Testing

/// The comparison the soak, load, chaos, long-life, kill -9 and failover runs end with
/// (`StoreAudit`) fails when a store is wrong: rows planted in a real store after a clean exchange —
/// a phantom, a leftover pending copy, a message removed — are each reported, and so are a send
/// the server took twice, a row claiming to be sent that the server lacks, and rows out of the
/// server's order.
@Suite(.timeLimit(.minutes(1)))
struct StoreAuditTests {
    static let customer = Participant(id: "customer", role: .customer, displayName: "Customer")
    static let agentParticipant = Participant(id: "agent", role: .agent, displayName: "Agent")

    enum Store: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case memory, sqlite
        var testDescription: String { rawValue }
        func make() throws -> any ChatStore { self == .sqlite ? try SQLiteChatStore.inMemory() : InMemoryChatStore() }
    }

    @Test(arguments: Store.allCases)
    func plantedRowsAreEachReported(_ kind: Store) async throws {
        let server = InMemoryServer()
        let agent = server.agent(Self.agentParticipant.id, name: "Agent")
        let conversation = server.createConversation(title: "audit", participants: [Self.customer, Self.agentParticipant]).id
        let store = try kind.make()
        let session = ChatSession(
            backend: InMemoryBackend(server: server, user: Self.customer.id), store: store, configuration: .fastForTests,
            clock: SessionClock(ImmediateClock()), random: SeededRandomNumberGenerator(seed: 7), logger: .quiet
        )
        let sent = (0..<3).map { "customer \($0)" }
        let rows: @Sendable () async throws -> [Message] = {
            try await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: session.scope)
        }
        let log: @Sendable () -> [ServerMessage] = { server.log(of: conversation, customer: Self.customer.id) }

        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.first("the conversation") { $0.conversationID == conversation }
            let chat = try await session.conversation(conversation)
            for (step, text) in sent.enumerated() {
                _ = try await chat.send(text: text)
                try agent.send("agent \(step)", in: conversation)
            }
            try await recorder.waitUntil("the store matches the server's log") {
                let audit = StoreAudit.compare(server: log(), stored: try await rows(), sent: sent)
                return audit.messages == 6 && audit.isClean && audit.unsent == 0
            }
        }
        let clean = StoreAudit.compare(server: log(), stored: try await rows(), sent: sent)
        print("store audit (\(kind.rawValue)), before planting: \(clean)")

        // A row under an id the server never issued; a send the server has, left as its pending
        // copy (a store keeps one row per client id, so the copy takes the confirmed row's place,
        // as when a confirmation is never written); an agent message taken out.
        let now = Date()
        let confirmed = try #require(log().first { $0.text == "customer 1" })
        let removed = try #require(log().first { $0.text == "agent 2" })
        for id in [confirmed.serverID, removed.serverID] {
            try await store.removeMessage(serverID: id, in: conversation, scope: session.scope)
        }
        try await store.saveMessages(
            [
                Message(serverID: "never-issued", conversationID: conversation, sender: "agent", text: "phantom", time: now, deliveryState: .sent),
                Message(clientID: confirmed.clientID, conversationID: conversation, sender: "customer", text: "customer 1", time: now, deliveryState: .pending),
            ],
            scope: session.scope
        )

        let audit = StoreAudit.compare(server: log(), stored: try await rows(), sent: sent)
        print("store audit (\(kind.rawValue)), planted: \(audit)")
        #expect(!audit.isClean)
        #expect(audit.phantoms == 1, "the phantom row")
        #expect(audit.leftovers == 1, "the pending copy of a send the server has")
        #expect(audit.lost == 2, "the message taken out, and the send no confirmed row holds")
        #expect(audit.duplicated == 0 && audit.outOfOrder == 0 && audit.unsent == 0)
        #expect(audit.examples.contains { $0.contains("never-issued") } && audit.examples.contains { $0.contains("agent 2") })
        #expect(audit.examples.contains { $0.hasPrefix("leftover \"customer 1\"") })
    }

    /// A send the server took twice, one it never got with nothing left to show for it, rows out
    /// of order, and a failed row of a send the server never accepted (allowed, and reported).
    @Test func sendsOrderAndUnsentRows() {
        let time = Date(timeIntervalSince1970: 0)
        func server(_ id: String, _ text: String, customer: Bool) -> ServerMessage {
            ServerMessage(serverID: MessageID(id), clientID: nil, text: text, fromCustomer: customer, sequence: nil)
        }
        func row(_ id: String?, _ text: String, _ state: Message.DeliveryState = .sent) -> Message {
            Message(serverID: id.map(MessageID.init), conversationID: "c", text: text, time: time, deliveryState: state)
        }
        let log = [server("1", "a", customer: true), server("2", "a", customer: true), server("3", "x", customer: false), server("4", "y", customer: false)]
        let stored = [row("1", "a"), row("2", "a"), row("4", "y"), row("3", "x"), row(nil, "refused", .failed("too long"))]
        let audit = StoreAudit.compare(server: log, stored: stored, sent: ["a", "b", "refused"])
        print("store audit, sends and order: \(audit)")
        #expect(audit.duplicated == 1, "the server took \"a\" twice")
        #expect(audit.lost == 1, "\"b\" never reached the server and no row holds it")
        #expect(audit.outOfOrder == 2, "x and y swapped")
        #expect(audit.unsent == 1 && audit.leftovers == 0 && audit.phantoms == 0)

        // A row claiming to be sent that the server does not have, and a pending row under an id
        // the server never issued: phantoms, whatever their state.
        let claims = StoreAudit.compare(server: [log[2]], stored: [row("3", "x"), row(nil, "claimed"), row("nope", "pending", .pending)])
        #expect(claims.phantoms == 2 && claims.unsent == 0, "\(claims)")

        // One client id the server took twice is one send duplicated, with or without the texts sent.
        func customerSend(_ id: String, clientID: String, _ text: String) -> ServerMessage {
            ServerMessage(serverID: MessageID(id), clientID: ClientMessageID(clientID), text: text, fromCustomer: true, sequence: nil)
        }
        let twice = [customerSend("1", clientID: "C-1", "hi"), customerSend("2", clientID: "c-1", "hi")]
        let taken = StoreAudit.compare(server: twice, stored: [row("1", "hi"), row("2", "hi")])
        #expect(taken.duplicated == 1, "one client id (case aside) on two server messages: \(taken)")
        #expect(StoreAudit.compare(server: twice, stored: [row("1", "hi"), row("2", "hi")], sent: ["hi"]).duplicated == 1, "counted once")

        // A second send of the same text that never reached the server is unsent, not a leftover:
        // the server knows the first by its client id.
        var second = row(nil, "hi", .failed("refused"))
        second.clientID = "c-2"
        let repeated = StoreAudit.compare(server: [twice[0]], stored: [row("1", "hi"), second])
        #expect(repeated.unsent == 1 && repeated.leftovers == 0 && repeated.isClean, "\(repeated)")

        let allowed = StoreAudit.compare(server: [log[0]], stored: [row("1", "a"), row(nil, "refused", .failed("too long"))], sent: ["a", "refused"])
        #expect(allowed.isClean && allowed.unsent == 1, "a failed row of a send the server never accepted is allowed: \(allowed)")
    }
}
