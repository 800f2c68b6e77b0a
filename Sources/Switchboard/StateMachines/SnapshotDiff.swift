/// Turns a full snapshot into exactly the events that bring the store up to it.
///
/// A re-init (Webim `fullUpdate` after `reinit-required`, CXone thread recovery after a
/// reconnect) sends state the client may already have: the diff emits nothing for what is
/// unchanged, `added` for what is new, `updated`/`stateChanged`/`agentChanged`/participant
/// events for what changed, and `removed` only where the snapshot says it is complete.
/// Messages go out as `messageAdded`, which the engine reconciles by server and client id, so
/// nothing is duplicated and nothing is lost.
enum SnapshotDiff {
    /// The stored state a snapshot is compared with.
    struct Stored: Sendable {
        var conversations: [ConversationID: ConversationInfo]
        /// Stored messages of the conversations in the snapshot, by server id.
        var messages: [ConversationID: [MessageID: Message]]

        init(
            conversations: [ConversationID: ConversationInfo],
            messages: [ConversationID: [MessageID: Message]]
        ) {
            self.conversations = conversations
            self.messages = messages
        }
    }

    static func events(from snapshot: BackendSnapshot, against stored: Stored) -> [BackendEvent] {
        var events: [BackendEvent] = []
        var seen = Set<ConversationID>()
        for item in snapshot.conversations {
            let conversation = item.conversation
            let id = conversation.id
            seen.insert(id)
            if let old = stored.conversations[id] {
                events += conversationChanges(from: old, to: conversation)
            } else {
                events.append(BackendEvent(.conversationAdded(conversation), conversation: id))
            }
            let storedMessages = stored.messages[id] ?? [:]
            var present = Set<MessageID>()
            for message in item.messages {
                if let serverID = message.serverID {
                    present.insert(serverID)
                    if let old = storedMessages[serverID] {
                        if case .update(_, let merged) = MessageReconciler.reconcile(
                            message,
                            byServerID: old,
                            byClientID: nil
                        ) {
                            events.append(BackendEvent(.messageUpdated(merged), conversation: id))
                        }
                        continue
                    }
                }
                events.append(
                    BackendEvent(.messageAdded(message, position: .newest), conversation: id, sequence: nil)
                )
            }
            if item.messagesAreComplete {
                for serverID in storedMessages.keys.sorted() where !present.contains(serverID) {
                    events.append(BackendEvent(.messageRemoved(serverID), conversation: id))
                }
            }
        }
        if snapshot.isComplete {
            for id in stored.conversations.keys.sorted() where !seen.contains(id) {
                events.append(BackendEvent(.conversationRemoved, conversation: id))
            }
        }
        return events
    }

    /// The events that turn `old` into `new`: granular ones for state, agent and
    /// participants, then `conversationUpdated` with the whole new value if anything changed.
    ///
    /// An assigned agent takes part in the conversation (the engine adds it to the participants
    /// when the agent changes), so a `new` that names the agent only as the assignee does not
    /// remove it from the participants.
    static func conversationChanges(from old: ConversationInfo, to new: ConversationInfo) -> [BackendEvent] {
        let new = new.withAssignedAgentAsParticipant()
        guard old != new else { return [] }
        let id = new.id
        var events: [BackendEvent] = []
        if old.state != new.state {
            events.append(BackendEvent(.conversationStateChanged(new.state, previous: old.state), conversation: id))
        }
        if old.assignedAgent != new.assignedAgent {
            events.append(BackendEvent(.agentChanged(new.assignedAgent), conversation: id))
        }
        let oldParticipants = Dictionary(old.participants.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        let newParticipants = Dictionary(new.participants.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        let added = new.participants.filter { oldParticipants[$0.id] == nil }
        let updated = new.participants.filter { participant in
            oldParticipants[participant.id].map { $0 != participant } ?? false
        }
        let removed = old.participants.map(\.id).filter { newParticipants[$0] == nil }
        if !added.isEmpty { events.append(BackendEvent(.participantsAdded(added), conversation: id)) }
        if !updated.isEmpty { events.append(BackendEvent(.participantsUpdated(updated), conversation: id)) }
        if !removed.isEmpty { events.append(BackendEvent(.participantsRemoved(removed), conversation: id)) }
        events.append(BackendEvent(.conversationUpdated(new), conversation: id))
        return events
    }
}
