@_spi(TestKit) public import Switchboard

/// A store that forwards to another and lets a test watch and hold what the engine does with it:
/// it counts each kind of call, and holds the next call of a kind until the test releases it, so
/// a test can make inputs pile up while the engine waits on its store.
///
/// Every write goes through ``apply(_:scope:)``, as a real store's single-write methods do, so
/// ``Call/apply`` counts the engine's transactions.
///
/// ```swift
/// let store = ProbedStore()
/// store.holdNext(.apply)
/// // … the engine's next transaction waits:
/// try await store.waitUntil("the write held") { $0.isHolding(.apply) }
/// store.release(.apply)
/// ```
public final class ProbedStore: ChatStore, Sendable {
    /// A kind of store call.
    public enum Call: Hashable, Sendable, CaseIterable {
        case apply
        case fetchConversations
        case fetchConversation
        /// `fetchMessages(serverIDs:clientIDs:in:scope:)`: the reads reconciliation makes (a single
        /// lookup counts as one).
        case fetchMessagesByKeys
        /// `fetchMessages(in:before:limit:scope:)`: a page of history.
        case fetchMessagesPage
        case countMessages
        case fetchReadMarkers
        case fetchSequences
        case fetchCursor
        case fetchOutbox
        case fetchCredentials
        case fetchOldestConfirmedMessage
        case fetchPendingMessages
    }

    private struct State {
        var counts: [Call: Int] = [:]
        var finished: [Call: Int] = [:]
        var holdNext: Set<Call> = []
        var held: [Call: CheckedContinuation<Void, Never>] = [:]
        var failures: [Call: (count: Int, error: SwitchboardError)] = [:]
    }

    /// Where calls go.
    public let base: any ChatStore
    private let state = Locked(State())
    /// Fires after each call starts or ends, and each hold begins.
    private let changed = AsyncSignal()

    /// - Parameter base: the store calls go to; a new in-memory store when omitted.
    public init(base: any ChatStore = InMemoryChatStore()) {
        self.base = base
    }

    /// How many calls of `call` started so far.
    public func count(_ call: Call) -> Int { state.withLock { $0.counts[call, default: 0] } }

    /// How many calls of `call` have returned (or thrown) so far.
    public func finishedCount(_ call: Call) -> Int { state.withLock { $0.finished[call, default: 0] } }

    /// The next call of `call` waits, before it reaches the base store, until ``release(_:)``.
    public func holdNext(_ call: Call) { state.withLock { _ = $0.holdNext.insert(call) } }

    /// The next `count` calls of `call` throw `error` instead of reaching the base store (as a
    /// read cancelled under a stopping session, or a lost connection, does).
    public func failNext(_ call: Call, count: Int = 1, with error: SwitchboardError = SwitchboardError(.storageFailure, "the store failed on purpose")) {
        state.withLock { $0.failures[call] = (count, error) }
    }

    /// Whether a call of `call` is waiting for ``release(_:)``.
    public func isHolding(_ call: Call) -> Bool { state.withLock { $0.held[call] != nil } }

    /// Lets the held call of `call` go on.
    public func release(_ call: Call) {
        let held = state.withLock { $0.held.removeValue(forKey: call) }
        held?.resume()
    }

    /// Waits until `check` holds, woken by each call's start and end, and each hold.
    ///
    /// - Parameters:
    ///   - what: what is awaited, for the error when time runs out.
    ///   - timeout: how long to wait.
    ///   - check: what must hold.
    public func waitUntil(_ what: String, timeout: Duration = .seconds(30), _ check: @escaping @Sendable (ProbedStore) -> Bool) async throws {
        try await SwitchboardTestKit.waitUntil(what, timeout: timeout, signal: changed) { check(self) }
    }

    /// Counts `call`, waits while it is held, then runs it and counts its end.
    private func probed<T>(_ call: Call, _ body: () async throws -> T) async throws -> T {
        let (hold, failure) = state.withLock { state -> (Bool, SwitchboardError?) in
            state.counts[call, default: 0] += 1
            var failure: SwitchboardError?
            if let planned = state.failures[call] {
                failure = planned.error
                state.failures[call] = planned.count > 1 ? (planned.count - 1, planned.error) : nil
            }
            return (state.holdNext.remove(call) != nil, failure)
        }
        changed.signal()
        if hold {
            await withCheckedContinuation { continuation in
                state.withLock { $0.held[call] = continuation }
                changed.signal()
            }
        }
        defer {
            state.withLock { $0.finished[call, default: 0] += 1 }
            changed.signal()
        }
        if let failure { throw failure }
        return try await body()
    }

    public func apply(_ writes: [StoreWrite], scope: StoreScope) async throws {
        try await probed(.apply) { try await base.apply(writes, scope: scope) }
    }

    public func fetchConversations(scope: StoreScope) async throws -> [ConversationInfo] {
        try await probed(.fetchConversations) { try await base.fetchConversations(scope: scope) }
    }

    public func fetchConversation(_ id: ConversationID, scope: StoreScope) async throws -> ConversationInfo? {
        try await probed(.fetchConversation) { try await base.fetchConversation(id, scope: scope) }
    }

    public func fetchMessages(serverIDs: [MessageID], clientIDs: [ClientMessageID], in conversation: ConversationID, scope: StoreScope) async throws -> [Message] {
        try await probed(.fetchMessagesByKeys) { try await base.fetchMessages(serverIDs: serverIDs, clientIDs: clientIDs, in: conversation, scope: scope) }
    }

    public func fetchMessages(in conversation: ConversationID, before: MessageOrderKey?, limit: Int, scope: StoreScope) async throws -> [Message] {
        try await probed(.fetchMessagesPage) { try await base.fetchMessages(in: conversation, before: before, limit: limit, scope: scope) }
    }

    public func countMessages(in conversation: ConversationID, scope: StoreScope) async throws -> Int {
        try await probed(.countMessages) { try await base.countMessages(in: conversation, scope: scope) }
    }

    public func fetchReadMarkers(in conversation: ConversationID, scope: StoreScope) async throws -> [ParticipantID: ChatEvent.ReadMarker] {
        try await probed(.fetchReadMarkers) { try await base.fetchReadMarkers(in: conversation, scope: scope) }
    }

    public func fetchSequences(scope: StoreScope) async throws -> [ConversationID: Int64] {
        try await probed(.fetchSequences) { try await base.fetchSequences(scope: scope) }
    }

    public func fetchCursor(scope: StoreScope) async throws -> SyncCursor? {
        try await probed(.fetchCursor) { try await base.fetchCursor(scope: scope) }
    }

    public func fetchOutbox(scope: StoreScope) async throws -> [OutboxEntry] {
        try await probed(.fetchOutbox) { try await base.fetchOutbox(scope: scope) }
    }

    public func fetchCredentials(scope: StoreScope) async throws -> Credentials {
        try await probed(.fetchCredentials) { try await base.fetchCredentials(scope: scope) }
    }

    public func fetchOldestConfirmedMessage(in conversation: ConversationID, scope: StoreScope) async throws -> Message? {
        try await probed(.fetchOldestConfirmedMessage) { try await base.fetchOldestConfirmedMessage(in: conversation, scope: scope) }
    }

    public func fetchPendingMessages(scope: StoreScope) async throws -> [Message] {
        try await probed(.fetchPendingMessages) { try await base.fetchPendingMessages(scope: scope) }
    }
}
