import Crypto
import Foundation
import Switchboard

/// Webim JSON (protocols/webim.md §2, §7) to the normalized model, and Webim error strings to
/// `SwitchboardError`. Pure functions over `JSONValue`.
enum WebimMapping {
    /// Everything a mapping needs to know about the link.
    struct Context: Sendable {
        var baseURL: String
        var pageID: String?
        var authToken: String?
        var visitorID: ParticipantID?
        var now: Date
    }

    static let conversation = ConversationID("chat")

    static func state(_ raw: String?) -> ConversationInfo.State {
        switch raw {
        case nil: return .none
        case "queue": return .queued
        case "chatting", "chatting_with_robot": return .active
        case "closed": return .closed
        case "closed_by_operator": return .closedByAgent
        case "closed_by_visitor": return .closedByCustomer
        case "invitation": return .invitation
        case let other?: return .unknown(other)
        }
    }

    static func agent(_ json: JSONValue, context: Context) -> Participant? {
        guard let id = json["id"]?.intValue, let name = json["fullname"]?.stringValue else { return nil }
        return Participant(
            id: ParticipantID("operator-\(id)"),
            role: .agent,
            displayName: name,
            avatarURL: json["avatar"]?.stringValue.flatMap { URL(string: $0.hasPrefix("http") ? $0 : context.baseURL + $0) },
            permissions: Participant.Permissions(canEditOwn: false, canRemoveOwn: false),
            payload: json
        )
    }

    /// The one conversation of a visitor: its current chat (`nil` before the first chat).
    static func conversationInfo(_ chat: JSONValue?, context: Context) -> ConversationInfo {
        var participants: [Participant] = []
        if let visitor = context.visitorID { participants.append(Participant(id: visitor, role: .customer)) }
        let chat = chat?.nonNull
        let agent = chat?["operator"].flatMap { Self.agent($0, context: context) }
        if let agent { participants.append(agent) }
        var customData: [String: JSONValue] = [:]
        if let id = chat?["id"] { customData["chatId"] = id }
        if let rates = chat?["operatorIdToRate"]?.nonNull {
            customData["operatorIdToRate"] = rates
            // The SDK's scale: the wire's −2…2 plus 3.
            var ratings: [String: JSONValue] = [:]
            for (id, entry) in rates.objectValue ?? [:] {
                if let rating = entry["rating"]?.intValue, (-2...2).contains(rating) { ratings[id] = .int(rating + 3) }
            }
            if !ratings.isEmpty { customData["operatorRatings"] = .object(ratings) }
        }
        return ConversationInfo(
            id: conversation,
            kind: .supportChat,
            state: state(chat?["state"]?.stringValue),
            participants: participants,
            assignedAgent: agent,
            unreadCount: Int(chat?["unreadByVisitorMsgCnt"]?.intValue ?? 0),
            customData: customData.isEmpty ? nil : .object(customData),
            createdAt: chat?["creationTs"]?.doubleValue.map { Date(timeIntervalSince1970: $0) }
        )
    }

    /// A message's time in seconds: `ts_m` (microseconds) where the server gives it, else `ts`;
    /// `nil` without either. Webim's times are microseconds in an Int64: a time past them is no
    /// time (a history page's anchor, `Int64(seconds * 1_000_000)`, trapped on one; found by
    /// FuzzWebim).
    static func seconds(of message: JSONValue) -> Double? {
        let seconds: Double
        if let micros = message["ts_m"]?.intValue {
            seconds = Double(micros) / 1_000_000
        } else if let ts = message["ts"]?.doubleValue {
            seconds = ts
        } else {
            return nil
        }
        return abs(seconds) < 9.2e12 ? seconds : nil
    }

