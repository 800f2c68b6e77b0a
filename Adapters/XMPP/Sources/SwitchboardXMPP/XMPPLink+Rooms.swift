import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// Rooms (XEP-0045) as group conversations: joined without the room's own history (the room's
/// archive brings it, with ids), occupants as participants, messages confirmed by the room's
/// reflection, and left for good on close.
///
/// A room's messages reach every occupant in the room's order, each with the room's archive id;
/// the cursor keeps the newest one delivered per room and the room's clock, and a link that
/// joins again catches up from it in the room's archive while the room's live messages wait.
extension XMPPLink {
    /// The nick the user asks for in the rooms it joins (the room may give another).
    var nick: String { configuration.localPart }

    /// Joins `room`: waits for the user's own presence (the occupants' come before it),
    /// configures a room this join made, and learns the room's name. The room's live messages
    /// wait until ``catchUpRoom(_:)`` has read its archive.
    ///
    /// A room the user was in (the cursor's) that this join had to make was gone: it is destroyed
    /// again, and the join fails `conversationNotFound`. Anything failing after the join leaves
    /// the room again.
    ///
    /// - Returns: `false` when the user is in the room already.
    /// - Throws: the room's refusal, classified.
    @discardableResult
    func enter(_ room: String, title: String? = nil, invite: [String] = []) async throws -> Bool {
        let known = try state.withLock { state -> Bool? in
            var entry = state.rooms[room] ?? State.Room(nick: nick)
            if entry.joined { return nil }
            guard !entry.joining else { throw SwitchboardError(.invalidArgument, "a join of \(room) is under way") }
            entry.joining = true
            entry.occupants = [:]
            entry.announced = false
            // Its live messages wait (during the login every live stanza waits anyway).
            if state.held == nil { entry.held = [] }
            state.rooms[room] = entry
            return entry.known
        }
        guard let known else { return false }
        do {
            var answer = try await exchange("#join:\(room)", XMPPStanzas.joinRoom(room, nick: nick), name: "join")
            if answer["type"] == "error", XMPPMapping.error(answer, request: "join").vendorCode == "conflict" {
                // Another JID has the nick: once more, with a suffix of its own.
                let other = "\(nick)-\(UUID().uuidString.prefix(4).lowercased())"
                state.withLock { $0.rooms[room]?.nick = other }
                answer = try await exchange("#join:\(room)", XMPPStanzas.joinRoom(room, nick: other), name: "join")
            }
            if answer["type"] == "error" { throw XMPPMapping.error(answer, request: "join \(room)") }
            if XMPPMapping.occupant(answer)?.created == true {
                if known {
                    // The room the user was in is gone: this join made a new one.
                    let id = uniqueID("destroy", askedOf: room)
                    _ = try? await request(id, XMPPStanzas.destroyRoom(room, id: id), name: "destroy")
                    throw SwitchboardError(.conversationNotFound, "the room \(room) is gone", vendorCode: "gone")
                }
                try await configure(room, title: title)
                for jid in invite { try await socket.send(XMPPStanzas.invite(jid, to: room)) }
            }
            try await learnAbout(room)
        } catch {
            // Not left half-joined: the room stops sending (its answer, the user's own leave,
            // is not a removal: the entry is not joined any more).
            let joinedAs = state.withLock { $0.rooms[room]?.nick } ?? nick
            if (error as? SwitchboardError)?.code != .connectionLost { try? await socket.send(XMPPStanzas.leaveRoom(room, nick: joinedAs)) }
            if known, !Self.roomIsGone(error) {
                // The user's room, out of reach for now: kept in the cursor for the next link.
                state.withLock { state in
                    guard let entry = state.rooms[room] else { return }
                    state.rooms[room] = State.Room(nick: nick, archiveID: entry.archiveID, clock: entry.clock, known: true)
                }
            } else {
                forget(room, removed: known)
            }
            throw error
        }
        state.withLock { $0.rooms[room]?.joining = false }
        return true
    }

