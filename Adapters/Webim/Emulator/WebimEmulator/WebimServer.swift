import Crypto
import Foundation
@_spi(TestKit) public import Switchboard
import SwitchboardTestKit

/// The server side of the Webim mobile API as protocols/webim.md describes it: init, the
/// server-held delta long-poll with a revision counter, form-encoded actions, history since and
/// before, multipart upload and signed downloads, one current chat per visitor with the chat state
/// machine (none → queue → chatting → closed by operator / visitor), unique µs timestamps and
/// echoed client-side ids — plus an operator robot, fault injection and logs of what it accepted.
///
/// The lock guards all state; long-polls wait on ``changes`` outside it.
public final class WebimServer: Sendable {
    public struct Configuration: Sendable {
        public var location: String
        /// How long a delta long-poll is held before `{}` (the SDK's own timeout is 60 s).
        public var deltaHold: Duration
        public var maxUploadMegabytes: Int
        public var allowedFileTypes: [String]
        public var uploadAllowed: Bool
        public var messageEditing: Bool
        public var maxMessageLength: Int
        /// Messages a `history?before-ts=` page holds.
        public var historyPageSize: Int
        /// Messages a `history?since=` answer holds before it says `hasMore`.
        public var historySincePageSize: Int
        /// Whether the server announces history revisions (`fullUpdate.historyRevision`,
        /// `HISTORY_REVISION`); without them a client polls history every 60 s.
        public var announcesHistoryRevisions: Bool
        /// The account's private key for identified visitors (identification v2): when set, a
        /// provided visitor's `hash` must be the HMAC-SHA256 ``WebimServer/visitorHash(fields:expires:privateKey:)``,
        /// else init answers `wrong-provided-visitor-hash-value`.
        public var visitorHashKey: String?
        /// The account's departments, listed in every full update as the SDK's `DepartmentItem`
        /// (`key`, `name`, `online`, `order`, `localeToName`, `logo`).
        public var departments: [Department]
        /// The location's hello message (`showHelloMessage`, `helloMessageDescr`, with
        /// `chatStartAfterMessage` on): shown by the client while the visitor has no messages.
        public var helloMessage: String?

        /// A department of the account.
        public struct Department: Sendable, Hashable {
            public var key: String
            public var name: String
            /// `online`, `busy_online`, `offline` or `busy_offline`.
            public var online: String
            public var order: Int

            public init(key: String, name: String, online: String = "online", order: Int = 100) {
                self.key = key
                self.name = name
                self.online = online
                self.order = order
            }

            var json: JSONValue {
                [
                    "key": .string(key), "name": .string(name), "online": .string(online), "order": .int(Int64(order)),
                    "localeToName": ["en": .string(name)], "logo": .string("/webim/images/department_logo/\(key).png"),
                ]
            }
        }

        public init(
            location: String = "mobile",
            deltaHold: Duration = .seconds(10),
            maxUploadMegabytes: Int = 10,
            allowedFileTypes: [String] = ["png", "jpg", "jpeg", "gif", "pdf", "txt"],
            uploadAllowed: Bool = true,
            messageEditing: Bool = true,
            maxMessageLength: Int = 20_000,
            historyPageSize: Int = 25,
            historySincePageSize: Int = 100,
            announcesHistoryRevisions: Bool = true,
            visitorHashKey: String? = nil,
            departments: [Department] = [Department(key: "sales", name: "Sales", order: 1), Department(key: "support", name: "Support", online: "busy_online", order: 2)],
            helloMessage: String? = nil
        ) {
            self.departments = departments
            self.helloMessage = helloMessage
            self.location = location
            self.deltaHold = deltaHold
            self.maxUploadMegabytes = maxUploadMegabytes
            self.allowedFileTypes = allowedFileTypes
            self.uploadAllowed = uploadAllowed
            self.messageEditing = messageEditing
            self.maxMessageLength = maxMessageLength
            self.historyPageSize = historyPageSize
            self.historySincePageSize = max(1, historySincePageSize)
            self.announcesHistoryRevisions = announcesHistoryRevisions
            self.visitorHashKey = visitorHashKey
        }
    }

    /// What the next requests of a kind meet instead of a normal answer.
    public enum Fault: Sendable, Hashable {
        /// `{"error":"reinit-required"}`.
        case reinitRequired
        /// `{"error":"<string>"}`, such as `account-blocked` or `visitor_banned`.
        case error(String)
        /// An HTTP status without a body, such as 502 or 503.
        case status(Int)
        /// A body cut off mid-JSON.
        case malformed
        /// This body, as it is, with status 200.
        case body(String)
        /// Answers normally, but only after this long (on the server's clock).
        case delay(Duration)
        /// Sends the headers and part of a normal-looking body, then closes the connection.
        case dropConnection
        /// Does what was asked, then closes the connection before the answer: the server has it,
        /// the client cannot know (uploads; elsewhere as `dropConnection`).
        case loseAnswer
    }

    public enum Endpoint: String, Sendable, Hashable {
        case initialize = "init"
        case delta, action, history, upload
    }

    /// A fault a request met: the fault took effect on the client's traffic.
    public struct TakenFault: Sendable, Hashable {
        public var endpoint: Endpoint
        /// The action of an `action` request.
        public var action: String?
        public var fault: Fault
    }