    /// A message item, or `nil` for what the SDK drops (no id, text, name or time; hidden kinds).
    static func message(_ json: JSONValue, context: Context) -> Message? {
        guard let id = json["id"]?.stringValue, let rawKind = json["kind"]?.stringValue, rawKind != "for_operator",
            let text = json["text"]?.stringValue, json["name"]?.stringValue != nil
        else { return nil }
        guard let seconds = seconds(of: json) else { return nil }
        let time = Date(timeIntervalSince1970: seconds)
        let (kind, role) = kindAndRole(rawKind)
        var sender: ParticipantID?
        switch role {
        case .customer: sender = context.visitorID
        case .agent: sender = json["authorId"]?.intValue.map { ParticipantID("operator-\($0)") }
        default: sender = nil
        }
        var attachments: [Message.Attachment] = []
        var shownText = text
        if kind == .file {
            attachments = self.attachments(fromFileText: text, data: json["data"], context: context)
            shownText = attachments.map(\.name).joined(separator: ", ")
        }
        var quote: Message.Quote?
        if let quoted = json["quote"]?["message"]?.nonNull {
            quote = Message.Quote(
                messageID: quoted["id"]?.stringValue.map(MessageID.init),
                senderName: quoted["name"]?.stringValue,
                text: quoted["text"]?.stringValue
            )
        }
        var payload: [String: JSONValue] = [:]
        if let data = json["data"]?.nonNull { payload["data"] = data }
        // The sender's picture for this message (a path on the server, or a URL).
        if let avatar = json["avatar"]?.stringValue, !avatar.isEmpty {
            payload["avatarURL"] = .string(avatar.hasPrefix("http") ? avatar : context.baseURL + avatar)
        }
        if kind == .file { payload["rawText"] = .string(text) }
        if case .rich = kind { payload["rawText"] = .string(text) }
        let isVisitors = role == .customer
        return Message(
            serverID: MessageID(id),
            clientID: (json["clientSideId"]?.stringValue).map(clientID(fromWire:)),
            conversationID: conversation,
            sender: sender,
            senderRole: role,
            senderName: json["name"]?.stringValue,
            kind: kind,
            text: shownText,
            attachments: attachments,
            payload: payload.isEmpty ? nil : .object(payload),
            time: time,
            isEdited: json["edited"]?.boolValue ?? false,
            isDeleted: json["deleted"]?.boolValue ?? false,
            quote: quote,
            // A visitor's message without `read` counts as read (protocols/webim.md: missing means read).
            deliveryState: isVisitors && (json["read"]?.boolValue ?? true) ? .read : .sent
        )
    }

