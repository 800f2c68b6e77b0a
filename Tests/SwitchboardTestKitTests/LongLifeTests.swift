import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

/// One link carries a long life of traffic — messages from the agent, sends from the customer,
/// typing and read markers — and the engine's own figures stay bounded: the child tasks alive,
/// the inputs waiting for the loop, the requests queued, the timers kept. Finished work is
/// forgotten as it ends.
@Suite(.timeLimit(.minutes(5)))
struct LongLifeTests {
    static let customer = Participant(id: "customer", role: .customer, displayName: "Customer")
    static let agentParticipant = Participant(id: "agent", role: .agent, displayName: "Agent")

    @Test func aHundredThousandMessagesThroughOneLinkKeepTheEngineBounded() async throws {
        let total = Int(ProcessInfo.processInfo.environment["LONG_LIFE_TOTAL"] ?? "") ?? 100_000
        let burst = 500
        let server = InMemoryServer()
        let agent = server.agent(Self.agentParticipant.id, name: "Agent")
        let conversations = (0..<2).map {
            server.createConversation(title: "long \($0)", participants: [Self.customer, Self.agentParticipant]).id
        }
        let configuration = SessionConfiguration.fastForTests
        let store = InMemoryChatStore()
        let session = ChatSession(
            backend: InMemoryBackend(server: server, user: Self.customer.id),
            store: store,
            configuration: configuration,
            clock: SessionClock(TestClock()),
            random: SeededRandomNumberGenerator(seed: 1),
            logger: .quiet
        )
        var peaks = SessionStatistics()
        var sends: [[String]] = [[], []]
        try await withRecording(session) { recorder in
            try await session.resume()
            for id in conversations {
                try await recorder.first("conversation \(id)") { $0.conversationID == id }
            }
            let chats = try await conversations.asyncMap { try await session.conversation($0) }
            var sent = 0
            var round = 0
            while sent < total {
                // A burst from the agent, and a few sends, typing and read markers from the customer.
                for index in 0..<burst {
                    try agent.send("agent \(sent + index)", in: conversations[index % 2])
                }
                let chat = chats[round % 2]
                _ = try await chat.send(text: "customer \(round)")
                sends[round % 2].append("customer \(round)")
                try await chat.userTyping(draft: nil)
                try await chat.markRead()
                sent += burst + 1
                round += 1
                let statistics = await session.statistics
                peaks.peakLiveTasks = max(peaks.peakLiveTasks, statistics.liveTasks)
                peaks.peakBufferedInputs = max(peaks.peakBufferedInputs, statistics.bufferedInputs)
                peaks.requestsQueued = max(peaks.requestsQueued, statistics.requestsQueued)
                peaks.timersPending = max(peaks.timersPending, statistics.timersPending)
            }
            // Events of every kind count towards the first, cheap condition; the store is read only
            // once that many have come, and again on each event after it.
            let onServer = round * (burst + 1)
            try await recorder.waitUntil("every message stored and confirmed", timeout: .seconds(240)) {
                guard await session.statistics.eventsPublished >= total else { return false }
                var confirmed = 0
                for id in conversations {
                    confirmed += await store.fetchMessages(in: id, before: nil, limit: .max, scope: session.scope)
                        .count { $0.serverID != nil && $0.deliveryState != .pending }
                }
                return confirmed >= onServer
            }
        }
        let final = await session.statistics
        // Every row the store holds, against the server's log: each message stored once.
        var audit = StoreAudit()
        for (index, id) in conversations.enumerated() {
            let stored = await store.fetchMessages(in: id, before: nil, limit: .max, scope: session.scope)
            audit.add(StoreAudit.compare(server: server.log(of: id, customer: Self.customer.id), stored: stored, sent: sends[index]))
        }
        print(
            """
            long life: \(audit); \(final.eventsPublished) events published, \
            live tasks now \(final.liveTasks) (peak sampled \(peaks.peakLiveTasks), peak ever \(final.peakLiveTasks)), \
            inputs waiting peak \(final.peakBufferedInputs), requests queued peak \(peaks.requestsQueued), \
            timers peak \(peaks.timersPending)
            """
        )
        #expect(audit.messages == (sends[0].count + sends[1].count) * (burst + 1), "every agent burst and send on the server")
        #expect(audit.isClean, "each message stored once, in order, none phantom or left pending")
        // The link, its reader, the timer sleeper and its two racers, and one request per lane
        // in flight up to the concurrency bound: nothing grows with the traffic.
        let taskBound = 5 + configuration.maxConcurrentRequests
        #expect(final.peakLiveTasks <= taskBound, "live child tasks stayed within \(taskBound)")
        #expect(final.liveTasks == 0, "nothing is left alive after the session ends")
        // Updates wait for the loop within the inbound window; app commands add one each.
        #expect(final.peakBufferedInputs <= configuration.inboundWindow + 16)
        #expect(peaks.timersPending <= 2 * conversations.count + 2)
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