    /// One answer: a status and a body.
    struct Answer {
        var status: Int
        var body: String
        var contentType = "application/json"
        /// The connection closes after part of the body.
        var dropsConnection = false

        static func json(_ value: JSONValue) -> Answer { Answer(status: 200, body: value.jsonString) }
        static func error(_ code: String) -> Answer { .json(["error": .string(code)]) }
    }

    struct State {
        var visitors: [String: WebimVisitor] = [:]
        var pages: [String: WebimPage] = [:]
        var uploads: [String: WebimUpload] = [:]
        var faults: [Endpoint: [(action: String?, fault: Fault)]] = [:]
        var duplicateNextMessages = 0
        var takenFaults: [TakenFault] = []
        var duplicatesDelivered = 0
        var nextID = 0
        var lastMicros: Int64 = 0
        var nextChatID = 1
        var typingLog: [WebimTypingRecord] = []
        var readLog: [(visitor: String, messageID: String?)] = []
        var ratings: [(visitor: String, operatorID: Int, rate: Int)] = []
        var surveyAnswers: [(visitor: String, surveyID: String, question: Int, answer: String)] = []
        var actions: [(visitor: String, action: String)] = []
        /// The parameters of the latest request of each action.
        var lastParameters: [String: [String: String]] = [:]
        var initLocations: [String] = []
        var autoReply: (robot: WebimOperatorRobot, reply: @Sendable (String) -> String?)?
        var appealReply: (robot: WebimOperatorRobot, delay: Duration, reply: @Sendable (String) -> String?)?
        var pendingAnswers: [PendingAnswer] = []
        /// The account's online status: `online`, `busy_online`, `busy_offline` or `offline`.
        var onlineStatus = "online"
        /// The `since` of every history-since request, in order.
        var historySinces: [String] = []
        /// Every online `history` request (since, before, or the first).
        var historyRequests = 0
    }

    public let configuration: Configuration
    let clock: SessionClock
    let state = Locked(State())
    /// Fires after every change; long-polls and tests wait on it.
    @_spi(TestKit) public let changes = AsyncSignal()

    public init(configuration: Configuration = Configuration(), clock: SessionClock = .continuous) {
        self.configuration = configuration
        self.clock = clock
    }

    // MARK: The server's truth and faults

    /// Every accepted `chat.visitor_typing`, in order.
    public var typingLog: [WebimTypingRecord] { state.withLock { $0.typingLog } }
    public var readLog: [(visitor: String, messageID: String?)] { state.withLock { $0.readLog } }
    public var ratings: [(visitor: String, operatorID: Int, rate: Int)] { state.withLock { $0.ratings } }
    public var actions: [(visitor: String, action: String)] { state.withLock { $0.actions } }

    /// The form of the latest request of `action` (without `page-id` and `auth-token`).
    public func lastParameters(of action: String) -> [String: String]? {
        state.withLock { $0.lastParameters[action] }
    }
    /// Every accepted `survey.answer`, in order (`question` is the index within the form).
    public var surveyAnswers: [(visitor: String, surveyID: String, question: Int, answer: String)] { state.withLock { $0.surveyAnswers } }
    /// The `location` of every init, in order.
    public var initLocations: [String] { state.withLock { $0.initLocations } }

    /// Every message of the visitor, oldest first: closed chats, then the current chat.
    public func messages(ofVisitor visitor: String) -> [(id: String, clientSideId: String, kind: String, text: String)] {
        state.withLock { state in
            (state.visitors[visitor]?.allMessages ?? []).map { ($0.id, $0.clientSideId, $0.kind, $0.text) }
        }
    }

    /// Every visitor the server has made or been given, sorted.
    public var visitorIDs: [String] { state.withLock { $0.visitors.keys.sorted() } }

    public func chatState(ofVisitor visitor: String) -> String? {
        state.withLock { $0.visitors[visitor]?.chat?.state }
    }

    /// Every injected fault a request met, in order.
    public var takenFaults: [TakenFault] { state.withLock { $0.takenFaults } }

    /// The faults a client met, as `AppliedFaults` counts them, for a client that polls `poll`
    /// (the chat's `delta`, or the offline appeals' `history`): a dropped poll is a disconnect, a
    /// broken or raw poll answer a malformed or raw frame, `account-blocked` on it a fatal end, a
    /// failed `init` a refused login, any action fault a failed request; and the messages an
    /// answer listed twice.
    func appliedFaults(polling poll: Endpoint) -> AppliedFaults {
        var applied = AppliedFaults()
        for taken in takenFaults {
            switch (taken.endpoint, taken.fault) {
            case (.initialize, _): applied[.rejectLogin] += 1
            case (.action, _): applied[.failRequest] += 1
            case (poll, .dropConnection): applied[.disconnect] += 1
            case (poll, .malformed): applied[.malformedFrame] += 1
            case (poll, .body): applied[.rawFrame] += 1
            case (poll, .error("account-blocked")): applied[.fatal] += 1
            default: break
            }
        }
        applied[.duplicateEvents] = duplicatesDelivered
        return applied
    }

    /// Items a client got a second time through `duplicateNextMessages`: delta items in a delta
    /// answer, appeal messages in an offline history answer.
    public var duplicatesDelivered: Int { state.withLock { $0.duplicatesDelivered } }

    /// The next request to `endpoint` (of `action`, for actions) meets `fault`.
    public func inject(_ fault: Fault, on endpoint: Endpoint, action: String? = nil) {
        state.withLock { $0.faults[endpoint, default: []].append((action, fault)) }
        changes.signal()
    }

