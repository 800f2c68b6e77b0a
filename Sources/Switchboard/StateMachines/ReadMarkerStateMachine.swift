import Foundation

/// The app's own read marker in one conversation: the newest one the server took, the one on its
/// way, and the rule that a marker never moves back.
///
/// Pure: where a ``ChatEvent/ReadMarker/message(_:)`` marker sits is told to it (the time of the
/// message it names, which the engine reads first: ``messagesToPlace(_:)``).
struct ReadMarkerStateMachine: Sendable, Hashable {
    /// The newest marker the server took.
    private(set) var sent: ChatEvent.ReadMarker?
    /// A marker the app set that the server has not taken yet: sent again on the next link.
    private(set) var pending: ChatEvent.ReadMarker?

    enum Decision: Sendable, Hashable {
        /// Send this marker (it is now the one on its way).
        case send(ChatEvent.ReadMarker)
        /// The newest marker set already reads as far: nothing to send.
        case alreadyRead
        /// The app's marker is behind the newest one set, and the backend does not take a marker
        /// that moves back.
        case refused(SwitchboardError)
    }

    /// The marker `markRead()` without one means: up to `newest`, the newest stored message.
    static func marker(upTo newest: Message) -> ChatEvent.ReadMarker {
        if let sequence = newest.sequence { return .sequence(sequence) }
        if let serverID = newest.serverID { return .message(serverID) }
        return .time(newest.time)
    }

    /// The messages whose times ``mark(_:times:)`` needs to place `marker` against the newest
    /// marker set.
    func messagesToPlace(_ marker: ChatEvent.ReadMarker) -> [MessageID] {
        guard let newest = pending ?? sent else { return [] }
        return [marker, newest].compactMap {
            if case .message(let id) = $0 { return id }
            return nil
        }
    }

    /// The app marks read up to `marker`: send it, unless the newest marker set reads as far
    /// already. Markers of different kinds are compared through the times of the messages they
    /// name (`times`); one that cannot be placed counts as further.
    ///
    /// - Parameters:
    ///   - isExplicit: the app named the marker (not "up to the newest").
    ///   - mayMoveBack: the backend takes a marker behind the one it has: an explicit marker
    ///     behind is sent; where it does not, it is refused, not dropped in silence.
    mutating func mark(_ marker: ChatEvent.ReadMarker, times: [MessageID: Date], isExplicit: Bool = false, mayMoveBack: Bool = false) -> Decision {
        if let newest = pending ?? sent, !Self.reads(marker, furtherThan: newest, times: times) {
            guard isExplicit, marker != newest, Self.reads(newest, furtherThan: marker, times: times) else { return .alreadyRead }
            guard mayMoveBack else {
                return .refused(SwitchboardError(.invalidArgument, "the read marker \(marker) is behind \(newest), and this backend does not move a read marker back"))
            }
        }
        pending = marker
        return .send(marker)
    }

    /// The server took `marker`.
    mutating func taken(_ marker: ChatEvent.ReadMarker) {
        sent = marker
        if pending == marker { pending = nil }
    }

    /// Sending a marker failed: a transient failure keeps it for the next link; any other is
    /// returned, to be reported, and the marker is dropped.
    mutating func failed(_ error: SwitchboardError) -> SwitchboardError? {
        guard !error.isTransient else { return nil }
        pending = nil
        return SwitchboardError(error.code, "marking read failed", underlying: error)
    }

    /// The server numbers the conversation afresh: markers of the old numbering mean nothing.
    mutating func forget() {
        self = ReadMarkerStateMachine()
    }

    private static func reads(_ marker: ChatEvent.ReadMarker, furtherThan other: ChatEvent.ReadMarker, times: [MessageID: Date]) -> Bool {
        if case .sequence(let new) = marker, case .sequence(let old) = other { return new > old }
        func position(_ marker: ChatEvent.ReadMarker) -> Date? {
            switch marker {
            case .time(let date): date
            case .message(let id): times[id]
            case .sequence: nil
            }
        }
        guard let new = position(marker), let old = position(other) else { return true }
        return new > old
    }
}
