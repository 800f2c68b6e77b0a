import Foundation

/// The engine's ``Conversation``: a handle that forwards to its session.
struct SessionConversation: Conversation {
    let session: ChatSession
    let id: ConversationID
    var sessionID: SessionID { session.id }

    func info() async throws -> ConversationInfo {
        guard let info = try await session.storedConversation(id) else {
            throw SwitchboardError(.conversationNotFound, "conversation \(id) is gone")
        }
        return info
    }

    func send(_ draft: MessageDraft) async throws -> Message { try await session.send(draft, in: id) }
    func send(_ draft: MessageDraft, clientID: ClientMessageID) async throws -> Message { try await session.send(draft, in: id, clientID: clientID) }

    func edit(_ message: MessageID, text: String) async throws {
        try await apply(.edit(id, message, text: text, payload: nil))
    }

    func delete(_ message: MessageID) async throws {
        try await apply(.delete(id, message))
    }

    @discardableResult
    func userTyping(draft: String?) async throws -> TypingOutcome { try await session.userTyping(true, draft: draft, in: id) }
    func userStoppedTyping() async throws { try await session.userTyping(false, draft: nil, in: id) }
    func markRead(upTo marker: ChatEvent.ReadMarker?) async throws { try await session.markRead(upTo: marker, in: id) }

    func storedMessages(before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        try await session.storedMessages(in: id, before: before, limit: limit)
    }

    func history(before: MessageOrderKey?, limit: Int) async throws -> [Message] {
        try await session.history(in: id, before: before, limit: limit)
    }

    func events(buffering: EventBus.BufferingPolicy) -> EventStream {
        session.events(filter: EventFilter(conversations: [id]), buffering: buffering)
    }

    func close() async throws { try await apply(.closeConversation(id)) }
    func archive() async throws { try await apply(.archiveConversation(id)) }
    func update(_ changes: ConversationChanges) async throws {
        _ = try await session.performNow(.updateConversation(id, changes), applying: .changes(changes, to: id))
    }

    func setCustomFields(_ fields: [String: String]) async throws {
        // Kept with the conversation (`customData["customFields"]`), so they read back offline.
        _ = try await session.performNow(.setCustomFields(id, fields), applying: .customFields(fields, to: id))
    }

    func rateAgent(_ agent: ParticipantID?, rating: Int, comment: String?) async throws {
        try await apply(.rateAgent(id, agent: agent, rating: rating, comment: comment))
    }

    func addParticipants(_ participants: [Participant]) async throws {
        try await apply(.addParticipants(id, participants))
    }

    func updateParticipants(_ participants: [Participant]) async throws {
        try await apply(.updateParticipants(id, participants))
    }

    func removeParticipants(_ participants: [ParticipantID]) async throws {
        try await apply(.removeParticipants(id, participants))
    }

    /// Performs a request and applies what the server answered (the edited message, the
    /// updated conversation); the server's own events confirm it again and are de-duplicated.
    private func apply(_ request: BackendRequest) async throws {
        _ = try await session.performNow(request, applying: .response(in: id))
    }
}
