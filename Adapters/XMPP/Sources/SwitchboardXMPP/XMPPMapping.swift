public import Foundation
public import Switchboard

/// XMPP's stanzas as the normalized model: pure functions, for the link, the codec tests and the
/// fuzz target.
@_spi(WireReaders) public enum XMPPMapping {
    /// A JID without its resource, its local part and domain lowercased (nodeprep and nameprep
    /// as far as ASCII goes; Prosody answers with the case it was given).
    public static func bare(_ jid: String) -> String {
        let withoutResource = jid.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? jid
        return withoutResource.lowercased()
    }

    /// One message of a MAM page: its archive id, when the server archived it, and the message.
    public struct ArchiveItem: Sendable, Hashable {
        public var queryID: String
        public var archiveID: String
        public var stamp: Date?
        public var message: XMPPElement
    }

    /// The archived message a `<message><result …><forwarded>…` frame carries; `nil` when the
    /// frame is not a MAM result.
    ///
    /// - Throws: ``SwitchboardError/Code/protocolViolation`` for a result without its id or
    ///   its forwarded message.
    public static func archiveItem(_ frame: XMPPElement) throws(SwitchboardError) -> ArchiveItem? {
        guard frame.is("message", NS.client), let result = frame.child("result", NS.mam) else { return nil }
        guard let queryID = result["queryid"], let archiveID = result["id"], !archiveID.isEmpty,
            let forwarded = result.child("forwarded", NS.forward), let message = forwarded.child("message", NS.client)
        else {
            throw SwitchboardError(.protocolViolation, "a MAM result without its query id, archive id or forwarded message")
        }
        let stamp = forwarded.child("delay", NS.delay)?["stamp"].flatMap(timestamp)
        return ArchiveItem(queryID: queryID, archiveID: archiveID, stamp: stamp, message: message)
    }

    /// The archive id the user's server gave a live message (XEP-0359's `<stanza-id>` with `by`
    /// the user's own bare JID; one `by` anyone else may be spoofed, and is ignored).
    public static func stanzaID(of message: XMPPElement, archive: String) -> String? {
        message.children("stanza-id", NS.sid).first { $0["by"].map(bare) == archive }?["id"]
    }

    /// A chat message as a ``Message`` of the conversation with the peer; `nil` for what is no
    /// message in increment one's model (no body, an error, a groupchat, a correction or a
    /// retraction).
    public static func message(_ stanza: XMPPElement, archiveID: String, me: String, time: Date) -> Message? {
        guard stanza.is("message", NS.client), let body = stanza.child("body", NS.client) else { return nil }
        let type = stanza["type"] ?? "normal"
        guard type == "chat" || type == "normal" else { return nil }
        guard stanza.child("replace", "urn:xmpp:message-correct:0") == nil, stanza.child("retract", "urn:xmpp:message-retract:1") == nil else {
            return nil
        }
        // An invitation to a room (through the room, or direct: XEP-0249) is not a message of a
        // chat, though it may carry a body.
        guard stanza.child("x", NS.mucUser)?.child("invite", NS.mucUser) == nil, stanza.child("x", NS.conferenceInvite) == nil else { return nil }
        let from = stanza["from"].map(bare) ?? me
        let to = stanza["to"].map(bare) ?? me
        let mine = from == me
        let peer = mine ? to : from
        guard !peer.isEmpty else { return nil }
        let originID = stanza.child("origin-id", NS.sid)?["id"] ?? stanza["id"]
        var payload: JSONValue?
        if let id = stanza["id"] { payload = ["xmpp": ["id": .string(id)]] }
        let file = file(of: stanza)
        return Message(
            serverID: MessageID(archiveID), clientID: mine ? originID.map(ClientMessageID.init) : nil, conversationID: ConversationID(peer),
            sender: ParticipantID(from), senderRole: .user, kind: file == nil ? .text : .file, text: file == nil ? body.text : "",
            attachments: file.map { [$0] } ?? [], payload: payload, time: time
        )
    }

    /// What a message stanza says about other messages or the peer, besides a message of its own.
    public enum Change: Sendable, Hashable {
        /// A chat state (XEP-0085): `composing` is typing, the others stopped it.
        case typing(Bool)
        /// A read marker (XEP-0333) naming a message by its id attribute.
        case displayed(String)
        /// A correction (XEP-0308) of the message with this id attribute.
        case replace(String, text: String)
        /// A retraction (XEP-0424) of the message with this id attribute.
        case retract(String)
    }

