import Dispatch

/// A task executor that runs every job it is given on one thread, one at a time, in the order the
/// jobs were enqueued.
///
/// As the task executor preference of a test's task (``withSerialExecution(isolation:_:)``) it takes the
/// test, the sessions the test runs (actors without an executor of their own run on their
/// caller's preferred executor), their child tasks and their task groups. Their jobs then
/// interleave the same way on every run: with the same inputs, a seeded random source and a
/// virtual clock (``ImmediateClock``, ``TestClock``), two runs do the same thing in the same
/// order, request for request, so a test can compare what the engine did.
///
/// Work outside the task tree still runs when it runs: unstructured tasks, a SQLite store's own
/// queue, sockets, and real clocks hand their results back whenever they finish.
///
/// The queue is serial and FIFO; it holds the jobs, nothing else.
@available(macOS 15.0, iOS 18.0, *)
public final class SerialTaskExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "switchboard.serial-task-executor")

    public init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// Runs `body` with a new ``SerialTaskExecutor`` as the task executor preference of its task and
/// every child task: everything `body` starts in structured concurrency runs on one thread in
/// the order it was enqueued, so a run on a virtual clock repeats exactly.
///
/// - Throws: what `body` throws.
@available(macOS 15.0, iOS 18.0, *)
public func withSerialExecution<T, Failure: Error>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws(Failure) -> T
) async throws(Failure) -> T {
    let executor = SerialTaskExecutor()
    return try await withTaskExecutorPreference(executor, isolation: isolation, operation: body)
}