    /// A new room is locked until its owner configures it: its name, kept when everyone left,
    /// members' JIDs visible to all, archived; where the server refuses that form, as it is
    /// (an instant room).
    private func configure(_ room: String, title: String?) async throws {
        do {
            let id = uniqueID("configure", askedOf: room)
            _ = try await request(id, XMPPStanzas.configureRoom(room, title: title, id: id), name: "configure")
        } catch let error as SwitchboardError where error.code != .connectionLost && error.code != .timedOut {
            context.logger.debug("xmpp: the room refused its configuration; taking the defaults", metadata: ["code": .string(error.code.description)])
            let id = uniqueID("configure", askedOf: room)
            _ = try await request(id, XMPPStanzas.instantRoom(room, id: id), name: "configure")
        }
    }

    /// The room's name (its disco#info identity), and whether it sets occupant ids (XEP-0421)
    /// that can be trusted.
    private func learnAbout(_ room: String) async throws {
        do {
            let id = uniqueID("disco", askedOf: room)
            let about = try await request(id, XMPPStanzas.discoInfo(room, id: id), name: "disco")
            let query = about.child("query", NS.discoInfo)
            let name = query?.children("identity", NS.discoInfo).first { $0["category"] == "conference" }?["name"]
            let trusts = query?.children("feature", NS.discoInfo).contains { $0["var"] == NS.occupantID } ?? false
            // A room without a name shows its local part (as Prosody does): no title then.
            let localPart = String(room.prefix { $0 != "@" })
            state.withLock { state in
                state.rooms[room]?.name = name == localPart || name?.isEmpty == true ? nil : name
                state.rooms[room]?.trustsOccupantIDs = trusts
            }
        } catch let error as SwitchboardError where error.code != .connectionLost && error.code != .timedOut {
            context.logger.debug("xmpp: the room does not say what it is", metadata: ["code": .string(error.code.description)])
        }
    }

    /// Whether a join's failure means the room is gone for the user (not there, or closed to
    /// it), rather than unreachable for now.
    static func roomIsGone(_ error: any Error) -> Bool {
        guard let error = error as? SwitchboardError else { return false }
        return ["gone", "item-not-found", "forbidden", "registration-required", "not-authorized"].contains(error.vendorCode ?? "")
    }

    /// The room is no longer the user's on this link; the cursor forgets it, and with `removed`
    /// so does the store.
    func forget(_ room: String, removed: Bool) {
        state.withLock { state in
            // Written even where the room's answer removed it already.
            state.rooms[room] = nil
            let cursor = cursor(state)
            if removed {
                output.yield(.event(BackendEvent(.conversationRemoved, conversation: ConversationID(room), cursor: cursor, time: context.clock.date)))
            } else if let cursor {
                output.yield(.cursor(cursor))
            }
        }
    }

