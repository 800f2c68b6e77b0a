import Foundation
import GRDB
import GRDBSQLite
import Switchboard

/// Checkpoints a file store's WAL off the writer's path.
///
/// SQLite's automatic checkpoint runs inside the commit that takes the WAL past 1,000 pages, and a
/// checkpoint syncs the WAL and the database file: that commit (a send's, an arriving message's)
/// waited milliseconds for the disk: the 4–10 ms p99 of the SQLite latency rows
/// (`Docs/Benchmarks.md`). This checkpointer's WAL hook, installed on the store's connections,
/// replaces the automatic checkpoint (`sqlite3_wal_hook` does): a commit that leaves the WAL at
/// ``threshold`` pages or more asks for a passive checkpoint, which runs on a connection and a
/// serial queue of its own. A passive checkpoint does not wait for readers or the writer, and they
/// do not wait for it; at most one is queued at a time, and one that could not copy everything
/// is asked for again by the next commit. The WAL starts over at the first commit after a
/// checkpoint copied all of it: between a session's exchanges, which leave the queue time. Writes
/// that never pause leave it no such moment, so past ``limit`` a commit checkpoints itself, as
/// SQLite would have at the threshold (`WALCheckpointTests` prints how many). A commit only
/// writes the WAL (`synchronous = NORMAL`; the first of each WAL cycle also syncs its header, as
/// SQLite does): it survives the process being killed, not a power cut before the next checkpoint.
final class WALCheckpointer: Sendable {
    /// The WAL size, in pages, from which a commit asks for a checkpoint: SQLite's own default.
    static let threshold: Int32 = 1000
    /// The WAL size from which a commit checkpoints before it returns, as SQLite's automatic
    /// checkpoint would: under writes that never pause, the queued checkpoints may never catch
    /// up with the end of the WAL, and only a checkpoint that does lets the next commit start
    /// the file over. This normally bounds the WAL at about 32 MB (a long read, or another process
    /// on an old snapshot, keeps a checkpoint from finishing and lets it grow).
    static let limit: Int32 = 8 * threshold

    /// How long a connection of a file store waits for another's lock before it fails.
    static let busyTimeout: TimeInterval = 5

    /// The connection checkpoints run on, opened once the store's pool has the file in WAL mode.
    private let connection = Locked<DatabaseQueue?>(nil)
    /// Whether a checkpoint is queued or running.
    private let queued = Locked(false)
    /// How many checkpoints ran, and the WAL frames the last one found: for tests.
    let statistics = Locked(Statistics())

    struct Statistics: Sendable {
        /// Checkpoints run on the checkpointer's queue.
        var checkpoints = 0
        /// How many of them left frames copied into the database.
        var checkpointsThatCopied = 0
        /// Checkpoints a commit ran itself, past ``WALCheckpointer/limit``.
        var checkpointsInCommits = 0
    }

    init() {}

    /// Opens the checkpoints' connection to the store's file.
    func open(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(Self.busyTimeout)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        connection.withLock { $0 = queue }
    }

    /// Installs the hook on one of the store's connections (`Configuration.prepareDatabase`: the
    /// pool's configuration holds this checkpointer as long as any of its connections lives).
    func install(on db: Database) throws {
        // A WAL that grew to ``limit`` goes back to the usual size when it starts over.
        try db.execute(sql: "PRAGMA journal_size_limit = \(Int(Self.threshold) * 4096)")
        sqlite3_wal_hook(
            db.sqliteConnection,
            { context, connection, name, pages in
                let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context!).takeUnretainedValue()
                guard pages < WALCheckpointer.limit else {
                    // What `sqlite3_wal_autocheckpoint`'s own hook does; a failure leaves the
                    // pages in the WAL, as durable as before.
                    // It is busy while the queued one runs: the next commit tries again.
                    if sqlite3_wal_checkpoint_v2(connection, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil) == SQLITE_OK {
                        checkpointer.statistics.withLock { $0.checkpointsInCommits += 1 }
                    }
                    return SQLITE_OK
                }
                checkpointer.committed(walPages: pages)
                return SQLITE_OK
            },
            Unmanaged.passUnretained(self).toOpaque()
        )
    }

    /// Returns once the checkpoints queued so far have run: for tests.
    func settle() {
        connection.withLock { $0 }?.writeWithoutTransaction { _ in }
    }

    /// A commit left the WAL at `walPages` pages: on the writer's queue, so it only queues work.
    private func committed(walPages: Int32) {
        guard walPages >= Self.threshold, let connection = connection.withLock({ $0 }) else { return }
        let first = queued.withLock { queued in
            defer { queued = true }
            return !queued
        }
        guard first else { return }
        connection.asyncWriteWithoutTransaction { [queued, statistics] db in
            // A checkpoint that fails (the file went away, the disk is full) leaves the pages in
            // the WAL, where they are as durable as before; the next commit asks again.
            let frames = try? db.checkpoint(.passive)
            statistics.withLock { statistics in
                statistics.checkpoints += 1
                if (frames?.checkpointedFrameCount ?? 0) > 0 { statistics.checkpointsThatCopied += 1 }
            }
            queued.withLock { $0 = false }
        }
    }
}
