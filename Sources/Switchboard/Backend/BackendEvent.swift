public import Foundation

/// An incremental event as an adapter reports it: what happened, in the adapter's own vocabulary
/// (``Kind``), plus where it sits in the backend's stream.
public struct BackendEvent: Sendable, Hashable {
    /// What an adapter may say happened: the bus's ``ChatEvent/Kind`` without what only the engine
    /// says (the connection's state, errors, the end of the session, a subscriber's gap). A
    /// failure the adapter meets is a ``BackendUpdate/problem(_:)`` or a thrown error.
    ///
    /// New cases may be added in minor releases.
    public enum Kind: Sendable, Hashable {
        indirect case conversationAdded(ConversationInfo)
        indirect case conversationUpdated(ConversationInfo)
        case conversationStateChanged(ConversationInfo.State, previous: ConversationInfo.State?)
        case conversationRemoved

        case participantsAdded([Participant])
        case participantsUpdated([Participant])
        case participantsRemoved([ParticipantID])
        indirect case agentChanged(Participant?)

        indirect case messageAdded(Message, position: ChatEvent.MessagePosition)
        indirect case messageUpdated(Message)
        case messageRemoved(MessageID)
        case historyCleared

        case typing(ParticipantID, isTyping: Bool, draft: String?)
        case readMarker(ParticipantID, ChatEvent.ReadMarker)
        case availability(ChatEvent.Availability)
        /// The customer's place in the queue; `nil` once out of it.
        case queuePosition(Int?)
        case settingsChanged(JSONValue)
        /// A vendor event the model does not cover, kept whole.
        case custom(name: String, payload: JSONValue)

        /// The event as the bus publishes it.
        public var published: ChatEvent.Kind {
            switch self {
            case .conversationAdded(let info): .conversationAdded(info)
            case .conversationUpdated(let info): .conversationUpdated(info)
            case .conversationStateChanged(let state, let previous): .conversationStateChanged(state, previous: previous)
            case .conversationRemoved: .conversationRemoved
            case .participantsAdded(let participants): .participantsAdded(participants)
            case .participantsUpdated(let participants): .participantsUpdated(participants)
            case .participantsRemoved(let ids): .participantsRemoved(ids)
            case .agentChanged(let agent): .agentChanged(agent)
            case .messageAdded(let message, let position): .messageAdded(message, position: position)
            case .messageUpdated(let message): .messageUpdated(message)
            case .messageRemoved(let id): .messageRemoved(id)
            case .historyCleared: .historyCleared
            case .typing(let participant, let isTyping, let draft): .typing(participant, isTyping: isTyping, draft: draft)
            case .readMarker(let participant, let marker): .readMarker(participant, marker)
            case .availability(let availability): .availability(availability)
            case .queuePosition(let position): .queuePosition(position)
            case .settingsChanged(let settings): .settingsChanged(settings)
            case .custom(let name, let payload): .custom(name: name, payload: payload)
            }
        }

        /// The bus event as an adapter may say it; `nil` for what only the engine says
        /// (``ChatEvent/Kind/connection(_:reason:)``, ``ChatEvent/Kind/error(_:)``,
        /// ``ChatEvent/Kind/fatal(_:)``, ``ChatEvent/Kind/gap(dropped:)``).
        public init?(_ published: ChatEvent.Kind) {
            switch published {
            case .conversationAdded(let info): self = .conversationAdded(info)
            case .conversationUpdated(let info): self = .conversationUpdated(info)
            case .conversationStateChanged(let state, let previous): self = .conversationStateChanged(state, previous: previous)
            case .conversationRemoved: self = .conversationRemoved
            case .participantsAdded(let participants): self = .participantsAdded(participants)
            case .participantsUpdated(let participants): self = .participantsUpdated(participants)
            case .participantsRemoved(let ids): self = .participantsRemoved(ids)
            case .agentChanged(let agent): self = .agentChanged(agent)
            case .messageAdded(let message, let position): self = .messageAdded(message, position: position)
            case .messageUpdated(let message): self = .messageUpdated(message)
            case .messageRemoved(let id): self = .messageRemoved(id)
            case .historyCleared: self = .historyCleared
            case .typing(let participant, let isTyping, let draft): self = .typing(participant, isTyping: isTyping, draft: draft)
            case .readMarker(let participant, let marker): self = .readMarker(participant, marker)
            case .availability(let availability): self = .availability(availability)
            case .queuePosition(let position): self = .queuePosition(position)
            case .settingsChanged(let settings): self = .settingsChanged(settings)
            case .custom(let name, let payload): self = .custom(name: name, payload: payload)
            case .connection, .error, .fatal, .gap: return nil
            }
        }

        /// The bus's category of the event.
        public var category: ChatEvent.Category { published.category }
    }

    public var kind: Kind
    public var conversationID: ConversationID?
    /// The conversation event sequence, for sequenced backends. Events with a sequence go
    /// through gap detection; events without one are delivered as they come.
    public var sequence: Int64?
    /// The account-wide cursor after this event, if the backend has one.
    public var cursor: SyncCursor?
    public var time: Date?

    public init(
        _ kind: Kind,
        conversation: ConversationID? = nil,
        sequence: Int64? = nil,
        cursor: SyncCursor? = nil,
        time: Date? = nil
    ) {
        self.kind = kind
        self.conversationID = conversation
        self.sequence = sequence
        self.cursor = cursor
        self.time = time
    }
}
