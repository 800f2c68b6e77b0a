import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// What the server sends: routed, held while the login assembles its snapshot, and handed on in
/// order.
extension XMPPLink {
    func readLoop() async {
        do {
            for try await text in socket.messages {
                state.withLock { $0.lastInbound = context.clock.now }
                await route(text)
            }
            output.end(SwitchboardError(.connectionLost, "the server closed the WebSocket"))
        } catch {
            output.end(SwitchboardError.classify(error))
        }
    }

    func route(_ text: String) async {
        let element: XMPPElement
        do {
            element = try XMLReader.read(text)
        } catch {
            // Refused here, but counted where the server counts it: a stanza.
            countedRefused(text)
            output.yield(.problem(error))
            return
        }
        defer { counted(element) }
        switch (element.namespace, element.name) {
        case (NS.framing, "open"):
            break
        case (NS.framing, "close"):
            state.withLock { $0.endedByServer = true }
            output.end(SwitchboardError(.connectionLost, "the server closed the stream"))
        case (NS.stream, "features"):
            replies.resolve("#features", with: element)
        case (NS.stream, "error"):
            state.withLock { $0.endedByServer = true }
            output.end(XMPPMapping.streamError(element))
        case (NS.sasl, "success"), (NS.sasl, "failure"), (NS.sasl, "challenge"):
            replies.resolve("#sasl", with: element)
        case (NS.sm, _):
            await streamManagement(element)
        case (NS.client, "iq"):
            await iq(element)
        case (NS.client, "message"):
            message(element)
        case (NS.client, "presence"):
            // Rooms' occupants; contacts' presence is not part of the model yet.
            presence(element)
        default:
            output.yield(.problem(SwitchboardError(.protocolViolation, "an element the adapter does not know: <\(element.name) xmlns='\(element.namespace)'>")))
        }
    }

    func iq(_ element: XMPPElement) async {
        let id = element["id"] ?? ""
        let from = element["from"]
        switch element["type"] {
        case "result", "error":
            // Answers come from the account or its server; one from anyone else is spoofed. A
            // heartbeat's answer has no waiter: hearing it was the point.
            // Another entity (a room, never one of its occupants; an upload service) answers only
            // what was asked of it, by an id no one can guess.
            let askedOf = state.withLock { $0.askedOf.removeValue(forKey: id) }
            guard from.map({ XMPPMapping.bare($0) == me || $0 == configuration.domain || $0 == askedOf }) ?? true else {
                output.yield(.problem(SwitchboardError(.protocolViolation, "an iq answer from \(XMPPMapping.bare(from!)), not the server")))
                return
            }
            replies.resolve(id, with: element)
        case "set" where element.child("query", NS.roster) != nil:
            // A roster push comes from the account itself (RFC 6121 §2.1.6); one from anyone else
            // is spoofed.
            guard from == nil || XMPPMapping.bare(from!) == me else {
                try? await socket.send(XMPPStanzas.notImplemented(to: id, from: from))
                return
            }
            try? await socket.send(XMPPStanzas.result(to: id, from: from))
            deliverOrHold(element)
        case "get" where element.child("ping", NS.ping) != nil:
            try? await socket.send(XMPPStanzas.result(to: id, from: from))
        case "get", "set":
            try? await socket.send(XMPPStanzas.notImplemented(to: id, from: from))
        default:
            output.yield(.problem(SwitchboardError(.protocolViolation, "an iq of type \(element["type"] ?? "none")")))
        }
    }

    func message(_ element: XMPPElement) {
        do {
            if let item = try XMPPMapping.archiveItem(element) {
                // The archive's results come from the archive asked: the account itself (no
                // `from`, or its bare JID), or the room.
                let from = element["from"].map { XMPPMapping.bare($0) == me ? me : $0 } ?? me
                let collected: Bool? = state.withLock { state in
                    // A dropped link's query, whose result the server sent again.
                    if state.abandonedQueries.contains(item.queryID) { return true }
                    guard state.pages[item.queryID] != nil else { return false }
                    guard state.pageSources[item.queryID] == from else { return nil }
                    state.pages[item.queryID]!.append(item)
                    return true
                }
                switch collected {
                case nil: output.yield(.problem(SwitchboardError(.protocolViolation, "an archive result from another archive than the one asked")))
                case false?: output.yield(.problem(SwitchboardError(.protocolViolation, "an archive result for a query nobody asked")))
                case true?: break
                }
                return
            }
        } catch {
            output.yield(.problem(error))
            return
        }
        if element["type"] == "error", let id = element["id"] {
            // A room's refusal of a message answers its send.
            if isRoom(XMPPMapping.bare(element["from"] ?? "")), replies.resolve("#muc:\(id)", with: element) { return }
            let error = XMPPMapping.error(element, request: "send")
            state.withLock { $0.bounce(id, error) }
            return
        }
        deliverOrHold(element)
    }

    /// Hands a live message or roster push on, or holds it while the login's snapshot is being
    /// assembled: under the lock, so nothing overtakes what was held.
    func deliverOrHold(_ element: XMPPElement) {
        state.withLock { state in
            if state.held != nil {
                state.held!.append(element)
            } else {
                deliver(element, &state)
            }
        }
    }

