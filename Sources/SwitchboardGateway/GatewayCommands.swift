import Foundation
import Logging
import PostgresNIO
@_spi(TestKit) import Switchboard
import SwitchboardPostgres

/// What the API asks of a session, carried through the database to whichever process runs it:
/// any gateway of a fleet takes a send or a read marker for any session.
///
/// A request is a row of the `command` table, announced with `NOTIFY` on the schema's
/// `_commands` channel with the session's key. The process that runs the session listens, runs
/// the session's rows in order and deletes each once the session took it; one it refused for good
/// keeps its error for the caller to read. A process that takes a session over runs what is left
/// of it first. A send carries the caller's client id, unique per session, so a row run twice —
/// the process died after the session queued the message and before it deleted the row — queues
/// the message once (``Conversation/send(_:clientID:)``).
final class GatewayCommands: Sendable {
    enum Kind: String, Sendable {
        case send
        case read
    }

    /// What became of a send request: queued now, or already there under its client id
    /// (waiting, refused, or another conversation's).
    enum Enqueued: Sendable, Hashable {
        case queued
        case alreadyQueued
        case refused(String)
        case conflict(ConversationID)
    }

    let store: PostgresChatStore
    let listenConnection: PostgresConnection.Configuration
    let logger: Logger
    /// How often a running session looks at its rows without being told: a notification missed
    /// while the listener reconnected is run by then.
    let sweepInterval: Duration
    /// The sessions this process runs, each woken by its key's notifications.
    private let wakes = Locked([String: AsyncSignal]())

    init(store: PostgresChatStore, url: String, sweepInterval: Duration, logger: Logger) throws {
        self.store = store
        self.listenConnection = try PostgresChatStore.Endpoint(url: url).connectionConfiguration()
        self.sweepInterval = sweepInterval
        self.logger = logger
    }

    var channel: String { "\(store.schema)_commands" }
    var table: String { "\(store.schema).command" }

    // MARK: Asking

    /// Leaves a request for the session `key`, and tells whoever runs it.
    func enqueue(session key: String, kind: Kind, conversation: ConversationID, clientID: ClientMessageID?, body: JSONValue) async throws -> Enqueued {
        try await store.migrate()
        do {
            let rows = try await store.client.query(
                """
                WITH inserted AS (
                    INSERT INTO \(unescaped: table) (session, kind, conversation, client_id, body)
                    VALUES (\(key), \(kind.rawValue), \(conversation.rawValue), \(clientID?.rawValue), \(ByteBuffer(bytes: body.jsonData())))
                    ON CONFLICT (session, client_id) DO NOTHING RETURNING id)
                SELECT id, pg_notify(\(channel), \(key))::text FROM inserted
                """,
                logger: logger
            )
            var inserted = 0
            for try await _ in rows.decode((Int64, String).self) { inserted += 1 }
            if inserted > 0 { return .queued }
            // Already there: waiting still, or refused with its error, or another conversation's.
            guard let clientID, let existing = try await state(session: key, clientID: clientID) else { return .alreadyQueued }
            if existing.conversation != conversation { return .conflict(existing.conversation) }
            return existing.error.map(Enqueued.refused) ?? .alreadyQueued
        } catch {
            throw PostgresChatStore.classify(error, what: "queueing a request")
        }
    }

    /// A send request of `clientID`: its conversation, and whether it waits or was refused (its
    /// error); `nil` when there is none (never asked, or run and gone).
    func state(session key: String, clientID: ClientMessageID) async throws -> (conversation: ConversationID, error: String?)? {
        try await store.migrate()
        do {
            let rows = try await store.client.query(
                "SELECT conversation, error FROM \(unescaped: table) WHERE session = \(key) AND client_id = \(clientID.rawValue)",
                logger: logger
            )
            for try await (conversation, error) in rows.decode((String, String?).self) { return (ConversationID(conversation), error) }
            return nil
        } catch {
            throw PostgresChatStore.classify(error, what: "reading a request")
        }
    }

    // MARK: Running

