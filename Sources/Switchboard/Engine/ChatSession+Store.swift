import Foundation
import Tracing

/// The store as the loop uses it.
///
/// While a transaction is open (``inOneTransaction(_:)``: the updates that arrived together, a
/// send's outcome, a retransmit's events), writes are kept and stored as one `apply` when it ends,
/// and the events they announce wait for that: nothing is announced that a crash could take back.
/// The conversations and messages the kept writes touch, and those read meanwhile, are kept too
/// (``EventProjection/Rows``, the projection's own working set), so a read by key is answered from
/// them or goes to the store for a key no kept write touched. Any other read (a page, a list, the
/// oldest message) first stores what is kept (``flushed()``); so does a removal of many rows. With
/// no transaction open, every write goes straight to the store.
///
/// App reads outside the loop go to ``store`` itself, and see what is committed.
extension ChatSession {
    /// Runs `body` in one transaction: its writes are one `apply`; once that is stored, its events
    /// are published, the inputs it left for after the commit are handled (each in a transaction
    /// of its own), and its callers are answered. Inside an open transaction it simply runs `body`.
    func inOneTransaction(_ body: () async -> Void) async {
        guard openTransaction == nil else {
            await body()
            return
        }
        openTransaction = OpenTransaction()
        await body()
        let transaction = openTransaction!
        openTransaction = nil
        do {
            if let failure = transaction.failure { throw failure }
            if !transaction.writes.isEmpty {
                try await apply(transaction.writes)
                machine.statistics.storeTransactions += 1
            }
        } catch {
            // What the transaction would have announced was not stored (all of it, or the part a
            // read stored first): a problem instead, and the cursor it would have moved was not
            // stored either, so the next link fetches it again. Its callers hear the failure. The
            // problems it found are still problems.
            for event in transaction.events {
                guard case .error = event.kind else { continue }
                machine.statistics.eventsPublished += 1
                bus.publish(event)
            }
            let failure = SwitchboardError(.storageFailure, "could not store a batch of writes", underlying: error)
            await run(.commitFailed(failure))
            for answer in transaction.answers { answer.complete(failure) }
            return
        }
        machine.statistics.eventsPublished += transaction.events.count
        for event in transaction.events { bus.publish(event) }
        for input in transaction.afterCommit { await inOneTransaction { await run(input) } }
        for answer in transaction.answers { answer.complete(nil) }
    }

    /// Writes `writes` (kept while a transaction is open). `projected`: they come from
    /// ``EventProjection``, which has put them in the rows already.
    func write(_ writes: [StoreWrite], projected: Bool = false) async throws {
        guard !writes.isEmpty else { return }
        guard openTransaction != nil else {
            try await apply(writes)
            return
        }
        openTransaction!.writes += writes
        var removesMany = false
        for write in writes {
            if !projected { openTransaction!.rows.apply(write) }
            switch write {
            case .removeAllMessages, .removeConversation: removesMany = true
            default: break
            }
        }
        // A removal of rows nobody read: stored at once, so a read by key cannot find them.
        if removesMany { try await flush() }
    }

    /// Stores `writes` in one transaction. A write that queues a traced send, or ends one, is a
    /// child span of that send's; once stored, the send's trace learns what became of it.
    private func apply(_ writes: [StoreWrite]) async throws {
        let traces = sendTraces.touched(by: writes)
        let spans = traces.map { tracer.startAnySpan("switchboard.store.write", context: $0.span.context, ofKind: .internal) }
        do {
            // Under the (first) write span as the current context: a store that traces its
            // statements traces them as that span's children.
            if let span = spans.first {
                try await ServiceContext.withValue(span.context) { try await store.apply(writes) }
            } else {
                try await store.apply(writes)
            }
        } catch {
            for span in spans {
                span.recordFailure(SwitchboardError.classify(error))
                span.end()
            }
            throw error
        }
        for span in spans { span.end() }
        sendTraces.stored(writes)
    }

    /// The store, with what the open transaction kept stored first: for a read the rows cannot
    /// answer. The transaction stays open.
    func flushed() async throws -> ScopedChatStore {
        try await flush()
        return store
    }

