public import Foundation
public import Switchboard

/// Reads the answers of `init` and of the `delta` long-poll (protocols/webim.md §2): the JSON
/// body to the engine's updates, keeping what later answers and requests need to know of the
/// chat (its state, its operator, the client-side ids of its messages, an announced history
/// revision).
///
/// The link reads every answer through one reader; benchmarks and fuzz targets drive the same
/// code without a connection. It never throws: what it cannot read is a ``Outcome/malformed(_:)``.
@_spi(WireReaders) public struct WebimDeltaReader: Sendable {
    /// What one answer says.
    public enum Outcome: Sendable {
        /// The body is not a JSON object: the link reports it and polls again.
        case malformed(SwitchboardError)
        /// `{"error": "…"}`: the vendor's error string.
        case error(String)
        /// No revision (`{}` after a poll timed out on the server): nothing changed.
        case unchanged
        /// A new revision with what changed: the page's credentials when the answer was a full
        /// update, then the updates in answer order.
        case changed(revision: String, credentials: Credentials?, updates: [BackendUpdate])
    }

    let baseURL: String
    /// The chat's state as last reported (`CHAT_STATE`, or the chat's `state`).
    var chatState: String?
    /// The chat's operator as last reported.
    var operatorID: Int?
    /// The chat as last reported, without its messages, kept current by the deltas that change
    /// its fields (state, operator, unread count, ratings).
    var chat: JSONValue?
    /// Server message id → client-side id, for edits and deletions of the visitor's messages.
    var clientSideIDs: [String: String] = [:]
    /// The current chat's message ids: the delta loop keeps their copies current, so a history
    /// change list (which may have been read before the newest delta) does not update them.
    var currentChatMessageIDs: Set<String> = []
    /// A history revision the server announced that has not been fetched yet.
    var announcedHistoryRevision: String? {
        didSet { if announcedHistoryRevision != nil { announcesHistory = true } }
    }
    /// Whether this server announces history revisions at all; one that does not is polled
    /// every 60 s (protocols/webim.md §6.1).
    var announcesHistory = false
    /// The online status as last reported (a full update, or `get-online-status`).
    var onlineStatus: String?
    /// The visit session state as last reported (`state` of a full update, `VISIT_SESSION_STATE`).
    var visitSessionState: String?

    /// What the app is told: the online status, or offline while the visit session state is
    /// `offline-message`.
    public var availability: ChatEvent.Availability {
        WebimMapping.availability(onlineStatus, visitSessionState: visitSessionState)
    }

    /// A reader for the server at `baseURL` (download links of files are built from it).
    public init(baseURL: String) {
        self.baseURL = baseURL
    }

    /// Reads one answer body. `credentials` are the page's current ones (page id, auth token,
    /// visitor id: download links and the visitor's own messages depend on them); `now` dates
    /// what the answer does not.
    public mutating func read(_ body: Data, credentials: Credentials, now: Date) -> Outcome {
        guard let json = try? JSONValue(parsing: body), json.objectValue != nil else {
            return .malformed(SwitchboardError(.protocolViolation, "a malformed answer of \(body.count) bytes"))
        }
        if let error = json["error"]?.stringValue { return .error(error) }
        // No revision (`{}`): nothing changed. One of the wrong type, or a list that is not one, is
        // not an answer to act on: the poll goes on from the revision it had.
        guard let rawRevision = json["revision"]?.nonNull else { return .unchanged }
        guard let revision = Self.revision(rawRevision) else {
            return .malformed(SwitchboardError(.protocolViolation, "a revision that is not a whole number or a string"))
        }
        if let list = json["deltaList"]?.nonNull, list.arrayValue == nil {
            return .malformed(SwitchboardError(.protocolViolation, "a deltaList that is not a list"))
        }
        let context = self.context(credentials, now: now)
        if let fullUpdate = json["fullUpdate"]?.nonNull {
            if let history = Self.revision(fullUpdate["historyRevision"]) { announcedHistoryRevision = history }
            rememberChat(fullUpdate["chat"]?.nonNull)
            onlineStatus = fullUpdate["onlineStatus"]?.stringValue
            visitSessionState = fullUpdate["state"]?.stringValue
            return .changed(
                revision: revision,
                credentials: WebimMapping.credentials(fromFullUpdate: fullUpdate),
                updates: WebimMapping.updates(forFullUpdate: fullUpdate, context: context)
            )
        }
        var updates: [BackendUpdate] = []
        for item in json["deltaList"]?.arrayValue ?? [] {
            updates += read(delta: item, context: context)
        }
        return .changed(revision: revision, credentials: nil, updates: updates)
    }

