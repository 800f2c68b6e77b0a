public import Foundation
public import Switchboard

/// Times in the archive's order.
///
/// The store orders a conversation's messages by time, then by id. Prosody's archive stamps whole
/// seconds and its ids are random, so five messages of one second would be stored in a random
/// order. The clock gives each message the server's stamp, moved up by a microsecond past the
/// message before it where they tie (or where the stamp is older than what came before, as a
/// live message's arrival time can be): strictly increasing in the order the archive has them.
/// The cursor carries the last time, so a restart goes on from it. History pages go the other
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

/// Where catch-up starts, kept as the session's one cursor token: the newest archive id the
/// archive showed the link, the clock's last time, and the archive ids delivered live after it
/// (the next link's catch-up skips those: delivered again, they would come with other times).
@_spi(WireReaders) public struct XMPPCursor: Sendable, Hashable {
    public var archiveID: String
    public var last: Date
    public var delivered: [String]
    /// More live ids than this are not kept: the follower moves the cursor after each live
    /// message, so only those of a link that ended meanwhile wait here.
    public static let maxDelivered = 100

    public init(archiveID: String, last: Date, delivered: [String] = []) {
        self.archiveID = archiveID
        self.last = last
        self.delivered = Array(delivered.suffix(Self.maxDelivered))
    }

    /// `<archive id> <microseconds since 1970> [<delivered id>…]`; archive ids never hold a
    /// space.
    public var token: SyncCursor {
        .token(([archiveID, String(Int64((last.timeIntervalSince1970 * 1_000_000).rounded()))] + delivered).joined(separator: " "))
    }

    public init?(_ cursor: SyncCursor?) {
        guard case .token(let token)? = cursor else { return nil }
        let parts = token.split(separator: " ")
        guard parts.count >= 2, !parts[0].isEmpty, let micros = Int64(parts[1]) else { return nil }
        self.archiveID = String(parts[0])
        self.last = Date(timeIntervalSince1970: TimeInterval(micros) / 1_000_000)
        self.delivered = parts.dropFirst(2).map(String.init)
    }
}

/// A history page's anchor: the archive id of the oldest message a page held and the time it was
/// given, whole on any link.
struct XMPPPageToken: Hashable {
    var archiveID: String
    var time: Date

    var anchor: HistoryQuery.Anchor {
        .token("\(archiveID) \(Int64((time.timeIntervalSince1970 * 1_000_000).rounded()))")
    }

    init(archiveID: String, time: Date) {
        self.archiveID = archiveID
        self.time = time
    }

    init?(_ token: String) {
        guard let cursor = XMPPCursor(.token(token)), cursor.delivered.isEmpty else { return nil }
        self.init(archiveID: cursor.archiveID, time: cursor.last)
    }
}
