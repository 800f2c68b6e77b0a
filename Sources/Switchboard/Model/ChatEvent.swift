public import Foundation

/// One normalized event on the bus: the same shape whatever backend produced it.
///
/// Every event names the session and backend it came from, its conversation (if any), when it
/// happened and, for sequenced backends, the conversation sequence it carries.
public struct ChatEvent: Sendable, Hashable, Codable {
    /// Who produced an event.
    public struct Origin: Sendable, Hashable, Codable {
        public var session: SessionID
        public var backend: BackendName
        public init(session: SessionID, backend: BackendName) {
            self.session = session
            self.backend = backend
        }
    }

    public var origin: Origin
    public var conversationID: ConversationID?
    public var time: Date
    public var sequence: Int64?
    public var kind: Kind

    public init(origin: Origin, conversationID: ConversationID?, time: Date, sequence: Int64? = nil, kind: Kind) {
        self.origin = origin
        self.conversationID = conversationID
        self.time = time
        self.sequence = sequence
        self.kind = kind
    }
}

extension ChatEvent {
    /// What happened.
    ///
    /// New cases may be added in minor releases: switch over it with a `default:` branch.
    public enum Kind: Sendable, Hashable, Codable {
        indirect case connection(ConnectionState, reason: DisconnectReason?)

        indirect case conversationAdded(ConversationInfo)
        indirect case conversationUpdated(ConversationInfo)
        case conversationStateChanged(ConversationInfo.State, previous: ConversationInfo.State?)
        case conversationRemoved

        case participantsAdded([Participant])
        case participantsUpdated([Participant])
        case participantsRemoved([ParticipantID])
        indirect case agentChanged(Participant?)

        indirect case messageAdded(Message, position: MessagePosition)
        indirect case messageUpdated(Message)
        case messageRemoved(MessageID)
        case historyCleared

        case typing(ParticipantID, isTyping: Bool, draft: String?)
        case readMarker(ParticipantID, ReadMarker)
        case availability(Availability)
        /// The customer's place in the queue; `nil` once out of it.
        case queuePosition(Int?)
        case settingsChanged(JSONValue)
        /// A vendor event the model does not cover, kept whole.
        case custom(name: String, payload: JSONValue)

        /// Something went wrong but the session goes on (a malformed frame, a failed retransmit).
        indirect case error(SwitchboardError)
        /// The session has ended for good.
        indirect case fatal(SwitchboardError)
        /// Only on bus subscriptions: the subscriber fell behind its buffer and `dropped` events
        /// were discarded for it. Re-read state from the store.
        case gap(dropped: Int)
    }

    /// Where an added message belongs relative to what the app has seen.
    public enum MessagePosition: String, Sendable, Hashable, Codable {
        /// The newest end: live messages, catch-up after a reconnect, local sends.
        case newest
        /// An older page loaded by history paging.
        case history
    }

    /// How far a participant has read.
    public enum ReadMarker: Sendable, Hashable, Codable {
        case sequence(Int64)
        case message(MessageID)
        case time(Date)
    }

    public enum Availability: String, Sendable, Hashable, Codable {
        case online
        case busyOnline
        case offline
        case busyOffline
        case unknown
    }

    /// The coarse kind of an event, for filters.
    public enum Category: String, Sendable, Hashable, Codable, CaseIterable {
        case connection, conversation, participants, message, typing, readMarker, availability
        case queue, settings, custom, error, gap
    }
}

extension ChatEvent.Kind {
    public var category: ChatEvent.Category {
        switch self {
        case .connection: return .connection
        case .conversationAdded, .conversationUpdated, .conversationStateChanged, .conversationRemoved:
            return .conversation
        case .participantsAdded, .participantsUpdated, .participantsRemoved, .agentChanged: return .participants
        case .messageAdded, .messageUpdated, .messageRemoved, .historyCleared: return .message
        case .typing: return .typing
        case .readMarker: return .readMarker
        case .availability: return .availability
        case .queuePosition: return .queue
        case .settingsChanged: return .settings
        case .custom: return .custom
        case .error, .fatal: return .error
        case .gap: return .gap
        }
    }
}

/// The state of a session's link to its backend, as the app sees it.
public enum ConnectionState: String, Sendable, Hashable, Codable {
    case connecting
    case connected
    /// Lost; the engine will try again after a backoff delay.
    case waitingToReconnect
    /// Paused by the app, or closed.
    case disconnected
}

/// Why a session is not connected.
public enum DisconnectReason: Sendable, Hashable, Codable {
    case userInitiated
    case connectionLost(SwitchboardError)
    case serverInitiated(SwitchboardError)
    case fatal(SwitchboardError)
}
