public import Foundation
public import Switchboard

/// CXone DTOs (protocols/cxone.md §5) to the normalized model, and inbound events (§2.4) to
/// updates. Pure functions over `JSONValue`; what the SDK refuses is a typed error naming the key.
@_spi(WireReaders) public enum CXoneMapping {
    /// The event carrying the customer's custom fields (ident → value) after a recovery.
    public static let customerFieldsEvent = "cxone.CustomerCustomFields"

    /// `[CustomFieldDTO{ident, value, updatedAt}]` as ident → value.
    public static func fieldValues(_ fields: JSONValue?) -> [String: String] {
        var values: [String: String] = [:]
        for field in fields?.arrayValue ?? [] {
            if let ident = field["ident"]?.stringValue, let value = field["value"]?.stringValue { values[ident] = value }
        }
        return values
    }

    /// ISO 8601 as the fixtures write it: `Z`, `+00:00` or `+0000`; fractional seconds are accepted
    /// (the SDK drops such events; a client that keeps them loses nothing).
    public static func date(_ value: JSONValue?) -> Date? {
        guard let text = value?.stringValue else { return nil }
        if let date = try? Date(text, strategy: CXoneServerDate.seconds) { return date }
        if let date = try? Date(text, strategy: CXoneServerDate.milliseconds) { return date }
        // `+0100`: insert the colon the formatter wants.
        if let match = text.range(of: #"[+-]\d{4}$"#, options: .regularExpression) {
            var fixed = text
            fixed.insert(":", at: fixed.index(match.lowerBound, offsetBy: 3))
            return date(.string(fixed))
        }
        return nil
    }

    static func required<T>(_ value: T?, _ key: String) throws -> T {
        guard let value else { throw SwitchboardError(.protocolViolation, "CXone: missing or bad \(key)") }
        return value
    }