    private func flush() async throws {
        guard let writes = openTransaction?.writes, !writes.isEmpty else { return }
        openTransaction!.writes = []
        do {
            try await apply(writes)
        } catch {
            // The rows show writes the store does not have: they are forgotten, and the
            // transaction announces nothing (see `inOneTransaction`).
            openTransaction!.rows = EventProjection.Rows()
            openTransaction!.failure = openTransaction!.failure ?? error
            throw error
        }
        machine.statistics.storeTransactions += 1
    }

    // MARK: Reads by key

    /// The rows of the open transaction (empty without one): what the projection works on.
    var transactionRows: EventProjection.Rows {
        get { openTransaction?.rows ?? EventProjection.Rows() }
        set { openTransaction?.rows = newValue }
    }

    /// The rows of the open transaction, taken out of it (it holds none until they are put
    /// back), so the taker is their only owner and changes them without a copy.
    func takeTransactionRows() -> EventProjection.Rows {
        guard openTransaction != nil else { return EventProjection.Rows() }
        defer { openTransaction!.rows = EventProjection.Rows() }
        return openTransaction!.rows
    }

    /// Reads the rows ``EventProjection`` asked for into `rows`: by key from the store (no kept
    /// write touched them, or the rows would know them), the newest messages after storing what
    /// is kept.
    func read(_ reads: EventProjection.Reads, into rows: inout EventProjection.Rows) async throws {
        guard !reads.isEmpty else { return }
        var found: [ConversationID: ConversationInfo] = [:]
        for id in reads.conversations { found[id] = try await store.fetchConversation(id) }
        var messages: [Message] = []
        for (conversation, keys) in reads.messages {
            messages += try await store.fetchMessages(serverIDs: Array(keys.serverIDs), clientIDs: Array(keys.clientIDs), in: conversation)
        }
        var newest: [ConversationID: [Message]] = [:]
        if !reads.newest.isEmpty {
            try await flush()
            for id in reads.newest {
                newest[id] = try await store.fetchMessages(in: id, before: nil, limit: EventProjection.readDerivationWindow)
            }
        }
        rows.add(reads, conversations: found, messages: messages, newest: newest)
    }

    /// A stored conversation, as the open transaction sees it.
    func readConversation(_ id: ConversationID) async throws -> ConversationInfo? {
        var reads = EventProjection.Reads()
        reads.conversations = [id]
        return try await readRows(reads).conversations[id] ?? nil
    }

    /// The stored messages with these ids, as the open transaction sees them.
    func readMessages(serverIDs: [MessageID], clientIDs: [ClientMessageID], in conversation: ConversationID) async throws -> [Message] {
        var reads = EventProjection.Reads()
        reads.messages[conversation] = EventProjection.Reads.Keys(serverIDs: Set(serverIDs), clientIDs: Set(clientIDs))
        let rows = try await readRows(reads)
        let byServerID = serverIDs.compactMap { rows.byServerID[conversation]?[$0] ?? nil }
        let byClientID = clientIDs.compactMap { rows.byClientID[$0] ?? nil }
        return byServerID + byClientID
    }

    /// The rows `reads` names, read where the open transaction does not know them (and kept in it).
    private func readRows(_ reads: EventProjection.Reads) async throws -> EventProjection.Rows {
        var rows = transactionRows
        try await read(EventProjection.reads(missingFrom: rows, of: reads), into: &rows)
        transactionRows = rows
        return rows
    }
}

/// The writes of the inputs the loop handles together, the events they announce, the answers and
/// inputs that wait for them to be stored, and the rows they touched or read.
struct OpenTransaction: Sendable {
    var writes: [StoreWrite] = []
    var events: [ChatEvent] = []
    var answers: [SessionStateMachine.Answer] = []
    var afterCommit: [SessionStateMachine.Input] = []
    var rows = EventProjection.Rows()
    /// A part stored early (before a read) failed: the transaction announces nothing.
    var failure: (any Error)?
}
