import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// What the user does: sends, typing, read markers, corrections and retractions.
extension XMPPLink {
    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        guard outgoing.content.attachments.isEmpty else {
            throw SwitchboardError(.unsupported, "files are not offered by this version of the XMPP adapter")
        }
        guard XMLReader.isAllowed(outgoing.content.text) else {
            // The server would end the stream for it, and the outbox would send it again.
            throw SwitchboardError(.invalidArgument, "the text holds a control character XML does not allow")
        }
        let peer = outgoing.conversationID.rawValue
        if isRoom(peer) { return try await sendToRoom(outgoing, room: peer) }
        let clientID = outgoing.clientID.rawValue
        // XMPP servers do not recognize a repeated message id: a resend after a lost answer looks
        // in the conversation's newest archived messages first.
        state.withLock { _ = $0.sending.insert(clientID) }
        defer {
            state.withLock { _ = $0.sending.remove(clientID) }
            // The cursor goes on past it.
            follow.yield()
        }
        let recent = try await archivePage(with: peer, page: .newest, max: 50).items
        if let item = recent.last(where: { isMine($0, clientID) }) {
            if let bounce = state.withLock({ $0.bounced.removeValue(forKey: clientID) }) { throw bounce }
            return confirm(item, time: nil)
        }
        // Its place among the live messages is when it is sent: one that arrives while the
        // answer is on its way is newer.
        let time = state.withLock { $0.clock.next(stamp: context.clock.date) }
        try output.checkOpen()
        try await socket.send(XMPPStanzas.chat(to: peer, clientID: clientID, body: outgoing.content.text))
        // The server handles a stream's stanzas in order: the archive after the newest message
        // seen above holds it now, and a bounce came before the answer.
        var page = recent.last.map { XMPPStanzas.Page.after($0.archiveID) } ?? .newest
        var sent: XMPPMapping.ArchiveItem?
        while sent == nil {
            let result = try await archivePage(with: peer, page: page, max: 100)
            sent = result.items.last { isMine($0, clientID) }
            guard !result.complete, let last = result.items.last?.archiveID else { break }
            page = .after(last)
        }
        if let bounce = state.withLock({ $0.bounced.removeValue(forKey: clientID) }) { throw bounce }
        guard let sent else {
            // Accepted but not archived (the user's archiving preferences leave this chat out):
            // its own id is all there is.
            let message = Message(
                serverID: MessageID("message:\(clientID)"), clientID: outgoing.clientID, conversationID: outgoing.conversationID,
                sender: ParticipantID(me), senderRole: .user, text: outgoing.content.text, payload: ["xmpp": ["id": .string(clientID)]], time: time
            )
            state.withLock { $0.keep(message) }
            return message
        }
        return confirm(sent, time: time)
    }

    /// Whether the archived message is the user's with this origin id.
    func isMine(_ item: XMPPMapping.ArchiveItem, _ clientID: String) -> Bool {
        XMPPMapping.bare(item.message["from"] ?? me) == me && (item.message.child("origin-id", NS.sid)?["id"] ?? item.message["id"]) == clientID
    }

    /// The user's archived message as the send's answer: at `time`, or where this link already
    /// placed it; the archive's copy, when the follower reads it, is not news.
    func confirm(_ item: XMPPMapping.ArchiveItem, time: Date?) -> Message? {
        state.withLock { state in
            let time = state.recent[item.archiveID]?.time ?? time ?? state.clock.next(stamp: self.time(stamped: item.stamp))
            guard let message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time) else { return nil }
            // The follower's copy of it is not news.
            state.keep(message)
            _ = state.handle(item.archiveID)
            return message
        }
    }

    func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws {
        let chatState = isTyping ? "composing" : (draft?.isEmpty == false ? "paused" : "active")
        try output.checkOpen()
        try await socket.send(XMPPStanzas.chatState(chatState, to: conversation.rawValue, type: isRoom(conversation.rawValue) ? "groupchat" : "chat"))
    }

    /// A displayed marker naming the newest message of the peer's at or before the marker.
    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        try requireNotRoom(conversation, "read markers")
        let target: Message
        switch marker {
        case .message(let id):
            let named = try await original(id, in: conversation)
            guard named.sender == ParticipantID(me) else {
                target = named
                break
            }
            // The peer's client knows its own messages' ids: the newest of those up to it.
            guard let newest = newestFromPeer(in: conversation, atOrBefore: named.time) else { return }
            target = newest
        case .time(let time):
            guard let newest = newestFromPeer(in: conversation, atOrBefore: time) else { return }
            target = newest
        case .sequence:
            throw SwitchboardError(.invalidArgument, "XMPP read markers name a message, not a sequence")
        }
        guard let stanzaID = XMPPMapping.stanzaID(of: target) else {
            throw SwitchboardError(.messageNotFound, "the message has no id a marker can name")
        }
        try await sendAndSync("markRead") { XMPPStanzas.displayed(stanzaID, to: conversation.rawValue, id: $0) }
    }

    func newestFromPeer(in conversation: ConversationID, atOrBefore time: Date) -> Message? {
        state.withLock { state in
            state.recent.values.filter { $0.conversationID == conversation && $0.sender != ParticipantID(me) && $0.time <= time }.max { $0.time < $1.time }
        }
    }

    /// A correction of the user's own message; the server has no echo of it for the sender, so
    /// the answer is the message as corrected.
    func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        try requireNotRoom(conversation, "corrections")
        var original = try await original(message, in: conversation)
        guard original.sender == ParticipantID(me), let stanzaID = XMPPMapping.stanzaID(of: original) else {
            throw SwitchboardError(.permissionDenied, "only the user's own messages can be corrected")
        }
        try await sendAndSync("edit") { XMPPStanzas.correction(of: stanzaID, text: text, to: conversation.rawValue, id: $0) }
        original.text = text
        original.isEdited = true
        state.withLock { $0.keep(original) }
        return original
    }

    /// A retraction of the user's own message; the server has no echo of it for the sender, so
    /// the link reports the removal itself.
    func delete(_ message: MessageID, in conversation: ConversationID) async throws {
        try requireNotRoom(conversation, "retractions")
        let original = try await original(message, in: conversation)
        guard original.sender == ParticipantID(me), let stanzaID = XMPPMapping.stanzaID(of: original) else {
            throw SwitchboardError(.permissionDenied, "only the user's own messages can be retracted")
        }
        try await sendAndSync("delete") { XMPPStanzas.retraction(of: stanzaID, to: conversation.rawValue, id: $0) }
        state.withLock { $0.recent[message.rawValue] = nil }
        output.yield(.event(BackendEvent(.messageRemoved(message), conversation: conversation, time: context.clock.date)))
    }

    /// A message by archive id: this link's, or fetched from the archive by its id.
    func original(_ id: MessageID, in conversation: ConversationID) async throws -> Message {
        if let known = state.withLock({ $0.recent[id.rawValue] }) { return known }
        let page = try await archivePage(with: nil, ids: [id.rawValue], page: .newest, max: 1)
        guard let item = page.items.first, item.archiveID == id.rawValue,
            let message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time(stamped: item.stamp)),
            message.conversationID == conversation
        else {
            throw SwitchboardError(.messageNotFound, "no message \(id) in this conversation's archive")
        }
        state.withLock { $0.keep(message) }
        return message
    }

    /// Sends a stanza, then a ping whose answer comes after the server handled it: a bounce of
    /// the stanza came first and fails the call.
    func sendAndSync(_ name: String, _ stanza: (_ id: String) -> String) async throws {
        // Unique across links and devices: the follower skips the archive's copy by it.
        let id = "\(name)-\(UUID().uuidString)"
        try output.checkOpen()
        state.withLock { $0.sent(id) }
        defer { follow.yield() }
        try await socket.send(stanza(id))
        let pingID = nextID("sync")
        _ = try await request(pingID, XMPPStanzas.ping(id: pingID, to: configuration.domain), name: name)
        if let bounce = state.withLock({ $0.bounced.removeValue(forKey: id) }) { throw bounce }
    }
}
