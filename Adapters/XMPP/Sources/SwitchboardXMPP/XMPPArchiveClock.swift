public import Foundation
public import Switchboard

/// Times in the archive's order.
///
/// The store orders a conversation's messages by time, then by id. Prosody's archive stamps whole
/// seconds and its ids are random, so five messages of one second would be stored in a random
/// order. The clock gives each message the server's stamp, moved up by a microsecond past the
/// message before it where they tie (or where the stamp is older than what came before, as a
/// live message's arrival time can be): strictly increasing in the order the archive has them.
/// The cursor (``XMPPCursor``) carries the last time, so a restart goes on from it. History pages go the other
/// way: each message at most a microsecond below the one after it.
@_spi(WireReaders) public struct XMPPArchiveClock: Sendable, Hashable {
    public static let tick: TimeInterval = 0.000_001
    /// The newest time given.
    public private(set) var last: Date?

    public init(last: Date? = nil) {
        self.last = last
    }

    /// The time of the next message in archive order, stamped `stamp` by the server (or
    /// arriving now, for a live message).
    public mutating func next(stamp: Date) -> Date {
        let time = last.map { max(stamp, $0.addingTimeInterval(Self.tick)) } ?? stamp
        last = time
        return time
    }

    /// Times for a history page (oldest first) that ends just below `upper`: each at most its
    /// stamp and below the next newer one.
    public static func below(_ upper: Date?, stamps: [Date]) -> [Date] {
        var times = stamps
        var bound = upper
        for index in times.indices.reversed() {
            if let limit = bound?.addingTimeInterval(-tick), times[index] > limit { times[index] = limit }
            bound = times[index]
        }
        return times
    }
}

/// A place in the archive: an archive id and the time the clock gave there, written as
/// `<archive id> <microseconds since 1970>` (archive ids never hold a space).
///
/// It is where the session's cursor (``XMPPCursor``) stands: the newest archive id the archive
/// showed the link, and the clock's last time, so a restart goes on from both. It is a history
/// page's anchor too: the oldest archive id the page held, and the time it was given.
@_spi(WireReaders) public struct XMPPArchivePosition: Sendable, Hashable {
    public var archiveID: String
    public var time: Date

    public init(archiveID: String, time: Date) {
        self.archiveID = archiveID
        self.time = time
    }

    public var text: String {
        "\(archiveID) \(Self.micros(time))"
    }

    static func micros(_ time: Date) -> Int64 {
        Int64((time.timeIntervalSince1970 * 1_000_000).rounded())
    }

    public var anchor: HistoryQuery.Anchor { .token(text) }

    /// `nil` for anything but the two parts.
    public init?(_ text: String) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, let micros = Int64(parts[1]) else { return nil }
        self.archiveID = String(parts[0])
        self.time = Date(timeIntervalSince1970: TimeInterval(micros) / 1_000_000)
    }

}

/// The session's cursor: where the user's archive was read to and the clock's last time, the
/// archive ids delivered live after it (the next link's catch-up skips them: delivered again,
/// they would come with other times, and move in the store), and the rooms the user is in, each
/// with where the room's own archive was read to and the room's clock.
///
/// Written `<archive id or -> <microseconds> [<live id>…] [room:<room JID>:<microseconds or ->:<room archive id>…]`
/// (a JID holds no `:` or space; `-` before an archive showed anything). A room entry out of
/// shape is skipped, not the cursor.
@_spi(WireReaders) public struct XMPPCursor: Sendable, Hashable {
    /// Where a room's archive was read to: its newest id delivered (`""` before it showed
    /// anything) and the room's clock.
    public struct Room: Sendable, Hashable {
        public var archiveID: String
        public var time: Date?

        public init(archiveID: String = "", time: Date? = nil) {
            self.archiveID = archiveID
            self.time = time
        }
    }

    /// The newest id of the user's archive delivered; `nil` before it showed anything.
    public var archiveID: String?
    /// The archive clock's last time.
    public var time: Date
    public var live: [String]
    /// The rooms joined, by bare JID.
    public var rooms: [String: Room]
    /// More live ids than this are not kept: the follower moves the cursor after each live
    /// message, so only those of a link that ended meanwhile wait here.
    public static let maxLive = 100

    public init(archiveID: String?, time: Date, live: [String] = [], rooms: [String: Room] = [:]) {
        self.archiveID = archiveID
        self.time = time
        self.live = Array(live.suffix(Self.maxLive))
        self.rooms = rooms
    }

    public init(position: XMPPArchivePosition, live: [String] = [], rooms: [String: Room] = [:]) {
        self.init(archiveID: position.archiveID, time: position.time, live: live, rooms: rooms)
    }

    /// The user's archive id and the clock's time, once the archive showed something.
    public var position: XMPPArchivePosition? {
        archiveID.map { XMPPArchivePosition(archiveID: $0, time: time) }
    }

    public var token: SyncCursor {
        let head = XMPPArchivePosition(archiveID: archiveID ?? "-", time: time).text
        let rooms = rooms.keys.sorted().map { jid in
            let room = self.rooms[jid]!
            return "room:\(jid):\(room.time.map { String(XMPPArchivePosition.micros($0)) } ?? "-"):\(room.archiveID)"
        }
        return .token(([head] + live + rooms).joined(separator: " "))
    }

    public init?(_ cursor: SyncCursor?) {
        guard case .token(let token)? = cursor else { return nil }
        let parts = token.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count >= 2, let head = XMPPArchivePosition(parts[0..<2].joined(separator: " ")) else { return nil }
        var live: [String] = []
        var rooms: [String: Room] = [:]
        for part in parts.dropFirst(2) {
            guard part.hasPrefix("room:") else {
                live.append(String(part))
                continue
            }
            // `<jid>:<micros or ->:<archive id>`: an archive id may hold a `:`.
            let fields = part.dropFirst(5).split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, !fields[0].isEmpty else { continue }
            let time = Int64(fields[1]).map { Date(timeIntervalSince1970: TimeInterval($0) / 1_000_000) }
            guard time != nil || fields[1] == "-" else { continue }
            rooms[String(fields[0])] = Room(archiveID: String(fields[2]), time: time)
        }
        self.init(archiveID: head.archiveID == "-" ? nil : head.archiveID, time: head.time, live: live, rooms: rooms)
    }
}
