import Foundation
import Switchboard
@testable import SwitchboardSQLite
import Testing

/// A file store checkpoints its WAL on a connection of its own, not in the commits (which would
/// wait for the disk), and the WAL stays bounded.
@Suite(.timeLimit(.minutes(1)))
struct WALCheckpointTests {
    static let scope = StoreScope(backend: "test", account: "default", user: nil)

    /// Each transaction one message of 2 KB, so a commit adds at least a page: the WAL passes the
    /// threshold many times over.
    static func writeMessages(_ count: Int, to store: SQLiteChatStore) async throws {
        let text = String(repeating: "a message long enough to fill pages ", count: 56)
        for index in 0..<count {
            let message = Message(serverID: MessageID("s-\(index)"), conversationID: "conv", sequence: Int64(index), text: text, time: Date(timeIntervalSinceReferenceDate: Double(index)))
            try await store.apply([.saveMessages([message])], scope: scope)
        }
    }

    /// The frames the WAL file has room for: a 32-byte header, then frames of a 24-byte header
    /// and a 4,096-byte page.
    static func walFrames(_ path: String) throws -> Int {
        let size = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        return max(0, size - 32) / (24 + 4096)
    }

    @Test func checkpointsRunOffTheCommitsAndTheWALStaysBounded() async throws {
        try await withDatabaseFile { path in
            let store = try SQLiteChatStore(path: path)
            let checkpointer = try #require(store.checkpointer)
            let written = 6_000
            try await Self.writeMessages(written, to: store)
            checkpointer.settle()
            let statistics = checkpointer.statistics.withLock { $0 }
            let frames = try Self.walFrames(path)
            let stored = try await store.countMessages(in: "conv", scope: Self.scope)
            print(
                "WAL checkpoints: \(written) commits of a 2 KB message, \(statistics.checkpoints) checkpoints on the checkpointer's queue "
                    + "(\(statistics.checkpointsThatCopied) copied frames), \(statistics.checkpointsInCommits) ran in commits (past \(WALCheckpointer.limit) frames), "
                    + "WAL file \(frames) frames, \(stored) messages stored"
            )
            // SQLite's automatic checkpoint (in the commits) would have left the counters at 0.
            #expect(statistics.checkpointsThatCopied >= 1)
            // Without any checkpoint the WAL would hold every commit's frames: each of these
            // commits writes several (the message's page and its indexes'), well over the bound.
            #expect(frames <= Int(WALCheckpointer.limit) + 200)
            #expect(stored == written)
        }
    }

    /// A store on a database the app opened keeps the database's own checkpoints.
    @Test func aDatabaseTheAppOpenedKeepsItsOwnCheckpoints() throws {
        let store = try SQLiteChatStore.inMemory()
        #expect(store.checkpointer == nil)
    }
}
