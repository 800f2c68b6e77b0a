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
        "\(archiveID) \(Int64((time.timeIntervalSince1970 * 1_000_000).rounded()))"
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

/// The session's cursor: where the archive was read to (``XMPPArchivePosition``), and the archive
/// ids delivered live after it, which the next link's catch-up skips (delivered again, they would
/// come with other times, and move in the store). Written `<archive id> <microseconds> [<live id>…]`.
@_spi(WireReaders) public struct XMPPCursor: Sendable, Hashable {
    public var position: XMPPArchivePosition
    public var live: [String]
    /// More live ids than this are not kept: the follower moves the cursor after each live
    /// message, so only those of a link that ended meanwhile wait here.
    public static let maxLive = 100

    public init(position: XMPPArchivePosition, live: [String] = []) {
        self.position = position
        self.live = Array(live.suffix(Self.maxLive))
    }

    public var token: SyncCursor {
        .token(([position.text] + live).joined(separator: " "))
    }

    public init?(_ cursor: SyncCursor?) {
        guard case .token(let token)? = cursor else { return nil }
        let parts = token.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count >= 2, let position = XMPPArchivePosition(parts[0..<2].joined(separator: " ")) else { return nil }
        self.init(position: position, live: parts.dropFirst(2).map(String.init))
    }
}
