@testable import Switchboard
import Testing

/// The lock and the child-task scope that stand in for `Mutex` and `withDiscardingTaskGroup` on
/// macOS 13 / iOS 16 (`Docs/Platforms.md`).
@Suite(.timeLimit(.minutes(1)))
struct PlatformPrimitivesTests {
    @Test func lockedSerializesConcurrentWriters() async {
        let counter = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<10_000 { counter.withLock { $0 += 1 } } }
            }
        }
        #expect(counter.withLock { $0 } == 80_000)
    }

    @Test func lockedRethrowsTheBodysTypedError() {
        struct Refused: Error, Equatable {}
        let value = Locked([1, 2])
        #expect(throws: Refused.self) {
            try value.withLock { (values: inout [Int]) throws(Refused) in
                values.append(3)
                throw Refused()
            }
        }
        #expect(value.withLock { $0 } == [1, 2, 3], "what the body changed before throwing stays")
    }

    /// A scope as long as a session starts a child per request: finished children must not pile
    /// up in the group. 50 children that each return at once; once all have returned, the next
    /// start reaps every one of them. (Each start waits for its child to be scheduled: with every
    /// suite at once, 1,000 took 48–59 s of the 60 s limit, and 200 took 21 s, 43 s with eight
    /// busy loops beside the run.)
    @Test func finishedChildrenAreReapedAsNewOnesStart() async {
        let (returned, signal) = AsyncStream.makeStream(of: Int.self)
        let held = await ChildTasksProbe.run(children: 50, signal: signal, returned: returned)
        print("child tasks: 50 started, \(held.peak) held at most, \(held.last) held after the last start")
        #expect(held.last == 1, "only the child just started is held")
    }

    @Test func cancelAllReachesRunningChildren() async {
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        await ChildTasks.withScope { tasks in
            for _ in 0..<3 {
                await tasks.addTask {
                    signal.yield()
                    while !Task.isCancelled { await Task.yield() }
                }
            }
            var iterator = started.makeAsyncIterator()
            for _ in 0..<3 { await iterator.next() }
            tasks.cancelAll()
        }
        // Reaching here means the scope waited for all three and they saw the cancellation.
    }
}

private enum ChildTasksProbe {
    static func run(
        children: Int, signal: AsyncStream<Int>.Continuation, returned: AsyncStream<Int>
    ) async -> (peak: Int, last: Int) {
        var peak = 0
        var last = 0
        await ChildTasks.withScope { tasks in
            var iterator = returned.makeAsyncIterator()
            for index in 0..<children {
                await tasks.addTask { signal.yield(index) }
                peak = max(peak, tasks.held)
                _ = await iterator.next()
            }
            // Every child has run its body; wait until each has also counted itself finished.
            while tasks.finishedCount < children { await Task.yield() }
            await tasks.addTask {}
            last = tasks.held
        }
        return (peak, last)
    }
}
