import Foundation
import Switchboard

extension XMPPLink {
    /// What the link's parts share, under its lock.
    struct State {
        var nextID = 1
        var lastInbound: Duration = .zero
        var clock: XMPPArchiveClock
        /// The newest archive id delivered: where the next link catches up from.
        var cursorID: String?
        /// The results of the archive queries in flight, by query id, in the order they came.
        var pages: [String: [XMPPMapping.ArchiveItem]] = [:]
        /// Messages and roster pushes that came while the login assembled its snapshot, handled
        /// after it (in the order they came); `nil` once the snapshot is out.
        var held: [XMPPElement]? = []
        /// Conversations this link announced (the roster, and peers met since).
        var known: Set<ConversationID> = []
        /// Archive ids this link handled (live, caught up, confirmed as a send's answer, and those
        /// the cursor named as delivered live): another copy of one (the archive's, a repeat, a
        /// carbon held during the login) is not handled again. Not those history paged: one of
        /// those may be news the follower has yet to bring.
        var handled: Set<String> = []
        /// `handled` as it was when it was last emptied: what was handled just before is still
        /// known.
        var handledBefore: Set<String> = []
        /// Archive ids delivered live that the archive has not shown after the cursor yet, in the
        /// order they came: the cursor carries them, and the next link's catch-up skips them
        /// (delivered again, they would come with other times, and move in the store).
        var live: [String] = []
        /// Where the catch-up goes from while the archive refuses the stored id and has shown
        /// nothing newer; the refused id, which the cursor keeps meanwhile (the next link is
        /// refused it too, and catches up from the time again).
        var since: Date?
        var refusedID: String?
        /// Whether the cursor ever named a room: it is written from then on, with no room left
        /// too.
        var hadRooms = false
        /// The HTTP upload service found among the server's (XEP-0363), and its size limit.
        var uploadService: (jid: String, limit: Int?)?
        /// The download address of each file this link put up, by the client id of its message:
        /// a retry sends it rather than putting the file up again.
        var uploaded: [String: String] = [:]
        /// Who each request with an id no one can guess was asked of: the only one whose answer
        /// is taken.
        var askedOf: [String: String] = [:]
        /// Who answers each archive query in flight: the user's server or a room.
        var pageSources: [String: String] = [:]
        /// Messages the server bounced (`type='error'`), by id, until their send looks.
        var bounced: [String: SwitchboardError] = [:]
        /// The archive id of each time this link gave a message, per conversation: a history
        /// page below a stored message (the engine names it by its time) starts just before its
        /// archive id.
        var archiveIDs: [TimeKey: String] = [:]

        /// Stream management, once the server enabled it (XEP-0198); whether the link ended (no
        /// stanza is counted after that); whether the client closed the stream or the server
        /// ended it (nothing to resume either way).
        var stream: StreamManagement?
        var enableSent = false
        var ended = false
        var closedByClient = false
        var endedByServer = false
        /// Archive queries of a dropped link whose results the server may send again after a
        /// resumption: nobody's, and dropped quietly.
        var abandonedQueries: Set<String> = []

        /// The rooms the user is in, or is joining, by bare JID.
        var rooms: [String: Room] = [:]

        struct Room {
            var nick: String
            /// The newest id of the room's archive delivered (`""` before it showed anything).
            var archiveID = ""
            /// The room's own archive clock: its messages' times follow its archive's order and
            /// stamps, whatever the other conversations' are.
            var clock = XMPPArchiveClock()
            /// Whether the user was in the room before this join (the stored cursor, or earlier
            /// on this link): the join catches up instead of taking the newest page as history.
            var known = false
            /// The occupants, by nick; the user among them once joined.
            var occupants: [String: Participant] = [:]
            /// Participants by their occupant id (XEP-0421), kept after they leave, where the
            /// room says it sets the ids (its disco#info); and the user's own.
            var occupantIDs: [String: ParticipantID] = [:]
            var ownOccupantID: String?
            var trustsOccupantIDs = false
            /// A join is under way.
            var joining = false
            /// The conversation was announced on this link: occupants' comings and goings are
            /// events from then on.
            var announced = false
            /// The user's sends the room reflected, by client id, with the time and archive id
            /// given when the reflection came (in the room's order).
            var reflected: [String: Message] = [:]
            /// The room's name (its disco#info identity), and its subject: the conversation's title
            /// is the name, else the subject.
            var name: String?
            var subject: String?
            /// Whether the user's own presence came back: occupants' presences are events from
            /// then on.
            var joined = false
            /// Live messages that came while the join reads the room's archive; `nil` once
            /// handed on.
            var held: [XMPPElement]?
        }