    /// The room's archive after the newest message delivered, page by page, as news; on a
    /// first join, its newest page, as history (where the room no longer has the stored id, what
    /// came since its clock's time). The room is announced first, and its live messages that
    /// waited are handed on after.
    ///
    /// A room without an archive is reported and joined without a catch-up. Any other failure
    /// leaves the room (its live messages dropped: the next join catches them up): kept in the
    /// cursor where the user was in it before, removed where this was its first join.
    func catchUpRoom(_ room: String) async throws {
        // Announced first (its messages then belong to a group conversation the store knows),
        // and the cursor's from then on (a first join: the room's clock starts at the join, past
        // its history). Outside the login and a join (a second join of the room), live messages
        // wait here.
        let start = state.withLock { state -> (archiveID: String, time: Date?, known: Bool)? in
            guard var entry = state.rooms[room] else { return nil }
            let start = (entry.archiveID, entry.clock.last, entry.known)
            if state.held == nil, entry.held == nil { entry.held = [] }
            if !entry.known { entry.clock = XMPPArchiveClock(last: max(entry.clock.last ?? .distantPast, context.clock.date)) }
            entry.announced = true
            entry.known = true
            state.hadRooms = true
            state.rooms[room] = entry
            if let info = roomInfo(room, state) {
                let added = state.known.insert(info.id).inserted
                output.yield(.event(BackendEvent(added ? .conversationAdded(info) : .conversationUpdated(info), conversation: info.id, cursor: cursor(state), time: context.clock.date)))
            }
            return start
        }
        guard let start else { throw SwitchboardError(.conversationNotFound, "the user is not in the room \(room)") }
        // A room the user was in: what came after the stored id, as news; where the room had
        // shown nothing yet, or no longer has the id, what came since the room's clock (what is
        // stamped before it only fills in).
        // (`since` is five minutes before that time, as the user's catch-up takes it.)
        var since: Date? = start.known && start.archiveID.isEmpty ? start.time?.addingTimeInterval(-300) : nil
        var page: XMPPStanzas.Page = !start.known ? .newest : since != nil || start.archiveID.isEmpty ? .oldest : .after(start.archiveID)
        let asNews = start.known
        do {
            while true {
                let result: (items: [XMPPMapping.ArchiveItem], complete: Bool)
                do {
                    result = try await archivePage(archive: room, with: nil, start: since, page: page, max: asNews ? 100 : 50)
                } catch let error as SwitchboardError where error.vendorCode == "item-not-found" && asNews && since == nil && !start.archiveID.isEmpty {
                    output.yield(.problem(SwitchboardError(.protocolViolation, "the room's archive refused the stored id; catching up from its time", underlying: error)))
                    since = (start.time ?? context.clock.date).addingTimeInterval(-300)
                    page = .oldest
                    continue
                }
                let items = result.items.filter { ($0.message["from"].map(XMPPMapping.bare)) == room }
                state.withLock { state in
                    if asNews {
                        for item in items {
                            let stamp = time(stamped: item.stamp)
                            let position: ChatEvent.MessagePosition = since.map { stamp < Self.floor(below: $0) } == true ? .history : .newest
                            receiveRoom(item.message, archiveID: item.archiveID, stamp: stamp, position: position, &state)
                        }
                    } else {
                        // Old news: at their stamps (below now), not at the room clock's next.
                        let times = XMPPArchiveClock.below(context.clock.date, stamps: items.map { time(stamped: $0.stamp) })
                        for (item, time) in zip(items, times) { receiveRoom(item.message, archiveID: item.archiveID, at: time, position: .history, &state) }
                    }
                }
                guard asNews, !result.complete, let last = result.items.last?.archiveID else { break }
                page = .after(last)
            }
        } catch let error as SwitchboardError where Self.roomHasNoArchive(error) {
            output.yield(.problem(SwitchboardError(error.code, "the room \(room) was joined without a catch-up: it keeps no archive the user may read", underlying: error)))
        } catch {
            // Out of reach for now (or the link ending): not left half-caught-up.
            let joinedAs = state.withLock { state -> String? in
                guard let entry = state.rooms[room] else { return nil }
                state.rooms[room] = State.Room(nick: nick, archiveID: entry.archiveID, clock: entry.clock, known: true)
                return entry.nick
            }
            if let joinedAs, (error as? SwitchboardError)?.code != .connectionLost { try? await socket.send(XMPPStanzas.leaveRoom(room, nick: joinedAs)) }
            if !start.known { forget(room, removed: true) }
            throw error
        }
        state.withLock { state in
            guard state.rooms[room] != nil else { return }
            let held = state.rooms[room]!.held ?? []
            state.rooms[room]!.held = nil
            if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
            for element in held { deliver(element, &state) }
        }
    }

    /// Whether an archive query's failure says the room keeps no archive the user may read (its
    /// messages then come live only).
    static func roomHasNoArchive(_ error: SwitchboardError) -> Bool {
        ["feature-not-implemented", "service-unavailable", "forbidden", "not-allowed"].contains(error.vendorCode ?? "")
    }

