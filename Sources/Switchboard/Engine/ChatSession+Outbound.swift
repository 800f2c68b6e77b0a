import Foundation
import Logging

// What the app asks of a session, and the outbox that carries sends. Every call that changes
// engine state runs as a command on the loop.
extension ChatSession {
    public func conversations() async throws -> [ConversationInfo] {
        try lifecycle.checkOpen()
        return try await store.fetchConversations(scope: scope)
    }

    /// One stored conversation, read by its id.
    func storedConversation(_ id: ConversationID) async throws -> ConversationInfo? {
        try lifecycle.checkOpen()
        return try await store.fetchConversation(id, scope: scope)
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

    /// The backend answered a start: the conversation (and the messages it began with) is
    /// stored before the caller hears back.
    func conversationStarted(_ result: Result<BackendResponse, SwitchboardError>, reply: Reply<ConversationID>) async {
        let started: ConversationSnapshot
        switch result {
        case .success(.conversation(let info)): started = ConversationSnapshot(conversation: info)
        case .success(.startedConversation(let snapshot)): started = snapshot
        case .success(let response): return reply.fail(SwitchboardError(.protocolViolation, "startConversation answered with \(response)"))
        case .failure(let error): return reply.fail(error)
        }
        await perform(machine.conversationStarted(started))
        reply.succeed(started.conversation.id)
    }

    public func refresh(forced: Bool) async throws {
        // The updates it answers with are applied before the answer reaches here (`requestFinished`).
        _ = try await performNow(.poll(forced: forced))
    }

    public func setCustomFields(_ fields: [String: String]) async throws {
        _ = try await performNow(.setCustomFields(nil, fields))
    }

    public func performVendorRequest(_ name: String, payload: JSONValue) async throws -> BackendResponse {
        try await performNow(.vendor(name: name, payload: payload))
    }

    // MARK: Sending

    func send(_ draft: MessageDraft, in conversation: ConversationID) async throws -> Message {
        try checkSendable(draft)
        return try await submit { .send(draft, in: conversation, $0) }
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

    /// Stores the message and its outbox entry, announces it pending, and hands it to the outbox.
    func enqueueSend(_ draft: MessageDraft, in conversation: ConversationID) async throws -> Message {
        try lifecycle.checkOpen()
        let outgoing = OutgoingMessage(
            clientID: ClientMessageID.random(using: &random),
            conversationID: conversation,
            content: draft
        )
        let now = clock.date
        let entry = OutboxEntry(message: outgoing, createdAt: now)
        let message = entry.pendingMessage
        try await ensureConversation(conversation, time: now)
        // The message and its outbox entry in one transaction: a crash between the two would
        // leave a pending message nothing resends.
        try await write([.saveMessages([message]), .saveOutboxEntry(entry)])
        publish(.messageAdded(message, position: .newest), conversation: conversation, time: now)
        await perform(machine.outbox { $0.enqueue(entry) })
        return message
    }

    func sendFinished(_ entry: OutboxEntry, result: Result<BackendResponse, SwitchboardError>) async {
        if case .failure(let error) = result {
            logger.debug("send failed", metadata: ["error": "\(error)", "attempts": "\(entry.attempts + 1)"])
        }
        // The confirmed message and the end of its outbox entry go in one transaction.
        await inOneTransaction {
            await run { $0.sendFinished(entry, result: result, facts: $1, using: &self.random) }
        }
    }

    /// Messages waiting in the outbox, FIFO per conversation.
    public var pendingSends: [OutboxEntry] { outbox.entries }

    // MARK: Typing and read markers

    @discardableResult
    func userTyping(_ isTyping: Bool, draft: String?, in conversation: ConversationID) async throws -> TypingOutcome {
        try requireCapability(.typing)
        return try await submit { .typing(isTyping, draft: draft, in: conversation, $0) }
    }

    /// The user typed, or stopped: the throttle decides what goes out.
    func typingChanged(_ isTyping: Bool, draft: String?, in conversation: ConversationID) async throws -> TypingOutcome {
        try lifecycle.checkOpen()
        let (outcome, actions) = machine.typing(isTyping, draft: draft, in: conversation, now: clock.now)
        await perform(actions)
        return outcome
    }

    func markRead(upTo marker: ChatEvent.ReadMarker?, in conversation: ConversationID) async throws {
        try requireCapability(.readMarkers)
        try await submit { .markRead(marker, in: conversation, $0) }
    }

    func setReadMarker(_ marker: ChatEvent.ReadMarker?, in conversation: ConversationID) async throws {
        try lifecycle.checkOpen()
        if let failure = await run({ $0.markRead(marker, in: conversation, facts: $1) }) { throw failure }
    }

    // MARK: History

    func storedMessages(in conversation: ConversationID, before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        try lifecycle.checkOpen()
        return try await store.fetchMessages(in: conversation, before: before, limit: limit, scope: scope)
    }

    func history(in conversation: ConversationID, before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        let stored = try await storedMessages(in: conversation, before: before, limit: limit)
        guard stored.count < limit, descriptor.capabilities.contains(.historyPaging) else { return stored }
        try await submit { .history(conversation, limit: limit, $0) }
        return try await storedMessages(in: conversation, before: before, limit: limit)
    }

    /// The app asked for the next history page: asks the backend for it, or, when a page is on
    /// its way already, waits for that one. Answered at once when there is nothing more to ask.
    func requestHistory(_ conversation: ConversationID, limit: Int, reply: Reply<Void>) async {
        do {
            try lifecycle.checkOpen()
            var next = conversations[conversation].history.next(in: conversation, limit: limit, isLinkOpen: isLinkOpen)
            if next == .readOldestStored {
                let oldest = try await flushed().fetchOldestConfirmedMessage(in: conversation, scope: scope)
                next = conversations[conversation].history.next(in: conversation, limit: limit, isLinkOpen: isLinkOpen, oldestStored: .some(oldest))
            }
            switch next {
            case .ask(let query):
                guard enqueue(.history(query), lane: conversation) else { return reply.succeed(()) }
            case .join:
                break
            case .answerNow, .readOldestStored:
                return reply.succeed(())
            }
            conversations[conversation].history.join(reply)
        } catch {
            reply.fail(error)
        }
    }

    /// The page arrived: stored, then everyone waiting for it hears back.
    func historyPageArrived(_ result: Result<BackendResponse, SwitchboardError>, in conversation: ConversationID) async {
        switch result {
        case .success(.history(let page)):
            let waiters = conversations[conversation].history.pageArrived(page)
            await deliver(page.messages.map { BackendEvent(.messageAdded($0, position: .history), conversation: conversation, time: $0.time) })
            for waiter in waiters { waiter.succeed(()) }
        case .success(let response):
            failHistoryWaiters(in: conversation, SwitchboardError(.protocolViolation, "history answered with \(response)"))
        case .failure(let error):
            failHistoryWaiters(in: conversation, error)
        }
    }

    func failHistoryWaiters(in conversation: ConversationID, _ error: SwitchboardError) {
        for waiter in conversations[conversation].history.pageFailed() { waiter.fail(error) }
    }
}

extension ChatSession {
    /// Runs one app command on the loop.
    func handle(_ command: AppCommand) async {
        switch command {
        case .lifecycle(let change, let reply):
            await reply.answer { try await applyLifecycle(change) }
        case .send(let draft, let conversation, let reply):
            await reply.answer { try await enqueueSend(draft, in: conversation) }
        case .typing(let isTyping, let draft, let conversation, let reply):
            await reply.answer { try await typingChanged(isTyping, draft: draft, in: conversation) }
        case .markRead(let marker, let conversation, let reply):
            await reply.answer { try await setReadMarker(marker, in: conversation) }
        case .history(let conversation, let limit, let reply):
            await requestHistory(conversation, limit: limit, reply: reply)
        case .startConversation(let draft, let reply):
            await reply.answerLater { try startRequest(.start(draft, reply), named: "startConversation", lane: nil) }
        case .request(let request, let applying, let reply):
            await reply.answerLater { try startRequest(.app(request, applying, reply), named: request.name, lane: request.conversationID) }
        }
    }

    /// Queues an app's request on the open link; its outcome answers the caller.
    private func startRequest(_ work: LaneWork, named name: String, lane: ConversationID?) throws {
        try lifecycle.checkOpen()
        guard enqueue(work, lane: lane) else { throw SwitchboardError(.notConnected, "\(name) needs a connection") }
    }
}