    /// The change a stanza carries; `nil` for a plain message (or nothing the model has).
    public static func change(_ stanza: XMPPElement) -> Change? {
        guard stanza.is("message", NS.client), stanza["type"] != "error", stanza["type"] != "groupchat" else { return nil }
        if let id = stanza.child("retract", NS.retract)?["id"] { return .retract(id) }
        if let id = stanza.child("replace", NS.correct)?["id"] { return .replace(id, text: stanza.child("body", NS.client)?.text ?? "") }
        if let id = stanza.child("displayed", NS.markers)?["id"] { return .displayed(id) }
        guard stanza.child("body", NS.client) == nil, let state = stanza.children.first(where: { $0.namespace == NS.chatStates }) else { return nil }
        return .typing(state.name == "composing")
    }

    /// The message a carbon (XEP-0280) copies, and whether the user sent it from another device;
    /// `nil` for what is not a carbon from the user's own account (one from anyone else is
    /// spoofed).
    public static func carbon(_ stanza: XMPPElement, me: String) -> (message: XMPPElement, sent: Bool)? {
        guard stanza.is("message", NS.client), bare(stanza["from"] ?? me) == me else { return nil }
        for kind in ["sent", "received"] {
            if let message = stanza.child(kind, NS.carbons)?.child("forwarded", NS.forward)?.child("message", NS.client) {
                return (message, kind == "sent")
            }
        }
        return nil
    }

    /// The `<delay>` stamp (XEP-0203) of a stanza, where it has one.
    public static func delay(of stanza: XMPPElement) -> Date? {
        stanza.child("delay", NS.delay)?["stamp"].flatMap(timestamp)
    }

    /// The message's id attribute, as markers, corrections and retractions name it.
    public static func stanzaID(of message: Message) -> String? {
        message.payload?["xmpp"]?["id"]?.stringValue
    }

    /// The conversation with a roster contact (or a peer seen in the archive).
    public static func conversation(peer: String, name: String?, me: String) -> ConversationInfo {
        ConversationInfo(
            id: ConversationID(peer), kind: .direct, title: name.flatMap { $0.isEmpty ? nil : $0 }, state: .active,
            participants: [Participant(id: ParticipantID(me), role: .user), Participant(id: ParticipantID(peer), role: .user, displayName: name)],
            flags: .direct
        )
    }