    /// Joins the rooms of the stored cursor again and catches each up. A room that is gone or
    /// closed to the user now is removed; one that cannot be joined for now is reported and kept
    /// for the next link (sends to it fail until then).
    func reenterRooms() async throws {
        for room in state.withLock({ $0.rooms.keys.sorted() }) {
            do {
                try await enter(room)
                try await catchUpRoom(room)
            } catch let error as SwitchboardError where error.code != .connectionLost {
                // Removed (gone) or kept for the next link by `enter`; the other rooms go on.
                output.yield(.problem(error))
            }
        }
    }

    /// The room as a conversation: its occupants, the user among them.
    func roomInfo(_ room: String, _ state: State) -> ConversationInfo? {
        guard let entry = state.rooms[room] else { return nil }
        let participants = entry.occupants.keys.sorted().compactMap { entry.occupants[$0] }
        return XMPPMapping.room(room, title: entry.name ?? entry.subject, participants: participants)
    }

    /// An occupant's presence: the user's own completes a join or a leave (or says the room
    /// removed the user); anyone else's is a participant joining, changing or leaving. Only from
    /// the room itself (`room@service/nick`), for a room the user is in.
    func presence(_ element: XMPPElement) {
        guard let from = element["from"] else { return }
        let room = XMPPMapping.bare(from)
        if element["type"] == "error" {
            if !replies.resolve("#join:\(room)", with: element) { _ = replies.resolve("#leave:\(room)", with: element) }
            return
        }
        guard let occupant = XMPPMapping.occupant(element) else { return }
        state.withLock { state in
            guard var entry = state.rooms[room] else { return }
            let participant = XMPPMapping.participant(occupant, me: me)
            if let id = occupant.occupantID {
                entry.occupantIDs[id] = participant.id
                if occupant.isSelf { entry.ownOccupantID = id }
            }
            func yield(_ kind: BackendEvent.Kind) {
                guard entry.announced else { return }
                output.yield(.event(BackendEvent(kind, conversation: ConversationID(room), time: context.clock.date)))
            }
            if occupant.left {
                entry.occupants[occupant.nick] = nil
                if let newNick = occupant.newNick {
                    // A change of nick: the presence under the new one follows. Where the
                    // participant is named by the nick (an anonymous room), the old one goes.
                    if occupant.isSelf { entry.nick = newNick }
                    state.rooms[room] = entry
                    if !occupant.isSelf, occupant.jid == nil { yield(.participantsRemoved([participant.id])) }
                    return
                }
                guard occupant.isSelf else {
                    state.rooms[room] = entry
                    // One of the participant's devices may stay.
                    if !entry.occupants.values.contains(where: { $0.id == participant.id }) { yield(.participantsRemoved([participant.id])) }
                    return
                }
                // Left at the user's request (the close answers), or removed by the room
                // (kicked, banned, the room destroyed). Not joined (a join given up, whose
                // leave this answers): nothing to remove.
                guard entry.joined else { return }
                if replies.resolve("#leave:\(room)", with: element) {
                    state.rooms[room] = nil
                } else if occupant.removedByRoom {
                    state.rooms[room] = nil
                    output.yield(.event(BackendEvent(.conversationRemoved, conversation: ConversationID(room), cursor: cursor(state), time: context.clock.date)))
                } else {
                    // The service going down (332, 333, or no reason): the room stays the user's,
                    // joined again by the next link.
                    state.rooms[room] = State.Room(nick: nick, archiveID: entry.archiveID, clock: entry.clock, known: entry.known)
                    if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
                }
                return
            }
            if occupant.isSelf {
                // The late answer of a join given up is not a join.
                guard entry.joined || entry.joining else { return }
                // The room may give the user another nick than the one asked for (status 210).
                entry.nick = occupant.nick
                entry.occupants[occupant.nick] = participant
                if !entry.joined {
                    entry.joined = true
                    state.rooms[room] = entry
                    _ = replies.resolve("#join:\(room)", with: element)
                    return
                }
                // The user's own presence is no news.
                state.rooms[room] = entry
                return
            }
            let known = entry.occupants.values.contains { $0.id == participant.id }
            entry.occupants[occupant.nick] = participant
            state.rooms[room] = entry
            yield(known ? .participantsUpdated([participant]) : .participantsAdded([participant]))
        }
    }