        struct TimeKey: Hashable {
            var conversation: ConversationID
            var time: Date
        }

        mutating func bounce(_ id: String, _ error: SwitchboardError) {
            // A bounce nobody waits for (it came after its send's answer) is not kept forever.
            if bounced.count >= 256 { bounced.removeAll(keepingCapacity: true) }
            bounced[id] = error
        }

        /// The messages this link delivered, confirmed or paged, by archive id, and the archive
        /// id of each by its id attribute: what a marker, a correction or a retraction names.
        var recent: [String: Message] = [:]
        var archiveIDByStanzaID: [StanzaKey: String] = [:]
        /// Ids of what this link sent besides messages (markers, corrections, retractions): the
        /// archive's copy of one is not news.
        var sentIDs: Set<String> = []
        /// Client ids of sends whose answer is on its way: the follower leaves their archived
        /// copy to the send.
        var sending: Set<String> = []
        /// Corrections and retractions a history page met, per conversation, by the id of the
        /// message they change: older pages show that message changed, or not at all.
        var historyChanges: [ConversationID: [String: (change: XMPPMapping.Change, author: String)]] = [:]

        struct StanzaKey: Hashable {
            var conversation: ConversationID
            var id: String
        }

        mutating func keep(_ message: Message) {
            guard let archiveID = message.serverID?.rawValue else { return }
            // Forgotten all at once when there are many: a page below a forgotten time falls
            // back to the time filter, a change to a forgotten message is reported.
            if archiveIDs.count >= 20_000 { archiveIDs.removeAll(keepingCapacity: true) }
            archiveIDs[TimeKey(conversation: message.conversationID, time: message.time)] = archiveID
            if recent.count >= 5_000 {
                recent.removeAll(keepingCapacity: true)
                archiveIDByStanzaID.removeAll(keepingCapacity: true)
            }
            recent[archiveID] = message
            if let stanzaID = XMPPMapping.stanzaID(of: message) {
                archiveIDByStanzaID[StanzaKey(conversation: message.conversationID, id: stanzaID)] = archiveID
            }
        }

        /// The archive showed `archiveID` after the cursor: no longer only delivered live.
        mutating func passed(_ archiveID: String) {
            if let index = live.firstIndex(of: archiveID) { live.remove(at: index) }
        }

        /// Whether `archiveID` is news to this link; it is not, from now on.
        ///
        /// The set starts again at 20,000 ids (keeping those delivered live that the archive has
        /// yet to show), and never while the login holds live stanzas (their copies must meet
        /// what the catch-up handled); the ids it held are known for another 20,000. A copy of an
        /// id forgotten after that is delivered again, with another time: it is long past by then.
        mutating func handle(_ archiveID: String) -> Bool {
            if handled.count >= 20_000, held == nil {
                handledBefore = handled
                handled = Set(live)
            }
            guard !handledBefore.contains(archiveID) else { return false }
            return handled.insert(archiveID).inserted
        }

        func original(named stanzaID: String, in conversation: ConversationID) -> Message? {
            archiveIDByStanzaID[StanzaKey(conversation: conversation, id: stanzaID)].flatMap { recent[$0] }
        }

        mutating func sent(_ id: String) {
            if sentIDs.count >= 1_000 { sentIDs.removeAll(keepingCapacity: true) }
            sentIDs.insert(id)
        }
    }
}
