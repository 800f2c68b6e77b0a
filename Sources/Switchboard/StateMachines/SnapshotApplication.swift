/// What a snapshot does to the engine's per-conversation state, decided from the stored rows it is
/// compared with: the events to store now, the windows whose gap below is filled first (their
/// message events held until it closes), the windows that wait for a fill already open, and the
/// heads the sequence trackers observe.
///
/// Pure: the engine reads the stored rows (``SnapshotDiff/Stored``) and, for the windows that may
/// leave a gap (``windowsToPlace(_:stored:states:)``), the oldest confirmed stored
/// message, then performs the plan.
struct SnapshotApplication: Sendable {
    /// How a new window fill pages.
    var pageLimit: Int
    var maxPages: Int
    /// Whether windows are filled at all: backends that page history and have no sequences
    /// (sequences find their gaps themselves).
    var fillsWindows: Bool

    /// What to perform.
    struct Plan: Sendable {
        /// The events to store, in order.
        var deliver: [BackendEvent] = []
        /// Conversations whose fill just opened, in a stable order: each asks for its first page.
        var newFills: [ConversationID] = []
        /// Conversations with a sequence head to observe, in snapshot order.
        var heads: [(ConversationID, Int64)] = []
    }

    /// The conversations of `snapshot` whose window may leave a gap, so the oldest confirmed
    /// stored message is needed to tell: a window whose oldest message is not stored (or that says
    /// what it skipped), with no fill open.
    func windowsToPlace(_ snapshot: BackendSnapshot, stored: SnapshotDiff.Stored, states: ConversationStates) -> [ConversationID] {
        guard fillsWindows else { return [] }
        return snapshot.conversations.filter { item in
            let id = item.conversation.id
            return states[id].windowFill == nil && Self.mayLeaveGap(item, isStored: { stored.messages[id]?[$0] != nil })
        }.map(\.conversation.id)
    }

    /// Whether the window of `item` may leave a gap below it, before the store's oldest message is
    /// known: the backend says it skipped events (``ConversationSnapshot/skippedAfter``), or the
    /// window's oldest message is not stored. Most windows (every reconnect's recovery) start with
    /// a stored message: that is known without reading the oldest.
    static func mayLeaveGap(_ item: ConversationSnapshot, isStored: (MessageID) -> Bool) -> Bool {
        guard !item.messagesAreComplete, let oldest = item.messages.min(by: { $0.orderKey < $1.orderKey }) else { return false }
        if item.skippedAfter != nil { return true }
        guard let serverID = oldest.serverID else { return false }
        return !isStored(serverID)
    }

    /// Whether a window that ``mayLeaveGap(_:isStored:)`` does: the store holds something older
    /// to fill down to (`storedOldest`, its oldest confirmed message).
    static func hasGap(below item: ConversationSnapshot, storedOldest: Message?) -> Bool {
        guard let storedOldest, let oldest = item.messages.min(by: { $0.orderKey < $1.orderKey }) else { return false }
        return item.skippedAfter != nil || storedOldest.orderKey < oldest.orderKey
    }

    /// Applies `snapshot` to `states` and says what to perform. `storedOldest` holds the oldest
    /// confirmed stored message of each conversation ``windowsToPlace(_:stored:states:)`` named
    /// (absent or `nil`: none).
    func apply(
        _ snapshot: BackendSnapshot,
        stored: SnapshotDiff.Stored,
        storedOldest: [ConversationID: Message],
        to states: inout ConversationStates
    ) -> Plan {
        var stored = stored
        if snapshot.isComplete {
            // Listed: the backend knows it. Not listed: started here after the backend read its
            // list, or not yet on the server (a CXone thread before its first message): not gone.
            for item in snapshot.conversations { states[item.conversation.id].startedLocally = false }
            for id in states.ids(where: \.startedLocally) { stored.conversations[id] = nil }
        }
        let windows = Set(windowsToPlace(snapshot, stored: stored, states: states))
        let filling = snapshot.conversations.filter { windows.contains($0.conversation.id) && Self.hasGap(below: $0, storedOldest: storedOldest[$0.conversation.id]) }
        let fillingIDs = Set(filling.map(\.conversation.id))
        // A new fill holds its window's message events from the start; an open one holds them too.
        let events = SnapshotDiff.events(from: snapshot, against: stored)
        // A window for a conversation whose fill is still open waits its turn: the gap below it
        // is not the one being filled (a second `limited` sync, the next link's recovery).
        for item in snapshot.conversations where states[item.conversation.id].windowFill != nil && !fillingIDs.contains(item.conversation.id) {
            if !item.messages.isEmpty, !item.messagesAreComplete {
                states[item.conversation.id].queuedWindows.append(QueuedWindow(window: item))
            }
        }
        var plan = Plan()
        plan.newFills = fillingIDs.sorted { $0.rawValue < $1.rawValue }
        for item in filling {
            let id = item.conversation.id
            states[id].windowFill = WindowBackfillStateMachine(
                conversation: id,
                window: events.filter { $0.conversationID == id && WindowBackfillStateMachine.holds($0) },
                lowerBound: item.skippedAfter,
                pageLimit: pageLimit,
                maxPages: maxPages
            )
        }
        for event in events {
            if let id = event.conversationID, states[id].windowFill != nil, WindowBackfillStateMachine.holds(event) {
                if !fillingIDs.contains(id) { states[id].holdDuringFill(event) }
            } else {
                plan.deliver.append(event)
            }
        }
        plan.heads = snapshot.conversations.compactMap { item in item.conversation.lastSequence.map { (item.conversation.id, $0) } }
        return plan
    }
}

extension ConversationState {
    /// Holds a message event while the conversation's gap is being filled: with the newest window
    /// waiting its turn, else with the fill.
    mutating func holdDuringFill(_ event: BackendEvent) {
        if let last = queuedWindows.indices.last {
            queuedWindows[last].events.append(event)
        } else {
            windowFill!.hold(event)
        }
    }
}
