/// De-duplication of messages across every path they arrive by (snapshot, live, history,
/// retransmit, the server's reply to a send): by server id first, then by client id.
///
/// The incoming copy's time replaces the stored one. Where an adapter makes times (XMPP's archive
/// clock over whole-second stamps), each link's times are in order among themselves, and the
/// newest copy's time is the one that fits the messages that come with it: keeping the stored
/// time put a message after the ones caught up beside it (`XMPPLiveTests`' restart). Such an
/// adapter avoids delivering a message twice rather than counting on the store to drop it.
enum MessageReconciler {
    enum Result: Sendable, Hashable {
        /// A message the store has never seen.
        case insert(Message)
        /// A known message changed (edited, deleted, confirmed, read); `merged` replaces `old`.
        case update(old: Message, merged: Message)
        /// Nothing new.
        case duplicate
    }

    /// - Parameters:
    ///   - incoming: the message as it just arrived.
    ///   - byServerID: the stored message with the same server id, if any.
    ///   - byClientID: the stored message with the same client id, if any (a local echo).
    static func reconcile(_ incoming: Message, byServerID: Message?, byClientID: Message?) -> Result {
        guard let existing = byServerID ?? byClientID else { return .insert(incoming) }
        var merged = incoming
        merged.clientID = incoming.clientID ?? existing.clientID
        merged.serverID = incoming.serverID ?? existing.serverID
        merged.sequence = incoming.sequence ?? existing.sequence
        merged.deliveryState = mergedDeliveryState(existing.deliveryState, incoming.deliveryState)
        if merged.attachments.isEmpty { merged.attachments = existing.attachments }
        merged.payload = incoming.payload ?? existing.payload
        merged.quote = incoming.quote ?? existing.quote
        merged.isEdited = incoming.isEdited || existing.isEdited
        merged.isDeleted = incoming.isDeleted || existing.isDeleted
        return merged == existing ? .duplicate : .update(old: existing, merged: merged)
    }

    /// Delivery only moves forward: pending → sent → delivered → read. A server copy of a
    /// message that failed locally means it got through after all.
    static func mergedDeliveryState(_ old: Message.DeliveryState, _ new: Message.DeliveryState) -> Message.DeliveryState {
        if case .failed = new { return new }
        return rank(new) >= rank(old) ? new : old
    }

    private static func rank(_ state: Message.DeliveryState) -> Int {
        switch state {
        case .failed: return -1
        case .pending: return 0
        case .sent: return 1
        case .delivered: return 2
        case .read: return 3
        }
    }
}
