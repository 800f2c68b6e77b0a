/// Which events a subscription receives. `nil` fields match everything.
public struct EventFilter: Sendable, Hashable {
    public var sessions: Set<SessionID>?
    public var backends: Set<BackendName>?
    /// Events of these conversations only (events without a conversation do not match).
    public var conversations: Set<ConversationID>?
    public var categories: Set<ChatEvent.Category>?

    public init(
        sessions: Set<SessionID>? = nil,
        backends: Set<BackendName>? = nil,
        conversations: Set<ConversationID>? = nil,
        categories: Set<ChatEvent.Category>? = nil
    ) {
        self.sessions = sessions
        self.backends = backends
        self.conversations = conversations
        self.categories = categories
    }

    /// Every event.
    public static var all: EventFilter { EventFilter() }

    public func matches(_ event: ChatEvent) -> Bool {
        if let sessions, !sessions.contains(event.origin.session) { return false }
        if let backends, !backends.contains(event.origin.backend) { return false }
        if let conversations {
            guard let id = event.conversationID, conversations.contains(id) else { return false }
        }
        if let categories, !categories.contains(event.kind.category) { return false }
        return true
    }

    /// Both filters at once.
    public func intersection(_ other: EventFilter) -> EventFilter {
        func meet<T>(_ lhs: Set<T>?, _ rhs: Set<T>?) -> Set<T>? {
            switch (lhs, rhs) {
            case (nil, let value), (let value, nil): return value
            case (let lhs?, let rhs?): return lhs.intersection(rhs)
            }
        }
        return EventFilter(
            sessions: meet(sessions, other.sessions),
            backends: meet(backends, other.backends),
            conversations: meet(conversations, other.conversations),
            categories: meet(categories, other.categories)
        )
    }
}
