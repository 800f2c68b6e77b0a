import Foundation
public import Logging
import PostgresNIO
public import Switchboard

/// The events `PostgresEventBridge` wrote — every session of a fleet — read in order from a
/// position: what a reader outside the processes (the gateway's event stream for other programs)
/// resumes from after a disconnect.
///
/// A position is the writing transaction and the row's id. Ids alone are not a safe order: a
/// transaction may take a smaller id and commit after a reader has passed it. So a read returns
/// only rows whose transaction is older than every transaction still running (the current
/// snapshot's `xmin`), ordered by transaction, then id: no row can later appear before a position
/// a reader has passed. A transaction that stays open anywhere in the database holds the log back
/// until it ends. Per session the order is the order its bridge published the events (each bridge
/// writes its batches one after another).
///
/// Rows live as long as the bridge's ``PostgresEventBridge/Configuration/retention``; a reader
/// that was away longer learns so from ``keepsEverything(after:)`` and re-reads state from the
/// store.
public struct PostgresEventLog: Sendable {
    /// Where a reader is: after the event at this transaction and id. Written `"tx-id"`.
    public struct Position: Sendable, Hashable, Comparable, LosslessStringConvertible {
        public var transaction: UInt64
        public var id: Int64

        public init(transaction: UInt64, id: Int64) {
            self.transaction = transaction
            self.id = id
        }

        /// `"tx-id"` as ``description`` writes it; `nil` for anything else.
        public init?(_ description: String) {
            let parts = description.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, let transaction = UInt64(parts[0]), let id = Int64(parts[1]), id >= 0 else { return nil }
            self.init(transaction: transaction, id: id)
        }

        public var description: String { "\(transaction)-\(id)" }

        public static func < (lhs: Position, rhs: Position) -> Bool {
            (lhs.transaction, lhs.id) < (rhs.transaction, rhs.id)
        }
    }

    /// One event of the log and where it is.
    public struct Entry: Sendable, Hashable {
        public var position: Position
        public var event: ChatEvent
    }

    /// What one read found: its events, and where the next read goes on from — past the last
    /// row read (which may be one that was skipped), or past everything stored so far when the
    /// page is not full.
    public struct Page: Sendable, Hashable {
        public var entries: [Entry]
        public var end: Position
        /// Whether the read stopped at its limit: there may be more at once.
        public var isFull: Bool
        /// Whether every event after the read's position was still there when it read
        /// (``keepsEverything(after:)``, in the same statement).
        public var keptEverything: Bool
    }

    let store: PostgresChatStore
    let logger: Logger

    /// The log in `store`'s schema (the bridges' `event` table).
    public init(store: PostgresChatStore, logger: Logger = Logger(label: "switchboard.event-log")) {
        self.store = store
        self.logger = logger
    }

    /// The position of "now": a read after it returns what is stored from here on (and possibly
    /// some events that committed just before, never fewer).
    public func now() async throws -> Position {
        try await store.migrate()
        do {
            let rows = try await store.client.query("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", logger: logger)
            for try await text in rows.decode(String.self) {
                guard let xmin = UInt64(text) else { break }
                // Everything from the oldest running transaction on is still to come.
                return Position(transaction: xmin > 0 ? xmin - 1 : 0, id: .max)
            }
        } catch {
            throw PostgresChatStore.classify(error, what: "reading the event log's position")
        }
        throw SwitchboardError(.storageFailure, "the database gave no snapshot position")
    }

    /// Whether every event after `position` is still in the log: nothing after it was pruned.
    public func keepsEverything(after position: Position) async throws -> Bool {
        try await store.migrate()
        do {
            let rows = try await store.client.query(
                """
                SELECT (tx, id) <= (\(String(position.transaction))::xid8, \(position.id)) FROM \(unescaped: store.table("event_horizon"))
                """,
                logger: logger
            )
            for try await kept in rows.decode(Bool.self) { return kept }
            return true
        } catch {
            throw PostgresChatStore.classify(error, what: "reading the event log")
        }
    }

    /// Up to `limit` events after `position`, oldest first: of one session (its key, the events'
    /// `origin.session`) and one conversation when given.
    ///
    /// A page that is not full ends past every event stored so far — those of other sessions
    /// too — so a reader of a quiet session moves on with the log. An event that no longer
    /// decodes (written by a newer library) is skipped, and logged.
    public func read(after position: Position, session: String? = nil, conversation: ConversationID? = nil, limit: Int = 500) async throws -> Page {
        try await store.migrate()
        let limit = max(1, limit)
        var entries: [Entry] = []
        var rowsRead = 0
        var end = position
        var xmin: UInt64?
        var kept = true
        do {
            // One statement: the rows and the snapshot they were read below.
            let rows = try await store.client.query(
                """
                SELECT s.xmin::text, s.kept, e.tx::text, e.id, e.payload
                FROM (
                    SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin,
                        (SELECT (h.tx, h.id) <= (\(String(position.transaction))::xid8, \(position.id)) FROM \(unescaped: store.table("event_horizon")) h) AS kept
                ) s
                LEFT JOIN LATERAL (
                    SELECT tx, id, payload FROM \(unescaped: store.table("event"))
                    WHERE (tx, id) > (\(String(position.transaction))::xid8, \(position.id))
                      AND tx < s.xmin
                      AND (\(session ?? "")::text = '' OR session = \(session ?? ""))
                      AND (\(conversation?.rawValue ?? "")::text = '' OR conversation = \(conversation?.rawValue ?? ""))
                    ORDER BY tx, id LIMIT \(Int64(limit))) e ON true
                ORDER BY e.tx, e.id
                """,
                logger: logger
            )
            let decoder = JSONDecoder()
            for try await (snapshot, keptAll, transaction, id, payload) in rows.decode((String, Bool?, String?, Int64?, Data?).self) {
                xmin = UInt64(snapshot)
                kept = keptAll ?? true
                guard let transaction = transaction.flatMap(UInt64.init), let id, let payload else { continue }
                rowsRead += 1
                end = Position(transaction: transaction, id: id)
                do {
                    entries.append(Entry(position: end, event: try decoder.decode(ChatEvent.self, from: payload)))
                } catch {
                    logger.warning("an event of the log does not decode; skipped", metadata: ["position": "\(end)"])
                }
            }
        } catch {
            throw PostgresChatStore.classify(error, what: "reading the event log")
        }
        // Not full: every matching row below the snapshot's xmin was read.
        if rowsRead < limit, let xmin, xmin > 0 {
            end = max(end, Position(transaction: xmin - 1, id: .max))
        }
        return Page(entries: entries, end: end, isFull: rowsRead == limit, keptEverything: kept)
    }
}
