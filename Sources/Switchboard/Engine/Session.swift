/// The app-facing session: one backend account, its conversations and its events.
///
/// ``ChatSession`` is the engine's implementation; apps can substitute a fake in their own
/// tests. Every call made after ``close()`` throws ``SwitchboardError/Code/sessionClosed``.
public protocol Session: Sendable {
    var id: SessionID { get }
    var descriptor: BackendDescriptor { get }

    /// Starts (or restarts after ``pause()``) the link to the backend.
    func resume() async throws
    /// Drops the link and keeps everything; sends wait in the outbox.
    func pause() async throws
    /// Ends the session for good. Idempotent.
    func close() async
    /// Ends the session and deletes every stored row of its user (sign-out on a shared device).
    func forgetUser() async throws

    var connectionState: ConnectionState { get async }

    /// Whether agents take chats, as the backend last said (``ChatEvent/Kind/availability(_:)``);
    /// `nil` until it said. Readable at any moment — a screen opened after connecting needs it —
    /// and announced as an event when it changes.
    var availability: ChatEvent.Availability? { get async }
    /// The backend's settings as last announced (``ChatEvent/Kind/settingsChanged(_:)``): the
    /// keys of every announced object, the newest value of each (Webim: `hintsEnabled`,
    /// `departments`, `visitSessionState`, `accountConfig`, `locationSettings`). An empty object
    /// until the backend announced any. Kept for the session's life; the next launch learns them
    /// again when it connects.
    var settings: JSONValue { get async }

    /// This session's events from now on.
    func events(filter: EventFilter, buffering: EventBus.BufferingPolicy) -> EventStream

    /// The conversations the store knows, in the order they were first seen.
    func conversations() async throws -> [ConversationInfo]
    /// A handle on a known conversation.
    ///
    /// - Throws: ``SwitchboardError/Code/conversationNotFound``.
    func conversation(_ id: ConversationID) async throws -> any Conversation
    /// Starts a conversation on the backend (needs ``BackendCapabilities/conversationLifecycle``).
    func startConversation(_ draft: ConversationDraft) async throws -> any Conversation
    /// Sets custom fields of the customer (needs ``BackendCapabilities/customFields``).
    func setCustomFields(_ fields: [String: String]) async throws
    /// Fetches what changed now, on a backend that pushes nothing (``SyncModel/polled``; the
    /// engine also polls on its own every
    /// ``SessionConfiguration/pollInterval``). `forced` reads everything again; what is already
    /// stored is not announced twice. Returns when what it found is stored and published.
    func refresh(forced: Bool) async throws
    /// A vendor-only call (needs ``BackendCapabilities/vendorRequests``), carried out on the
    /// live link in the session's request lane; typed vendor extensions are built on it.
    ///
    /// - Returns: the request's typed reply, after what it changed is stored and published.
    /// - Throws: ``SwitchboardError/Code/unsupported`` when the request is another backend's.
    func perform<Request: VendorRequest>(_ request: Request) async throws -> Request.Reply
}

extension Session {
    public func events() -> EventStream { events(filter: .all, buffering: .bounded(1024)) }
    public func refresh() async throws { try await refresh(forced: false) }

    /// A fake that does not poll (the requirement came after `Session` was published).
    public func refresh(forced: Bool) async throws {
        throw SwitchboardError(.unsupported, "this session does not poll")
    }

    /// A fake that knows nothing of the service (the requirement came after `Session` was published).
    public var availability: ChatEvent.Availability? { get async { nil } }
    /// A fake that knows no settings (the requirement came after `Session` was published).
    public var settings: JSONValue { get async { [:] } }

    /// A fake that stores nothing (the requirement came after `Session` was published).
    public func forgetUser() async throws {
        throw SwitchboardError(.unsupported, "this session cannot forget its user")
    }
}

/// The app-facing handle on one conversation.
///
/// A conformer (a fake in an app's tests) implements the ten requirements that have no default:
/// the identity, ``info()``, sending, typing, marking read, the stored and older messages and the
/// events. The rest — edits, lifecycle, fields, rating, participants — answer
/// ``SwitchboardError/Code/unsupported`` unless implemented, and ``timeline(limit:)`` is built from
/// the required ones.
public protocol Conversation: Sendable {
    var id: ConversationID { get }
    var sessionID: SessionID { get }

    /// The conversation as the store has it now.
    func info() async throws -> ConversationInfo

