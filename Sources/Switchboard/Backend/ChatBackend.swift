public import Foundation
public import Logging

/// The adapter seam: what a vendor adapter implements so the engine can drive it.
///
/// An adapter is a translator between a wire protocol and the normalized model. It does **not**
/// reconnect, retry, de-duplicate, order, store or throttle: the session engine owns all of that
/// and gives every adapter the same guarantees. The contract:
///
/// - ``withConnection(_:_:)`` opens one link, using the stored credentials and cursors in the
///   context, runs `body` with it, and closes the link when `body` returns or throws. Work the
///   link needs while it is up (a socket reader, a long-poll loop, a heartbeat) runs inside this
///   scope, as child tasks. It throws a ``SwitchboardError`` whose classification says what the
///   engine does next (transient → backoff, authentication → retry once with cleared
///   credentials, fatal → session ends).
/// - ``BackendConnection/updates`` yields inbound data **in wire order**, finishes or throws
///   when the link is gone, and never crashes on bad input: a malformed or unknown frame becomes
///   ``BackendUpdate/problem(_:)`` or a ``BackendEvent/Kind/custom(name:payload:)`` event.
/// - Each request is a method of ``BackendConnection`` with a typed answer (``BackendConnection/send(_:)``
///   answers with the server's ``Message``, ``BackendConnection/history(_:)`` with a ``HistoryPage``…).
///   A method the link does not implement answers ``SwitchboardError/Code/unsupported`` on its own;
///   a request for a capability the descriptor does not list is never sent. Vendor-only calls are
///   ``VendorRequest`` values that carry their reply type.
/// - Sends carry the ``ClientMessageID``; the server's echo carries it back.
///
/// The conformance suite in `SwitchboardTestKit` (`ConformanceSuite.cases`) checks all of this
/// against the adapter's emulator; `InMemoryBackend` is the reference implementation.
public protocol ChatBackend: Sendable {
    var descriptor: BackendDescriptor { get }

    /// The participant the session acts as, where the backend knows it before connecting (the
    /// Voximplant-style user): a message it sent from another device is the user's own, and
    /// never counts as unread. `nil` (the default) where the user is the customer of a support
    /// chat (``Participant/Role/customer`` says whose a message is) or is not known up front.
    var user: ParticipantID? { get }

    /// The user whose rows the session's store holds (``StoreScope/user``), where the app's
    /// configuration names one: the Webim visitor of the identification fields or the provided
    /// token, the CXone customer id, the Voximplant-style or Matrix user. A session for another
    /// user on the same store sees none of this user's conversations, messages, cursors,
    /// credentials or outbox. `nil` for an anonymous user the server makes up (one per store
    /// scope; ``ChatSession/forgetUser()`` starts a new one). Defaults to ``user``.
    var storeUser: String? { get }

    /// Whether a session forgets every stored row of its user before it starts, as
    /// ``ChatSession/forgetUser()`` does (Webim's visitor-data clearing at session build).
    /// `false` by default.
    var startsAsNewUser: Bool { get }

    /// Opens a link to the service, runs `body` with it, and closes the link afterwards.
    ///
    /// `body` returns when the engine is done with the link (paused, closed, or the updates
    /// ended); the adapter then closes it and returns what `body` returned.
    ///
    /// - Throws: ``SwitchboardError`` (classified) when the link cannot be opened or fails, what
    ///   `body` throws, or `CancellationError`.
    func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result
}

extension ChatBackend {
    public var user: ParticipantID? { nil }
    public var storeUser: String? { user?.rawValue }
    public var startsAsNewUser: Bool { false }
}

/// What the engine hands an adapter when it connects.
public struct ConnectionContext: Sendable {
    public var session: SessionID
    /// What the adapter asked the engine to keep last time (Webim page id and auth token, CXone
    /// customer id and tokens, a Voximplant user).
    public var credentials: Credentials
    /// The account-wide cursor the adapter last reported (Webim revision).
    public var cursor: SyncCursor?
    /// Per-conversation sequences delivered so far, for sequenced backends.
    public var conversationSequences: [ConversationID: Int64]
    public var clock: SessionClock
    public var logger: Logger