    /// A client id as the SDK sends it, `client-side-id`: 32 lowercase hex digits. The engine's
    /// ids are lowercase UUIDs, sent without their dashes; any other id goes as it is.
    static func wireID(_ id: ClientMessageID) -> String {
        let raw = id.rawValue
        guard raw.count == 36, raw == raw.lowercased(), UUID(uuidString: raw) != nil else { return raw }
        return raw.replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// A `clientSideId` read back as the client id it was sent for: 32 hex digits are a UUID
    /// sent by ``wireID(_:)`` (or the SDK's own id, from another device), given its dashes again.
    static func clientID(fromWire wire: String) -> ClientMessageID {
        let hex = Array(wire.lowercased())
        guard hex.count == 32, hex.allSatisfy(\.isHexDigit), hex.allSatisfy(\.isASCII) else { return ClientMessageID(wire) }
        let groups = [hex[0..<8], hex[8..<12], hex[12..<16], hex[16..<20], hex[20..<32]]
        return ClientMessageID(groups.map { String($0) }.joined(separator: "-"))
    }

    static func kindAndRole(_ raw: String) -> (Message.Kind, Participant.Role) {
        switch raw {
        case "visitor": return (.text, .customer)
        case "operator": return (.text, .agent)
        case "info": return (.system, .system)
        case "file_visitor": return (.file, .customer)
        case "file_operator": return (.file, .agent)
        case "action_request": return (.actionRequest, .system)
        case "operator_busy": return (.agentBusy, .system)
        case "keyboard", "cont_req": return (.rich(raw), .bot)
        case "keyboard_response", "contacts", "sticker_visitor": return (.rich(raw), .customer)
        default: return (.custom(raw), .system)
        }
    }

    /// File params (one object or an array) from a file message's text, or `data.file.desc`.
    static func attachments(fromFileText text: String, data: JSONValue?, context: Context) -> [Message.Attachment] {
        let parsed = try? JSONValue(parsing: text)
        let items: [JSONValue]
        if let array = parsed?.arrayValue {
            items = array
        } else if let object = parsed, object.objectValue != nil {
            items = [object]
        } else if let desc = data?["file"]?["desc"], desc.objectValue != nil {
            items = [desc]
        } else {
            return []
        }
        return items.compactMap { item in
            guard let name = item["filename"]?.stringValue, let guid = item["guid"]?.stringValue else { return nil }
            let size = item["image"]?["size"]
            return Message.Attachment(
                name: name,
                mimeType: item["content_type"]?.stringValue,
                size: item["size"]?.intValue,
                url: downloadURL(guid: guid, filename: name, context: context, thumbnail: false),
                imageSize: size.flatMap { size in
                    guard let width = size["width"]?.intValue, let height = size["height"]?.intValue else { return nil }
                    return Message.Attachment.ImageSize(width: Int(width), height: Int(height))
                },
                thumbnailURL: size == nil ? nil : downloadURL(guid: guid, filename: name, context: context, thumbnail: true)
            )
        }
    }

    /// A file's stable address, `/l/v/m/download/<guid>/<name>` (with `thumb=ios` for its
    /// thumbnail): what the store keeps. The server serves it only signed (``signed(_:context:)``),
    /// and a signature lives 300 s, so a link is signed when the app opens it
    /// (`WebimRequests.downloadURL(for:thumbnail:)`), never stored, and re-signing never changes
    /// a stored message.
    static func downloadURL(guid: String, filename: String, context: Context, thumbnail: Bool) -> URL? {
        let name = filename.addingPercentEncoding(withAllowedCharacters: .urlHostAllowed) ?? filename
        let guid = guid.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? guid
        return URL(string: "\(context.baseURL)/l/v/m/download/\(guid)/\(name)" + (thumbnail ? "?thumb=ios" : ""))
    }

    /// A stable download address signed for the page now: `page-id`, `expires` (now + 300 s) and
    /// `hash`, the hex HMAC-SHA256 of `guid + expires` keyed by the page's auth token.
    ///
    /// - Throws: `invalidArgument` when `url` is no download address of this server;
    ///   `notConnected` when the page has no credentials yet.
    static func signed(_ url: URL, context: Context) throws -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), url.absoluteString.hasPrefix(context.baseURL + "/"),
            case let path = url.pathComponents, let index = path.firstIndex(of: "download"), index + 1 < path.count
        else { throw SwitchboardError(.invalidArgument, "not a Webim download address of \(context.baseURL)") }
        guard let pageID = context.pageID, let token = context.authToken else {
            throw SwitchboardError(.notConnected, "a download link is signed with the page's credentials: none yet")
        }
        let guid = path[index + 1]
        let expires = String(Int64(context.now.timeIntervalSince1970) + 300)
        let hash = HMAC<SHA256>.authenticationCode(for: Data((guid + expires).utf8), using: SymmetricKey(data: Data(token.utf8)))
            .map { String(format: "%02x", $0) }.joined()
        let kept = (components.queryItems ?? []).filter { !["page-id", "expires", "hash"].contains($0.name) }
        components.queryItems = [URLQueryItem(name: "page-id", value: pageID), URLQueryItem(name: "expires", value: expires), URLQueryItem(name: "hash", value: hash)]
            + kept
        guard let signed = components.url else { throw SwitchboardError(.invalidArgument, "cannot sign \(url)") }
        return signed
    }

    /// The page's credentials in a full update.
    static func credentials(fromFullUpdate fullUpdate: JSONValue) -> Credentials {
        var credentials = Credentials()
        if let page = fullUpdate["pageId"]?.stringValue { credentials["page-id"] = page }
        if let token = fullUpdate["authToken"]?.stringValue { credentials["auth-token"] = token }
        if let session = fullUpdate["visitSessionId"]?.stringValue { credentials["visit-session-id"] = session }
        if let visitor = fullUpdate["visitor"]?.nonNull {
            credentials["visitor"] = visitor.jsonString
            if let id = visitor["id"]?.stringValue { credentials["visitor-id"] = id }
        }
        return credentials
    }

    /// A full update (protocols/webim.md §2.4): the visitor's conversation as a complete snapshot,
    /// the online status, the departments.
    static func updates(forFullUpdate fullUpdate: JSONValue, context: Context) -> [BackendUpdate] {
        var context = context
        if let visitor = fullUpdate["visitor"]?["id"]?.stringValue { context.visitorID = ParticipantID(visitor) }
        if let page = fullUpdate["pageId"]?.stringValue { context.pageID = page }
        if let token = fullUpdate["authToken"]?.stringValue { context.authToken = token }
        let chat = fullUpdate["chat"]?.nonNull
        let messages = (chat?["messages"]?.arrayValue ?? []).compactMap { message($0, context: context) }
        var updates: [BackendUpdate] = [
            .snapshot(
                BackendSnapshot(
                    conversations: [ConversationSnapshot(conversation: conversationInfo(chat, context: context), messages: messages)],
                    isComplete: true
                )
            ),
            .event(BackendEvent(.availability(availability(fullUpdate["onlineStatus"]?.stringValue, visitSessionState: fullUpdate["state"]?.stringValue)))),
        ]
        if let state = fullUpdate["state"]?.stringValue {
            // The visit session state (chat, offline-message, department-selection, …), as the
            // VISIT_SESSION_STATE delta that would have set it.
            let item: JSONValue = ["objectType": "VISIT_SESSION_STATE", "event": "upd", "id": "visit-session", "data": .string(state)]
            updates.append(.event(BackendEvent(.custom(name: "webim.VISIT_SESSION_STATE", payload: item))))
            updates.append(.event(BackendEvent(.settingsChanged(["visitSessionState": .string(state)]))))
        }
        if let hints = fullUpdate["hintsEnabled"]?.boolValue {
            // The location setting the SDK exposes as `LocationSettings.areHintsEnabled()`.
            updates.append(.event(BackendEvent(.settingsChanged(["hintsEnabled": .bool(hints)]))))
        }
        if let departments = fullUpdate["departments"]?.nonNull, departments != [] {
            updates.append(.event(BackendEvent(.settingsChanged(["departments": departments]))))
        }
        if let show = fullUpdate["showHelloMessage"]?.boolValue {
            // The SDK's hello message: shown while the current chat has no message, when the
            // location starts a chat after the visitor's message (the SDK also needs local
            // history empty; the app knows its store).
            let text = fullUpdate["helloMessageDescr"]?.stringValue
            let shown = show && fullUpdate["chatStartAfterMessage"]?.boolValue == true && messages.isEmpty ? text : nil
            updates.append(.event(BackendEvent(.settingsChanged(["helloMessage": shown.map(JSONValue.string) ?? .null]))))
        }
        if let visitor = fullUpdate["visitorFull"]?.nonNull {
            updates.append(.event(BackendEvent(.settingsChanged(["visitor": visitor]))))
        }
        if let survey = fullUpdate["survey"]?.nonNull, let id = survey["id"]?.stringValue {
            // The survey in progress, as the SURVEY delta that would have shown it.
            let item: JSONValue = ["objectType": "SURVEY", "event": "upd", "id": .string(id), "data": survey]
            updates.append(.event(BackendEvent(.custom(name: "webim.SURVEY", payload: item), conversation: conversation)))
        }
        return updates
    }

    /// One `deltaList` item (§2.3) as updates; `operatorID` is the chat's operator after the item.
    static func updates(forDelta item: JSONValue, operatorID: Int?, context: Context) -> [BackendUpdate] {
        guard let id = item["id"]?.stringValue, let type = item["objectType"]?.stringValue else {
            return [.problem(SwitchboardError(.protocolViolation, "a delta item without a string id or type"))]
        }
        let event = item["event"]?.stringValue
        let data = item["data"]?.nonNull
        let operatorParticipant = ParticipantID(operatorID.map { "operator-\($0)" } ?? "operator")
        func emit(_ kind: BackendEvent.Kind) -> [BackendUpdate] { [.event(BackendEvent(kind, conversation: conversation))] }
        switch (type, event) {
        case ("CHAT", "upd") where data != nil:
            let messages = (data?["messages"]?.arrayValue ?? []).compactMap { message($0, context: context) }
            return [
                .snapshot(
                    BackendSnapshot(
                        conversations: [ConversationSnapshot(conversation: conversationInfo(data, context: context), messages: messages)],
                        isComplete: false
                    )
                )
            ]
        case ("CHAT", _):
            // No chat: as the SDK (`MessageStreamImpl.changingChatStateOf(chat: nil)`), the chat is
            // closed and has no operator; the engine ends the operator's typing with the chat.
            return emit(.conversationStateChanged(.closed, previous: nil)) + emit(.agentChanged(nil))
        case ("CHAT_MESSAGE", "add"), ("CHAT_MESSAGE", "upd"):
            guard let json = data, let mapped = message(json, context: context) else {
                return [.problem(SwitchboardError(.protocolViolation, "CHAT_MESSAGE \(id) is not a message"))]
            }
            return emit(event == "add" ? .messageAdded(mapped, position: .newest) : .messageUpdated(mapped))
        case ("CHAT_MESSAGE", "del"):
            return emit(.messageRemoved(MessageID(id)))
        case ("CHAT_STATE", _):
            return emit(.conversationStateChanged(state(data?.stringValue), previous: nil))
        case ("CHAT_OPERATOR", _):
            return emit(.agentChanged(data.flatMap { agent($0, context: context) }))
        case ("CHAT_OPERATOR_TYPING", _):
            return emit(.typing(operatorParticipant, isTyping: data?.boolValue ?? false, draft: nil))
        case ("MESSAGE_READ", _) where data?.boolValue == true:
            return emit(.readMarker(operatorParticipant, .message(MessageID(id))))
        case ("DEPARTMENT_LIST", _):
            return emit(.settingsChanged(["departments": data ?? []]))
        case ("VISITOR_FULL", _):
            // The visitor as the server has them now (`WebimRequests.visitor()`), and the item as before.
            return emit(.custom(name: "webim.\(type)", payload: item)) + (data.map { emit(.settingsChanged(["visitor": $0])) } ?? [])
        case ("VISIT_SESSION_STATE", _):
            // The state as a setting the session keeps (`Session.settings`), and the item as before.
            return emit(.custom(name: "webim.\(type)", payload: item)) + emit(.settingsChanged(["visitSessionState": data ?? .null]))
        default:
            return emit(.custom(name: "webim.\(type)", payload: item))
        }
    }

    /// The online status, except that the visit session state `offline-message` means no
    /// operator takes chats: offline, whatever the last status was (protocols/webim.md §2.3).
    static func availability(_ raw: String?, visitSessionState: String?) -> ChatEvent.Availability {
        visitSessionState == "offline-message" ? .offline : availability(raw)
    }

    /// `online`, `busy_online`, `offline`, `busy_offline`; anything else is unknown.
    static func availability(_ raw: String?) -> ChatEvent.Availability {
        switch raw {
        case "online": return .online
        case "busy_online": return .busyOnline
        case "offline": return .offline
        case "busy_offline": return .busyOffline
        default: return .unknown
        }
    }

    /// Error strings that end the session (protocols/webim.md §4.2).
    static let fatalErrors: Set<String> = [
        "account-blocked", "visitor_banned", "provided-visitor-expired", "wrong-provided-visitor-hash-value",
        "wrong-provided-visitor-expires-value", "wrong-init", "domain-not-from-whitelist",
    ]

    /// A Webim error string as a classified error; the string is kept as the vendor code.
    static func error(_ code: String, during request: String) -> SwitchboardError {
        let message = "\(request): \(code)"
        switch code {
        case "reinit-required", "server-not-ready", "session_not_found":
            return SwitchboardError(.connectionLost, message, vendorCode: code)
        case "provided-auth-token-not-found", "unauthorized":
            return SwitchboardError(.authenticationFailed, message, vendorCode: code)
        case _ where fatalErrors.contains(code):
            return SwitchboardError(.fatal, message, vendorCode: code)
        case "max_file_size_exceeded", "max-message-length-exceeded":
            return SwitchboardError(.payloadTooLarge, message, vendorCode: code)
        case "no-chat", "chat-required", "no_previous_chats", "chat-not-found":
            return SwitchboardError(.conversationNotFound, message, vendorCode: code)
        case "message_not_found", "uploaded-file-not-found", "file-not-found", "quoted-message-not-found":
            return SwitchboardError(.messageNotFound, message, vendorCode: code)
        case "internal_error":
            return SwitchboardError(.serverError, message, vendorCode: code)
        case "unknown-method", "setting_disabled", "no-tariff-option", "rate-disabled", "survey_disabled":
            return SwitchboardError(.unsupported, message, vendorCode: code)
        case "argument-missing", "wrong-argument-value", "rate-value-incorrect", "wrong-operator-id", "note-is-too-long",
            "incorrect-survey-id", "button-id-not-set", "request-message-id-not-set", "invalid-coordinates-received":
            return SwitchboardError(.invalidArgument, message, vendorCode: code)
        default:
            // message_empty, not_allowed, message_not_owned, wrong_message_kind, file and quote errors…
            return SwitchboardError(.messageRejected, message, vendorCode: code)
        }
    }
}