    /// An agent (`AgentDTO` / "UserView"): id, names, bot flag, image.
    public static func agent(_ json: JSONValue?) -> Participant? {
        guard let json = json?.nonNull, let id = json["id"]?.intValue else { return nil }
        let first = json["firstName"]?.stringValue ?? ""
        let surname = json["surname"]?.stringValue ?? ""
        let nickname = json["nickname"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        let fullName = [first, surname].filter { !$0.isEmpty }.joined(separator: " ")
        return Participant(
            id: ParticipantID("agent-\(id)"),
            role: json["isBotUser"]?.boolValue == true ? .bot : .agent,
            displayName: nickname ?? (fullName.isEmpty ? nil : fullName),
            avatarURL: json["publicImageUrl"]?.stringValue.flatMap(URL.init(string:)),
            permissions: Participant.Permissions(canEditOwn: false, canRemoveOwn: false),
            payload: json
        )
    }

    /// A case status as a thread state: `new` waits in the queue; `closed` and `trashed` are closed.
    public static func state(ofCaseStatus status: String?) -> ConversationInfo.State {
        switch status {
        case "new": return .queued
        case "open", "pending", "escalated", "resolved": return .active
        case "closed", "trashed": return .closed
        case nil: return .none
        case let other?: return .unknown(other)
        }
    }

    /// A thread list item (`ReceivedThreadDataDTO`).
    public static func thread(_ json: JSONValue) throws -> ConversationInfo {
        let id = try required(json["idOnExternalPlatform"]?.stringValue, "thread.idOnExternalPlatform")
        let name = json["threadName"]?.stringValue
        let open = json["canAddMoreMessages"]?.boolValue ?? true
        return ConversationInfo(
            id: ConversationID(id.lowercased()),
            kind: .thread,
            title: (name?.isEmpty ?? true) ? nil : name,
            state: open ? .active : .closed,
            customData: json["channelId"].map { ["channelId": $0] }
        )
    }

    /// A message (`MessageDTO`); `nil` for `POSTBACK` content and inactivity pop-ups, which the
    /// SDK keeps out of history.
    public static func message(_ json: JSONValue) throws -> Message? {
        let id = try required(json["idOnExternalPlatform"]?.stringValue, "message.idOnExternalPlatform")
        let thread = try required(json["threadIdOnExternalPlatform"]?.stringValue, "message.threadIdOnExternalPlatform")
        let content = try required(json["messageContent"]?.nonNull, "message.messageContent")
        let created = try required(date(json["createdAt"]), "message.createdAt")
        let direction = try required(json["direction"]?.stringValue, "message.direction")
        let type = try required(content["type"]?.stringValue, "messageContent.type")
        // The SDK's hidden messages (a live chat's "Begin Conversation", the automatic answer to an
        // unsupported message) are for the agent: never shown to the customer (§3.8).
        let parameters = content["parameters"]
        if parameters?["isInitialMessage"]?.boolValue == true || parameters?["isUnsupportedMessageTypeAnswer"]?.boolValue == true { return nil }
        let fromAgent = direction == "outbound"
        var kind: Message.Kind
        var text: String
        switch type {
        case "TEXT":
            kind = .text
            text = try required(content["payload"]?["text"]?.stringValue, "messageContent.payload.text")
        case "POSTBACK":
            return nil
        case "PLUGIN" where CXoneInactivityPopup.isPopup(json):
            return nil
        case "RICH_LINK":
            kind = .rich(type)
            text = content["payload"]?["title"]?["content"]?.stringValue ?? content["payload"]?["url"]?.stringValue ?? ""
        case "QUICK_REPLIES":
            kind = .rich(type)
            text = content["payload"]?["text"]?["content"]?.stringValue ?? ""
        case "LIST_PICKER", "TIME_PICKER":
            kind = .rich(type)
            text = content["payload"]?["title"]?["content"]?.stringValue ?? content["payload"]?["text"]?["content"]?.stringValue ?? ""
        default:
            // Plugins and the rest: kept whole, with the fallback text the SDK would show.
            kind = .rich(type)
            let element = content["payload"]?["elements"]?[0]?["type"]?.stringValue ?? "GALLERY"
            let fallback = content["fallbackText"]?.stringValue
            text = fallback.map { "\($0):\n\(type) – \(element)" } ?? "\(type) – \(element)"
        }
        let attachments = try (json["attachments"]?.arrayValue ?? []).map { attachment -> Message.Attachment in
            Message.Attachment(
                name: attachment["friendlyName"]?.stringValue ?? attachment["fileName"]?.stringValue ?? "attachment",
                mimeType: attachment["mimeType"]?.stringValue,
                url: try required(attachment["url"]?.stringValue.flatMap(URL.init(string:)), "attachments.url")
            )
        }
        if !attachments.isEmpty, kind == .text, text.isEmpty { kind = .file }
        let author = fromAgent ? agent(json["authorUser"]) : nil
        let customer = json["authorEndUserIdentity"]?.nonNull
        let readByAgent = date(json["userStatistics"]?["readAt"]) != nil
        let seenByAgent = date(json["userStatistics"]?["seenAt"]) != nil
        // A customer's message id is made by the client (it is its client id too); an agent's by the server.
        return Message(
            serverID: MessageID(id.lowercased()),
            clientID: fromAgent ? nil : ClientMessageID(id.lowercased()),
            conversationID: ConversationID(thread.lowercased()),
            sender: author?.id ?? customer?["idOnExternalPlatform"]?.stringValue.map(ParticipantID.init),
            senderRole: fromAgent ? (author?.role ?? .agent) : .customer,
            senderName: author?.displayName ?? [customer?["firstName"]?.stringValue, customer?["lastName"]?.stringValue].compactMap { $0 }.joined(separator: " ").nonEmpty,
            kind: kind,
            text: text,
            attachments: attachments,
            payload: type == "TEXT" ? content["postback"].map { ["postback": $0] } : content,
            time: created,
            deliveryState: fromAgent ? .sent : (readByAgent ? .read : (seenByAgent ? .delivered : .sent))
        )
    }

    /// What an inbound event means for the session. Replies that only complete a request (a
    /// `SendMessage` acknowledgment) map to nothing; `EventInS3` asks for a download.
    public enum Outcome: Sendable {
        case updates([BackendUpdate])
        /// Download `url` (H9) and feed its body back in as a frame.
        case download(url: URL, originEventType: String?)
        /// A page of older messages (`MoreMessagesLoaded`) with the next scroll token.
        case moreMessages([Message], scrollToken: String)
    }

    /// Maps one event frame of type `type`; `thread` is the thread a reply is about, when the reply
    /// does not say; `customer` is the session's customer, whose own read markers (an agent's
    /// message seen, on this device or another) are told when known.
    public static func outcome(of frame: JSONValue, type: String?, thread: ConversationID? = nil, customer: ParticipantID? = nil) throws -> Outcome {
        let data = frame["data"] ?? frame["postback"]?["data"]
        let time = date(frame["createdAt"])
        func event(_ kind: BackendEvent.Kind, _ conversation: ConversationID?) -> BackendUpdate {
            .event(BackendEvent(kind, conversation: conversation, time: time))
        }
        func threadID(_ json: JSONValue?) -> ConversationID? {
            (json?["idOnExternalPlatform"]?.stringValue ?? json?["threadIdOnExternalPlatform"]?.stringValue).map { ConversationID($0.lowercased()) }
        }
        switch type {
        case "MessageCreated":
            let json = try required(data?["message"], "data.message")
            if CXoneInactivityPopup.isPopup(json) {
                let popup = try CXoneInactivityPopup(message: json)
                return .updates([event(.custom(name: CXoneInactivityPopup.eventName, payload: json), popup.threadID)])
            }
            guard let message = try message(json) else { return .updates([]) }
            var updates = [event(.messageAdded(message, position: .newest), message.conversationID)]
            if let status = data?["case"]?["status"]?.stringValue {
                updates.append(event(.conversationStateChanged(state(ofCaseStatus: status), previous: nil), message.conversationID))
            }
            return .updates(updates)
        case "MessageReadChanged", "MessageSeenChanged":
            let json = try required(data?["message"], "data.message")
            guard let message = try message(json) else { return .updates([]) }
            var updates = [event(.messageUpdated(message), message.conversationID)]
            if message.deliveryState == .read, let id = message.serverID {
                // The event does not say which agent read it.
                updates.append(event(.readMarker(ParticipantID("agent"), .message(id)), message.conversationID))
            }
            if type == "MessageSeenChanged", let customer, message.senderRole != .customer, date(json["customerStatistics"]?["seenAt"]) != nil,
                let id = message.serverID
            {
                // The customer saw an agent's message (`MessageSeenByCustomer`, from this device or
                // another): the user's own marker.
                updates.append(event(.readMarker(customer, .message(id)), message.conversationID))
            }
            return .updates(updates)
        case "SenderTypingStarted", "SenderTypingEnded":
            guard let who = agent(data?["user"]) else { return .updates([]) }
            return .updates([event(.typing(who.id, isTyping: type == "SenderTypingStarted", draft: nil), threadID(data?["thread"]))])
        case "CaseInboxAssigneeChanged":
            let conversation = threadID(data?["case"])
            return .updates([event(.agentChanged(agent(data?["inboxAssignee"])), conversation), event(.queuePosition(nil), conversation)])
        case "CaseStatusChanged":
            let status = try required(data?["case"]?["status"]?.stringValue, "data.case.status")
            return .updates([event(.conversationStateChanged(state(ofCaseStatus: status), previous: nil), threadID(data?["case"]))])
        case "SetPositionInQueue":
            let position = try required(data?["positionInQueue"]?.intValue, "data.positionInQueue")
            return .updates([event(.queuePosition(Int(position)), thread)])
        case "ThreadRecovered", "LivechatRecovered":
            guard let data = data?.nonNull else {
                // LivechatRecovered without data: no live chat to recover.
                return .updates([])
            }
            var info = try CXoneMapping.thread(try required(data["thread"], "data.thread"))
            let contact = data["contact"]?.nonNull ?? data["consumerContact"]?.nonNull
            if let status = contact?["status"]?.stringValue, info.state != .closed { info.state = state(ofCaseStatus: status) }
            info.assignedAgent = agent(data["inboxAssignee"]) ?? agent(data["ownerAssignee"])
            if let agent = info.assignedAgent { info.participants.append(agent) }
            var custom = info.customData?.objectValue ?? [:]
            if let contactID = contact?["id"] { custom["contactId"] = contactID }
            if let token = data["messagesScrollToken"] { custom["scrollToken"] = token }
            // The thread's (contact's) custom fields, ident → value.
            custom["customFields"] = .object(fieldValues(contact?["customFields"]).mapValues(JSONValue.string))
            info.customData = .object(custom)
            let raw = data["messages"]?.arrayValue ?? []
            // Oldest first, as the SDK keeps a thread: a live chat's come newest first, and equal
            // times (the wire has whole seconds) keep the order the server meant.
            let messages = try (type == "LivechatRecovered" ? raw.reversed() : raw).compactMap(message)
                .enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
            var updates: [BackendUpdate] = [.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info, messages: messages)], isComplete: false))]
            if let customer = data["customer"]?.nonNull {
                // The customer's custom fields as the server has them.
                updates.append(.event(BackendEvent(.custom(name: customerFieldsEvent, payload: .object(fieldValues(customer["customFields"]).mapValues(JSONValue.string))))))
            }
            // A live chat's messages come newest first: a pop-up on top is still waiting for an answer.
            if type == "LivechatRecovered", let newest = raw.first, CXoneInactivityPopup.isPopup(newest) {
                let popup = try CXoneInactivityPopup(message: newest)
                updates.append(event(.custom(name: CXoneInactivityPopup.eventName, payload: newest), popup.threadID))
            }
            return .updates(updates)
        case "ThreadListFetched":
            let threads = try (data?["threads"]?.arrayValue ?? []).map(CXoneMapping.thread)
            return .updates([.snapshot(BackendSnapshot(conversations: threads.map { ConversationSnapshot(conversation: $0) }, isComplete: true))])
        case "ThreadMetadataLoaded":
            var updates: [BackendUpdate] = []
            if let last = try data?["lastMessage"]?.nonNull.flatMap(message) {
                updates.append(event(.messageAdded(last, position: .newest), last.conversationID))
                if let owner = agent(data?["ownerAssignee"]) { updates.append(event(.agentChanged(owner), last.conversationID)) }
            }
            return .updates(updates)
        case "MoreMessagesLoaded":
            let messages = try (data?["messages"]?.arrayValue ?? []).compactMap(message)
            return .moreMessages(messages, scrollToken: data?["scrollToken"]?.stringValue ?? "")
        case "ThreadArchived":
            return .updates(thread.map { [event(.conversationStateChanged(.archived, previous: nil), $0)] } ?? [])
        case "TokenRefreshed", "ConsumerAuthorized":
            var credentials = Credentials()
            if let token = data?["accessToken"]?["token"]?.stringValue { credentials["access-token"] = token }
            if let expires = data?["accessToken"]?["expiresIn"]?.intValue { credentials["access-token-expires-in"] = String(expires) }
            if let customer = data?["consumerIdentity"]?["idOnExternalPlatform"]?.stringValue { credentials["customer-id"] = customer }
            return .updates(credentials.isEmpty ? [] : [.credentials(credentials)])
        case "EventInS3":
            let url = try required(data?["s3Object"]?["url"]?.stringValue.flatMap(URL.init(string:)), "data.s3Object.url")
            return .download(url: url, originEventType: data?["originEvent"]?["eventType"]?.stringValue)
        case "FireProactiveAction":
            return .updates([event(.custom(name: "cxone.FireProactiveAction", payload: data ?? .null), thread)])
        case nil:
            // A bare acknowledgment (the reply to SendMessage).
            return .updates([])
        case let other?:
            return .updates([event(.custom(name: "cxone.\(other)", payload: frame), thread)])
        }
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
