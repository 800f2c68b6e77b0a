import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// What the user does: sends (files through the server's upload service), typing, read markers,
/// corrections and retractions.
extension XMPPLink {
    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        try Self.checkSendable(outgoing.content)
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
            return Self.withSentFile(confirm(item, time: nil), outgoing)
        }
        // Not found: a file goes up first (its address is the message).
        let file = try await outgoing.content.attachments.first.asyncMap { try await upload($0, for: clientID) }
        // Its place among the live messages is when it is sent: one that arrives while the
        // answer is on its way is newer.
        let time = state.withLock { $0.clock.next(stamp: context.clock.date) }
        try output.checkOpen()
        // A bounce of an earlier attempt (sent again by the server after a resumption) is not
        // this one's.
        state.withLock { _ = $0.bounced.removeValue(forKey: clientID) }
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
        return Self.withSentFile(confirm(sent, time: time), outgoing)
    }

    /// Refuses what an XMPP message cannot carry before anything is sent: text XML does not
    /// allow (the server would end the stream, and the outbox would send it again), more than
    /// one file, or text beside a file (a file's message is its address; the engine sends a
    /// caption as a message of its own).
    static func checkSendable(_ content: MessageDraft) throws {
        guard content.attachments.count <= 1 else {
            throw SwitchboardError(.invalidArgument, "an XMPP message carries one file: send each in a message of its own")
        }
        guard content.attachments.isEmpty || content.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw SwitchboardError(.invalidArgument, "an XMPP file message carries no text: send the text as a message of its own")
        }
        guard XMLReader.isAllowed(content.text) else {
            throw SwitchboardError(.invalidArgument, "the text holds a control character XML does not allow")
        }
    }

    /// The confirmed message with the file as the user sent it (its name, type and size; the
    /// archive's copy has its address only).
    static func withSentFile(_ message: Message?, _ outgoing: OutgoingMessage) -> Message? {
        guard var message, let url = message.attachments.first?.url, var file = outgoing.content.attachments.first?.withoutData else { return message }
        file.url = url
        message.attachments = [file]
        return message
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
    func upload(_ attachment: Message.Attachment, for clientID: String) async throws -> String {
        // A retry on this link after the file went up sends the address it got.
        if let done = state.withLock({ $0.uploaded[clientID] }) { return done }
        let (service, limit) = try await uploadService()
        if let limit, let size = attachment.size, size > limit {
            throw SwitchboardError(.payloadTooLarge, "the file is over the upload service's limit of \(limit) bytes", vendorCode: "file-too-large")
        }
        let data = try attachment.contents()
        if let limit, data.count > limit {
            throw SwitchboardError(.payloadTooLarge, "the file is over the upload service's limit of \(limit) bytes", vendorCode: "file-too-large")
        }
        // What XML cannot carry would end the stream.
        let name = Self.xmlSafe(attachment.name, or: "file")
        let contentType = Self.xmlSafe(attachment.mimeType ?? "", or: "application/octet-stream")
        let id = uniqueID("upload", askedOf: service)
        let answer = try await exchange(id, XMPPStanzas.uploadSlot(to: service, id: id, filename: name, size: data.count, contentType: contentType), name: "upload")
        if answer["type"] == "error" { throw Self.slotError(answer) }
        let slot = answer.child("slot", NS.upload)
        guard let put = slot?.child("put", NS.upload)?["url"], let get = slot?.child("get", NS.upload)?["url"] else {
            throw SwitchboardError(.protocolViolation, "upload: a slot without its put or get address")
        }
        // The server names both addresses: HTTPS only (plain HTTP where the configuration allows
        // it), with a host; nothing else is put to or sent on.
        for address in [put, get] {
            guard let url = URLComponents(string: address), ["https", "http"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
                throw SwitchboardError(.protocolViolation, "upload: the slot's address is not an http(s) address with a host")
            }
            guard configuration.allowsPlainText || PlainTextPolicy.isEncryptedOrLoopback(address) else {
                throw SwitchboardError(.protocolViolation, "upload: the slot's address is plain http to another host")
            }
        }
        // XEP-0363 §5: only these headers, and without line breaks.
        let headers = (slot?.child("put", NS.upload)?.children("header", NS.upload) ?? []).compactMap { header -> (String, String)? in
            guard let name = header["name"], ["authorization", "cookie", "expires"].contains(name.lowercased()) else { return nil }
            return (name, header.text.filter { $0 != "\r" && $0 != "\n" })
        }
        // At least 100 kB/s, and the request deadline four times over.
        let timeout = max(configuration.requestTimeout * 4, .seconds(data.count / 100_000))
        let response = try await http.postData(put, data: data, contentType: contentType, method: "PUT", headers: headers, timeout: timeout)
        switch response.status {
        case 200, 201:
            state.withLock { state in
                if state.uploaded.count >= 100 { state.uploaded.removeAll() }
                state.uploaded[clientID] = get
            }
            return get
        case 413: throw SwitchboardError(.payloadTooLarge, "upload: the file is over the upload service's limit", vendorCode: "413")
        case 429: throw SwitchboardError(.rateLimited, "upload: the service asks to slow down (429)", retryAfter: .seconds(30), vendorCode: "429")
        case 408: throw SwitchboardError(.timedOut, "upload: the service timed the PUT out (408)", vendorCode: "408")
        case 401, 403: throw SwitchboardError(.permissionDenied, "upload: the service refused the slot's PUT (\(response.status))", vendorCode: String(response.status))
        default:
            throw SwitchboardError(response.status >= 500 ? .serverError : .messageRejected, "upload: the PUT was answered \(response.status)", vendorCode: String(response.status))
        }
    }

    /// A slot refused, classified: over the limit is `payloadTooLarge`; no such service
    /// `unsupported`; a quota `rateLimited` until the service's retry stamp.
    static func slotError(_ answer: XMPPElement) -> SwitchboardError {
        let error = answer.child("error", NS.client)
        if let limit = error?.child("file-too-large", NS.upload) {
            let max = limit.child("max-file-size", NS.upload)?.text ?? "unknown"
            return SwitchboardError(.payloadTooLarge, "the file is over the upload service's limit of \(max) bytes", vendorCode: "file-too-large")
        }
        let classified = XMPPMapping.error(answer, request: "upload")
        switch classified.vendorCode {
        case "service-unavailable", "item-not-found", "feature-not-implemented":
            return SwitchboardError(.unsupported, "upload: the server has no upload service here (\(classified.vendorCode ?? ""))", underlying: classified, vendorCode: classified.vendorCode)
        case "resource-constraint":
            let stamp = error?.child("retry", NS.upload)?["stamp"].flatMap(XMPPMapping.timestamp)
            let wait = stamp.map { Duration.seconds(max(1, Int($0.timeIntervalSinceNow.rounded(.up)))) } ?? .seconds(60)
            return SwitchboardError(.rateLimited, "upload: over the upload quota", underlying: classified, retryAfter: wait, vendorCode: classified.vendorCode)
        default:
            return classified
        }
    }

    /// Text XML can carry, without control characters; `fallback` when nothing is left.
    static func xmlSafe(_ text: String, or fallback: String) -> String {
        let kept = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F && XMLReader.isAllowed(String($0)) }.prefix(255))
        return kept.isEmpty ? fallback : kept
    }

    /// The upload service and its size limit: the configuration's service, else the first of
    /// the server's services that offers uploads (asked once per link).
    func uploadService() async throws -> (jid: String, limit: Int?) {
        if let found = state.withLock({ $0.uploadService }) { return found }
        var candidates = configuration.uploadService.map { [$0] } ?? []
        if candidates.isEmpty {
            let itemsID = nextID("items")
            let items = try await request(itemsID, XMPPStanzas.discoItems(configuration.domain, id: itemsID), name: "disco")
            candidates = items.child("query", NS.discoItems)?.children("item", NS.discoItems).compactMap { $0["jid"] } ?? []
        }
        for jid in candidates {
            let infoID = uniqueID("info", askedOf: jid)
            let info: XMPPElement
            do {
                info = try await request(infoID, XMPPStanzas.discoInfo(jid, id: infoID), name: "disco")
            } catch let error as SwitchboardError where error.code != .connectionLost && error.code != .timedOut {
                // A service that does not answer disco#info is not the upload service.
                continue
            }
            let query = info.child("query", NS.discoInfo)
            guard query?.children("feature", NS.discoInfo).contains(where: { $0["var"] == NS.upload }) == true else { continue }
            // XEP-0363 §2: the limit, in the form for its namespace.
            let form = query?.children("x", NS.dataForms).first { $0.children("field", NS.dataForms).contains { $0["var"] == "FORM_TYPE" && $0.child("value", NS.dataForms)?.text == NS.upload } }
            let limit = form?.children("field", NS.dataForms).first { $0["var"] == "max-file-size" }?.child("value", NS.dataForms).flatMap { Int($0.text) }
            state.withLock { $0.uploadService = (jid, limit) }
            return (jid, limit)
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
