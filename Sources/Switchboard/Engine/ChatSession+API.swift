import Foundation
import Logging
import Tracing

// What the app asks of a session. Reads go to the store; every call that changes engine state is
// a command the loop hands to the machine.
extension ChatSession {
    public func conversations() async throws -> [ConversationInfo] {
        try lifecycle.checkOpen()
        return try await store.fetchConversations()
    }

    /// One stored conversation, read by its id.
    func storedConversation(_ id: ConversationID) async throws -> ConversationInfo? {
        try lifecycle.checkOpen()
        return try await store.fetchConversation(id)
    }

    public func conversation(_ id: ConversationID) async throws -> any Conversation {
        try lifecycle.checkOpen()
        guard try await storedConversation(id) != nil else {
            throw SwitchboardError(.conversationNotFound, "no conversation \(id) in this session")
        }
        return SessionConversation(session: self, id: id)
    }

    public func startConversation(_ draft: ConversationDraft) async throws -> any Conversation {
        if let first = draft.firstMessage { try checkSendable(first) }
        var draft = draft
        if draft.clientID == nil { draft.clientID = ClientMessageID.random(using: &random) }
        try requireCapability(BackendRequest.startConversation(draft).requiredCapability)
        let id = try await submit { [draft] in .startConversation(draft, $0) }
        return SessionConversation(session: self, id: id)
    }

    public func refresh(forced: Bool) async throws {
        guard descriptor.sync == .polled else {
            throw SwitchboardError(.unsupported, "\(descriptor.name) pushes its changes: it is not polled")
        }
        // The updates it answers with are applied before the answer reaches here (`requestFinished`).
        _ = try await performNow(.poll(forced: forced))
    }

    public func setCustomFields(_ fields: [String: String]) async throws {
        _ = try await performNow(.setCustomFields(nil, fields))
    }

    public func perform<Request: VendorRequest>(_ request: Request) async throws -> Request.Reply {
        // The link answers with what the request's own `perform(on:)` returned, so the cast holds.
        guard case .vendor(let answer) = try await performNow(.vendor(VendorCall(request))),
            let reply = answer.reply(as: Request.Reply.self)
        else { throw SwitchboardError(.protocolViolation, "\(request.name) came back without its reply") }
        return reply
    }

    // MARK: Sending

    func send(_ draft: MessageDraft, in conversation: ConversationID, clientID: ClientMessageID? = nil) async throws -> Message {
        // One span from here to the server's answer; its parent is the caller's current span.
        // Without a tracer (the default no-op one) the send goes untraced, at no cost.
        guard isTracing else {
            try checkSendable(draft, clientID: clientID)
            return try await submit { .send(draft, in: conversation, clientID: clientID, trace: nil, $0) }
        }
        let span = tracer.startAnySpan("switchboard.send", context: ServiceContext.current ?? .topLevel, ofKind: .producer)
        span.attributes["switchboard.backend"] = descriptor.name.rawValue
        span.attributes["switchboard.conversation"] = conversation.rawValue
        if let clientID { span.attributes["switchboard.send.client_id"] = clientID.rawValue }
        let trace = SendTrace(span: span)
        do {
            try checkSendable(draft, clientID: clientID)
            let message = try await submit { .send(draft, in: conversation, clientID: clientID, trace: trace, $0) }
            // Queued: the loop ends the span when the server answers. Otherwise a repeat was
            // answered from the store.
            if !trace.wasQueued { trace.end(outcome: "stored") }
            return message
        } catch {
            trace.end(outcome: "refused", error: error)
            throw error
        }
    }

    /// A send's checks before anything is stored: the draft (``checkSendable(_:)``) and the
    /// caller's client id.
    nonisolated func checkSendable(_ draft: MessageDraft, clientID: ClientMessageID?) throws {
        try checkSendable(draft)
        if let clientID, clientID.rawValue.isEmpty {
            throw SwitchboardError(.invalidArgument, "a client id is not empty")
        }
    }

    /// What the backend refuses of any message, checked before anything is stored or sent.
    nonisolated func checkSendable(_ draft: MessageDraft) throws {
        if !draft.attachments.isEmpty { try requireCapability(.files) }
        if draft.quote != nil { try requireCapability(.quotes) }
        let limits = descriptor.limits
        if draft.text.count > limits.maxTextLength {
            throw SwitchboardError(
                .payloadTooLarge,
                "text of \(draft.text.count) characters is over the limit of \(limits.maxTextLength)"
            )
        }
        if let payload = draft.payload, payload.jsonData().count > limits.maxPayloadBytes {
            throw SwitchboardError(.payloadTooLarge, "payload is over the limit of \(limits.maxPayloadBytes) bytes")
        }
    }