    func deliver(_ element: XMPPElement, _ state: inout State) {
        if element.name == "iq" {
            for item in element.child("query", NS.roster)?.children("item", NS.roster) ?? [] {
                guard let jid = item["jid"], item["subscription"] != "remove" else { continue }
                let info = XMPPMapping.conversation(peer: XMPPMapping.bare(jid), name: item["name"], me: me)
                let added = state.known.insert(info.id).inserted
                output.yield(.event(BackendEvent(added ? .conversationAdded(info) : .conversationUpdated(info), conversation: info.id, time: context.clock.date)))
            }
            return
        }
        if element["type"] == "groupchat" {
            liveRoomMessage(element, &state)
            return
        }
        var stanza = element
        if let carbon = XMPPMapping.carbon(element, me: me) {
            stanza = carbon.message
            // The user's own message from another device: the copy carries no archive id, so it
            // comes from the archive, with its id, when the follower looks.
            if carbon.sent, stanza.child("body", NS.client) != nil, XMPPMapping.change(stanza) == nil {
                follow.yield()
                return
            }
        }
        let archiveID = XMPPMapping.stanzaID(of: stanza, archive: me)
        if let archiveID {
            guard state.handle(archiveID) else { return }
            state.live.append(archiveID)
            follow.yield()
        }
        // A `<delay>` is the sender's word: never later than now.
        let stamp = time(stamped: XMPPMapping.delay(of: stanza))
        receive(stanza, archiveID: archiveID, stamp: stamp, &state)
    }

    /// One message stanza, live or from the archive, in order: a message, or a change to one.
    func receive(_ stanza: XMPPElement, archiveID: String?, stamp: Date, position: ChatEvent.MessagePosition = .newest, _ state: inout State) {
        // Private messages through a room the user is in are not part of the model yet.
        if state.rooms[XMPPMapping.bare(stanza["from"] ?? "")] != nil || state.rooms[XMPPMapping.bare(stanza["to"] ?? "")] != nil { return }
        if let change = XMPPMapping.change(stanza) {
            apply(change, of: stanza, stamp: stamp, &state)
            return
        }
        guard stanza.child("body", NS.client) != nil else { return }
        // Not archived (a `no-store` hint, or archiving off): its own id is all there is.
        let serverID = archiveID ?? "message:\(stanza["id"] ?? UUID().uuidString)"
        let time = state.clock.next(stamp: stamp)
        guard let message = XMPPMapping.message(stanza, archiveID: serverID, me: me, time: time) else { return }
        state.keep(message)
        announce(message.conversationID, &state)
        output.yield(.event(BackendEvent(.messageAdded(message, position: position), conversation: message.conversationID, cursor: cursor(state), time: time)))
    }

    /// A chat state, a read marker, a correction or a retraction, from the peer or (a marker,
    /// a correction, a retraction) from the user's other device. One naming a message this link
    /// has not seen is reported: the original is needed to apply it.
    func apply(_ change: XMPPMapping.Change, of stanza: XMPPElement, stamp: Date, _ state: inout State) {
        let from = XMPPMapping.bare(stanza["from"] ?? me)
        let peer = from == me ? XMPPMapping.bare(stanza["to"] ?? me) : from
        guard !peer.isEmpty, peer != me else { return }
        let conversation = ConversationID(peer)
        let author = ParticipantID(from)
        func yield(_ kind: BackendEvent.Kind) {
            announce(conversation, &state)
            output.yield(.event(BackendEvent(kind, conversation: conversation, time: stamp)))
        }
        switch change {
        case .typing(let isTyping):
            // The user's own chat states on another device are not news.
            guard from != me else { return }
            yield(.typing(author, isTyping: isTyping, draft: nil))
        case .displayed(let stanzaID):
            // Read up to that message; one this link has not seen is read up to when the marker
            // was sent.
            let marker = state.archiveIDByStanzaID[State.StanzaKey(conversation: conversation, id: stanzaID)].map { ChatEvent.ReadMarker.message(MessageID($0)) } ?? .time(stamp)
            yield(.readMarker(author, marker))
        case .replace(let stanzaID, let text):
            guard var original = state.original(named: stanzaID, in: conversation), original.sender == author else {
                output.yield(.problem(SwitchboardError(.messageNotFound, "a correction of a message this link has not seen", vendorCode: "replace")))
                return
            }
            original.text = text
            original.isEdited = true
            state.keep(original)
            yield(.messageUpdated(original))
        case .retract(let stanzaID):
            guard let original = state.original(named: stanzaID, in: conversation), original.sender == author, let id = original.serverID else {
                output.yield(.problem(SwitchboardError(.messageNotFound, "a retraction of a message this link has not seen", vendorCode: "retract")))
                return
            }
            state.recent[id.rawValue] = nil
            yield(.messageRemoved(id))
        }
    }

    func isRoom(_ jid: String) -> Bool {
        state.withLock { $0.rooms[jid] != nil }
    }

    /// A peer met outside the roster is a conversation too: announced before its first message.
    func announce(_ conversation: ConversationID, _ state: inout State) {
        guard state.known.insert(conversation).inserted else { return }
        let info = XMPPMapping.conversation(peer: conversation.rawValue, name: nil, me: me)
        output.yield(.event(BackendEvent(.conversationAdded(info), conversation: conversation, time: context.clock.date)))
    }
}