    /// Every operator goes `online`, `busy_online`, `busy_offline` or `offline`. Each visitor's
    /// online status follows; going offline (or busy offline) puts a visitor without an open
    /// chat into the visit session state `offline-message` (a `VISIT_SESSION_STATE` delta), and
    /// coming back takes them out of it.
    ///
    /// That delta is all a connected app is told: the Webim SDKs read no online-status delta
    /// (iOS 4.0, Android and Dart know no `ONLINE_STATUS` object type, protocols/webim.md §2.3),
    /// so a visitor in a chat learns the new status from its next init's full update, or from
    /// `get-online-status` if the app polls it.
    ///
    /// - Returns: The visitors told now, by the delta.
    @discardableResult
    public func setOnlineStatus(_ status: String) -> [String] {
        defer { changes.signal() }
        return state.withLock { state in
            state.onlineStatus = status
            var told: [String] = []
            for id in state.visitors.keys.sorted() {
                state.visitors[id]!.onlineStatus = status
                let offline = Self.isOffline(status) && (state.visitors[id]!.chat?.isClosed ?? true)
                guard offline != state.visitors[id]!.offlineMessage else { continue }
                state.visitors[id]!.offlineMessage = offline
                let visitState = state.visitors[id]!.visitSessionState
                record(["objectType": "VISIT_SESSION_STATE", "event": "upd", "id": "visit-session", "data": .string(visitState)], for: id, state: &state)
                told.append(id)
            }
            return told
        }
    }

    /// The visitor's fields changed on the server (an operator edited the contact): a
    /// `VISITOR_FULL` delta with the visitor as `visitorFull` shows it.
    public func setVisitorFields(_ fields: [String: String], ofVisitor visitorID: String) {
        defer { changes.signal() }
        state.withLock { state in
            guard state.visitors[visitorID] != nil else { return }
            state.visitors[visitorID]!.fields.merge(fields) { _, new in new }
            record(["objectType": "VISITOR_FULL", "event": "upd", "id": .string(visitorID), "data": state.visitors[visitorID]!.visitorFullJSON], for: visitorID, state: &state)
        }
    }

    /// Whether the visitor has a chat that is not closed.
    public func hasOpenChat(visitor: String) -> Bool {
        state.withLock { $0.visitors[visitor]?.chat.map { !$0.isClosed } ?? false }
    }

    static func isOffline(_ status: String) -> Bool { status == "offline" || status == "busy_offline" }

    /// `GET /l/v/m/get-online-status`: the account's status and whether an operator is online.
    func onlineStatus(_ params: [String: String]) -> Answer {
        state.withLock { state in
            guard let page = authorized(params, state: state) else { return .error("reinit-required") }
            let status = state.visitors[page.visitorID]?.onlineStatus ?? state.onlineStatus
            return .json(["onlineStatus": .string(status), "onlineOperators": .bool(status == "online" || status == "busy_online")])
        }
    }

    /// How many online `history` requests were answered.
    public var historyRequests: Int { state.withLock { $0.historyRequests } }

    /// The visitor's delta revision now.
    public func revision(ofVisitor visitorID: String) -> Int {
        state.withLock { $0.visitors[visitorID]?.revision ?? 0 }
    }

    /// The next `count` message deltas are listed twice (in the delta log, or in the next offline
    /// history answers); ``duplicatesDelivered`` counts the copies a client got.
    public func duplicateNextMessages(_ count: Int) {
        state.withLock { $0.duplicateNextMessages += count }
    }

    /// Makes `robot` take every chat a visitor writes in and answer each visitor message with what
    /// `reply` returns (nothing for `nil`). For `switchboard emulate webim`.
    public func autoReply(as robot: WebimOperatorRobot, _ reply: @escaping @Sendable (String) -> String?) {
        state.withLock { $0.autoReply = (robot, reply) }
    }

    /// An operator robot.
    public func robot(id: Int = 1, name: String = "Operator") -> WebimOperatorRobot {
        WebimOperatorRobot(server: self, operatorItem: WebimOperator(id: id, fullname: name, avatar: "/webim/images/avatar/\(id).png"))
    }

    // MARK: Endpoints

