@_spi(TestKit) public import Switchboard

/// The reference backend: a complete adapter over ``InMemoryServer``, supporting every
/// capability. It is the conformance suite's self-test and the first thing an adapter author
/// should read: it only translates — frames in, normalized updates out; requests in, replies
/// out — and leaves every guarantee to the engine.
public struct InMemoryBackend: ChatBackend {
    public let server: InMemoryServer
    /// Who this backend's sessions act as.
    public let user: ParticipantID
    public let descriptor: BackendDescriptor

    public init(
        server: InMemoryServer,
        user: ParticipantID,
        name: BackendName = "in-memory",
        capabilities: BackendCapabilities = .all,
        typingPolicy: TypingPolicy = .minimumInterval(.seconds(10))
    ) {
        self.server = server
        self.user = user
        self.descriptor = BackendDescriptor(
            name: name,
            capabilities: capabilities,
            limits: BackendLimits(
                maxTextLength: server.configuration.maxTextLength,
                typingPolicy: typingPolicy
            ),
            sync: .sequenced(batchLimit: server.configuration.maxRetransmitBatch)
        )
    }

    /// The user's rows are theirs alone on a shared store.
    public var storeUser: String? { user.rawValue }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let (updates, continuation) = BackendUpdates.makeStream()
        let sink = InMemoryClientSink(
            receive: { text in
                switch Self.decode(text) {
                case .update(let update): continuation.yield(update)
                case .fatal(let error): continuation.finish(throwing: error)
                }
            },
            close: { error in
                continuation.finish(throwing: error)
            }
        )
        let client = try server.attach(user: user, sink: sink)
        defer { server.detach(client) }
        return try await body(InMemoryConnection(server: server, user: user, client: client, updates: updates))
    }

    enum Decoded {
        case update(BackendUpdate)
        case fatal(SwitchboardError)
    }

    /// The client side of the wire: one frame of text to one normalized update. Text that is
    /// not a frame becomes a problem report; it never ends the link.
    static func decode(_ text: String) -> Decoded {
        let frame: InMemoryFrame
        do {
            frame = try InMemoryFrame.decode(text)
        } catch {
            return .update(.problem(error as? SwitchboardError ?? SwitchboardError(.protocolViolation, "bad frame")))
        }
        switch frame {
        case .snapshot(let conversations):
            return .update(
                .snapshot(
                    BackendSnapshot(
                        conversations: conversations.map { ConversationSnapshot(conversation: $0) },
                        isComplete: true
                    )
                )
            )
        case .event(let published, let conversation, let sequence, let time):
            guard let kind = BackendEvent.Kind(published) else {
                return .update(.problem(SwitchboardError(.protocolViolation, "a \(published.category) event is the engine's to say, not the server's")))
            }
            return .update(.event(BackendEvent(kind, conversation: conversation, sequence: sequence, time: time)))
        case .fatal(let error):
            return .fatal(error)
        }
    }
}

struct InMemoryConnection: AnsweringConnection {
    let server: InMemoryServer
    let user: ParticipantID
    let client: Int
    let updates: BackendUpdates

    func answer(_ request: BackendRequest) async throws -> BackendResponse {
        try Task.checkCancellation()
        return try server.handle(request, from: user, client: client)
    }
}

/// A robot acting as an agent (or any participant) on an ``InMemoryServer``.
public struct InMemoryAgent: Sendable {
    public let server: InMemoryServer
    public let participant: Participant

    public var id: ParticipantID { participant.id }

    /// Joins the conversation as its assigned agent and makes it active.
    public func join(_ conversation: ConversationID) throws(SwitchboardError) {
        defer { server.changes.signal() }
        try server.state.withLock { state throws(SwitchboardError) in
            // Only the info is read: holding the stored conversation while appending to it would
            // copy its whole log and message table on every call.
            guard let info = state.conversations[conversation]?.info else {
                throw SwitchboardError(.conversationNotFound, "no conversation \(conversation)")
            }
            if info.participant(participant.id) == nil {
                state.conversations[conversation]!.info.participants.append(participant)
                server.append(.participantsAdded([participant]), to: conversation, state: &state)
            }
            state.conversations[conversation]!.info.assignedAgent = participant
            server.append(.agentChanged(participant), to: conversation, state: &state)
            server.setState(.active, of: conversation, state: &state)
        }
    }

    @discardableResult
    public func send(_ text: String, in conversation: ConversationID) throws(SwitchboardError) -> Message {
        defer { server.changes.signal() }
        return try server.state.withLock { state throws(SwitchboardError) in
            guard let info = state.conversations[conversation]?.info else {
                throw SwitchboardError(.conversationNotFound, "no conversation \(conversation)")
            }
            guard let member = info.participant(participant.id) else {
                throw SwitchboardError(.permissionDenied, "\(participant.id) is not in \(conversation)")
            }
            return server.newMessage(in: conversation, from: member, clientID: nil, kind: .text, text: text, state: &state)
        }
    }

    public func typing(_ isTyping: Bool, in conversation: ConversationID, draft: String? = nil) throws(SwitchboardError) {
        _ = try server.handle(.typing(conversation, isTyping: isTyping, draft: draft), from: participant.id, client: nil)
    }

    /// Marks everything in the conversation read.
    public func markRead(_ conversation: ConversationID) throws(SwitchboardError) {
        let last = server.conversation(conversation)?.lastSequence ?? 0
        _ = try server.handle(.markRead(conversation, upTo: .sequence(last)), from: participant.id, client: nil)
    }

    public func close(_ conversation: ConversationID) throws(SwitchboardError) {
        _ = try server.handle(.closeConversation(conversation), from: participant.id, client: nil)
    }
}