    /// A room's live message: held while the room catches up; the user's own send when it is
    /// the room's reflection of a send waiting for it (its time and archive id given now, in the
    /// room's order); else received.
    func liveRoomMessage(_ stanza: XMPPElement, _ state: inout State) {
        let room = XMPPMapping.bare(stanza["from"] ?? "")
        guard let entry = state.rooms[room] else { return }
        if entry.held != nil {
            state.rooms[room]!.held!.append(stanza)
            return
        }
        // Out of reach (a join or catch-up that failed): what comes now is the next join's
        // catch-up, not past a gap.
        guard entry.joined else { return }
        let archiveID = XMPPMapping.stanzaID(of: stanza, archive: room)
        if let nick = XMPPMapping.nick(of: stanza), roomSender(stanza, nick: nick, entry).mine, let id = Self.originID(stanza), state.sending.contains(id) {
            if let archiveID, !state.handle(archiveID) {
                // Delivered already (a catch-up of this link read it): that copy answers.
                state.rooms[room]!.reflected[id] = state.recent[archiveID]
            } else {
                let time = state.rooms[room]!.clock.next(stamp: context.clock.date)
                if let archiveID { state.rooms[room]!.archiveID = archiveID }
                if let message = XMPPMapping.roomMessage(stanza, archiveID: archiveID ?? "message:\(id)", sender: ParticipantID(me), mine: true, time: time) {
                    state.keep(message)
                    state.rooms[room]!.reflected[id] = message
                }
            }
            if replies.resolve("#muc:\(id)", with: stanza) {
                if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
                return
            }
            // Nobody waits any more (the send timed out): news like any other.
            guard let message = state.rooms[room]!.reflected.removeValue(forKey: id) else { return }
            output.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: message.conversationID, cursor: cursor(state), time: message.time)))
            return
        }
        receiveRoom(stanza, archiveID: archiveID, stamp: time(stamped: XMPPMapping.delay(of: stanza)), &state)
    }

    /// A room's message, live or caught up, in the room's order: a message at the room clock's
    /// next time after `stamp` (or at the time `given`, for history), a subject, or a chat state.
    func receiveRoom(
        _ stanza: XMPPElement, archiveID: String?, at given: Date? = nil, stamp: Date? = nil, position: ChatEvent.MessagePosition = .newest,
        _ state: inout State
    ) {
        let room = XMPPMapping.bare(stanza["from"] ?? "")
        guard var entry = state.rooms[room] else { return }
        let conversation = ConversationID(room)
        let stamp = given ?? stamp ?? context.clock.date
        if let subject = stanza.child("subject", NS.client), stanza.child("body", NS.client) == nil {
            entry.subject = subject.text
            state.rooms[room] = entry
            if entry.announced, let info = roomInfo(room, state) { output.yield(.event(BackendEvent(.conversationUpdated(info), conversation: conversation, time: stamp))) }
            return
        }
        guard let nick = XMPPMapping.nick(of: stanza) else { return }
        let (sender, mine) = roomSender(stanza, nick: nick, entry)
        if stanza.child("body", NS.client) == nil {
            if !mine, entry.announced, let chatState = stanza.children.first(where: { $0.namespace == NS.chatStates }) {
                output.yield(.event(BackendEvent(.typing(sender, isTyping: chatState.name == "composing", draft: nil), conversation: conversation, time: stamp)))
            }
            return
        }
        // A send whose answer is on its way delivers it (a catch-up meets it before its
        // reflection).
        if mine, let id = Self.originID(stanza), state.sending.contains(id) { return }
        if let archiveID {
            guard state.handle(archiveID) else { return }
            // In the room's order (caught up, then live): the next join goes on after it.
            state.rooms[room]!.archiveID = archiveID
        }
        let time = given ?? state.rooms[room]!.clock.next(stamp: stamp)
        let serverID = archiveID ?? "message:\(stanza["id"] ?? UUID().uuidString)"
        guard let message = XMPPMapping.roomMessage(stanza, archiveID: serverID, sender: sender, mine: mine, time: time) else { return }
        state.keep(message)
        output.yield(.event(BackendEvent(.messageAdded(message, position: position), conversation: conversation, cursor: cursor(state), time: time)))
    }

    /// Who sent a room's message: by its occupant id where the room sets them (a nick can change
    /// hands; the id stays with the JID), else by the nick: the user's own, an occupant's, or
    /// the nick's address in the room. A sender's own claims in the message are not taken.
    func roomSender(_ stanza: XMPPElement, nick: String, _ entry: State.Room) -> (id: ParticipantID, mine: Bool) {
        let address = (ParticipantID("\(XMPPMapping.bare(stanza["from"] ?? ""))/\(nick)"), false)
        if entry.trustsOccupantIDs, let occupantID = stanza.child("occupant-id", NS.occupantID)?["id"] {
            if occupantID == entry.ownOccupantID { return (ParticipantID(me), true) }
            return entry.occupantIDs[occupantID].map { ($0, $0 == ParticipantID(me)) } ?? address
        }
        if nick == entry.nick { return (ParticipantID(me), true) }
        return entry.occupants[nick].map { ($0.id, false) } ?? address
    }

    static func originID(_ stanza: XMPPElement) -> String? {
        stanza.child("origin-id", NS.sid)?["id"] ?? stanza["id"]
    }

    /// An id no one can guess, for what is asked of another entity than the user's server (a
    /// room, an upload service): its answer is taken from that entity only.
    func uniqueID(_ prefix: String, askedOf jid: String) -> String {
        let id = "u-\(prefix)-\(UUID().uuidString)"
        state.withLock { state in
            // Requests that were never answered are not kept for ever.
            if state.askedOf.count >= 1_000 { state.askedOf.removeAll() }
            state.askedOf[id] = jid
        }
        return id
    }

    /// A message to a room, confirmed by the room's reflection of it (with the room's archive
    /// id). A resend after a lost answer looks in the room's newest archived messages first.
    func sendToRoom(_ outgoing: OutgoingMessage, room: String) async throws -> Message? {
        let clientID = outgoing.clientID.rawValue
        guard state.withLock({ $0.rooms[room]?.joined == true }) else {
            throw SwitchboardError(.serverError, "the room \(room) is not joined on this link (it is tried again on the next)", retryAfter: .seconds(5))
        }
        state.withLock { _ = $0.sending.insert(clientID) }
        defer {
            state.withLock { state in
                _ = state.sending.remove(clientID)
                state.rooms[room]?.reflected[clientID] = nil
            }
        }
        let recent: [XMPPMapping.ArchiveItem]
        do {
            recent = try await archivePage(archive: room, with: nil, page: .newest, max: 50).items
        } catch let error as SwitchboardError where Self.roomHasNoArchive(error) {
            // A room without an archive: nothing to find a resend in.
            context.logger.debug("xmpp: the room's archive cannot be read; sent without looking", metadata: ["code": .string(error.code.description)])
            recent = []
        }
        let found = state.withLock { state -> Message?? in
            guard let entry = state.rooms[room] else { return nil }
            for item in recent.reversed() where XMPPMapping.bare(item.message["from"] ?? "") == room && Self.originID(item.message) == clientID {
                guard let nick = XMPPMapping.nick(of: item.message), roomSender(item.message, nick: nick, entry).mine else { continue }
                if let known = state.recent[item.archiveID] { return .some(known) }
                let time = state.rooms[room]!.clock.next(stamp: self.time(stamped: item.stamp))
                let message = XMPPMapping.roomMessage(item.message, archiveID: item.archiveID, sender: ParticipantID(me), mine: true, time: time)
                if let message { state.keep(message) }
                _ = state.handle(item.archiveID)
                return .some(message)
            }
            return nil
        }
        if let found { return Self.withSentFile(found, outgoing) }
        // Not found: a file goes up first (its address is the message).
        let file = try await outgoing.content.attachments.first.asyncMap { try await upload($0, for: clientID) }
        let stanza = XMPPStanzas.groupchat(to: room, clientID: clientID, body: outgoing.content.text, file: file)
        let reflected = try await exchange("#muc:\(clientID)", stanza, name: "send")
        if reflected["type"] == "error" { throw XMPPMapping.error(reflected, request: "send") }
        guard let message = state.withLock({ $0.rooms[room]?.reflected.removeValue(forKey: clientID) }) else {
            throw SwitchboardError(.protocolViolation, "the room reflected the message without its body")
        }
        return Self.withSentFile(message, outgoing)
    }

    /// Starts a room: a new one named from the start's client id (so a retried start joins the
    /// room it made), configured with the title, the draft's participants invited, then its
    /// first message.
    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        guard draft.kind != .direct else {
            throw SwitchboardError(.unsupported, "an XMPP one-to-one chat needs no start: send to the contact's JID, the conversation's id")
        }
        if let first = draft.firstMessage { try Self.checkSendable(first) }
        guard XMLReader.isAllowed(draft.title ?? ""), draft.participants.allSatisfy({ XMLReader.isAllowed($0.id.rawValue) }) else {
            throw SwitchboardError(.invalidArgument, "the title or a participant's JID holds a character XML does not allow")
        }
        let clientID = draft.clientID?.rawValue ?? UUID().uuidString
        let local = String(clientID.lowercased().unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "-" }.prefix(64))
        let room = "room-\(local.isEmpty ? UUID().uuidString.lowercased() : local)@\(configuration.mucService)"
        let invite = draft.participants.map { XMPPMapping.bare($0.id.rawValue) }.filter { $0 != me }
        try await enter(room, title: draft.title, invite: invite)
        try await catchUpRoom(room)
        guard let info = state.withLock({ roomInfo(room, $0) }) else {
            throw SwitchboardError(.conversationNotFound, "the room \(room) was left while it started")
        }
        guard let first = draft.firstMessage else { return ConversationSnapshot(conversation: info) }
        let sent = try await sendToRoom(OutgoingMessage(clientID: ClientMessageID(clientID), conversationID: info.id, content: first), room: room)
        return ConversationSnapshot(conversation: info, messages: sent.map { [$0] } ?? [])
    }

    /// Leaves a room for good: the next links do not join it again. A room that does not answer
    /// the leave in time is forgotten all the same. A one-to-one chat cannot be left.
    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        let room = conversation.rawValue
        guard let entry = state.withLock({ $0.rooms[room] }) else {
            throw SwitchboardError(.unsupported, "only rooms can be left; \(room) is not a room the user is in")
        }
        if entry.joined {
            do {
                let answer = try await exchange("#leave:\(room)", XMPPStanzas.leaveRoom(room, nick: entry.nick), name: "leave")
                if answer["type"] == "error" { throw XMPPMapping.error(answer, request: "leave \(room)") }
            } catch let error as SwitchboardError where error.code == .timedOut {
                context.logger.debug("xmpp: the room did not answer the leave; forgotten all the same", metadata: ["room": .string(room)])
            }
        }
        forget(room, removed: false)
        return .removed
    }

    /// Refuses what this version does not do in a room.
    func requireNotRoom(_ conversation: ConversationID, _ what: String) throws {
        if state.withLock({ $0.rooms[conversation.rawValue] != nil }) {
            throw SwitchboardError(.unsupported, "\(what) in rooms is not offered by this version of the XMPP adapter")
        }
    }

    /// Joins a room by its bare JID, and reads its newest page (or, joined already, what came
    /// since).
    func join(_ room: String) async throws -> ConversationID {
        let room = XMPPMapping.bare(room)
        guard room.contains("@"), XMLReader.isAllowed(room), !room.contains(" ") else {
            throw SwitchboardError(.invalidArgument, "a room is a bare JID, room@service")
        }
        try await enter(room)
        try await catchUpRoom(room)
        return ConversationID(room)
    }
}
