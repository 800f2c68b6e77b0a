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
        let session = ChatSession(
            backend: InMemoryBackend(server: server, user: Self.customer.id),
            configuration: configuration,
            clock: SessionClock(TestClock()),
            random: SeededRandomNumberGenerator(seed: 1),
            logger: .quiet
        )
        var peaks = SessionStatistics()
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
            try await recorder.waitUntil("every agent message stored", timeout: .seconds(240)) {
                await session.statistics.eventsPublished >= total
            }
        }
        let final = await session.statistics
        let stored = server.messages(in: conversations[0]).count + server.messages(in: conversations[1]).count
        print(
            """
            long life: \(stored) messages on the server, \(final.eventsPublished) events published, \
            live tasks now \(final.liveTasks) (peak sampled \(peaks.peakLiveTasks), peak ever \(final.peakLiveTasks)), \
            inputs waiting peak \(final.peakBufferedInputs), requests queued peak \(peaks.requestsQueued), \
            timers peak \(peaks.timersPending)
            """
        )
        #expect(stored >= total)
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