    public init(
        session: SessionID,
        credentials: Credentials = Credentials(),
        cursor: SyncCursor? = nil,
        conversationSequences: [ConversationID: Int64] = [:],
        clock: SessionClock,
        logger: Logger
    ) {
        self.session = session
        self.credentials = credentials
        self.cursor = cursor
        self.conversationSequences = conversationSequences
        self.clock = clock
        self.logger = logger
    }
}

/// Opaque per-backend credentials the engine persists for the adapter.
public struct Credentials: Sendable, Hashable, Codable {
    public var values: [String: String]
    public init(_ values: [String: String] = [:]) { self.values = values }
    public subscript(key: String) -> String? {
        get { values[key] }
        set { values[key] = newValue }
    }
    public var isEmpty: Bool { values.isEmpty }
}

/// Printed, dumped or logged, credentials show their keys only: the values are tokens and ids.
extension Credentials: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "Credentials(\(values.keys.sorted().joined(separator: ", ")); values redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["keys": values.keys.sorted()], displayStyle: .struct) }
}

/// A backend's position in its update stream.
public enum SyncCursor: Sendable, Hashable, Codable {
    /// A per-conversation event sequence (Voximplant).
    case sequence(Int64)
    /// An account-wide revision (Webim `revision`).
    case revision(String)
    /// An opaque token (CXone scroll token).
    case token(String)
}

/// One inbound item from a backend.
public enum BackendUpdate: Sendable, Hashable {
    /// The full state of a scope (Webim `fullUpdate`, CXone thread recovery). The engine diffs
    /// it against the store, so a re-init never duplicates or loses anything.
    case snapshot(BackendSnapshot)
    /// One incremental event.
    case event(BackendEvent)
    /// The newest sequence of a conversation, so the engine can plan catch-up.
    case conversationHead(ConversationID, lastSequence: Int64)
    /// Credentials to persist (merged into the stored ones).
    case credentials(Credentials)
    /// The account-wide cursor moved without an event (an empty Webim delta with a revision).
    case cursor(SyncCursor)
    /// Input the adapter could not use; the session goes on.
    case problem(SwitchboardError)
    /// The participant the session acts as, once the link knows it where ``ChatBackend/user``
    /// could not say (a Matrix login by local part, a CXone customer made up at the first
    /// connection): that participant's messages and read markers are the user's own, set on
    /// another device.
    case user(ParticipantID)
}

/// The full state of one or more conversations.
public struct BackendSnapshot: Sendable, Hashable {
    public var conversations: [ConversationSnapshot]
    /// `true` when the snapshot lists every conversation of the account: stored conversations
    /// missing from it are removed.
    public var isComplete: Bool
    public var cursor: SyncCursor?

    public init(conversations: [ConversationSnapshot], isComplete: Bool, cursor: SyncCursor? = nil) {
        self.conversations = conversations
        self.isComplete = isComplete
        self.cursor = cursor
    }
}

/// One conversation in a snapshot, with the messages the backend sent along.
public struct ConversationSnapshot: Sendable, Hashable {
    public var conversation: ConversationInfo
    public var messages: [Message]
    /// `true` when `messages` are all the conversation's messages: stored messages missing from
    /// them were removed on the server. `false` when they are a recent window.
    public var messagesAreComplete: Bool
    /// Set when the server says it skipped events between a point the client had reached and
    /// this window (Matrix's `limited` timeline, whose gap starts at the sync's `since`): the
    /// engine then fills the gap from history down to that point — asking with
    /// ``HistoryQuery/after`` — and stores everything it finds there, even where the window's
    /// oldest message is one the store already has (the app's own send, confirmed by its answer).
    /// `nil` when the backend cannot tell; the engine then infers a gap from what it has stored.
    public var skippedAfter: HistoryQuery.Anchor?

    public init(
        conversation: ConversationInfo,
        messages: [Message] = [],
        messagesAreComplete: Bool = false,
        skippedAfter: HistoryQuery.Anchor? = nil
    ) {
        self.conversation = conversation
        self.messages = messages
        self.messagesAreComplete = messagesAreComplete
        self.skippedAfter = skippedAfter
    }
}
