import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// Rooms (XEP-0045) as group conversations: joined without the room's own history (the room's
/// archive brings it, with ids), occupants as participants, messages confirmed by the room's
/// reflection, and left for good on close.
///
/// A room's messages reach every occupant in the room's order, each with the room's archive id;
/// the cursor keeps the newest one delivered per room, and a link that joins again catches up
/// from it in the room's archive (while the room's live messages wait).
extension XMPPLink {
    /// The user's nick in the rooms it joins.
    var nick: String { configuration.localPart }

    /// Joins `room`: waits for the user's own presence (the occupants' come before it), and
    /// configures a room this join made. The conversation is announced with its occupants.
    ///
    /// After the login, the room's live messages wait until ``catchUpRoom(_:)`` has read its
    /// archive.
    ///
    /// - Throws: the room's refusal, classified (`conversationNotFound` for a room that does not
    ///   exist or takes no one, `permissionDenied` for one closed to the user).
    func enter(_ room: String, title: String? = nil) async throws {
        // Joined already: the room would answer with the user's presence only.
        if state.withLock({ $0.rooms[room]?.joined == true }) { return }
        state.withLock { state in
            var entry = state.rooms[room] ?? State.Room(nick: nick)
            entry.joined = false
            entry.occupants = [:]
            // During the login every live stanza waits anyway.
            if state.held == nil { entry.held = [] }
            state.rooms[room] = entry
        }
        let answer: XMPPElement
        do {
            answer = try await exchange("#join:\(room)", XMPPStanzas.joinRoom(room, nick: nick), name: "join")
            if answer["type"] == "error" { throw XMPPMapping.error(answer, request: "join \(room)") }
        } catch {
            state.withLock { _ = $0.rooms.removeValue(forKey: room) }
            throw error
        }
        if XMPPMapping.occupant(answer)?.created == true {
            // A new room is locked until its owner configures it.
            let id = nextID("configure")
            _ = try await request(id, XMPPStanzas.configureRoom(room, title: title, id: id), name: "configure")
        }
        // The room's name: its title.
        let discoID = nextID("disco")
        do {
            let about = try await request(discoID, XMPPStanzas.discoInfo(room, id: discoID), name: "disco")
            let name = about.child("query", NS.discoInfo)?.children("identity", NS.discoInfo).first { $0["category"] == "conference" }?["name"]
            // A room without a name shows its local part (as Prosody does): no title then.
            let localPart = String(room.prefix { $0 != "@" })
            state.withLock { $0.rooms[room]?.name = name == localPart || name?.isEmpty == true ? nil : name }
        } catch let error as SwitchboardError where error.code != .connectionLost && error.code != .timedOut {
            context.logger.debug("xmpp: the room does not say its name", metadata: ["code": .string(error.code.description)])
        }
        state.withLock { state in
            guard let info = roomInfo(room, state) else { return }
            let added = state.known.insert(info.id).inserted
            output.yield(.event(BackendEvent(added ? .conversationAdded(info) : .conversationUpdated(info), conversation: info.id, cursor: cursor(state), time: context.clock.date)))
        }
    }

    /// The room's archive after the newest message delivered, page by page; on a first join,
    /// its newest page, as history. Then the room's live messages that waited.
    ///
    /// An archive id the room no longer has is reported, and the newest page read instead.
    func catchUpRoom(_ room: String) async throws {
        var after = state.withLock { $0.rooms[room]?.archiveID } ?? ""
        let firstJoin = after.isEmpty
        var page: XMPPStanzas.Page = firstJoin ? .newest : .after(after)
        while true {
            let result: (items: [XMPPMapping.ArchiveItem], complete: Bool)
            do {
                result = try await archivePage(archive: room, with: nil, page: page, max: firstJoin ? 50 : 100)
            } catch let error as SwitchboardError where error.vendorCode == "item-not-found" && !after.isEmpty {
                output.yield(.problem(SwitchboardError(.protocolViolation, "the room's archive refused the stored id; reading its newest page", underlying: error)))
                after = ""
                page = .newest
                continue
            }
            state.withLock { state in
                for item in result.items {
                    receiveRoom(item.message, archiveID: item.archiveID, stamp: time(stamped: item.stamp), position: firstJoin ? .history : .newest, &state)
                }
            }
            guard !firstJoin, !after.isEmpty, !result.complete, let last = result.items.last?.archiveID else { break }
            page = .after(last)
        }
        state.withLock { state in
            let held = state.rooms[room]?.held ?? []
            state.rooms[room]?.held = nil
            for element in held { deliver(element, &state) }
        }
    }

