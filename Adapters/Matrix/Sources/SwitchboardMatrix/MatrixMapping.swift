public import Foundation
public import Switchboard

/// Pure functions from the Matrix client-server API's JSON to the normalized model, and from its
/// errors to classified `SwitchboardError`s.
@_spi(WireReaders) public enum MatrixMapping {
    /// What one room event is to a timeline.
    public enum Item: Sendable, Hashable {
        /// A message to add (its latest edit applied where the server bundled it).
        case message(Message)
        /// `m.replace`: the message `target` now reads `text`.
        case edit(target: MessageID, text: String, time: Date)
        /// `m.room.redaction` of `target`.
        case redaction(target: MessageID)
        /// A state event (`m.room.name`, `m.room.member`, …): applied to the room's state.
        case state(type: String, stateKey: String, content: JSONValue, sender: String)
        /// An event the model does not cover, kept whole for the app.
        case custom(type: String, event: JSONValue)
        /// Nothing to show: a message redacted before it arrived.
        case ignored
    }

    /// Maps one room event (from `/sync`, `/messages` or `/event`).
    public static func item(_ event: JSONValue, room: ConversationID, me: String, homeserver: String) -> Item {
        guard let type = event["type"]?.stringValue else { return .custom(type: "unknown", event: event) }
        let content = event["content"] ?? .object([:])
        if let stateKey = event["state_key"]?.stringValue {
            return .state(type: type, stateKey: stateKey, content: content, sender: event["sender"]?.stringValue ?? "")
        }
        switch type {
        case "m.room.message":
            if event["unsigned"]?["redacted_because"] != nil { return .ignored }
            let time = date(event["origin_server_ts"])
            if content["m.relates_to"]?["rel_type"]?.stringValue == "m.replace",
                let target = content["m.relates_to"]?["event_id"]?.stringValue
            {
                let text = content["m.new_content"]?["body"]?.stringValue ?? content["body"]?.stringValue ?? ""
                return .edit(target: MessageID(target), text: text, time: time)
            }
            guard let message = message(event, room: room, me: me, homeserver: homeserver) else { return .custom(type: type, event: event) }
            return .message(message)
        case "m.room.redaction":
            guard let target = event["redacts"]?.stringValue ?? content["redacts"]?.stringValue else { return .ignored }
            return .redaction(target: MessageID(target))
        default:
            return .custom(type: type, event: event)
        }
    }

    /// An `m.room.message` event as a message; `nil` when it has no event id or sender. A file's
    /// URL is the homeserver's authenticated download (`/_matrix/client/v1/media/download`), which
    /// takes the access token; the `mxc://` address is kept in the payload.
    public static func message(_ event: JSONValue, room: ConversationID, me: String, homeserver: String) -> Message? {
        guard let eventID = event["event_id"]?.stringValue, let sender = event["sender"]?.stringValue else { return nil }
        var content = event["content"] ?? .object([:])
        var isEdited = false
        // The server bundles the latest edit with its original (`unsigned.m.relations.m.replace`).
        if let edit = event["unsigned"]?["m.relations"]?["m.replace"], let newContent = edit["content"]?["m.new_content"] {
            content = newContent
            isEdited = true
        }
        let msgtype = content["msgtype"]?.stringValue ?? "m.text"
        var kind = Message.Kind.text
        var attachments: [Message.Attachment] = []
        var payload: [String: JSONValue] = [:]
        switch msgtype {
        case "m.text", "m.notice", "m.emote":
            if msgtype != "m.text" { payload["msgtype"] = .string(msgtype) }
        case "m.image", "m.file", "m.video", "m.audio":
            kind = .file
            let info = content["info"]
            var size: Message.Attachment.ImageSize?
            if let width = info?["w"]?.intValue, let height = info?["h"]?.intValue { size = .init(width: Int(width), height: Int(height)) }
            let url = content["url"]?.stringValue
            attachments = [
                Message.Attachment(
                    name: content["filename"]?.stringValue ?? content["body"]?.stringValue ?? "file",
                    mimeType: info?["mimetype"]?.stringValue,
                    size: info?["size"]?.intValue,
                    url: url.flatMap { downloadURL(mxc: $0, homeserver: homeserver) },
                    imageSize: size
                )
            ]
            payload["msgtype"] = .string(msgtype)
            if let url { payload["mxc"] = .string(url) }
        default:
            kind = .custom(msgtype)
            payload["content"] = content
        }
        if let format = content["format"]?.stringValue, let formatted = content["formatted_body"]?.stringValue {
            payload["format"] = .string(format)
            payload["formatted_body"] = .string(formatted)
        }
        let transaction = event["unsigned"]?["transaction_id"]?.stringValue
        return Message(
            serverID: MessageID(eventID),
            clientID: sender == me ? transaction.map { ClientMessageID($0) } : nil,
            conversationID: room,
            sender: ParticipantID(sender),
            senderRole: msgtype == "m.notice" ? .bot : .user,
            kind: kind,
            text: content["body"]?.stringValue ?? "",
            attachments: attachments,
            payload: payload.isEmpty ? nil : .object(payload),
            time: date(event["origin_server_ts"]),
            isEdited: isEdited
        )
    }

