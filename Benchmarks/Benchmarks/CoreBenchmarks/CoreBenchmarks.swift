import Benchmark
import Foundation
@_spi(Benchmarks) import Switchboard
import SwitchboardTestKit

/// Core hot paths. Wall-clock numbers are reported but not gated (2-core machine); malloc
/// counts are the stable metric.
let benchmarks: @Sendable () -> Void = {
    // Allocations are repeatable on a shared machine, wall clock is not: only they are gated
    // (Thresholds/, `swift package benchmark thresholds check`).
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        maxDuration: .seconds(2),
        thresholds: mallocThresholds
    )

    Benchmark("EventBus publish, 4 subscribers") { benchmark in
        let bus = EventBus()
        let streams = (0..<4).map { _ in bus.subscribe(buffering: .bounded(1 << 20)) }
        let event = ChatEvent(
            origin: .init(session: "s", backend: "b"),
            conversationID: "c",
            time: Date(timeIntervalSince1970: 0),
            kind: .typing("p", isTyping: true, draft: nil)
        )
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            bus.publish(event)
        }
        benchmark.stopMeasurement()
        for stream in streams { stream.finish() }
    }

    Benchmark("SequenceTracker in order") { benchmark in
        var tracker = SequenceTrackerStateMachine<Int>(delivered: 0, batchLimit: 100)
        var sequence: Int64 = 0
        for _ in benchmark.scaledIterations {
            sequence += 1
            blackHole(tracker.receive(sequence: sequence, event: 0))
        }
    }

    Benchmark("SequenceTracker 1,000-event gap filled by retransmit") { benchmark in
        for _ in benchmark.scaledIterations {
            var tracker = SequenceTrackerStateMachine<Int>(delivered: 0, batchLimit: 100)
            let plan = tracker.receive(sequence: 1001, event: 0)
            for range in plan.retransmit {
                for sequence in range { blackHole(tracker.receive(sequence: sequence, event: 0)) }
                blackHole(tracker.retransmitCompleted(range))
            }
        }
    }

    Benchmark("JSONValue parse and encode") { benchmark in
        let text = #"{"id":123,"kind":"visitor","text":"hello","ts":1700000000.123,"data":{"a":[1,2,3],"b":null}}"#
        let data = Data(text.utf8)
        for _ in benchmark.scaledIterations {
            blackHole(try JSONValue(parsing: data).jsonData())
        }
    }
}

/// The gate on allocations: 5% more than the recorded figure at the median and p90, or 2 more
/// (small counts), fails `swift package benchmark thresholds check`.
var mallocThresholds: [BenchmarkMetric: BenchmarkThresholds] {
    [.mallocCountTotal: BenchmarkThresholds(relative: [.p50: 5, .p90: 5], absolute: [.p50: 2, .p90: 2])]
}
