import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// What the user does: sends, typing, read markers, corrections and retractions.
extension XMPPLink {
    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        guard outgoing.content.attachments.count <= 1 else {
            throw SwitchboardError(.invalidArgument, "an XMPP message carries one file: send each in a message of its own")
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
        // Not found: a file goes up first (its address is the message).
        let file = try await outgoing.content.attachments.first.asyncMap { try await upload($0) }
        // Its place among the live messages is when it is sent: one that arrives while the
        // answer is on its way is newer.
        let time = state.withLock { $0.clock.next(stamp: context.clock.date) }
        try output.checkOpen()
        try await socket.send(XMPPStanzas.chat(to: peer, clientID: clientID, body: outgoing.content.text, file: file))
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
            let attachments = Self.sent(outgoing.content.attachments, at: file)
            let message = Message(
                serverID: MessageID("message:\(clientID)"), clientID: outgoing.clientID, conversationID: outgoing.conversationID,
                sender: ParticipantID(me), senderRole: .user, kind: attachments.isEmpty ? .text : .file, text: attachments.isEmpty ? outgoing.content.text : "",
                attachments: attachments, payload: ["xmpp": ["id": .string(clientID)]], time: time
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

    // MARK: Files (XEP-0363)

    /// The files as sent: without their bytes, at the address they were put at.
    static func sent(_ attachments: [Message.Attachment], at url: String?) -> [Message.Attachment] {
        guard let url, var sent = attachments.first?.withoutData else { return [] }
        sent.url = URL(string: url)
        return [sent]
    }

    /// Puts the file on the server's HTTP upload service: a slot asked of the service, the bytes
    /// `PUT` where it says (with the headers it names that XEP-0363 allows). Returns the address
    /// the file is fetched from.
    ///
    /// - Throws: `payloadTooLarge` where the service says the file is over its limit (or the
    ///   `PUT` is refused as too large); `unsupported` where the server has no upload service.
    func upload(_ attachment: Message.Attachment) async throws -> String {
        let data = try attachment.contents()
        let service = try await uploadService()
        let contentType = attachment.mimeType ?? "application/octet-stream"
        let id = uniqueID("upload")
        let answer = try await exchange(id, XMPPStanzas.uploadSlot(to: service, id: id, filename: attachment.name, size: data.count, contentType: contentType), name: "upload")
        if answer["type"] == "error" {
            if let limit = answer.child("error", NS.client)?.child("file-too-large", NS.upload) {
                let max = limit.child("max-file-size", NS.upload)?.text ?? "unknown"
                throw SwitchboardError(.payloadTooLarge, "the file is over the upload service's limit of \(max) bytes", vendorCode: "file-too-large")
            }
            throw XMPPMapping.error(answer, request: "upload")
        }
        let slot = answer.child("slot", NS.upload)
        guard let put = slot?.child("put", NS.upload)?["url"], let get = slot?.child("get", NS.upload)?["url"], URL(string: get) != nil else {
            throw SwitchboardError(.protocolViolation, "upload: a slot without its put or get address")
        }
        // XEP-0363 §5: only these headers, and without line breaks.
        let headers = (slot?.child("put", NS.upload)?.children("header", NS.upload) ?? []).compactMap { header -> (String, String)? in
            guard let name = header["name"], ["authorization", "cookie", "expires"].contains(name.lowercased()) else { return nil }
            return (name, header.text.filter { $0 != "\r" && $0 != "\n" })
        }
        let response = try await http.postData(put, data: data, contentType: contentType, method: "PUT", headers: headers, timeout: configuration.requestTimeout * 4)
        switch response.status {
        case 200, 201: return get
        case 413: throw SwitchboardError(.payloadTooLarge, "upload: the file is over the upload service's limit", vendorCode: "413")
        case 401, 403: throw SwitchboardError(.permissionDenied, "upload: the service refused the slot's PUT (\(response.status))", vendorCode: String(response.status))
        default:
            throw SwitchboardError(response.status >= 500 ? .serverError : .messageRejected, "upload: the PUT was answered \(response.status)", vendorCode: String(response.status))
        }
    }

    /// The upload service: the configuration's, else the first of the server's services that
    /// offers uploads (asked once per link).
    func uploadService() async throws -> String {
        if let service = configuration.uploadService ?? state.withLock({ $0.uploadService }) { return service }
        let itemsID = uniqueID("items")
        let items = try await request(itemsID, XMPPStanzas.discoItems(configuration.domain, id: itemsID), name: "disco")
        for jid in items.child("query", NS.discoItems)?.children("item", NS.discoItems).compactMap({ $0["jid"] }) ?? [] {
            let infoID = uniqueID("info")
            guard let info = try? await request(infoID, XMPPStanzas.discoInfo(jid, id: infoID), name: "disco") else { continue }
            if info.child("query", NS.discoInfo)?.children("feature", NS.discoInfo).contains(where: { $0["var"] == NS.upload }) == true {
                state.withLock { $0.uploadService = jid }
                return jid
            }
        }
        throw SwitchboardError(.unsupported, "the server offers no HTTP upload service (XEP-0363): files cannot be sent")
    }
}

extension Optional {
    /// `map` with an asynchronous, throwing transform.
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
