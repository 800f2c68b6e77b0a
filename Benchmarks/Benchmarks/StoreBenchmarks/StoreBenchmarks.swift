import Benchmark
import Foundation
import Switchboard
import SwitchboardSQLite
import Synchronization

/// The stores on the engine's paths: a batch of incoming messages, a history page, an outbox
/// round trip. SQLite in memory measures the SQL and encoding without the disk (a file store adds
/// the WAL fsync, which depends on the machine). Malloc counts are the stable metric.
let benchmarks: @Sendable () -> Void = {
    // Allocations are repeatable on a shared machine, wall clock is not: only they are gated
    // (Thresholds/, `swift package benchmark thresholds check`).
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        maxDuration: .seconds(2),
        thresholds: mallocThresholds
    )
    let scope = StoreScope(backend: "bench", account: "alice")
    let conversation = ConversationID("c1")

    @Sendable func messages(_ range: Range<Int>) -> [Message] {
        range.map {
            Message(
                serverID: MessageID("s\($0)"), clientID: nil, conversationID: conversation, sequence: Int64($0), senderRole: .agent,
                text: "message \($0) with a sentence of ordinary length", time: Date(timeIntervalSince1970: 1_700_000_000 + Double($0))
            )
        }
    }

    /// Stores `count` messages in chunks, as a long history arrives.
    @Sendable func fill(_ store: any ChatStore, _ count: Int) async throws {
        for start in stride(from: 0, to: count, by: 5_000) {
            try await store.apply([.saveMessages(messages(start..<min(count, start + 5_000)))], scope: scope)
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

        // Scale: the same three steps on a conversation of 1,000 and of 100,000 stored messages;
        // each should cost the same (indexed reads, appends at the end). The store is filled once
        // per benchmark, in its setup, outside the measurement.
        for size in [1_000, 100_000] {
            let label = size == 1_000 ? "1,000" : "100,000"
            let configuration = Benchmark.Configuration(
                metrics: [.wallClock, .throughput, .mallocCountTotal],
                maxDuration: .seconds(3),
                maxIterations: 2_000,
                thresholds: mallocThresholds
            )
            let filled = FilledStore()
            let setup: @Sendable () async throws -> Void = {
                let store = try make()
                try await fill(store, size)
                filled.store = store
            }

            Benchmark("Store open: newest 50 of \(label) (\(name))", configuration: configuration) { benchmark async throws in
                let store = try filled.get()
                for _ in benchmark.scaledIterations {
                    blackHole(try await store.fetchMessages(in: conversation, before: nil, limit: 50, scope: scope))
                }
            } setup: {
                try await setup()
            }

            Benchmark("Store history page of 50 in the middle of \(label) (\(name))", configuration: configuration) { benchmark async throws in
                let store = try filled.get()
                let middle = messages((size / 2)..<(size / 2 + 1))[0].orderKey
                for _ in benchmark.scaledIterations {
                    blackHole(try await store.fetchMessages(in: conversation, before: middle, limit: 50, scope: scope))
                    blackHole(try await store.fetchOldestConfirmedMessage(in: conversation, scope: scope))
                }
            } setup: {
                try await setup()
            }

            Benchmark("Store inbound batch of 50 onto \(label) (\(name))", configuration: configuration) { benchmark async throws in
                let store = try filled.get()
                let next = filled.nextSequence(after: size)
                let batch = messages(next..<(next + 50))
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    try await store.apply([.saveMessages(batch), .saveSequence(Int64(next + 50), for: conversation)], scope: scope)
                }
                benchmark.stopMeasurement()
            } setup: {
                try await setup()
            }
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

/// A store filled in a benchmark's setup and used by its samples. The lock guards the store and
/// the next sequence.
final class FilledStore: Sendable {
    private let state = Mutex<(store: (any ChatStore)?, next: Int?)>((nil, nil))

    var store: (any ChatStore)? {
        get { state.withLock { $0.store } }
        set { state.withLock { $0 = (newValue, nil) } }
    }

    func get() throws -> any ChatStore {
        guard let store else { throw SwitchboardError(.storageFailure, "the benchmark's setup did not run") }
        return store
    }

    /// Where the next appended batch starts: after the filled messages and the batches before it.
    func nextSequence(after size: Int) -> Int {
        state.withLock { state in
            let next = state.next ?? size
            state.next = next + 50
            return next
        }
    }
}

/// The gate on allocations, as in CoreBenchmarks (each benchmark target is its own module).
var mallocThresholds: [BenchmarkMetric: BenchmarkThresholds] {
    [.mallocCountTotal: BenchmarkThresholds(relative: [.p50: 5, .p90: 5], absolute: [.p50: 2, .p90: 2])]
}
