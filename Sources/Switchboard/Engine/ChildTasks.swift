/// Child tasks whose results nobody reads: what `withDiscardingTaskGroup` gives from macOS 14 /
/// iOS 17, on the older systems the package supports (`Docs/Platforms.md`).
///
/// A plain task group keeps every finished child until someone awaits it, so a scope that lives
/// as long as a session (a child per request, per timer) would grow without end. Each child here
/// counts itself finished as it returns, and ``addTask(_:)`` first awaits that many: the group
/// holds only the children still running, and the wait is never for one that has work left.
struct ChildTasks {
    private var group: TaskGroup<Void>
    private let finished = Locked(0)
    private var reaped = 0
    private var started = 0

    /// Runs `body` with a scope for child tasks; returns when it and every child have ended.
    static func withScope(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (inout ChildTasks) async -> Void
    ) async {
        await withTaskGroup(of: Void.self, isolation: isolation) { group in
            var tasks = ChildTasks(group: group)
            await body(&tasks)
        }
    }

    private init(group: TaskGroup<Void>) { self.group = group }

    /// Starts `operation` as a child task, after reaping the children that have finished.
    mutating func addTask(
        isolation: isolated (any Actor)? = #isolation,
        _ operation: @escaping @Sendable () async -> Void
    ) async {
        let done = finished.withLock { $0 }
        while reaped < done {
            await group.next()
            reaped += 1
        }
        let finished = self.finished
        started += 1
        group.addTask {
            await operation()
            finished.withLock { $0 += 1 }
        }
    }

    /// Cancels every child still running.
    func cancelAll() { group.cancelAll() }

    /// Children the group holds: started and not yet reaped.
    var held: Int { started - reaped }

    /// Children that have returned, reaped or not.
    var finishedCount: Int { finished.withLock { $0 } }
}