    /// XEP-0082 date-time: `2026-11-28T12:00:00Z`, with optional fractions and offset.
    public static func timestamp(_ text: String) -> Date? {
        let utf8 = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= utf8.count else { return nil }
            var value = 0
            for byte in utf8[from..<(from + count)] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard utf8.count >= 20, let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
            let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2)
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < utf8.count, utf8[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            while index < utf8.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(utf8[index]) {
                fraction += Double(utf8[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
        }
        var offset = 0
        if index < utf8.count, utf8[index] == UInt8(ascii: "Z") {
            index += 1
        } else if index < utf8.count, utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-"), let hours = number(index + 1, 2), let minutes = number(index + 4, 2) {
            offset = (hours * 3600 + minutes * 60) * (utf8[index] == UInt8(ascii: "+") ? 1 : -1)
            index += 6
        } else {
            return nil
        }
        guard index == utf8.count else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)) else {
            return nil
        }
        return date.addingTimeInterval(fraction - TimeInterval(offset))
    }

    // MARK: Rooms (XEP-0045)

    /// What an occupant's presence in a room says.
    public struct Occupant: Sendable, Hashable {
        /// The room's bare JID.
        public var room: String
        public var nick: String
        /// The occupant's own bare JID, where the room shows it (a non-anonymous room).
        public var jid: String?
        public var affiliation: String
        public var role: String
        /// The user's own presence in the room (status 110).
        public var isSelf: Bool
        /// The room was made by this join (status 201): it waits for its configuration.
        public var created: Bool
        /// The occupant left (or was removed).
        public var left: Bool
        /// The occupant's id in the room (XEP-0421), which the room keeps for one JID whatever
        /// the nick: to be trusted only where the room says it sets it.
        public var occupantID: String?
        /// The nick the occupant goes on under, when this unavailable presence is a change of
        /// nick (status 303), not a leave.
        public var newNick: String?
        /// The room removed the occupant for good: banned (301), kicked (307), no longer a
        /// member (321, 322), or the room destroyed. Other leaves of the user's own (the service
        /// shutting down, 332; a technical problem, 333) are not a removal.
        public var removedByRoom: Bool
    }

    /// The occupant a room's presence (from `room@service/nick`, with a `muc#user` item) tells
    /// of; `nil` for any other presence.
    public static func occupant(_ presence: XMPPElement) -> Occupant? {
        guard presence.is("presence", NS.client), let from = presence["from"], let x = presence.child("x", NS.mucUser) else { return nil }
        let parts = from.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, !parts[1].isEmpty else { return nil }
        let item = x.child("item", NS.mucUser)
        let statuses = Set(x.children("status", NS.mucUser).compactMap { $0["code"] })
        let left = presence["type"] == "unavailable"
        return Occupant(
            room: bare(String(parts[0])), nick: String(parts[1]), jid: item?["jid"].map(bare), affiliation: item?["affiliation"] ?? "none",
            role: item?["role"] ?? "none", isSelf: statuses.contains("110"), created: statuses.contains("201"), left: left,
            occupantID: presence.child("occupant-id", NS.occupantID)?["id"],
            newNick: left && statuses.contains("303") ? item?["nick"] : nil,
            removedByRoom: left && (!statuses.isDisjoint(with: ["301", "307", "321", "322"]) || x.child("destroy", NS.mucUser) != nil)
        )
    }

    /// An occupant as a participant: by their own JID where the room shows it (the user always),
    /// else by their address in the room; an owner may manage the room, a visitor may not write.
    public static func participant(_ occupant: Occupant, me: String) -> Participant {
        let id = occupant.isSelf ? me : occupant.jid ?? "\(occupant.room)/\(occupant.nick)"
        var permissions = occupant.affiliation == "owner" ? Participant.Permissions.owner : Participant.Permissions()
        if occupant.role == "visitor" { permissions.canWrite = false }
        return Participant(id: ParticipantID(id), role: .user, displayName: occupant.nick, permissions: permissions)
    }

    /// A room as a group conversation.
    public static func room(_ room: String, title: String?, participants: [Participant]) -> ConversationInfo {
        ConversationInfo(id: ConversationID(room), kind: .group, title: title.flatMap { $0.isEmpty ? nil : $0 }, state: .active, participants: participants)
    }

    /// A room's message (`type='groupchat'`, from `room@service/nick`) as a ``Message`` of the
    /// room, sent by `sender`; `nil` for what is no message (no body, a subject, a correction, a
    /// retraction).
    public static func roomMessage(_ stanza: XMPPElement, archiveID: String, sender: ParticipantID, mine: Bool, time: Date) -> Message? {
        guard stanza.is("message", NS.client), stanza["type"] == "groupchat", let body = stanza.child("body", NS.client), let from = stanza["from"] else {
            return nil
        }
        guard stanza.child("replace", NS.correct) == nil, stanza.child("retract", NS.retract) == nil else { return nil }
        let originID = stanza.child("origin-id", NS.sid)?["id"] ?? stanza["id"]
        var payload: JSONValue?
        if let id = stanza["id"] { payload = ["xmpp": ["id": .string(id)]] }
        let file = file(of: stanza)
        return Message(
            serverID: MessageID(archiveID), clientID: mine ? originID.map(ClientMessageID.init) : nil, conversationID: ConversationID(bare(from)),
            sender: sender, senderRole: .user, kind: file == nil ? .text : .file, text: file == nil ? body.text : "",
            attachments: file.map { [$0] } ?? [], payload: payload, time: time
        )
    }

    /// The file a message carries: out-of-band data (XEP-0066) whose address is the whole body,
    /// as an HTTP upload (XEP-0363) is sent; an `http(s)` address only. Named by the address's
    /// last path part.
    public static func file(of stanza: XMPPElement) -> Message.Attachment? {
        guard let text = stanza.child("x", NS.oob)?.child("url", NS.oob)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
            stanza.child("body", NS.client)?.text.trimmingCharacters(in: .whitespacesAndNewlines) == text,
            let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host?.isEmpty == false
        else { return nil }
        return Message.Attachment(name: fileName(url), url: url)
    }

    /// A name to show and save a file under, from its address's last path part (decoded once):
    /// no path separators or control characters, not `.` or `..`, at most 255 characters.
    public static func fileName(_ url: URL) -> String {
        var kept = String.UnicodeScalarView()
        // The root's last part is `/` itself: no name.
        let last = url.lastPathComponent == "/" ? "" : url.lastPathComponent
        for scalar in last.unicodeScalars where kept.count < 255 {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { continue }
            kept.append(scalar == "/" || scalar == "\\" ? "_" : scalar)
        }
        let name = String(kept)
        return name.isEmpty || name == "." || name == ".." ? "file" : name
    }

    /// The nick a room's stanza comes from (`room@service/nick`).
    public static func nick(of stanza: XMPPElement) -> String? {
        guard let from = stanza["from"], let slash = from.firstIndex(of: "/") else { return nil }
        let nick = String(from[from.index(after: slash)...])
        return nick.isEmpty ? nil : nick
    }

    // MARK: Errors

    /// A stanza's `<error>` (RFC 6120 §8.3) classified; the condition is the vendor code.
    public static func error(_ stanza: XMPPElement, request: String) -> SwitchboardError {
        let error = stanza.child("error", NS.client)
        let condition = error?.children.first { $0.namespace == NS.stanzas && $0.name != "text" }?.name ?? "undefined-condition"
        let text = error?.child("text", NS.stanzas)?.text
        let message = "\(request): \(condition)" + (text.map { " (\($0))" } ?? "")
        let code: SwitchboardError.Code
        var retryAfter: Duration?
        switch condition {
        case _ where error?["type"] == "wait":
            // "Retry after waiting" (RFC 6120 §8.3.2), whatever the condition: a limit is a rate
            // limit, the rest a server that may do it later.
            code = condition == "resource-constraint" || condition == "policy-violation" ? .rateLimited : .serverError
            retryAfter = .seconds(5)
        case "item-not-found", "service-unavailable", "recipient-unavailable", "remote-server-not-found": code = .conversationNotFound
        case "forbidden", "not-allowed", "not-authorized", "registration-required", "subscription-required": code = .permissionDenied
        case "resource-constraint":
            code = .rateLimited
            retryAfter = .seconds(5)
        case "not-acceptable", "policy-violation": code = .messageRejected
        case "bad-request", "jid-malformed": code = .invalidArgument
        case "feature-not-implemented": code = .unsupported
        default: code = error?["type"] == "wait" ? .serverError : (condition == "internal-server-error" ? .serverError : .messageRejected)
        }
        return SwitchboardError(code, message, retryAfter: retryAfter, vendorCode: condition)
    }

    /// A stream error (RFC 6120 §4.9): the stream is over; what the engine does next follows the
    /// condition.
    public static func streamError(_ element: XMPPElement) -> SwitchboardError {
        let condition = element.children.first { $0.namespace == NS.streams && $0.name != "text" }?.name ?? "undefined-condition"
        let message = "the server ended the stream: \(condition)"
        switch condition {
        case "not-authorized": return SwitchboardError(.authenticationFailed, message, vendorCode: condition)
        case "conflict", "host-unknown", "improper-addressing", "invalid-from", "unsupported-version":
            return SwitchboardError(.fatal, message, vendorCode: condition)
        case "policy-violation", "resource-constraint":
            return SwitchboardError(.rateLimited, message, retryAfter: .seconds(5), vendorCode: condition)
        case "not-well-formed", "invalid-xml", "invalid-namespace", "bad-format", "unsupported-stanza-type", "restricted-xml":
            return SwitchboardError(.protocolViolation, message, vendorCode: condition)
        case "internal-server-error": return SwitchboardError(.serverError, message, vendorCode: condition)
        default: return SwitchboardError(.connectionLost, message, vendorCode: condition)
        }
    }

    /// A SASL `<failure>` (RFC 6120 §6.5).
    public static func saslFailure(_ element: XMPPElement) -> SwitchboardError {
        let condition = element.children.first { $0.namespace == NS.sasl && $0.name != "text" }?.name ?? "not-authorized"
        switch condition {
        case "account-disabled", "credentials-expired": return SwitchboardError(.fatal, "login refused: \(condition)", vendorCode: condition)
        case "temporary-auth-failure": return SwitchboardError(.serverError, "login failed for now: \(condition)", vendorCode: condition)
        case "encryption-required": return SwitchboardError(.fatal, "the server wants TLS for this login: \(condition)", vendorCode: condition)
        default: return SwitchboardError(.authenticationFailed, "login refused: \(condition)", vendorCode: condition)
        }
    }
}
