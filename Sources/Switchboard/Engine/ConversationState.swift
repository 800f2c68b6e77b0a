/// What the engine keeps for one conversation, in one value: where to add a per-conversation
/// feature. Only the loop changes it.
struct ConversationState: Sendable {
    /// Orders its event stream (backends with sequences); made when its first event or head
    /// comes.
    var tracker: SequenceTrackerStateMachine<BackendEvent>?
    /// The sequence stored as delivered: where the next link resumes.
    var storedSequence: Int64?
    /// Known to be in the store, so an event for it needs no read to learn that (the store's read
    /// per event was a third of an inbound message's time). Forgotten when a batch fails to commit.
    var isStored = false
    /// The stored value as this session last wrote or read it, so a new message (which moves the
    /// conversation's activity and unread count) needs no read of it. Forgotten with `isStored`.
    var info: ConversationInfo?
    /// Closes the gap below a recent window with history pages (backends without sequences).
    var windowFill: WindowBackfillStateMachine?
    /// Windows that came while the fill was open (a second `limited` sync, the next link's
    /// recovery), oldest first, each holding the message events that came after it. Each may have
    /// a gap of its own: it is checked, and filled, when the fill before it closes.
    var queuedWindows: [QueuedWindow] = []
    var typing: TypingThrottleStateMachine?
    /// The others the app was told are typing, and have not been said to stop.
    var othersTyping: Set<ParticipantID> = []
    /// The app's own read marker: sent, on its way, never moving back.
    var readMarker = ReadMarkerStateMachine()
    /// History paging: where the next page starts, and the app's calls waiting for it.
    var history = HistoryPagingStateMachine<Reply<Void>>()
    /// Started by the app and not listed by any snapshot yet: a complete snapshot may predate it
    /// (it was read while the conversation was being made), so it does not remove it.
    var startedLocally = false
}

/// The states of every conversation the engine keeps something for.
struct ConversationStates: Sendable {
    private var states: [ConversationID: ConversationState] = [:]

    /// The state of `id`, empty when nothing is kept for it yet.
    subscript(id: ConversationID) -> ConversationState {
        get { states[id] ?? ConversationState() }
        _modify { yield &states[id, default: ConversationState()] }
    }

    /// Whether anything is kept for `id` (it was not removed since).
    func isKept(_ id: ConversationID) -> Bool {
        states[id] != nil
    }

    /// Forgets everything kept for `id` (the conversation is gone).
    mutating func remove(_ id: ConversationID) {
        states[id] = nil
    }

    /// The ids whose state matches, in a stable order.
    func ids(where matches: (ConversationState) -> Bool) -> [ConversationID] {
        states.filter { matches($0.value) }.keys.sorted { $0.rawValue < $1.rawValue }
    }

    func contains(where matches: (ConversationState) -> Bool) -> Bool {
        states.values.contains(where: matches)
    }

    /// Changes every kept state.
    mutating func forEach(_ change: (inout ConversationState) -> Void) {
        for id in Array(states.keys) { change(&states[id]!) }
    }

    /// Events held back by the trackers, waiting for gaps to fill.
    var heldEvents: Int {
        states.values.reduce(0) { $0 + ($1.tracker?.heldCount ?? 0) }
    }

    /// Where each conversation's events resume: the tracker's delivered sequence, else the
    /// stored one.
    var sequences: [ConversationID: Int64] {
        states.compactMapValues { $0.tracker?.delivered ?? $0.storedSequence }
    }
}

/// A window that came while its conversation's fill was open, and the message events after it.
struct QueuedWindow: Sendable {
    let window: ConversationSnapshot
    var events: [BackendEvent] = []
}
