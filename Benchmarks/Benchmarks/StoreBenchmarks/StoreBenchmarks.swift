import Benchmark
import Foundation
import Switchboard
import SwitchboardSQLite

/// The stores on the engine's paths: a batch of incoming messages, a history page, an outbox
/// round trip. SQLite in memory measures the SQL and encoding without the disk (a file store adds
/// the WAL fsync, which depends on the machine). Malloc counts are the stable metric.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(2))
    let scope = StoreScope(backend: "bench", account: "alice")
    let conversation = ConversationID("c1")

    func messages(_ range: Range<Int>) -> [Message] {
        range.map {
            Message(
                serverID: MessageID("s\($0)"), clientID: nil, conversationID: conversation, sequence: Int64($0), senderRole: .agent,
                text: "message \($0) with a sentence of ordinary length", time: Date(timeIntervalSince1970: 1_700_000_000 + Double($0))
            )
        }
    }

    let stores: [(String, @Sendable () throws -> any ChatStore)] = [
        ("in memory", { InMemoryChatStore() }),
        ("SQLite", { try SQLiteChatStore.inMemory() }),
    ]

    for (name, make) in stores {
        Benchmark("Store save 100 messages (\(name))") { benchmark async throws in
            let store = try make()
            var next = 0
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                try await store.saveMessages(messages(next..<(next + 100)), scope: scope)
                next += 100
            }
            benchmark.stopMeasurement()
        }

        Benchmark("Store page of 50 from 10,000 messages (\(name))") { benchmark async throws in
            let store = try make()
            try await store.saveMessages(messages(0..<10_000), scope: scope)
            let middle = messages(5_000..<5_001)[0].orderKey
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                blackHole(try await store.fetchMessages(in: conversation, before: middle, limit: 50, scope: scope))
            }
            benchmark.stopMeasurement()
        }

        Benchmark("Store outbox save and remove (\(name))") { benchmark async throws in
            let store = try make()
            var index = 0
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                let entry = OutboxEntry(
                    message: OutgoingMessage(clientID: ClientMessageID("k\(index)"), conversationID: conversation, content: MessageDraft(text: "hello")),
                    createdAt: Date(timeIntervalSince1970: 1_700_000_000)
                )
                try await store.saveOutboxEntry(entry, scope: scope)
                try await store.removeOutboxEntry(entry.clientID, scope: scope)
                index += 1
            }
            benchmark.stopMeasurement()
        }
    }
}