    /// One `deltaList` item, in array order: what the reader must remember, then the updates.
    private mutating func read(delta item: JSONValue, context: WebimMapping.Context) -> [BackendUpdate] {
        let data = item["data"]?.nonNull
        switch (item["objectType"]?.stringValue, item["event"]?.stringValue) {
        case ("CHAT", "upd") where data != nil: rememberChat(data)
        case ("CHAT", _): rememberChat(nil)
        case ("CHAT_MESSAGE", let event):
            if let id = item["id"]?.stringValue, let client = data?["clientSideId"]?.stringValue { clientSideIDs[id] = client }
            if let id = item["id"]?.stringValue {
                if event == "del" { currentChatMessageIDs.remove(id) } else { currentChatMessageIDs.insert(id) }
            }
        case ("CHAT_STATE", _):
            chatState = data?.stringValue
            chat = chat?.with("state", data ?? .null)
        case ("CHAT_OPERATOR", _):
            operatorID = data?["id"]?.intValue.map(Int.init)
            chat = chat?.with("operator", data ?? .null)
        case ("UNREAD_BY_VISITOR", _):
            // The server's count of what the visitor has not read: it wins over the engine's
            // (`BackendCapabilities.unreadCounts`), so it goes out as the conversation it changes.
            chat = chat?.with("unreadByVisitorMsgCnt", data?["msgCnt"] ?? 0)
            if let current = chat {
                let info = WebimMapping.conversationInfo(current, context: context)
                return [.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info)], isComplete: false))]
            }
        case ("OPERATOR_RATE", _):
            // A rating (not a resolution answer) refreshes the conversation's ratings.
            if let id = data?["operatorId"]?.intValue, let rating = data?["rating"]?.intValue, let current = chat {
                var rates = current["operatorIdToRate"]?.objectValue ?? [:]
                rates[String(id)] = ["operatorId": .int(id), "rating": .int(rating)]
                chat = current.with("operatorIdToRate", .object(rates))
                let info = WebimMapping.conversationInfo(chat, context: context)
                return WebimMapping.updates(forDelta: item, operatorID: operatorID, context: context)
                    + [.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info)], isComplete: false))]
            }
        case ("HISTORY_REVISION", _):
            if let revision = Self.revision(data?["revision"]) { announcedHistoryRevision = revision }
        case ("VISIT_SESSION_STATE", "upd"):
            let before = availability
            visitSessionState = data?.stringValue
            // Entering or leaving `offline-message` changes what the app may offer.
            if availability != before {
                return WebimMapping.updates(forDelta: item, operatorID: operatorID, context: context)
                    + [.event(BackendEvent(.availability(availability)))]
            }
        default: break
        }
        return WebimMapping.updates(forDelta: item, operatorID: operatorID, context: context)
    }

    private mutating func rememberChat(_ chat: JSONValue?) {
        if chat?["id"] != self.chat?["id"] || chat == nil { currentChatMessageIDs = [] }
        for message in chat?["messages"]?.arrayValue ?? [] {
            if let id = message["id"]?.stringValue { currentChatMessageIDs.insert(id) }
        }
        self.chat = chat?.with("messages", [])
        chatState = chat?["state"]?.stringValue
        operatorID = chat?["operator"]?["id"]?.intValue.map(Int.init)
        for message in chat?["messages"]?.arrayValue ?? [] {
            if let id = message["id"]?.stringValue, let client = message["clientSideId"]?.stringValue { clientSideIDs[id] = client }
        }
    }

    /// Reads a `get-online-status` answer (`{"onlineStatus": …, "onlineOperators": …}`): the
    /// availability to announce when it changed, else `nil`. An answer without a status (or not
    /// an object) changes nothing.
    public mutating func readOnlineStatus(_ body: Data) -> ChatEvent.Availability? {
        guard let json = try? JSONValue(parsing: body), let status = json["onlineStatus"]?.stringValue else { return nil }
        let before = availability
        onlineStatus = status
        return availability == before ? nil : availability
    }

    /// What the link takes from the account config (`GET /api/visitor/v1/configs/<location>`).
    @_spi(TestKit) public struct AccountConfig: Sendable, Hashable {
        /// `accountConfig` and `locationSettings` as the app is told them (`settingsChanged`);
        /// `nil` when the answer has neither.
        public var settings: JSONValue?
        /// `max_visitor_upload_file_size` (megabytes), in bytes.
        public var maxUploadBytes: Int?
        /// `allowed_upload_file_types`, lowercased, without spaces.
        public var allowedFileTypes: Set<String>?
        /// `visitor_upload_file`.
        public var uploadAllowed: Bool?
    }

    /// Reads the account config (`GET /api/visitor/v1/configs/<location>?jsonp=false`): the
    /// account's and the location's settings, for the app, and the upload limits. What the answer
    /// does not say stays `nil`.
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not JSON, or its
    ///   upload limit is not a size (below zero, or past `Int.max` bytes). The link ignores a
    ///   config it cannot read, as the SDK does.
    @_spi(TestKit) public static func readConfigAnswer(_ body: Data) throws -> AccountConfig {
        guard let json = try? JSONValue(parsing: body) else {
            throw SwitchboardError(.protocolViolation, "config: a malformed answer of \(body.count) bytes")
        }
        let account = json["accountConfig"]
        var settings: [String: JSONValue] = [:]
        if let account = account?.nonNull { settings["accountConfig"] = account }
        if let location = json["locationSettings"]?.nonNull { settings["locationSettings"] = location }
        var config = AccountConfig(settings: settings.isEmpty ? nil : .object(settings))
        if let megabytes = account?["max_visitor_upload_file_size"]?.intValue {
            // In bytes it must be an Int (`Int(megabytes) * 1024 * 1024` trapped past 2^43 MB).
            guard megabytes >= 0, megabytes <= Int64(Int.max / (1024 * 1024)) else {
                throw SwitchboardError(.protocolViolation, "config: max_visitor_upload_file_size \(megabytes) is not a size in megabytes")
            }
            config.maxUploadBytes = Int(megabytes) * 1024 * 1024
        }
        if let types = account?["allowed_upload_file_types"]?.stringValue {
            config.allowedFileTypes = Set(types.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
        }
        config.uploadAllowed = account?["visitor_upload_file"]?.boolValue
        return config
    }

    /// What an action answer says.
    @_spi(TestKit) public enum ActionOutcome: Sendable {
        /// The body is not a JSON object (`protocolViolation`).
        case malformed(SwitchboardError)
        /// `{"error": …}`: the page's error, mapped; the link ends on `reinit-required` or a
        /// fatal one.
        case error(SwitchboardError)
        /// `{"data": {"error": …}}`: the action was refused, mapped.
        case refused(SwitchboardError)
        /// Done: the answer.
        case done(JSONValue)
    }

    /// Reads an action answer (`POST /l/v/m/action`, protocols/webim.md §1 #5) of the action
    /// `name`.
    @_spi(TestKit) public static func readActionAnswer(_ body: Data, during name: String) -> ActionOutcome {
        guard let json = try? JSONValue(parsing: body), json.objectValue != nil else {
            return .malformed(SwitchboardError(.protocolViolation, "\(name): the answer is not a JSON object (\(body.count) bytes)"))
        }
        if let error = json["error"]?.stringValue { return .error(WebimMapping.error(error, during: name)) }
        if let error = json["data"]?["error"]?.stringValue { return .refused(WebimMapping.error(error, during: name)) }
        return .done(json)
    }

    /// Reads an `upload` answer (protocols/webim.md §1 #8): `{"result":"ok","data":{file params}}`;
    /// returns the file parameters (`null` when the server sent none).
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not a JSON object;
    ///   the vendor's error (`max_file_size_exceeded`, …) when it is `{"error": …}`.
    public static func readUploadAnswer(_ body: Data) throws -> JSONValue {
        try object(body, during: "upload")["data"] ?? .null
    }

    /// Reads a `history?before-ts=` answer (protocols/webim.md §6.2): a page of messages, oldest
    /// first, and whether there are older ones; the anchor of the next page is the oldest
    /// message's time in microseconds.
    ///
    /// - Throws: `SwitchboardError.Code.protocolViolation` when the body is not a JSON object;
    ///   the vendor's error when it is `{"error": …}`.
    public func readHistoryPage(_ body: Data, credentials: Credentials, now: Date) throws -> HistoryPage {
        let json = try Self.object(body, during: "history")
        let context = self.context(credentials, now: now)
        let messages = (json["data"]?["messages"]?.arrayValue ?? []).compactMap { WebimMapping.message($0, context: context) }
            .sorted { $0.time < $1.time }
        return HistoryPage(
            messages: messages,
            hasMore: json["data"]?["hasMore"]?.boolValue ?? false,
            nextAnchor: messages.first.map { .token(String(Int64(($0.time.timeIntervalSince1970 * 1_000_000).rounded()))) }
        )
    }

    /// Reads a `history?since=` answer (protocols/webim.md §6.1): the changed messages as updates
    /// (a message marked `deleted` is a removal), the new history revision, and whether more
    /// changes wait (`hasMore`: asked for again at once); `nil` when the answer says nothing changed.
    /// `isChangeList`: the answer to a `since` (not the first sync), whose messages may be ones
    /// the store holds, edited or read since.
    public func readHistoryChanges(_ body: Data, credentials: Credentials, now: Date, isChangeList: Bool = true) throws -> (updates: [BackendUpdate], revision: String?, hasMore: Bool)? {
        let json = try Self.object(body, during: "history")
        guard let data = json["data"]?.nonNull else { return nil }
        let context = self.context(credentials, now: now)
        var updates: [BackendUpdate] = []
        for item in data["messages"]?.arrayValue ?? [] {
            if item["deleted"]?.boolValue == true, let id = item["id"]?.stringValue {
                updates.append(.event(BackendEvent(.messageRemoved(MessageID(id)), conversation: WebimMapping.conversation)))
            } else if let message = WebimMapping.message(item, context: context) {
                updates.append(.event(BackendEvent(.messageAdded(message, position: .history), conversation: WebimMapping.conversation, time: message.time)))
                // A change list (`since`) also carries messages the store holds, edited or read
                // since: the history copy above only fills in what is missing, so the change is
                // applied as an update (identical copies change nothing and announce nothing) —
                // except to the current chat's messages, which the deltas keep current.
                if isChangeList, !currentChatMessageIDs.contains(message.serverID?.rawValue ?? "") {
                    updates.append(.event(BackendEvent(.messageUpdated(message), conversation: WebimMapping.conversation, time: message.time)))
                }
            }
        }
        return (updates, data["revision"]?.stringValue, data["hasMore"]?.boolValue ?? false)
    }

    /// What the mapping needs: the server, and the page's credentials as of now.
    func context(_ credentials: Credentials, now: Date) -> WebimMapping.Context {
        WebimMapping.Context(
            baseURL: baseURL,
            pageID: credentials["page-id"],
            authToken: credentials["auth-token"],
            visitorID: credentials["visitor-id"].map(ParticipantID.init),
            now: now
        )
    }

    private static func object(_ body: Data, during request: String) throws -> JSONValue {
        guard let json = try? JSONValue(parsing: body), json.objectValue != nil else {
            throw SwitchboardError(.protocolViolation, "\(request): a malformed answer of \(body.count) bytes")
        }
        if let error = json["error"]?.stringValue { throw WebimMapping.error(error, during: request) }
        return json
    }

    /// A revision as the server writes it: a number or a string.
    static func revision(_ value: JSONValue?) -> String? {
        switch value {
        case .int(let number)?: return String(number)
        case .string(let text)?: return text
        // Within Int64, or it is no revision (`Int64(1e300)` would trap).
        case .double(let number)? where number.isFinite && abs(number) < 9.2e18: return String(Int64(number))
        default: return nil
        }
    }
}

extension JSONValue {
    /// This object with `key` set to `value` (anything but an object stays as it is).
    func with(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(var object) = self else { return self }
        object[key] = value
        return .object(object)
    }
}