    /// The content of an `m.room.message` a draft sends.
    public static func content(of draft: MessageDraft) -> JSONValue {
        var content: [String: JSONValue] = [
            "msgtype": .string(draft.vendorOptions?["msgtype"] ?? "m.text"),
            "body": .string(draft.text),
        ]
        if let quote = draft.quote?.messageID {
            content["m.relates_to"] = ["m.in_reply_to": ["event_id": .string(quote.rawValue)]]
        }
        return .object(content)
    }

    /// `mxc://server/id` → `<homeserver>/_matrix/client/v1/media/download/server/id`.
    public static func downloadURL(mxc: String, homeserver: String) -> URL? {
        guard mxc.hasPrefix("mxc://") else { return nil }
        let parts = mxc.dropFirst("mxc://".count).split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let base = homeserver.hasSuffix("/") ? String(homeserver.dropLast()) : homeserver
        return URL(string: "\(base)/_matrix/client/v1/media/download/\(parts[0])/\(parts[1])")
    }

    /// The content of a file message: `m.image`, `m.video`, `m.audio` by the file's type, else
    /// `m.file`; the caption (the draft's text) as `body` where there is one, the name as
    /// `filename`.
    public static func fileContent(of attachment: Message.Attachment, mxc: String, caption: String) -> JSONValue {
        let mimeType = attachment.mimeType ?? "application/octet-stream"
        let msgtype: String
        if mimeType.hasPrefix("image/") {
            msgtype = "m.image"
        } else if mimeType.hasPrefix("video/") {
            msgtype = "m.video"
        } else if mimeType.hasPrefix("audio/") {
            msgtype = "m.audio"
        } else {
            msgtype = "m.file"
        }
        var info: [String: JSONValue] = ["mimetype": .string(mimeType)]
        if let size = attachment.size { info["size"] = .int(size) }
        if let image = attachment.imageSize {
            info["w"] = .int(Int64(image.width))
            info["h"] = .int(Int64(image.height))
        }
        return [
            "msgtype": .string(msgtype),
            "body": .string(caption.isEmpty ? attachment.name : caption),
            "filename": .string(attachment.name),
            "url": .string(mxc),
            "info": .object(info),
        ]
    }

    /// `origin_server_ts` (milliseconds since 1970).
    static func date(_ value: JSONValue?) -> Date {
        Date(timeIntervalSince1970: Double(value?.intValue ?? 0) / 1000)
    }

    /// Milliseconds since 1970, as the API counts them.
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Whole milliseconds of a duration, as the API's timeouts count them.
    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    // MARK: Errors

    /// Classifies an error answer: `status` and its body (`{"errcode": …, "error": …}`).
    /// `request` names what was asked, for the message and the not-found codes.
    public static func error(status: Int, body: Data, request: String) -> SwitchboardError {
        let json = try? JSONValue(parsing: body)
        let errcode = json?["errcode"]?.stringValue
        let text = json?["error"]?.stringValue.map { ": \($0)" } ?? ""
        let message = "\(request) failed with \(status) \(errcode ?? "")\(text)"
        let code: SwitchboardError.Code
        var retryAfter: Duration?
        switch errcode {
        case "M_UNKNOWN_TOKEN", "M_MISSING_TOKEN":
            code = .authenticationFailed
        case "M_FORBIDDEN" where request == "login":
            code = .authenticationFailed
        case "M_USER_DEACTIVATED", "M_USER_LOCKED", "M_USER_SUSPENDED":
            code = .fatal
        case "M_FORBIDDEN", "M_GUEST_ACCESS_FORBIDDEN", "M_CANNOT_LEAVE_SERVER_NOTICE_ROOM":
            code = .permissionDenied
        case "M_LIMIT_EXCEEDED":
            code = .rateLimited
            let milliseconds = json?["retry_after_ms"]?.intValue ?? 1000
            retryAfter = .milliseconds(milliseconds)
        case "M_NOT_FOUND":
            code = request == "event" || request == "redact" || request == "edit" ? .messageNotFound : .conversationNotFound
        case "M_TOO_LARGE":
            code = .payloadTooLarge
        case "M_BAD_JSON", "M_NOT_JSON", "M_INVALID_PARAM", "M_MISSING_PARAM", "M_INVALID_ROOM_STATE", "M_BAD_STATE":
            code = .invalidArgument
        case "M_UNRECOGNIZED":
            code = .unsupported
        default:
            if status == 401 {
                code = .authenticationFailed
            } else if status == 429 {
                code = .rateLimited
            } else if status >= 500 {
                code = .serverError
            } else if status == 404 {
                code = .conversationNotFound
            } else {
                code = .messageRejected
            }
        }
        return SwitchboardError(code, message, retryAfter: retryAfter, vendorCode: errcode ?? String(status))
    }
}