    func initialize(_ params: [String: String]) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            if let fault = takeFault(.initialize, action: nil, state: &state) { return answer(for: fault) }
            guard params["event"] == "init" || params["event"] == nil, params["device-id"] != nil, let location = params["location"],
                params["platform"] != nil, params["title"].map({ !$0.isEmpty }) == true
            else {
                return .error("argument-missing")
            }
            // A push token comes with its service; an app version, when sent, is not empty.
            if params["push-token"] != nil, !["apns", "fcm"].contains(params["push-service"] ?? "") { return .error("wrong-argument-value") }
            if params["push-token"] == nil, params["push-service"] != nil { return .error("argument-missing") }
            if params["app-version"]?.isEmpty == true { return .error("wrong-argument-value") }
            state.initLocations.append(location)
            state.lastParameters["init"] = params
            var visitorID: String?
            var fields: [String: String] = [:]
            if let ext = params["visitor-ext"], let provided = try? JSONValue(parsing: ext) {
                let providedFields = provided["fields"]?.objectValue ?? provided.objectValue ?? [:]
                guard let id = providedFields["id"]?.stringValue ?? provided["id"]?.stringValue else {
                    return .error("wrong-argument-value")
                }
                if let expires = provided["expires"]?.intValue, expires < Int64(clock.date.timeIntervalSince1970) {
                    return .error("provided-visitor-expired")
                }
                if let key = configuration.visitorHashKey {
                    let values = providedFields.compactMapValues(\.stringValue)
                    guard let hash = provided["hash"]?.stringValue,
                        hash.lowercased() == Self.visitorHash(fields: values, expires: provided["expires"]?.intValue, privateKey: key)
                    else { return .error("wrong-provided-visitor-hash-value") }
                }
                visitorID = "provided-\(id)"
                fields = providedFields.compactMapValues(\.stringValue)
            } else if let stored = params["visitor"], let visitor = try? JSONValue(parsing: stored), let id = visitor["id"]?.stringValue,
                state.visitors[id] != nil
            {
                visitorID = id
            }
            let id = visitorID ?? newID("visitor", &state)
            if state.visitors[id] == nil {
                var visitor = WebimVisitor(id: id, fields: fields, visitSessionID: newID("session", &state))
                visitor.onlineStatus = state.onlineStatus
                visitor.offlineMessage = Self.isOffline(state.onlineStatus)
                state.visitors[id] = visitor
            }
            if let token = params["push-token"] { state.visitors[id]!.pushToken = token }
            let page = WebimPage(pageID: newID("page", &state), authToken: newID("token", &state), visitorID: id)
            state.pages[page.pageID] = page
            return .json(["revision": .string(String(state.visitors[id]!.revision)), "fullUpdate": fullUpdate(state.visitors[id]!, page: page)])
        }
    }

    /// The long-poll: answers at once when something happened after `since`, else waits for a
    /// change up to ``Configuration/deltaHold`` and answers `{}`.
    func delta(_ params: [String: String]) async -> Answer {
        let delay: Duration? = state.withLock { state in
            guard let index = state.faults[.delta]?.firstIndex(where: { if case .delay = $0.fault { return true } else { return false } }),
                case .delay(let duration) = state.faults[.delta]!.remove(at: index).fault
            else { return nil }
            state.takenFaults.append(TakenFault(endpoint: .delta, action: nil, fault: .delay(duration)))
            return duration
        }
        if let delay {
            changes.signal()
            try? await clock.sleep(for: delay)
        }
        let deadline = clock.now + configuration.deltaHold
        while true {
            let generation = changes.generation
            if let answer = pollOnce(params) { return answer }
            let remaining = deadline - clock.now
            if remaining <= .zero { return .json([:]) }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.changes.wait(since: generation) }
                group.addTask { try? await self.clock.sleep(for: remaining) }
                await group.next()
                group.cancelAll()
            }
            if Task.isCancelled { return .json([:]) }
        }
    }

    private func pollOnce(_ params: [String: String]) -> Answer? {
        // A fault taken here is news to whoever shows the taken faults.
        var tookFault = false
        defer { if tookFault { changes.signal() } }
        return state.withLock { state in
            guard let page = authorized(params, state: state) else { return .error("reinit-required") }
            if let fault = takeFault(.delta, action: nil, state: &state) {
                tookFault = true
                return answer(for: fault)
            }
            guard let since = Int(params["since"] ?? ""), let visitor = state.visitors[page.visitorID] else {
                return .error("reinit-required")
            }
            if since >= visitor.revision { return nil }
            let items = visitor.deltas.filter { $0.revision > since }.map(\.item)
            if let oldest = visitor.deltas.first?.revision, since < oldest - 1 {
                return .json(["revision": .string(String(visitor.revision)), "fullUpdate": fullUpdate(visitor, page: page)])
            }
            let duplicates = visitor.undeliveredDuplicates.filter { $0 > since }.count
            if duplicates > 0 {
                // A fault that took effect: the console shows it.
                tookFault = true
                state.duplicatesDelivered += duplicates
                state.visitors[page.visitorID]!.undeliveredDuplicates.removeAll { $0 > since }
            }
            // A string, as the server writes it (the SDK's `DeltaResponse` payload).
            return .json(["revision": .string(String(visitor.revision)), "deltaList": .array(items)])
        }
    }

    func action(_ params: [String: String]) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            guard let page = authorized(params, state: state) else { return .error("reinit-required") }
            let name = params["action"] ?? ""
            if let fault = takeFault(.action, action: name, state: &state) { return answer(for: fault) }
            let visitorID = page.visitorID
            state.actions.append((visitorID, name))
            state.lastParameters[name] = params.filter { $0.key != "page-id" && $0.key != "auth-token" && $0.key != "action" }
            switch name {
            case "chat.start":
                startChat(visitorID, state: &state)
            case "chat.close":
                guard var chat = state.visitors[visitorID]?.chat, !chat.isClosed else { return .error("no-chat") }
                chat.state = "closed_by_visitor"
                state.visitors[visitorID]!.chat = chat
                record(["objectType": "CHAT_STATE", "event": "upd", "id": .string(String(chat.id)), "data": "closed_by_visitor"], for: visitorID, state: &state)
            case "chat.message":
                return sendMessage(params, visitorID: visitorID, state: &state)
            case "chat.delete_message":
                guard let clientSideId = params["client-side-id"], var chat = state.visitors[visitorID]?.chat,
                    let index = chat.messages.firstIndex(where: { $0.clientSideId == clientSideId })
                else { return .error("message_not_found") }
                guard chat.messages[index].kind == "visitor" || chat.messages[index].kind == "file_visitor" else {
                    return .error("message_not_owned")
                }
                let removed = chat.messages.remove(at: index)
                state.visitors[visitorID]!.chat = chat
                record(["objectType": "CHAT_MESSAGE", "event": "del", "id": .string(removed.id), "data": .null], for: visitorID, state: &state)
            case "chat.visitor_typing":
                guard let typing = params["typing"], ["0", "1"].contains(typing), let delete = params["del-message-draft"], ["0", "1"].contains(delete) else {
                    return .error("argument-missing")
                }
                state.typingLog.append(WebimTypingRecord(visitor: visitorID, typing: typing == "1", draft: params["message-draft"], deletesDraft: delete == "1"))
            case "chat.read_by_visitor":
                state.readLog.append((visitorID, params["message_id"]))
                if state.visitors[visitorID]?.chat != nil {
                    state.visitors[visitorID]!.chat!.readByVisitor = true
                    state.visitors[visitorID]!.chat!.unreadByVisitor = 0
                    state.visitors[visitorID]!.chat!.unreadByVisitorSinceTs = nil
                    record(["objectType": "CHAT_READ_BY_VISITOR", "event": "upd", "id": "chat", "data": true], for: visitorID, state: &state)
                    record(["objectType": "UNREAD_BY_VISITOR", "event": "upd", "id": "chat", "data": ["msgCnt": 0, "sinceTs": .null]], for: visitorID, state: &state)
                }
            case "chat.operator_rate_select":
                guard let chat = state.visitors[visitorID]?.chat else { return .error("no-chat") }
                guard let rate = Int(params["rate"] ?? ""), (-2...2).contains(rate) else { return .error("rate-value-incorrect") }
                let operatorID = params["operator_id"].flatMap(Int.init) ?? chat.operatorInChat?.id
                guard let operatorID, chat.operatorInChat?.id == operatorID || chat.rates[operatorID] != nil else {
                    return .error("wrong-operator-id")
                }
                state.visitors[visitorID]!.chat!.rates[operatorID] = rate
                state.ratings.append((visitorID, operatorID, rate))
                record(["objectType": "OPERATOR_RATE", "event": "upd", "id": .string(String(operatorID)), "data": ["operatorId": .int(Int64(operatorID)), "rating": .int(Int64(rate))]], for: visitorID, state: &state)
            case "chat.clear_history":
                state.visitors[visitorID]!.history.removeAll()
                if state.visitors[visitorID]!.chat != nil { state.visitors[visitorID]!.chat!.messages.removeAll() }
            case "set_push_token":
                state.visitors[visitorID]!.pushToken = params["push-token"] == "none" ? nil : params["push-token"]
            case "survey.answer":
                return answerSurvey(params, visitorID: visitorID, state: &state)
            case "chat.keyboard_response":
                guard params["button-id"]?.isEmpty == false, params["request-message-id"]?.isEmpty == false else { return .error("argument-missing") }
            case "chat.resolution_survey_select":
                guard ["0", "1"].contains(params["answer"] ?? ""), params["operator_id"].flatMap(Int.init) != nil else { return .error("wrong-argument-value") }
            case "chat.set_prechat_fields":
                guard let fields = params["prechat-key-independent-fields"], (try? JSONValue(parsing: fields))?.objectValue != nil else {
                    return .error("wrong-argument-value")
                }
            case "chat.send_chat_history", "widget.update", "geo_response", "chat.react_message":
                break
            default:
                return .error("unknown-method")
            }
            return .json(["result": "ok"])
        }
    }

    func history(_ params: [String: String]) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            guard let page = authorized(params, state: state) else { return .error("reinit-required") }
            if let fault = takeFault(.history, action: nil, state: &state) { return answer(for: fault) }
            state.historyRequests += 1
            let visitor = state.visitors[page.visitorID]!
            let all = visitor.allMessages.sorted { $0.tsMicros < $1.tsMicros }
            if let before = params["before-ts"].flatMap(Int64.init) {
                let older = all.filter { $0.tsMicros < before }
                let pageItems = Array(older.suffix(configuration.historyPageSize))
                return .json(["result": "ok", "data": ["hasMore": .bool(older.count > pageItems.count), "messages": .array(pageItems.map(\.json))]])
            }
            guard let since = params["since"] else {
                // The first request of a device: everything there is.
                return .json([
                    "result": "ok",
                    "data": ["hasMore": false, "revision": .string(String(visitor.historyRevision)), "messages": .array(all.map(\.json))],
                ])
            }
            // What changed after `since`, a page at a time in the order it changed; the revision
            // of a page that is not the last is its last message's, so the next asks from there.
            state.historySinces.append(since)
            let changed = all.filter { $0.revision > Int(since) ?? 0 }.sorted { $0.revision < $1.revision }
            let batch = changed.prefix(configuration.historySincePageSize)
            let hasMore = changed.count > batch.count
            let revision = hasMore ? batch.last!.revision : visitor.historyRevision
            return .json([
                "result": "ok",
                "data": ["hasMore": .bool(hasMore), "revision": .string(String(revision)), "messages": .array(batch.map(\.json))],
            ])
        }
    }

    func upload(fields: [String: String], filename: String, contentType: String, data: Data) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            guard let page = authorized(fields, state: state) else { return .error("reinit-required") }
            let fault = takeFault(.upload, action: nil, state: &state)
            if let fault, fault != .loseAnswer { return answer(for: fault) }
            guard configuration.uploadAllowed else { return .error("not_allowed_file_type") }
            guard data.count <= configuration.maxUploadMegabytes * 1024 * 1024 else { return .error("max_file_size_exceeded") }
            guard !data.isEmpty else { return .error("file_size_too_small") }
            let ext = (filename as NSString).pathExtension.lowercased()
            guard configuration.allowedFileTypes.contains(ext) else { return .error("not_allowed_file_type") }
            guard state.visitors[page.visitorID]?.chat.map({ !$0.isClosed }) ?? false else { return .error("chat-required") }
            let upload = WebimUpload(guid: newID("file", &state), filename: filename, contentType: contentType, data: data, visitorID: page.visitorID)
            state.uploads[upload.guid] = upload
            let message = WebimMessage(
                id: newID("msg", &state), clientSideId: fields["client-side-id"] ?? newID("csid", &state), kind: "file_visitor",
                text: upload.params.jsonString, name: visitorName(page.visitorID, state: state), tsMicros: nextMicros(&state), canBeEdited: false
            )
            appendMessage(message, visitorID: page.visitorID, state: &state)
            var answer = Answer.json(["result": "ok", "data": upload.params])
            answer.dropsConnection = fault == .loseAnswer
            return answer
        }
    }

    /// The hash of identification v2 (protocols/webim.md §5): the lowercase hex HMAC-SHA256,
    /// keyed by the account's private key, of the fields' values in the order of their sorted
    /// names, then `expires`.
    public static func visitorHash(fields: [String: String], expires: Int64?, privateKey: String) -> String {
        let message = fields.keys.sorted().map { fields[$0]! }.joined() + (expires.map(String.init) ?? "")
        return HMAC<SHA256>.authenticationCode(for: Data(message.utf8), using: SymmetricKey(data: Data(privateKey.utf8)))
            .map { String(format: "%02x", $0) }.joined()
    }

    /// The bytes of an upload, if the signature (HMAC-SHA256 of guid + expires, keyed by the
    /// page's auth token) and expiry check out.
    func download(guid: String, pageID: String?, expires: String?, hash: String?) -> (status: Int, data: Data, contentType: String) {
        state.withLock { state in
            guard let upload = state.uploads[guid] else { return (404, Data(), "text/plain") }
            guard let pageID, let page = state.pages[pageID], let expires, let hash, let seconds = Int64(expires),
                seconds >= Int64(clock.date.timeIntervalSince1970)
            else { return (403, Data(), "text/plain") }
            let key = SymmetricKey(data: Data(page.authToken.utf8))
            let expected = HMAC<SHA256>.authenticationCode(for: Data((guid + expires).utf8), using: key)
                .map { String(format: "%02x", $0) }.joined()
            guard expected == hash.lowercased() else { return (403, Data(), "text/plain") }
            return (200, upload.data, upload.contentType)
        }
    }

    // MARK: Chat (lock held)

    func startChat(_ visitorID: String, state: inout State) {
        guard state.visitors[visitorID]?.chat.map({ $0.isClosed }) ?? true else { return }
        if let old = state.visitors[visitorID]?.chat {
            state.visitors[visitorID]!.history += old.messages
            state.visitors[visitorID]!.historyRevision += 1
            announceHistoryRevision(of: visitorID, state: &state)
        }
        let chat = WebimChat(
            id: state.nextChatID, clientSideId: newID("chat", &state), state: "queue",
            creationTs: clock.date.timeIntervalSince1970
        )
        state.nextChatID += 1
        state.visitors[visitorID]!.chat = chat
        record(["objectType": "CHAT", "event": "upd", "id": .string(String(chat.id)), "data": chat.json], for: visitorID, state: &state)
    }

    private func sendMessage(_ params: [String: String], visitorID: String, state: inout State) -> Answer {
        guard let clientSideId = params["client-side-id"], !clientSideId.isEmpty else { return .error("argument-missing") }
        guard var chat = state.visitors[visitorID]?.chat, !chat.isClosed else { return .error("chat-required") }
        let text = params["message"] ?? ""
        if let index = chat.messages.firstIndex(where: { $0.clientSideId == clientSideId }) {
            // The same client-side id again: an edit (or a resend of what the server has).
            guard chat.messages[index].kind == "visitor" else { return .error("wrong_message_kind") }
            guard chat.messages[index].text != text else { return .json(["result": "ok"]) }
            guard configuration.messageEditing else { return .error("not_allowed") }
            chat.messages[index].text = text
            chat.messages[index].edited = true
            state.visitors[visitorID]!.chat = chat
            record(["objectType": "CHAT_MESSAGE", "event": "upd", "id": .string(chat.messages[index].id), "data": chat.messages[index].json], for: visitorID, state: &state)
            return .json(["result": "ok"])
        }
        guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return .error("message_empty") }
        guard text.count <= configuration.maxMessageLength else { return .error("max-message-length-exceeded") }
        var quote: JSONValue?
        if let raw = params["quote"], let ref = (try? JSONValue(parsing: raw))?["ref"]?["msgId"]?.stringValue {
            guard let quoted = state.visitors[visitorID]!.allMessages.first(where: { $0.id == ref }) else {
                return .json(["result": "ok", "data": ["error": "quoted-message-not-found"]])
            }
            quote = ["state": "filled", "message": ["id": .string(quoted.id), "kind": .string(quoted.kind), "name": .string(quoted.name), "text": .string(quoted.text), "ts": .double(Double(quoted.tsMicros) / 1_000_000)]]
        }
        let name = visitorName(visitorID, state: state)
        let message = WebimMessage(
            id: newID("msg", &state), clientSideId: clientSideId, kind: params["kind"] == "file_visitor" ? "file_visitor" : "visitor",
            text: text, name: name, tsMicros: nextMicros(&state), canBeEdited: configuration.messageEditing,
            data: params["data"].flatMap { try? JSONValue(parsing: $0) }, quote: quote
        )
        appendMessage(message, visitorID: visitorID, state: &state)
        if let (robot, reply) = state.autoReply, let answer = reply(text) {
            if state.visitors[visitorID]!.chat!.operatorInChat == nil {
                var chat = state.visitors[visitorID]!.chat!
                robot.join(&chat, visitor: visitorID, server: self, state: &state)
                state.visitors[visitorID]!.chat = chat
            }
            _ = robot.post(visitorID, kind: "operator", text: answer, state: &state)
        }
        return .json(["result": "ok"])
    }

    /// `survey.answer` (protocols/webim.md §3): answers the current question and moves on; the
    /// SDK's `closeSurvey` sends only `survey-id`, which ends the survey unanswered.
    private func answerSurvey(_ params: [String: String], visitorID: String, state: inout State) -> Answer {
        guard var survey = state.visitors[visitorID]?.survey else { return .error("no-current-survey") }
        guard params["survey-id"] == survey.id else { return .error("incorrect-survey-id") }
        guard params["form-id"] != nil || params["question-id"] != nil || params["answer"] != nil else {
            endSurvey(visitorID, state: &state)
            return .json(["result": "ok"])
        }
        guard params["form-id"] == String(survey.formID), params["question-id"] == String(survey.current),
            survey.questions.indices.contains(survey.current)
        else { return .error("question-not-found") }
        let answer = params["answer"] ?? ""
        let question = survey.questions[survey.current]
        switch question.type {
        case "stars":
            guard let stars = Int(answer), (1...5).contains(stars) else { return .error("incorrect-stars-value") }
            if let operatorID = survey.ratedOperatorID, state.visitors[visitorID]?.chat != nil {
                state.visitors[visitorID]!.chat!.rates[operatorID] = stars - 3
                state.ratings.append((visitorID, operatorID, stars - 3))
                record(["objectType": "OPERATOR_RATE", "event": "upd", "id": .string(String(operatorID)), "data": ["operatorId": .int(Int64(operatorID)), "rating": .int(Int64(stars - 3))]], for: visitorID, state: &state)
            }
        case "radio":
            guard let index = Int(answer), question.options.indices.contains(index) else { return .error("incorrect-radio-value") }
        default:
            guard answer.count <= 1_000 else { return .error("max-comment-length-exceeded") }
        }
        state.surveyAnswers.append((visitorID, survey.id, survey.current, answer))
        survey.current += 1
        if survey.current < survey.questions.count {
            state.visitors[visitorID]!.survey = survey
        } else {
            endSurvey(visitorID, state: &state)
        }
        return .json(["result": "ok"])
    }

    private func endSurvey(_ visitorID: String, state: inout State) {
        guard let survey = state.visitors[visitorID]?.survey else { return }
        state.visitors[visitorID]!.survey = nil
        record(["objectType": "SURVEY", "event": "upd", "id": .string(survey.id), "data": .null], for: visitorID, state: &state)
    }

    func visitorName(_ visitorID: String, state: State) -> String {
        let fields = state.visitors[visitorID]?.fields ?? [:]
        return fields["display_name"] ?? fields["name"] ?? "Visitor"
    }

    func appendMessage(_ message: WebimMessage, visitorID: String, state: inout State) {
        var message = message
        message.chatID = message.chatID ?? state.visitors[visitorID]!.chat?.id
        message.sessionID = message.sessionID ?? state.visitors[visitorID]!.visitSessionID
        state.visitors[visitorID]!.historyRevision += 1
        message.revision = state.visitors[visitorID]!.historyRevision
        state.visitors[visitorID]!.chat!.messages.append(message)
        let item: JSONValue = ["objectType": "CHAT_MESSAGE", "event": "add", "id": .string(message.id), "data": message.json]
        record(item, for: visitorID, state: &state)
        if state.duplicateNextMessages > 0 {
            state.duplicateNextMessages -= 1
            state.visitors[visitorID]!.deltas.append((state.visitors[visitorID]!.revision, item))
            state.visitors[visitorID]!.undeliveredDuplicates.append(state.visitors[visitorID]!.revision)
        }
    }

    /// A `HISTORY_REVISION` delta with the visitor's history revision, if the server announces them.
    func announceHistoryRevision(of visitorID: String, state: inout State) {
        guard configuration.announcesHistoryRevisions else { return }
        record(["objectType": "HISTORY_REVISION", "event": "upd", "id": "history", "data": ["revision": .string(String(state.visitors[visitorID]!.historyRevision))]], for: visitorID, state: &state)
    }

    /// A chat the visitor had elsewhere (another device), closed: its messages are history only,
    /// found by history-since. Returns their ids.
    @discardableResult
    public func addPastChat(ofVisitor visitorID: String, operator robot: WebimOperatorRobot, texts: [String]) -> [String] {
        defer { changes.signal() }
        return state.withLock { state in
            guard state.visitors[visitorID] != nil else { return [] }
            var ids: [String] = []
            for text in texts {
                state.visitors[visitorID]!.historyRevision += 1
                var message = WebimMessage(
                    id: newID("msg", &state), clientSideId: newID("csid", &state), kind: "operator", text: text,
                    name: robot.name, authorId: robot.id, tsMicros: nextMicros(&state)
                )
                message.revision = state.visitors[visitorID]!.historyRevision
                // Older than the current chat's messages in time? No: a chat on another device now.
                state.visitors[visitorID]!.history.append(message)
                ids.append(message.id)
            }
            announceHistoryRevision(of: visitorID, state: &state)
            return ids
        }
    }

    /// A message of a past chat changed elsewhere (the operator edited it, or read the
    /// visitor's): the change is in history only, found by history-since. Returns whether the
    /// message was found.
    @discardableResult
    public func changePastMessage(ofVisitor visitorID: String, id: String, text: String? = nil, read: Bool? = nil) -> Bool {
        defer { changes.signal() }
        return state.withLock { state in
            guard let index = state.visitors[visitorID]?.history.firstIndex(where: { $0.id == id }) else { return false }
            state.visitors[visitorID]!.historyRevision += 1
            var message = state.visitors[visitorID]!.history[index]
            if let text, text != message.text {
                message.text = text
                message.edited = true
            }
            if let read { message.read = read }
            message.revision = state.visitors[visitorID]!.historyRevision
            state.visitors[visitorID]!.history[index] = message
            announceHistoryRevision(of: visitorID, state: &state)
            return true
        }
    }

    /// Appends a delta item at a new revision.
    func record(_ item: JSONValue, for visitorID: String, state: inout State) {
        state.visitors[visitorID]!.revision += 1
        state.visitors[visitorID]!.deltas.append((state.visitors[visitorID]!.revision, item))
    }

    func nextMicros(_ state: inout State) -> Int64 {
        let now = Int64(clock.date.timeIntervalSince1970 * 1_000_000)
        state.lastMicros = max(now, state.lastMicros + 1)
        return state.lastMicros
    }

    func newID(_ prefix: String, _ state: inout State) -> String {
        state.nextID += 1
        return "\(prefix)-\(state.nextID)"
    }

    private func fullUpdate(_ visitor: WebimVisitor, page: WebimPage) -> JSONValue {
        let revision: JSONValue? = configuration.announcesHistoryRevisions ? .int(Int64(visitor.historyRevision)) : nil
        let update: JSONValue = [
            "pageId": .string(page.pageID), "authToken": .string(page.authToken), "visitSessionId": .string(visitor.visitSessionID),
            "visitor": visitor.visitorFullJSON, "state": .string(visitor.visitSessionState),
            "onlineStatus": .string(visitor.onlineStatus), "chat": visitor.chat?.json ?? .null, "hintsEnabled": false,
            "departments": .array(configuration.departments.map(\.json)), "survey": visitor.survey?.json ?? .null,
            "showHelloMessage": .bool(configuration.helloMessage != nil), "chatStartAfterMessage": true,
            "helloMessageDescr": configuration.helloMessage.map(JSONValue.string) ?? .null, "visitorFull": visitor.visitorFullJSON,
            "currentTime": .int(Int64(clock.date.timeIntervalSince1970)), "pollingPeriod": 2, "normalPollingPeriod": 10,
            "onlineOperators": .bool(visitor.onlineStatus == "online" || visitor.onlineStatus == "busy_online"),
            "cobrowsingSession": .null, "visitorNumber": .null,
        ]
        return update.setting("historyRevision", to: revision)
    }

    private func authorized(_ params: [String: String], state: State) -> WebimPage? {
        guard let pageID = params["page-id"], let page = state.pages[pageID], page.authToken == params["auth-token"] else { return nil }
        return page
    }

    func takeFault(_ endpoint: Endpoint, action: String?, state: inout State) -> Fault? {
        guard let index = state.faults[endpoint]?.firstIndex(where: { $0.action == nil || $0.action == action }) else { return nil }
        let fault = state.faults[endpoint]!.remove(at: index).fault
        state.takenFaults.append(TakenFault(endpoint: endpoint, action: action, fault: fault))
        return fault
    }

    func answer(for fault: Fault) -> Answer {
        switch fault {
        case .reinitRequired: return .error("reinit-required")
        case .error(let code): return .error(code)
        case .status(let status): return Answer(status: status, body: "", contentType: "text/plain")
        case .malformed: return Answer(status: 200, body: "{\"revision\":9,\"deltaList\":[{\"objectType\":")
        case .body(let text): return Answer(status: 200, body: text)
        case .delay: return .json([:])
        case .dropConnection, .loseAnswer: return Answer(status: 200, body: #"{"revision":9,"deltaList":[]}"#, dropsConnection: true)
        }
    }
}

/// One `chat.visitor_typing` the emulator accepted: `typing`, `message-draft` and
/// `del-message-draft` as the visitor sent them.
public struct WebimTypingRecord: Sendable, Hashable {
    public var visitor: String
    public var typing: Bool
    public var draft: String?
    public var deletesDraft: Bool
}
