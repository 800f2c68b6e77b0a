import Foundation
import Switchboard

/// A link of a test double that hands each request to a script or a server model as a value
/// (``BackendRequest``) and reads the answer (``BackendResponse``) back as the method's type: an
/// answer of the wrong kind is the script's mistake, and fails the request as a protocol
/// violation. ``TestBackend`` and the in-memory backend are such links; a real adapter implements
/// the typed methods of ``BackendConnection`` directly.
protocol AnsweringConnection: BackendConnection {
    func answer(_ request: BackendRequest) async throws -> BackendResponse
}

extension AnsweringConnection {
    func send(_ message: OutgoingMessage) async throws -> Message? {
        try await scripted(.send(message)) { if case .message(let message) = $0 { message } else { nil } }
    }
    func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        try await scripted(.edit(conversation, message, text: text, payload: payload)) { if case .message(let message) = $0 { message } else { nil } }
    }
    func delete(_ message: MessageID, in conversation: ConversationID) async throws {
        try await done(.delete(conversation, message))
    }
    func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws {
        try await done(.typing(conversation, isTyping: isTyping, draft: draft))
    }
    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        try await done(.markRead(conversation, upTo: marker))
    }
    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        try await expecting(.startConversation(draft)) {
            switch $0 {
            case .conversation(let info): ConversationSnapshot(conversation: info)
            case .startedConversation(let snapshot): snapshot
            default: nil
            }
        }
    }
    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        try await scripted(.closeConversation(conversation)) { Self.closed($0, conversation) } ?? .done
    }
    func archiveConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        try await scripted(.archiveConversation(conversation)) { Self.closed($0, conversation) } ?? .done
    }
    func updateConversation(_ conversation: ConversationID, _ changes: ConversationChanges) async throws -> ConversationInfo? {
        try await scripted(.updateConversation(conversation, changes), Self.conversation)
    }
    func rateAgent(in conversation: ConversationID, agent: ParticipantID?, rating: Int, comment: String?) async throws {
        try await done(.rateAgent(conversation, agent: agent, rating: rating, comment: comment))
    }
    func setCustomFields(_ fields: [String: String], of conversation: ConversationID?) async throws {
        try await done(.setCustomFields(conversation, fields))
    }
    func addParticipants(_ participants: [Participant], to conversation: ConversationID) async throws -> ConversationInfo? {
        try await scripted(.addParticipants(conversation, participants), Self.conversation)
    }
    func updateParticipants(_ participants: [Participant], in conversation: ConversationID) async throws -> ConversationInfo? {
        try await scripted(.updateParticipants(conversation, participants), Self.conversation)
    }
    func removeParticipants(_ participants: [ParticipantID], from conversation: ConversationID) async throws -> ConversationInfo? {
        try await scripted(.removeParticipants(conversation, participants), Self.conversation)
    }
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        try await expecting(.history(query)) { if case .history(let page) = $0 { page } else { nil } }
    }
    func retransmit(_ range: ClosedRange<Int64>, in conversation: ConversationID) async throws -> Retransmission {
        try await expecting(.retransmit(conversation, range)) {
            if case .retransmitted(let events, let isComplete) = $0 { Retransmission(events, isComplete: isComplete) } else { nil }
        }
    }
    func poll(forced: Bool) async throws -> [BackendUpdate] {
        try await expecting(.poll(forced: forced)) { if case .updates(let updates) = $0 { updates } else { nil } }
    }

    /// A close or archive answered: with the conversation, or with its removal (as
    /// ``BackendConnection/perform(_:)`` says ``ClosedConversation/removed``).
    static func closed(_ response: BackendResponse, _ conversation: ConversationID) -> ClosedConversation? {
        if case .conversation(let info) = response { return .conversation(info) }
        if case .updates(let updates) = response, updates == [.event(BackendEvent(.conversationRemoved, conversation: conversation))] {
            return .removed
        }
        return nil
    }

    static func conversation(_ response: BackendResponse) -> ConversationInfo? {
        if case .conversation(let info) = response { info } else { nil }
    }

    /// An answer that may be "done" (`nil`) or a value.
    func scripted<Value>(_ request: BackendRequest, _ value: (BackendResponse) -> Value?) async throws -> Value? {
        let response = try await answer(request)
        if case .done = response { return nil }
        guard let value = value(response) else { throw Self.wrongAnswer(response, to: request) }
        return value
    }

    func expecting<Value>(_ request: BackendRequest, _ value: (BackendResponse) -> Value?) async throws -> Value {
        let response = try await answer(request)
        guard let value = value(response) else { throw Self.wrongAnswer(response, to: request) }
        return value
    }

    func done(_ request: BackendRequest) async throws {
        _ = try await answer(request)
    }

    static func wrongAnswer(_ response: BackendResponse, to request: BackendRequest) -> SwitchboardError {
        SwitchboardError(.protocolViolation, "the test answered \(request.name) with \(response)")
    }
}
