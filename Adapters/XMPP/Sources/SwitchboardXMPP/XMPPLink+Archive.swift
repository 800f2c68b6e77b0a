import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// The archive (XEP-0313): catch-up after the cursor, the follower, and history.
extension XMPPLink {
    /// The cursor as it stands: where the archive was read to, the clock, what came live since,
    /// and the rooms with where their archives were read to; `nil` before the archive showed the
    /// link anything and while the user is in no room.
    func cursor(_ state: State) -> SyncCursor? {
        Self.cursor(state, now: context.clock.date)
    }

    static func cursor(_ state: State, now: Date) -> SyncCursor? {
        // While a refused id is recovered from its time, the cursor keeps it: the next link is
        // refused it too, and goes from the time again.
        let archiveID = state.cursorID ?? state.refusedID
        guard archiveID != nil || state.hadRooms else { return nil }
        // A room is the cursor's once announced (`known`), not while its join is under way.
        let rooms = state.rooms.filter(\.value.known).mapValues { XMPPCursor.Room(archiveID: $0.archiveID, time: $0.clock.last) }
        return XMPPCursor(archiveID: archiveID, time: state.clock.last ?? now, live: state.live, rooms: rooms).token
    }

    /// Archived stanzas after the cursor, in the archive's order, each once; then the cursor
    /// after them. Chat states of then are no news now.
    func receiveArchived(_ items: [XMPPMapping.ArchiveItem], olderThan floor: Date?, _ state: inout State) {
        for item in items {
            // Each once: a live copy, a held one, a repeat, or a confirmed send came first.
            state.passed(item.archiveID)
            guard state.handle(item.archiveID) else { continue }
            if case .typing? = XMPPMapping.change(item.message) { continue }
            if XMPPMapping.bare(item.message["from"] ?? me) == me, let id = item.message["id"] {
                // What this link sent: a send whose answer is on its way delivers it, and the
                // link's own markers, corrections and retractions are not news.
                if state.sending.contains(id) || state.sentIDs.contains(id) { continue }
            }
            let stamp = time(stamped: item.stamp)
            // Catching up from a time: what is stamped before it only fills in.
            let position: ChatEvent.MessagePosition = floor.map { stamp < $0 } == true ? .history : .newest
            receive(item.message, archiveID: item.archiveID, stamp: stamp, position: position, &state)
        }
        guard let last = items.last?.archiveID else { return }
        state.cursorID = last
        state.since = nil
        state.refusedID = nil
        if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
    }

    /// What a catch-up from `since` (five minutes before the refused cursor's time) takes as
    /// history: stamped a whole second before the cursor's time, so surely delivered before
    /// (the archive's stamps are whole seconds; the clock's times may be later than a stamp).
    static func floor(below since: Date) -> Date {
        Date(timeIntervalSince1970: (since.addingTimeInterval(300).timeIntervalSince1970).rounded(.down) - 1)
    }

    /// Reads the archive after the cursor whenever a live message rang.
    func followArchive() async {
        for await _ in followSignals {
            do {
                try await catchUp()
            } catch {
                if output.endedWith != nil || Task.isCancelled { return }
                let failure = SwitchboardError.classify(error)
                // A query written to a socket that is gone (before the reader saw it close): the
                // link ends with it, as the reader's end would; it is no problem of the server's.
                if failure.code == .connectionLost {
                    output.end(failure)
                    return
                }
                output.yield(.problem(failure))
            }
        }
    }

    /// The archive after the cursor (from the newest page when there is none, or since the time
    /// of a refused one), page by page.
    ///
    /// An archive id the server no longer has (expired, or another server's) is reported, and the
    /// catch-up goes from a little before the cursor's time instead; what is stamped before that
    /// time only fills in (the engine drops what it has).
    func catchUp() async throws {
        let (cursorID, refusedSince) = state.withLock { ($0.cursorID, $0.since) }
        var start = cursorID == nil ? refusedSince : nil
        var floor = start.map(Self.floor(below:))
        var page = start != nil ? .oldest : cursorID.map { XMPPStanzas.Page.after($0) } ?? .newest
        while true {
            let result: (items: [XMPPMapping.ArchiveItem], complete: Bool)
            do {
                result = try await archivePage(with: nil, start: start, page: page, max: 100)
            } catch let error as SwitchboardError where error.vendorCode == "item-not-found" && start == nil {
                let since = state.withLock { state in
                    let since = (state.clock.last ?? context.clock.date).addingTimeInterval(-300)
                    state.refusedID = state.cursorID ?? state.refusedID
                    state.cursorID = nil
                    state.since = since
                    return since
                }
                output.yield(.problem(SwitchboardError(.protocolViolation, "the stored archive id was refused; catching up from its time", underlying: error)))
                start = since
                floor = Self.floor(below: since)
                page = .oldest
                continue
            }
            state.withLock { receiveArchived(result.items, olderThan: floor, &$0) }
            guard !result.complete, let last = result.items.last?.archiveID else { return }
            page = .after(last)
        }
    }

