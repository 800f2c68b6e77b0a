import Foundation
import Switchboard
import SwitchboardSQLite
import SwitchboardTestKit
import Testing

/// The comparison the soak, load, chaos and long-life runs end with (`StoreAudit`) fails when a
/// store is wrong: rows planted in a real store after a clean exchange — a phantom, a leftover
/// pending copy, a message removed — are each reported, and so are a send the server took twice
/// and rows out of the server's order.
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

        // A row under an id the server never issued, a pending copy of a send the server has, and
        // an agent message taken out.
        let now = Date()
        try await store.saveMessages(
            [
                Message(serverID: "never-issued", conversationID: conversation, sender: "agent", text: "phantom", time: now, deliveryState: .sent),
                Message(clientID: "leftover-copy", conversationID: conversation, sender: "customer", text: "customer 1", time: now, deliveryState: .pending),
            ],
            scope: session.scope
        )
        let removed = try #require(log().first { $0.text == "agent 2" })
        try await store.removeMessage(serverID: removed.serverID, in: conversation, scope: session.scope)

        let audit = StoreAudit.compare(server: log(), stored: try await rows(), sent: sent)
        print("store audit (\(kind.rawValue)), planted: \(audit)")
        #expect(!audit.isClean)
        #expect(audit.phantoms == 1, "the phantom row")
        #expect(audit.leftovers == 1, "the pending copy beside its confirmed send")
        #expect(audit.lost == 1, "the message taken out")
        #expect(audit.duplicated == 0 && audit.outOfOrder == 0 && audit.unsent == 0)
        #expect(audit.examples.contains { $0.contains("never-issued") } && audit.examples.contains { $0.contains("agent 2") })
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

        let allowed = StoreAudit.compare(server: [log[0]], stored: [row("1", "a"), row(nil, "refused", .failed("too long"))], sent: ["a", "refused"])
        #expect(allowed.isClean && allowed.unsent == 1, "a failed row of a send the server never accepted is allowed: \(allowed)")
    }
}