    /// Listens for requests until cancelled, reconnecting after a broken connection.
    func listen() async {
        while !Task.isCancelled {
            var connection: PostgresConnection?
            do {
                let listening = try await PostgresConnection.connect(configuration: listenConnection, id: 3, logger: logger)
                connection = listening
                try await withTaskCancellationHandler {
                    try await listening.listen(on: channel) { notifications in
                        // Connected (again): what came meanwhile is run now.
                        self.wakeAll()
                        for try await notification in notifications {
                            self.wakes.withLock { $0[notification.payload] }?.signal()
                        }
                    }
                } onCancel: {
                    let _: EventLoopFuture<Void> = listening.close()
                }
            } catch {
                if !Task.isCancelled {
                    logger.warning("the request listener lost its connection", metadata: ["error": "\(PostgresChatStore.classify(error, what: "listening").message)"])
                }
            }
            try? await connection?.close()
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func wakeAll() {
        for wake in wakes.withLock({ Array($0.values) }) { wake.signal() }
    }

    /// Runs the requests for `session` (its key `key`) until cancelled or the session ends: those
    /// left from before at once, the others as they come.
    func serve(_ session: ChatSession, key: String) async {
        let wake = AsyncSignal()
        wakes.withLock { $0[key] = wake }
        defer { wakes.withLock { if $0[key] === wake { $0[key] = nil } } }
        while !Task.isCancelled {
            let generation = wake.generation
            let pass = await runWaiting(session, key: key)
            if pass == .going { return }
            // Woken by a notification, or after the sweep interval (sooner when a request failed
            // for now) whatever happened.
            let pause = pass == .retrySoon ? Self.retryInterval : sweepInterval
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await wake.wait(since: generation) }
                group.addTask { try? await Task.sleep(for: pause) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// How soon a request that failed for now (a server error, no link, the store) is tried again.
    static let retryInterval: Duration = .seconds(1)

    private struct Row: Sendable {
        var id: Int64
        var kind: String
        var conversation: ConversationID
        var clientID: ClientMessageID?
        var body: JSONValue
    }

    /// What one look at a session's rows ended with.
    enum Pass: Sendable, Equatable {
        /// Every row ran or was refused for good.
        case done
        /// Some failed for now: they, and the later rows of their conversations, wait.
        case retrySoon
        /// The session is going: what is left waits for whoever runs it next.
        case going
    }

    /// Runs the session's waiting rows, oldest first. A row that fails for now holds back the
    /// later rows of its conversation (they stay in order), not those of the others.
    private func runWaiting(_ session: ChatSession, key: String) async -> Pass {
        var waiting: [Row] = []
        do {
            let rows = try await store.client.query(
                "SELECT id, kind, conversation, client_id, body FROM \(unescaped: table) WHERE session = \(key) AND error IS NULL ORDER BY id",
                logger: logger
            )
            for try await (id, kind, conversation, clientID, body) in rows.decode((Int64, String, String, String?, Data).self) {
                waiting.append(Row(id: id, kind: kind, conversation: ConversationID(conversation), clientID: clientID.map(ClientMessageID.init), body: (try? JSONValue(parsing: body)) ?? .null))
            }
        } catch {
            logger.warning("reading the requests failed", metadata: ["session": "\(key)", "error": "\(PostgresChatStore.classify(error, what: "reading requests").message)"])
            return .retrySoon
        }
        var held: Set<ConversationID> = []
        for row in waiting where !held.contains(row.conversation) {
            if Task.isCancelled { return .going }
            let outcome: String?
            do {
                try await perform(row, on: session)
                outcome = nil
            } catch {
                let failure = SwitchboardError.classify(error)
                if Task.isCancelled || failure.code == .sessionClosed { return .going }
                // The store or the server failed for now: the row and its conversation's later
                // rows wait for the next look.
                guard Self.refusesForGood.contains(failure.code) else {
                    logger.warning("a request failed; tried again soon", metadata: ["session": "\(key)", "error": "\(failure.message)"])
                    held.insert(row.conversation)
                    continue
                }
                outcome = failure.message
                logger.info("a request was refused", metadata: ["session": "\(key)", "kind": "\(row.kind)", "error": "\(failure.message)"])
            }
            do {
                // A refused send keeps its error for the caller (``pruneRefused()`` removes it a day
                // later); anything else done is gone.
                if let outcome, row.kind == Kind.send.rawValue {
                    try await store.client.run("UPDATE \(unescaped: table) SET error = \(outcome) WHERE id = \(row.id)", logger: logger)
                } else {
                    try await store.client.run("DELETE FROM \(unescaped: table) WHERE id = \(row.id)", logger: logger)
                }
            } catch {
                // Run again at the next look: a send under its client id queues nothing twice.
                logger.warning("a request was run but not marked done", metadata: ["session": "\(key)", "error": "\(PostgresChatStore.classify(error, what: "ending a request").message)"])
                return .retrySoon
            }
        }
        return held.isEmpty ? .done : .retrySoon
    }

    /// How long a refused send keeps its error for callers to read.
    static let refusalKept: Duration = .seconds(86_400)

    /// Removes, every hour until cancelled, the refused sends older than ``refusalKept``.
    func pruneRefused() async {
        while !Task.isCancelled {
            do {
                try await store.migrate()
                try await store.client.run(
                    "DELETE FROM \(unescaped: table) WHERE error IS NOT NULL AND created < now() - make_interval(secs => \(Double(Self.refusalKept.components.seconds)))",
                    logger: logger
                )
            } catch {
                logger.warning("pruning refused requests failed", metadata: ["error": "\(PostgresChatStore.classify(error, what: "pruning requests").message)"])
            }
            try? await Task.sleep(for: .seconds(3600))
        }
    }

    /// The errors that answer a request for good: trying it again would be refused again.
    static let refusesForGood: Set<SwitchboardError.Code> = [
        .invalidArgument, .payloadTooLarge, .unsupported, .conversationNotFound, .messageNotFound, .permissionDenied, .messageRejected, .invalidState, .fatal,
    ]

    private func perform(_ row: Row, on session: ChatSession) async throws {
        let conversation = try await session.conversation(row.conversation)
        switch Kind(rawValue: row.kind) {
        case .send:
            guard let clientID = row.clientID, let text = row.body["text"]?.stringValue else {
                throw SwitchboardError(.invalidArgument, "a send request without its client id or text")
            }
            try await conversation.send(MessageDraft(text: text, payload: row.body["payload"]?.nonNull), clientID: clientID)
        case .read:
            let marker = row.body["upTo"]?.stringValue.map { ChatEvent.ReadMarker.message(MessageID($0)) }
            do {
                try await conversation.markRead(upTo: marker)
            } catch let error as SwitchboardError where error.code == .connectionLost {
                // The marker is sent when the next link opens.
            } catch let error as SwitchboardError where error.code == .cancelled && !Task.isCancelled {
                // The link closed under it: asked again at the next look.
                throw SwitchboardError(.connectionLost, "the link closed before the server took the read marker")
            }
        case nil:
            throw SwitchboardError(.invalidArgument, "an unknown request \(row.kind)")
        }
    }
}