    /// A page of the conversation's archive, older than the anchor, oldest first: the anchor is
    /// the previous page's token (its oldest archive id) or a time (the store's oldest message).
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        var page = XMPPStanzas.Page.newest
        var end: Date?
        var upper: Date?
        switch query.before {
        case .token(let text):
            guard let token = XMPPArchivePosition(text) else { throw SwitchboardError(.invalidArgument, "not an XMPP history token") }
            page = .before(token.archiveID)
            upper = token.time
        case .time(let time):
            upper = time
            if let archiveID = state.withLock({ $0.archiveIDs[State.TimeKey(conversation: query.conversationID, time: time)] }) {
                page = .before(archiveID)
            } else {
                // A message an earlier link stored: `end` is inclusive and whole seconds, and a
                // live message's time is its arrival (the server's clock may be ahead), so it
                // goes ten seconds past: the page may repeat messages, which the engine drops.
                end = time.addingTimeInterval(10)
            }
        case .sequence:
            throw SwitchboardError(.invalidArgument, "XMPP history pages from an archive id or a time, not a sequence")
        case nil:
            break
        }
        // A room's history is the room's archive; a chat's, the user's with the peer.
        let room = isRoom(query.conversationID.rawValue) ? query.conversationID.rawValue : nil
        let peer = room == nil ? query.conversationID.rawValue : nil
        let result: (items: [XMPPMapping.ArchiveItem], complete: Bool)
        do {
            result = try await archivePage(archive: room, with: peer, end: end, page: page, max: query.limit)
        } catch let error as SwitchboardError where error.vendorCode == "item-not-found" && upper != nil {
            // An anchor the server no longer has: from its time instead.
            result = try await archivePage(archive: room, with: peer, end: upper!.addingTimeInterval(10), page: .newest, max: query.limit)
        }
        let times = XMPPArchiveClock.below(upper, stamps: result.items.map { $0.stamp ?? upper ?? context.clock.date })
        // Newest first, so a correction or retraction is met before the message it changes (on
        // this page or an older one).
        var messages: [Message] = []
        state.withLock { state in
            let conversation = query.conversationID
            for (item, time) in zip(result.items, times).reversed() {
                if let change = XMPPMapping.change(item.message) {
                    switch change {
                    case .replace(let id, _), .retract(let id):
                        if state.historyChanges[conversation, default: [:]].count >= 5_000 { state.historyChanges[conversation] = [:] }
                        if state.historyChanges[conversation]?[id] == nil {
                            state.historyChanges[conversation, default: [:]][id] = (change, XMPPMapping.bare(item.message["from"] ?? me))
                        }
                    case .typing, .displayed:
                        break
                    }
                    continue
                }
                let mapped: Message?
                if let room, let entry = state.rooms[room], let nick = XMPPMapping.nick(of: item.message) {
                    let (sender, mine) = roomSender(item.message, nick: nick, entry)
                    mapped = XMPPMapping.roomMessage(item.message, archiveID: item.archiveID, sender: sender, mine: mine, time: time)
                } else {
                    mapped = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time)
                }
                guard var message = mapped else { continue }
                // Only the author's own changes count.
                if let id = XMPPMapping.stanzaID(of: message), let (change, author) = state.historyChanges[conversation]?[id], message.sender == ParticipantID(author) {
                    switch change {
                    case .retract: continue
                    case .replace(_, let text):
                        message.text = text
                        message.isEdited = true
                    case .typing, .displayed:
                        break
                    }
                }
                messages.insert(message, at: 0)
            }
        }
        let next = result.items.first.map { XMPPArchivePosition(archiveID: $0.archiveID, time: times[0]).anchor }
        state.withLock { state in
            for message in messages where state.recent[message.serverID?.rawValue ?? ""] == nil { state.keep(message) }
        }
        return HistoryPage(messages: messages, hasMore: !result.complete && next != nil, nextAnchor: next)
    }

    /// One archive query (XEP-0313): the results the reader collected for it, and whether the
    /// server said they reach the end.
    func archivePage(
        archive: String? = nil, with peer: String?, start: Date? = nil, end: Date? = nil, ids: [String] = [], page: XMPPStanzas.Page, max: Int
    ) async throws -> (items: [XMPPMapping.ArchiveItem], complete: Bool) {
        // Not guessable: results are matched to their query by it (and a room's answer is
        // taken only for such an id).
        let id = archive == nil ? "mam-\(UUID().uuidString)" : uniqueID("mam", askedOf: archive!)
        state.withLock { state in
            state.pages[id] = []
            state.pageSources[id] = archive ?? me
        }
        defer {
            state.withLock { state in
                state.pages[id] = nil
                state.pageSources[id] = nil
            }
        }
        let answer = try await request(id, XMPPStanzas.archiveQuery(id: id, queryID: id, archive: archive, with: peer, start: start, end: end, ids: ids, page: page, max: max), name: "archive")
        let complete = answer.child("fin", NS.mam)?["complete"] == "true"
        return (state.withLock { $0.pages[id] ?? [] }, complete)
    }
}