    /// Messages waiting in the outbox, FIFO per conversation.
    public var pendingSends: [OutboxEntry] { machine.outbox.entries }

    // MARK: Typing and read markers

    @discardableResult
    func userTyping(_ isTyping: Bool, draft: String?, in conversation: ConversationID) async throws -> TypingOutcome {
        try requireCapability(.typing)
        return try await submit { .typing(isTyping, draft: draft, in: conversation, $0) }
    }

    func markRead(upTo marker: ChatEvent.ReadMarker?, in conversation: ConversationID) async throws {
        try requireCapability(.readMarkers)
        try await submit { .markRead(marker, in: conversation, $0) }
    }

    // MARK: History

    func storedMessages(in conversation: ConversationID, before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        try lifecycle.checkOpen()
        return try await store.fetchMessages(in: conversation, before: before, limit: limit)
    }

    func history(in conversation: ConversationID, before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        let stored = try await storedMessages(in: conversation, before: before, limit: limit)
        guard stored.count < limit, descriptor.capabilities.contains(.historyPaging) else { return stored }
        try await submit { .history(conversation, limit: limit, $0) }
        return try await storedMessages(in: conversation, before: before, limit: limit)
    }

    // MARK: The session

    public func resume() async throws {
        try await lifecycleCommand(.resume)
    }

    public func pause() async throws {
        try await lifecycleCommand(.pause)
    }

    public func close() async {
        try? await lifecycleCommand(.close)
    }

    /// Signs the user out of this device: closes the session, waits for ``run()`` to return, and
    /// deletes every row of the user from the store in one transaction — conversations,
    /// messages, read markers, sequences, the cursor, the outbox (queued sends are dropped, never
    /// sent) and the credentials (the SDKs' `destroyWithClearVisitorData` and `signOut`). The
    /// server is not told; the next session for this scope starts as a new user (a new anonymous
    /// visitor or customer), and sessions of other users on the store keep their rows.
    ///
    /// - Throws: ``SwitchboardError/Code/storageFailure`` when the rows cannot be deleted, or
    ///   `CancellationError` when cancelled before ``run()`` returned; the session is closed all
    ///   the same, and a second call tries again.
    public func forgetUser() async throws {
        await close()
        if hasRun && !runEnded {
            let generation = runEnd.generation
            if !runEnded { await runEnd.wait(since: generation) }
            // Cancelled while the loop still ran: deleting now could race its last writes.
            if !runEnded { throw CancellationError() }
        }
        // What the backend said of the user (Webim's visitor among the settings) goes too.
        availability = nil
        settings = [:]
        try await store.apply([.removeEverything])
        machine.outbox = OutboxStateMachine(backoff: machine.outbox.backoff, maxLinkLosses: machine.outbox.maxLinkLosses)
        logger.notice("forgot the user's stored rows")
    }

    /// `true` once the session is closed, by the app or by a fatal error.
    public var isClosed: Bool { lifecycle.state == .closed }

    public var connectionState: ConnectionState { machine.connection.published }

    /// What the engine has done so far, and what it holds now.
    public var statistics: SessionStatistics {
        var statistics = machine.statistics
        statistics.liveTasks = inbox.liveTasks
        statistics.peakLiveTasks = inbox.peakLiveTasks
        statistics.bufferedInputs = inbox.buffered
        statistics.peakBufferedInputs = inbox.peakBuffered
        statistics.heldUpdates = inbox.heldUpdates
        statistics.peakHeldUpdates = inbox.peakHeldUpdates
        statistics.requestsQueued = machine.lanes.count
        statistics.heldEvents = machine.conversations.heldEvents
        statistics.timersPending = machine.deadlines.count
        return statistics
    }

    public nonisolated func events(filter: EventFilter, buffering: EventBus.BufferingPolicy) -> EventStream {
        bus.subscribe(filter: filter.intersection(EventFilter(sessions: [id])), buffering: buffering)
    }

    nonisolated func requireCapability(_ capability: BackendCapabilities?) throws {
        if let capability, !descriptor.capabilities.contains(capability) {
            throw SwitchboardError.unsupported(capability, backend: descriptor.name)
        }
    }

    /// Performs a request on the live link, in its conversation's lane, and waits for the answer.
    func performNow(_ request: BackendRequest, applying: AppCommand.Applying = .nothing) async throws -> BackendResponse {
        try requireCapability(request.requiredCapability)
        return try await submit { .request(request, applying, $0) }
    }
}