    /// Queues a message: stored and published as pending at once, sent when connected,
    /// retried with the same client id, marked sent or failed as the server decides. On a
    /// backend that takes fewer files per message than the draft has
    /// (``BackendLimits/attachmentsPerMessage``), the draft's parts are queued as separate
    /// messages in one transaction: its text first, then its files.
    ///
    /// - Returns: the pending message (the first part's, when the draft goes as several; the
    ///   others are announced as `messageAdded` events).
    /// - Throws: ``SwitchboardError/Code/unsupported`` for attachments or quotes the backend
    ///   cannot carry, ``SwitchboardError/Code/payloadTooLarge`` for text over the limit.
    @discardableResult
    func send(_ draft: MessageDraft) async throws -> Message
    /// Queues a message under a client id the caller chose — an idempotency key for a caller that
    /// may repeat the call (a request retried after a lost answer, a command read again after a
    /// crash): when the store already holds a message of this conversation with that client id,
    /// nothing is queued and that message is returned as it is now (pending, sent or failed).
    /// The id is the one the backend gets, so a server that recognizes resends recognizes it too.
    /// A draft that goes as several messages gives its further parts `clientID/2`, `clientID/3` …
    ///
    /// - Throws: as ``send(_:)``; `invalidArgument` for an empty id.
    @discardableResult
    func send(_ draft: MessageDraft, clientID: ClientMessageID) async throws -> Message
    func edit(_ message: MessageID, text: String) async throws
    func delete(_ message: MessageID) async throws

    /// The user typed; throttled as the backend requires. A notification sent on an open link
    /// returns when the server answered it (after the conversation's earlier requests), and
    /// throws the server's refusal; offline nothing is sent.
    @discardableResult
    func userTyping(draft: String?) async throws -> TypingOutcome
    func userStoppedTyping() async throws
    /// Marks the conversation read up to `marker` (the newest message when `nil`). On an open
    /// link it returns when the server took the marker, and throws the server's refusal (a
    /// ``SwitchboardError`` with its code), or `connectionLost` when the link went first (the
    /// marker is still sent when the next link opens); offline it returns at once and the
    /// marker is sent on the next connect.
    func markRead(upTo marker: ChatEvent.ReadMarker?) async throws

    /// Stored messages only, oldest first: the `limit` newest older than `before`.
    func storedMessages(before: MessageOrderKey?, limit: Int) async throws -> [Message]
    /// Older messages: from the store first, then from the backend's history.
    func history(before: MessageOrderKey?, limit: Int) async throws -> [Message]
    /// A live window over the conversation for a UI.
    func timeline(limit: Int) async throws -> Timeline
    /// This conversation's events from now on.
    func events(buffering: EventBus.BufferingPolicy) -> EventStream

    func close() async throws
    func archive() async throws
    func update(_ changes: ConversationChanges) async throws
    /// Sets custom fields of this conversation (a CXone contact's fields, say); the session's
    /// ``Session/setCustomFields(_:)`` sets the customer's.
    func setCustomFields(_ fields: [String: String]) async throws
    func rateAgent(_ agent: ParticipantID?, rating: Int, comment: String?) async throws
    func addParticipants(_ participants: [Participant]) async throws
    func updateParticipants(_ participants: [Participant]) async throws
    func removeParticipants(_ participants: [ParticipantID]) async throws
}

// What a conformer need not implement.
extension Conversation {
    public func edit(_ message: MessageID, text: String) async throws { throw unsupported("edit") }
    public func delete(_ message: MessageID) async throws { throw unsupported("delete") }
    public func send(_ draft: MessageDraft, clientID: ClientMessageID) async throws -> Message { throw unsupported("send with a client id") }
    public func timeline(limit: Int) async throws -> Timeline { try await Timeline(conversation: self, limit: limit) }
    public func close() async throws { throw unsupported("close") }
    public func archive() async throws { throw unsupported("archive") }
    public func update(_ changes: ConversationChanges) async throws { throw unsupported("update") }
    public func setCustomFields(_ fields: [String: String]) async throws { throw unsupported("setCustomFields") }
    public func rateAgent(_ agent: ParticipantID?, rating: Int, comment: String?) async throws { throw unsupported("rateAgent") }
    public func addParticipants(_ participants: [Participant]) async throws { throw unsupported("addParticipants") }
    public func updateParticipants(_ participants: [Participant]) async throws { throw unsupported("updateParticipants") }
    public func removeParticipants(_ participants: [ParticipantID]) async throws { throw unsupported("removeParticipants") }

    private func unsupported(_ call: String) -> SwitchboardError {
        SwitchboardError(.unsupported, "\(call) is not implemented by this conversation")
    }
}

extension Conversation {
    @discardableResult
    public func send(text: String) async throws -> Message { try await send(MessageDraft(text: text)) }
    public func markRead() async throws { try await markRead(upTo: nil) }
    public func events() -> EventStream { events(buffering: .bounded(1024)) }
}

/// What became of one ``Conversation/userTyping(draft:)`` under the backend's typing policy.
public enum TypingOutcome: Sendable, Hashable {
    /// Sent to the backend now (offline it is dropped: typing is best effort).
    case sent
    /// Not sent now, but not lost: the backend already shows the user typing, or gets the latest
    /// draft with the next update the policy allows (Webim's one per second, CXone's start/end).
    case coalesced
    /// Discarded: within the backend's minimum interval (Voximplant's 10 s — the SDK's error
    /// 10000, "call discarded"). Nothing is sent for it later.
    case throttled
}