    /// Joins the rooms of the stored cursor again and catches each up; a room that is gone or
    /// closed to the user now is removed.
    func reenterRooms() async throws {
        for room in state.withLock({ $0.rooms.keys.sorted() }) {
            do {
                try await enter(room)
            } catch let error as SwitchboardError where error.code == .conversationNotFound || error.code == .permissionDenied {
                output.yield(.problem(error))
                state.withLock { state in
                    output.yield(.event(BackendEvent(.conversationRemoved, conversation: ConversationID(room), cursor: cursor(state), time: context.clock.date)))
                }
                continue
            }
            try await catchUpRoom(room)
        }
    }

    /// The room as a conversation: its occupants, the user among them.
    func roomInfo(_ room: String, _ state: State) -> ConversationInfo? {
        guard let entry = state.rooms[room] else { return nil }
        let participants = entry.occupants.keys.sorted().compactMap { entry.occupants[$0] }
        return XMPPMapping.room(room, title: entry.name ?? entry.subject, participants: participants)
    }

    /// An occupant's presence: the user's own completes a join or a leave (or says it was
    /// removed); anyone else's is a participant joining, changing or leaving.
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
            func yield(_ kind: BackendEvent.Kind) {
                output.yield(.event(BackendEvent(kind, conversation: ConversationID(room), time: context.clock.date)))
            }
            if occupant.left {
                entry.occupants[occupant.nick] = nil
                guard occupant.isSelf else {
                    state.rooms[room] = entry
                    if entry.joined { yield(.participantsRemoved([participant.id])) }
                    return
                }
                // Left at the user's request (the close answers), or removed by the room.
                state.rooms[room] = nil
                if !replies.resolve("#leave:\(room)", with: element) {
                    output.yield(.event(BackendEvent(.conversationRemoved, conversation: ConversationID(room), cursor: cursor(state), time: context.clock.date)))
                }
                return
            }
            let known = entry.occupants.updateValue(participant, forKey: occupant.nick) != nil
            if occupant.isSelf, !entry.joined {
                entry.joined = true
                state.rooms[room] = entry
                _ = replies.resolve("#join:\(room)", with: element)
                return
            }
            state.rooms[room] = entry
            if entry.joined { yield(known ? .participantsUpdated([participant]) : .participantsAdded([participant])) }
        }
    }

    /// A room's live message: held while the room catches up, the answer of the user's send
    /// when it is the room's reflection of it, else received.
    func liveRoomMessage(_ stanza: XMPPElement, _ state: inout State) {
        let room = XMPPMapping.bare(stanza["from"] ?? "")
        guard let entry = state.rooms[room] else { return }
        if entry.held != nil {
            state.rooms[room]!.held!.append(stanza)
            return
        }
        let archiveID = XMPPMapping.stanzaID(of: stanza, archive: room)
        if XMPPMapping.nick(of: stanza) == entry.nick, let id = Self.originID(stanza), state.sending.contains(id),
            replies.resolve("#muc:\(id)", with: stanza)
        {
            if let archiveID {
                _ = state.handle(archiveID)
                state.rooms[room]!.archiveID = archiveID
            }
            return
        }
        receiveRoom(stanza, archiveID: archiveID, stamp: time(stamped: XMPPMapping.delay(of: stanza)), &state)
    }

    /// A room's message, live or from its archive: a message, a subject, or a chat state.
    func receiveRoom(_ stanza: XMPPElement, archiveID: String?, stamp: Date, position: ChatEvent.MessagePosition = .newest, _ state: inout State) {
        let room = XMPPMapping.bare(stanza["from"] ?? "")
        guard var entry = state.rooms[room] else { return }
        let conversation = ConversationID(room)
        if let subject = stanza.child("subject", NS.client), stanza.child("body", NS.client) == nil {
            entry.subject = subject.text
            state.rooms[room] = entry
            if entry.joined, let info = roomInfo(room, state) { output.yield(.event(BackendEvent(.conversationUpdated(info), conversation: conversation, time: stamp))) }
            return
        }
        guard let nick = XMPPMapping.nick(of: stanza) else { return }
        let (sender, mine) = roomSender(stanza, nick: nick, entry)
        if stanza.child("body", NS.client) == nil {
            if !mine, let chatState = stanza.children.first(where: { $0.namespace == NS.chatStates }) {
                output.yield(.event(BackendEvent(.typing(sender, isTyping: chatState.name == "composing", draft: nil), conversation: conversation, time: stamp)))
            }
            return
        }
        if let archiveID {
            // In the room's order, live and caught up alike (its live messages wait while it
            // catches up): the next join goes on after it.
            state.rooms[room]!.archiveID = archiveID
            guard state.handle(archiveID) else { return }
        }
        let time = state.clock.next(stamp: stamp)
        let serverID = archiveID ?? "message:\(stanza["id"] ?? UUID().uuidString)"
        guard let message = XMPPMapping.roomMessage(stanza, archiveID: serverID, sender: sender, mine: mine, time: time) else { return }
        state.keep(message)
        output.yield(.event(BackendEvent(.messageAdded(message, position: position), conversation: conversation, cursor: cursor(state), time: time)))
    }

    /// Who sent a room's message: the user for its own nick; else the occupant by that nick, the
    /// sender's JID where the room's archive kept it, or its address in the room.
    func roomSender(_ stanza: XMPPElement, nick: String, _ entry: State.Room) -> (ParticipantID, mine: Bool) {
        if nick == entry.nick { return (ParticipantID(me), true) }
        if let occupant = entry.occupants[nick] { return (occupant.id, false) }
        if let jid = stanza.child("x", NS.mucUser)?.child("item", NS.mucUser)?["jid"] { return (ParticipantID(XMPPMapping.bare(jid)), false) }
        return (ParticipantID("\(XMPPMapping.bare(stanza["from"] ?? ""))/\(nick)"), false)
    }

    static func originID(_ stanza: XMPPElement) -> String? {
        stanza.child("origin-id", NS.sid)?["id"] ?? stanza["id"]
    }

    /// A message to a room, confirmed by the room's reflection of it (with the room's archive
    /// id). A resend after a lost answer looks in the room's newest archived messages first.
    func sendToRoom(_ outgoing: OutgoingMessage, room: String) async throws -> Message? {
        let clientID = outgoing.clientID.rawValue
        guard let nick = state.withLock({ $0.rooms[room]?.nick }) else {
            throw SwitchboardError(.conversationNotFound, "the user is not in the room \(room)")
        }
        state.withLock { _ = $0.sending.insert(clientID) }
        defer { state.withLock { _ = $0.sending.remove(clientID) } }
        let recent = try await archivePage(archive: room, with: nil, page: .newest, max: 50).items
        if let item = recent.last(where: { XMPPMapping.nick(of: $0.message) == nick && Self.originID($0.message) == clientID }) {
            return state.withLock { state in
                if let known = state.recent[item.archiveID] { return known }
                let time = state.clock.next(stamp: self.time(stamped: item.stamp))
                guard let message = XMPPMapping.roomMessage(item.message, archiveID: item.archiveID, sender: ParticipantID(me), mine: true, time: time) else {
                    return nil
                }
                state.keep(message)
                _ = state.handle(item.archiveID)
                return message
            }
        }
        // Its place among the live messages is when it is sent.
        let time = state.withLock { $0.clock.next(stamp: context.clock.date) }
        let reflected = try await exchange("#muc:\(clientID)", XMPPStanzas.groupchat(to: room, clientID: clientID, body: outgoing.content.text), name: "send")
        if reflected["type"] == "error" { throw XMPPMapping.error(reflected, request: "send") }
        let archiveID = XMPPMapping.stanzaID(of: reflected, archive: room) ?? "message:\(clientID)"
        guard let message = XMPPMapping.roomMessage(reflected, archiveID: archiveID, sender: ParticipantID(me), mine: true, time: time) else {
            throw SwitchboardError(.protocolViolation, "the room reflected the message without its body")
        }
        state.withLock { $0.keep(message) }
        return message
    }

    /// Starts a room: a new one named from the start's client id (so a retried start joins the
    /// room it made), configured with the title, the draft's participants invited, then its
    /// first message.
    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        guard draft.kind != .direct else {
            throw SwitchboardError(.unsupported, "an XMPP one-to-one chat needs no start: send to the contact's JID, the conversation's id")
        }
        let clientID = draft.clientID?.rawValue ?? UUID().uuidString
        let local = String(clientID.lowercased().unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "-" }.prefix(64))
        let room = "room-\(local.isEmpty ? UUID().uuidString.lowercased() : local)@\(configuration.mucService)"
        try await enter(room, title: draft.title)
        for participant in draft.participants where XMPPMapping.bare(participant.id.rawValue) != me {
            try await socket.send(XMPPStanzas.invite(participant.id.rawValue, to: room))
        }
        try await catchUpRoom(room)
        guard let info = state.withLock({ roomInfo(room, $0) }) else {
            throw SwitchboardError(.conversationNotFound, "the room \(room) was left while it started")
        }
        guard let first = draft.firstMessage else { return ConversationSnapshot(conversation: info) }
        guard first.attachments.isEmpty else { throw SwitchboardError(.unsupported, "files are not offered by this version of the XMPP adapter") }
        let sent = try await sendToRoom(OutgoingMessage(clientID: ClientMessageID(clientID), conversationID: info.id, content: first), room: room)
        return ConversationSnapshot(conversation: info, messages: sent.map { [$0] } ?? [])
    }

    /// Leaves a room for good: the next links do not join it again. A one-to-one chat cannot be
    /// left.
    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
        let room = conversation.rawValue
        guard let nick = state.withLock({ $0.rooms[room]?.nick }) else {
            throw SwitchboardError(.unsupported, "only rooms can be left; \(room) is not a room the user is in")
        }
        let answer = try await exchange("#leave:\(room)", XMPPStanzas.leaveRoom(room, nick: nick), name: "leave")
        if answer["type"] == "error" { throw XMPPMapping.error(answer, request: "leave \(room)") }
        state.withLock { state in
            state.rooms[room] = nil
            if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
        }
        return .removed
    }

    /// Refuses what this version does not do in a room.
    func requireNotRoom(_ conversation: ConversationID, _ what: String) throws {
        if state.withLock({ $0.rooms[conversation.rawValue] != nil }) {
            throw SwitchboardError(.unsupported, "\(what) in rooms is not offered by this version of the XMPP adapter")
        }
    }

    /// Joins a room by its bare JID, and reads its newest page.
    func join(_ room: String) async throws -> ConversationID {
        let room = XMPPMapping.bare(room)
        guard room.contains("@") else { throw SwitchboardError(.invalidArgument, "a room is a bare JID, room@service") }
        try await enter(room)
        try await catchUpRoom(room)
        return ConversationID(room)
    }
}
