public import Foundation
@_spi(TestKit) public import Switchboard
public import SwitchboardTestKit

/// The server side of CXone Digital First chat as protocols/cxone.md describes it: channel
/// configurations for each mode, customers and tokens, threads with cases (contacts) and their
/// statuses, messages with ISO dates and UUID ids, scroll-token paging, queue positions, replies
/// matched by `eventId`, `"pong"`, `EventInS3` for large events — plus an agent robot, faults and a
/// log of what it accepted. It shares no code with the adapter.
///
/// The lock guards all state; frames are queued to connections under it.
public final class CXoneServer: Sendable {
    public enum Mode: String, Sendable, CaseIterable {
        case single, multi, live
    }

    public struct Configuration: Sendable {
        public var brandID: Int
        public var channelID: String
        public var mode: Mode
        /// `features.securedSessions`: anonymous transaction tokens instead of AuthorizeCustomer.
        public var securedSessions: Bool
        /// With secured sessions: third-party OAuth (`isAuthorizationEnabled`), an authorization
        /// code exchanged once for a transaction token and a refreshable access token.
        public var thirdPartyOAuth: Bool
        public var allowedFileSizeMegabytes: Int
        public var allowedMIMETypes: [String]
        /// Frames larger than this go out as `EventInS3` with a download URL.
        public var s3Threshold: Int
        public var pageSize: Int
        public var requiredPreChatField: String?
        /// `expiresIn` of the access tokens issued, in seconds.
        public var tokenLifetime: Int

        public init(
            brandID: Int = 1386,
            channelID: String = "chat_emulator",
            mode: Mode = .multi,
            securedSessions: Bool = false,
            thirdPartyOAuth: Bool = false,
            allowedFileSizeMegabytes: Int = 10,
            allowedMIMETypes: [String] = ["image/*", "application/pdf", "text/plain"],
            s3Threshold: Int = 512 * 1024,
            pageSize: Int = 20,
            requiredPreChatField: String? = nil,
            tokenLifetime: Int = 3600
        ) {
            self.tokenLifetime = tokenLifetime
            self.brandID = brandID
            self.channelID = channelID
            self.mode = mode
            self.securedSessions = securedSessions
            self.thirdPartyOAuth = thirdPartyOAuth
            self.allowedFileSizeMegabytes = allowedFileSizeMegabytes
            self.allowedMIMETypes = allowedMIMETypes
            self.s3Threshold = s3Threshold
            self.pageSize = pageSize
            self.requiredPreChatField = requiredPreChatField
        }
    }

    public enum Fault: Sendable, Hashable {
        /// Heartbeats get no `"pong"` until the socket closes.
        case noPong
        /// The socket of the next request of this event type (or any) closes before it is handled.
        case dropOnNext(eventType: String?)
        /// Close every socket of the customer now.
        case closeSocket
        /// The next request of this event type (or any) gets an `OperationError`.
        case operationError(code: String, eventType: String?)
        /// What the server sends after the next request of this event type (or any), its reply
        /// first, is held back for the delay.
        case slowReplies(Duration, eventType: String?)
        /// The next WebSocket upgrade is refused.
        case failHandshake
        /// The next `count` pushed `MessageCreated` events go out twice.
        case duplicateMessages(Int)
        /// A frame that is not JSON.
        case malformedFrame
        /// This text, as it is, to every connection.
        case rawFrame(String)
        /// From now on the channel configuration answers `SdkVersionNotSupported`, and every socket
        /// closes: the server no longer serves this SDK (a fatal end for the client).
        case sdkVersionNotSupported
    }

    struct StoredMessage {
        var id: String
        var thread: String
        var direction: String
        var text: String
        var createdAt: Date
        var agent: JSONValue?
        var customerID: String?
        var attachments: [JSONValue] = []
        var readAt: Date?
        /// When the customer saw it (`MessageSeenByCustomer`): an agent's message only.
        var seenByCustomerAt: Date?
        var content: JSONValue?

        var isHidden: Bool {
            content?["parameters"]?["isInitialMessage"]?.boolValue == true || content?["parameters"]?["isUnsupportedMessageTypeAnswer"]?.boolValue == true
        }
    }

    struct StoredThread {
        var id: String
        var customerID: String
        var name = ""
        var contactID: String
        var status = "new"
        var archived = false
        var assignee: JSONValue?
        var messages: [StoredMessage] = []
        var positionInQueue: Int?
        /// The contact's custom fields: ident → value.
        var contactFields: [String: String] = [:]
        /// The customer's last `SenderTypingStarted` (true) or `SenderTypingEnded`; a message ends it.
        var customerTyping = false
        /// Whether the agent's last typing event started typing; the agent's message ends it.
        var agentTyping = false
    }

    struct Connection {
        var customerID: String?
        var visitorID: String
        var send: @Sendable (String) -> Void
        var close: @Sendable () -> Void
        /// Holds back everything sent after it for the duration.
        var pause: @Sendable (Duration) -> Void
        var noPong = false
    }

    struct State {
        var threads: [String: StoredThread] = [:]
        var order: [String] = []
        var connections: [Int: Connection] = [:]
        var nextConnection = 0
        var nextID = 0
        var tokens: [String: String] = [:]
        var faults: [Fault] = []
        var duplicateMessages = 0
        var applied = AppliedFaults()
        var s3Objects: [String: String] = [:]
        var uploads: [String: Data] = [:]
        var uploadRequests = 0
        var received: [(customer: String, eventType: String, data: JSONValue)] = []
        var identities: [String: JSONValue] = [:]
        /// The last frame of each event type sent to a client.
        var lastFrames: [String: JSONValue] = [:]
        var analytics: [JSONValue] = []
        var sdkRefused = false
        /// Requests refused because they named a brand or channel the emulator does not serve.
        var refusedRequests = 0
        var lastMessageTime: Date?
        var autoReply: (robot: CXoneAgentRobot, reply: @Sendable (String) -> String?)?
        var liveChatOnline = true
        var usedCodes: Set<String> = []
        var refreshTokens: Set<String> = []
        var tokenRequests: [JSONValue] = []
        var visitors: [String: JSONValue] = [:]
        var popupAnswers: [(thread: String, postback: String)] = []
        /// `LoadMoreMessages` requests whose `oldestMessageDatetime` was (true) or was not (false)
        /// the oldest message the client had.
        var oldestChecks: [Bool] = []
        var triggers: [(customer: String, trigger: String, destination: String)] = []
        /// Each customer's custom fields: ident → value.
        var customerFields: [String: [String: String]] = [:]
        var seenForUnknownThreads = 0
        /// A line for each fault that took effect, oldest first (the last 200).
        var faultLog: [String] = []
    }

    public let configuration: Configuration
    let clock: SessionClock
    let state = Locked(State())
    @_spi(TestKit) public let changes = AsyncSignal()

    public init(configuration: Configuration = Configuration(), clock: SessionClock = .continuous) {
        self.configuration = configuration
        self.clock = clock
    }

    // MARK: Truth and faults

    /// Every request the server accepted: who, which event type, its data.
    public var received: [(customer: String, eventType: String, data: JSONValue)] { state.withLock { $0.received } }
    /// How many requests named a brand or channel the emulator does not serve (each refused).
    public var refusedRequests: Int { state.withLock { $0.refusedRequests } }
    public var analytics: [JSONValue] { state.withLock { $0.analytics } }
    /// Every inactivity pop-up answer (`SendMessage` with `isInactivityPopupAnswer`): the thread and
    /// the button's postback.
    public var popupAnswers: [(thread: String, postback: String)] { state.withLock { $0.popupAnswers } }
    /// For each `LoadMoreMessages` with a page to give: whether its `oldestMessageDatetime` named
    /// the oldest message the client had loaded (protocols/cxone.md §3.7).
    public var oldestMessageChecks: [Bool] { state.withLock { $0.oldestChecks } }
    /// The customer's custom fields as the server keeps them.
    public func customerFields(of customer: String) -> [String: String] { state.withLock { $0.customerFields[customer] ?? [:] } }
    /// A thread's contact custom fields as the server keeps them.
    public func contactFields(ofThread thread: String) -> [String: String] { state.withLock { $0.threads[thread.lowercased()]?.contactFields ?? [:] } }

    /// Every accepted `ExecuteTrigger`: the customer, the trigger and the destination it named.
    public var triggers: [(customer: String, trigger: String, destination: String)] { state.withLock { $0.triggers } }
    /// `MessageSeenByCustomer` for threads the server does not have (a client must not send them).
    public var seenForUnknownThreads: Int { state.withLock { $0.seenForUnknownThreads } }
    /// The last visitor record (H3 PUT) of each visitor id.
    public var visitors: [String: JSONValue] { state.withLock { $0.visitors } }
    /// The faults that took effect on the customer's traffic (see `AppliedFaults` for the units):
    /// each socket `closeSocket` closed is a disconnect, and `sdkVersionNotSupported` a fatal end;
    /// each socket a malformed or raw frame reached; a request that met `dropOnNext` or an
    /// `operationError` is a failed request, or a refused login when the error is
    /// `CustomerAuthorizationFailed`, as a refused handshake is; each `MessageCreated` a socket
    /// got twice. `noPong` and `slowReplies` are not counted.
    public var appliedFaults: AppliedFaults { state.withLock { $0.applied } }
    /// How many WebSockets the server has accepted.
    public var socketsAccepted: Int { state.withLock { $0.nextConnection } }
    /// What the live-chat availability endpoint (H2) answers: `online` or `offline`.
    public var isLiveChatOnline: Bool { state.withLock { $0.liveChatOnline } }

    public func setLiveChatOnline(_ online: Bool) {
        state.withLock { $0.liveChatOnline = online }
        changes.signal()
    }

    func recordVisitor(_ visitorID: String, _ body: JSONValue) {
        state.withLock { $0.visitors[visitorID] = body }
        changes.signal()
    }

    /// A thread's messages, oldest first: id, text, whether the customer sent it.
    /// The thread's messages the customer may see, oldest first (hidden ones — a live chat's
    /// "Begin Conversation" — are the agent's only: ``hiddenMessages(inThread:)``).
    public func messages(inThread thread: String) -> [(id: String, text: String, fromCustomer: Bool)] {
        state.withLock { ($0.threads[thread.lowercased()]?.messages ?? []).filter { !$0.isHidden }.map { ($0.id, $0.text, $0.direction == "inbound") } }
    }

    /// The thread's hidden messages (`isInitialMessage`, `isUnsupportedMessageTypeAnswer`): what the
    /// agent sees that the customer's app does not show.
    public func hiddenMessages(inThread thread: String) -> [String] {
        state.withLock { ($0.threads[thread.lowercased()]?.messages ?? []).filter(\.isHidden).map(\.text) }
    }

    public func threads(of customer: String) -> [String] {
        state.withLock { state in state.order.filter { state.threads[$0]?.customerID == customer } }
    }

    public func status(ofThread thread: String) -> String? { state.withLock { $0.threads[thread.lowercased()]?.status } }

    /// The customer's identity (`customerIdentity` / `consumerIdentity`: id, first and last name)
    /// as their last event named it.
    public func identity(ofCustomer customer: String) -> JSONValue? { state.withLock { $0.identities[customer] } }

    /// The last frame of each event type the server sent a client (an `OperationError` under that
    /// name), to compare with the SDK's payloads.
    public var lastFrames: [String: JSONValue] { state.withLock { $0.lastFrames } }

    /// Every upload request (H5) the server got, refused ones too.
    public var uploadRequests: Int { state.withLock { $0.uploadRequests } }

    /// The bytes of the files uploaded (H5), and of those the agent sent, by their id.
    public var uploads: [String: [UInt8]] { state.withLock { $0.uploads.mapValues { [UInt8]($0) } } }

    /// Whether the thread is archived on the server.
    public func isArchived(thread: String) -> Bool { state.withLock { $0.threads[thread.lowercased()]?.archived ?? false } }

    /// The thread is gone on the server (an administrator removed it): requests naming it are
    /// refused as unknown.
    public func forgetThread(_ thread: String) {
        state.withLock { _ = $0.threads.removeValue(forKey: thread.lowercased()) }
        changes.signal()
    }

    public func inject(_ fault: Fault) {
        let closers: [@Sendable () -> Void] = state.withLock { state in
            switch fault {
            case .closeSocket:
                state.applied[.disconnect] += state.connections.count
                if !state.connections.isEmpty { noteFault("disconnect: closed \(state.connections.count) socket(s)", state: &state) }
                return state.connections.values.map(\.close)
            case .sdkVersionNotSupported:
                state.sdkRefused = true
                state.applied[.fatal] += state.connections.count
                noteFault("fatal: SdkVersionNotSupported from now on; closed \(state.connections.count) socket(s)", state: &state)
                return state.connections.values.map(\.close)
            case .noPong:
                for id in state.connections.keys { state.connections[id]!.noPong = true }
                if !state.connections.isEmpty { noteFault("noPong: heartbeats on \(state.connections.count) socket(s) go unanswered", state: &state) }
            case .duplicateMessages(let count): state.duplicateMessages += count
            case .malformedFrame:
                for connection in state.connections.values { connection.send("{\"eventId\":\"x\",\"eventType\":") }
                state.applied[.malformedFrame] += state.connections.count
                if !state.connections.isEmpty { noteFault("malformedFrame: sent to \(state.connections.count) socket(s)", state: &state) }
            case .rawFrame(let text):
                for connection in state.connections.values { connection.send(text) }
                state.applied[.rawFrame] += state.connections.count
                if !state.connections.isEmpty { noteFault("rawFrame: sent to \(state.connections.count) socket(s)", state: &state) }
            default: state.faults.append(fault)
            }
            return []
        }
        for close in closers { close() }
        changes.signal()
    }

    func takeHandshakeFault() -> Bool {
        let taken = state.withLock { state -> Bool in
            guard let index = state.faults.firstIndex(of: .failHandshake) else { return false }
            state.faults.remove(at: index)
            state.applied[.rejectLogin] += 1
            noteFault("rejectLogin: refused a WebSocket upgrade", state: &state)
            return true
        }
        if taken { changes.signal() }
        return taken
    }

    /// Records that a fault took effect (lock held).
    func noteFault(_ line: String, state: inout State) {
        state.faultLog.append(line)
        if state.faultLog.count > 200 { state.faultLog.removeFirst(state.faultLog.count - 200) }
    }

    /// An agent robot.
    /// Makes `robot` take every thread that has no agent and answer each customer message with
    /// `reply(text)` (no answer when it returns `nil`).
    public func autoReply(as robot: CXoneAgentRobot, _ reply: @escaping @Sendable (String) -> String?) {
        state.withLock { $0.autoReply = (robot, reply) }
    }

    public func agent(id: Int = 62_713_628, firstName: String = "David", surname: String = "Berry") -> CXoneAgentRobot {
        CXoneAgentRobot(
            server: self,
            user: ["id": .int(Int64(id)), "firstName": .string(firstName), "surname": .string(surname), "nickname": "", "isBotUser": false, "isSurveyUser": false, "publicImageUrl": "https://example.com/agent.png"]
        )
    }

    // MARK: HTTP

    /// Whether the emulator serves this brand's channel: only the brand and channel it was
    /// configured with, so a typo in either fails here as it fails at the real service, not
    /// only in production. `brandID` and `channelID` are as they appear in a path or a query.
    public func serves(brandID: String?, channelID: String?) -> Bool {
        brandID == String(configuration.brandID) && channelID == configuration.channelID
    }

    /// Why a brand or channel is refused, for the answers below.
    func refusal(brandID: String?, channelID: String?) -> String {
        "brand \(brandID ?? "(none)") has no channel \(channelID ?? "(none)"); this emulator serves brand \(configuration.brandID), channel \(configuration.channelID)"
    }

    /// H1, H2 and the upload for a brand or channel the emulator does not serve. protocols/cxone.md
    /// does not record what the real service answers there; this is the closest the notes allow:
    /// a 404 carrying the error envelope the service uses for H1's other refusal
    /// (`{"error":{"errorCode","errorMessage"}}`, as `SdkVersionNotSupported`). The error code
    /// is the emulator's own. The SDK reads no status on H1, so it would fail to decode this as
    /// a configuration; the adapter names the brand and channel instead.
    func unknownChannelAnswer(brandID: String?, channelID: String?) -> (status: Int, body: JSONValue) {
        (404, ["error": ["errorCode": "ChannelNotFound", "errorMessage": .string(refusal(brandID: brandID, channelID: channelID))]])
    }

    /// H1: the channel configuration for the configured mode.
    public var channelConfiguration: JSONValue {
        if state.withLock({ $0.sdkRefused }) {
            return ["error": ["errorCode": "SdkVersionNotSupported", "errorMessage": "Your version of SDK is not supported anymore, please do upgrade."]]
        }
        var configuration: [String: JSONValue] = [
            "isAuthorizationEnabled": .bool(self.configuration.thirdPartyOAuth), "isLiveChat": .bool(self.configuration.mode == .live),
            "settings": [
                "hasMultipleThreadsPerEndUser": .bool(self.configuration.mode == .multi), "isProactiveChatEnabled": true,
                "liveChatAllowTranscript": true,
                "fileRestrictions": [
                    "allowedFileSize": .string(String(self.configuration.allowedFileSizeMegabytes)),
                    "allowedFileTypes": .array(self.configuration.allowedMIMETypes.map { ["mimeType": .string($0), "description": .string($0)] }),
                    "isAttachmentsEnabled": true,
                ],
                "features": ["securedSessions": .bool(self.configuration.securedSessions), "isRecoverLivechatDoesNotFailEnabled": true],
            ],
        ]
        // The customer's and a contact's field definitions, shaped as the SDK's payload.
        configuration["endUserCustomFields"] = [
            ["ident": "marital_status", "label": "Marital Status", "type": "list", "required": false, "isEditable": false,
             "values": [["name": "single", "value": "Single"], ["name": "married", "value": "Married"]]],
        ]
        configuration["caseCustomFields"] = [
            ["ident": "order", "label": "Order", "type": "text", "required": false, "isEditable": false, "values": []],
            ["ident": "priority", "label": "Priority", "type": "list", "required": false, "isEditable": false,
             "values": [["name": "low", "value": "Low"], ["name": "high", "value": "High"]]],
        ]
        if let field = self.configuration.requiredPreChatField {
            configuration["preContactForm"] = ["name": "Pre-chat", "customFields": [["isRequired": true, "definition": ["ident": .string(field), "label": .string(field), "type": "text"]]]]
        }
        return .object(configuration)
    }

    /// Every body posted to `oauth/token` (H6, H7), in order.
    public var tokenRequests: [JSONValue] { state.withLock { $0.tokenRequests } }

    /// H6 and H7: a transaction token (anonymous, secured cookie, or an authorization code that
    /// works once), or a refreshed third-party access token.
    func token(_ body: JSONValue) -> (status: Int, body: JSONValue) {
        defer { changes.signal() }
        return state.withLock { state in
            state.tokenRequests.append(body)
            func issue(_ prefix: String) -> String {
                state.nextID += 1
                let token = "\(prefix)-\(state.nextID)"
                state.tokens[token] = "valid"
                return token
            }
            let lifetime = JSONValue.int(Int64(configuration.tokenLifetime))
            switch body["thirdParty"]?["grant_type"]?.stringValue {
            case "authorization_code":
                guard let code = body["thirdParty"]?["authorization_code"]?.stringValue, !code.isEmpty, body["thirdParty"]?["code_verifier"]?.stringValue?.isEmpty == false,
                    state.usedCodes.insert(code).inserted
                else { return (400, ["error": "invalid_grant"]) }
                let refresh = issue("refresh")
                state.refreshTokens.insert(refresh)
                return (200, ["accessToken": .string(issue("transaction")), "expiresIn": 600,
                              "thirdParty": ["access_token": .string(issue("oauth")), "refresh_token": .string(refresh), "expires_in": lifetime]])
            case "refresh_token":
                guard let old = body["thirdParty"]?["refresh_token"]?.stringValue, state.refreshTokens.remove(old) != nil else { return (400, ["error": "invalid_grant"]) }
                let refresh = issue("refresh")
                state.refreshTokens.insert(refresh)
                return (200, ["access_token": .string(issue("oauth")), "refresh_token": .string(refresh), "expires_in": lifetime])
            default:
                var answer: [String: JSONValue] = ["accessToken": .string(issue("transaction")), "expiresIn": 600]
                if let customer = body["customerIdentity"] { answer["customerIdentity"] = customer }
                return (200, .object(answer))
            }
        }
    }

    func upload(_ body: JSONValue) -> (status: Int, body: JSONValue) {
        state.withLock { $0.uploadRequests += 1 }
        guard let base64 = body["content"]?.stringValue, let data = Data(base64Encoded: base64), let name = body["fileName"]?.stringValue else {
            return (400, ["error": "bad upload"])
        }
        if data.count > configuration.allowedFileSizeMegabytes * 1024 * 1024 {
            return (200, ["allowedFileSize": .string(String(configuration.allowedFileSizeMegabytes)), "allowedFileTypes": [], "isAttachmentsEnabled": true])
        }
        let id = state.withLock { state -> String in
            state.nextID += 1
            state.uploads["file-\(state.nextID)"] = data
            return "file-\(state.nextID)"
        }
        return (200, ["fileUrl": .string("https://files.emulator/\(id)/\(name)")])
    }

    func s3Object(_ id: String) -> String? { state.withLock { $0.s3Objects[id] } }

    func recordAnalytics(_ event: JSONValue) {
        state.withLock { $0.analytics.append(event) }
        changes.signal()
    }

    // MARK: WebSocket

    func attach(
        visitorID: String,
        send: @escaping @Sendable (String) -> Void,
        pause: @escaping @Sendable (Duration) -> Void,
        close: @escaping @Sendable () -> Void
    ) -> Int {
        state.withLock { state in
            defer { state.nextConnection += 1 }
            state.connections[state.nextConnection] = Connection(visitorID: visitorID, send: send, close: close, pause: pause)
            return state.nextConnection
        }
    }

    func detach(_ connection: Int) {
        _ = state.withLock { $0.connections.removeValue(forKey: connection) }
    }

    /// One text frame from a connection.
    func receive(_ text: String, from connection: Int) {
        defer { changes.signal() }
        state.withLock { state in
            guard let sender = state.connections[connection] else { return }
            guard let frame = try? JSONValue(parsing: text) else { return }
            if frame["action"] == "heartbeat" {
                if !sender.noPong { sender.send("\"pong\"") }
                return
            }
            guard let eventID = frame["eventId"]?.stringValue, let payload = frame["payload"], let type = payload["eventType"]?.stringValue else { return }
            // Every request names its brand and channel; one the emulator does not serve is
            // refused. What the real service answers is not recorded (protocols/cxone.md): the
            // closest the notes allow is the refusal of a login, which the SDK and the adapter
            // report as an authorization failure.
            let brand = payload["brand"]?["id"].flatMap { $0.intValue.map(String.init) ?? $0.stringValue }
            let channel = payload["channel"]?["id"]?.stringValue
            guard serves(brandID: brand, channelID: channel) else {
                state.refusedRequests += 1
                sender.send(operationError(eventID, "CustomerAuthorizationFailed", refusal(brandID: brand, channelID: channel)))
                return
            }
            let identity = payload["customerIdentity"] ?? payload["consumerIdentity"]
            guard let customer = identity?["idOnExternalPlatform"]?.stringValue else {
                sender.send(operationError(eventID, "CustomerAuthorizationFailed", "no customer identity"))
                return
            }
            state.connections[connection]!.customerID = customer
            state.identities[customer] = identity
            if let index = state.faults.firstIndex(where: { if case .dropOnNext(let name) = $0 { return name == nil || name == type } else { return false } }) {
                state.faults.remove(at: index)
                state.applied[.failRequest] += 1
                noteFault("failRequest: closed the socket before a \(type) was handled", state: &state)
                sender.close()
                return
            }
            if let index = state.faults.firstIndex(where: { if case .operationError(_, let name) = $0 { return name == nil || name == type } else { return false } }),
                case .operationError(let code, _) = state.faults.remove(at: index)
            {
                state.applied[code == "CustomerAuthorizationFailed" ? .rejectLogin : .failRequest] += 1
                noteFault("\(code == "CustomerAuthorizationFailed" ? "rejectLogin" : "failRequest"): answered a \(type) with OperationError \(code)", state: &state)
                sender.send(operationError(eventID, code, "injected"))
                return
            }
            if let index = state.faults.firstIndex(where: { if case .slowReplies(_, let name) = $0 { return name == nil || name == type } else { return false } }),
                case .slowReplies(let delay, _) = state.faults.remove(at: index)
            {
                noteFault("slowReplies: held what follows a \(type) for \(delay)", state: &state)
                sender.pause(delay)
            }
            let data = payload["data"] ?? .null
            if type == "ExecuteTrigger" {
                // §3.14: its own envelope, naming the destination and the visitor.
                guard let destination = payload["destination"]?["id"]?.stringValue, payload["visitor"]?["id"]?.stringValue != nil,
                    let trigger = data["trigger"]?["id"]?.stringValue
                else {
                    sender.send(operationError(eventID, "InconsistentData", "ExecuteTrigger needs destination.id, visitor.id and data.trigger.id"))
                    return
                }
                state.triggers.append((customer, trigger, destination))
            }
            if type == "MessageSeenByCustomer", let thread = data["thread"]?["idOnExternalPlatform"]?.stringValue?.lowercased(), state.threads[thread] == nil {
                state.seenForUnknownThreads += 1
            }
            state.received.append((customer, type, data))
            keepCustomFields(type, data: data, customer: customer, state: &state)
            handle(type, eventID: eventID, data: data, customer: customer, connection: connection, state: &state)
        }
    }

    private func reply(_ eventID: String, _ type: String, data: JSONValue?, to connection: Int, state: inout State) {
        var postback: [String: JSONValue] = ["eventType": .string(type)]
        if let data { postback["data"] = data }
        send(["eventId": .string(eventID), "eventType": .string(type), "postback": .object(postback)], to: connection, state: &state)
    }

    private func operationError(_ eventID: String, _ code: String, _ message: String) -> String {
        JSONValue.object(["eventId": .string(eventID), "error": ["errorCode": .string(code), "errorMessage": .string(message), "transactionId": "tx"]]).jsonString
    }

    /// Sends a frame, or an `EventInS3` pointing at it when it is too large.
    func send(_ frame: JSONValue, to connection: Int, state: inout State) {
        guard let target = state.connections[connection] else { return }
        if let type = frame["eventType"]?.stringValue ?? frame["postback"]?["eventType"]?.stringValue ?? (frame["error"] != nil ? "OperationError" : nil) {
            state.lastFrames[type] = frame
        }
        let text = frame.jsonString
        if text.utf8.count > configuration.s3Threshold {
            state.nextID += 1
            let id = "s3-\(state.nextID)"
            state.s3Objects[id] = text
            target.send(JSONValue.object([
                "eventId": .string(UUID().uuidString.lowercased()), "eventType": "EventInS3", "eventObject": "S3Object",
                "createdAt": .string(Self.date(clock.date)),
                "data": ["s3Object": ["url": .string("/s3/\(id)")], "originEvent": ["eventType": frame["eventType"] ?? frame["postback"]?["eventType"] ?? .null]],
            ]).jsonString)
        } else {
            target.send(text)
        }
    }

    /// Pushes an event to every connection of the thread's customer.
    func push(_ frame: JSONValue, toCustomer customer: String, state: inout State) {
        for (id, connection) in state.connections where connection.customerID == customer {
            send(frame, to: id, state: &state)
        }
    }

    private func handle(_ type: String, eventID: String, data: JSONValue, customer: String, connection: Int, state: inout State) {
        let threadID = data["thread"]?["idOnExternalPlatform"]?.stringValue?.lowercased()
        switch type {
        case "AuthorizeCustomer":
            let token = "legacy-\(UUID().uuidString.lowercased())"
            state.tokens[token] = customer
            reply(eventID, "ConsumerAuthorized", data: ["consumerIdentity": ["idOnExternalPlatform": .string(customer), "firstName": "", "lastName": ""], "accessToken": ["token": .string(token), "expiresIn": .int(Int64(configuration.tokenLifetime))]], to: connection, state: &state)
        case "ReconnectCustomer":
            guard let token = data["accessToken"]?["token"]?.stringValue, state.tokens[token] == customer else {
                state.connections[connection]?.send(operationError(eventID, "CustomerReconnectionFailed", "unknown token"))
                return
            }
            reply(eventID, "ConsumerReconnected", data: nil, to: connection, state: &state)
        case "RefreshToken":
            let token = "legacy-\(UUID().uuidString.lowercased())"
            state.tokens[token] = customer
            reply(eventID, "TokenRefreshed", data: ["accessToken": ["token": .string(token), "expiresIn": .int(Int64(configuration.tokenLifetime))]], to: connection, state: &state)
        case "FetchThreadList":
            let threads = state.order.compactMap { state.threads[$0] }.filter { $0.customerID == customer }
            reply(eventID, "ThreadListFetched", data: ["threads": .array(threads.map(threadJSON))], to: connection, state: &state)
        case "LoadThreadMetadata":
            guard let threadID, let thread = state.threads[threadID] else { return }
            var data: [String: JSONValue] = [:]
            if let last = thread.messages.last { data["lastMessage"] = messageJSON(last) }
            data["ownerAssignee"] = thread.assignee ?? .null
            reply(eventID, "ThreadMetadataLoaded", data: .object(data), to: connection, state: &state)
        case "RecoverThread", "RecoverLivechat":
            let live = type == "RecoverLivechat"
            let candidate = threadID.flatMap { state.threads[$0] }
                ?? state.order.reversed().compactMap { state.threads[$0] }.first { $0.customerID == customer }
            guard let thread = candidate, thread.customerID == customer, !(live && thread.status == "closed") else {
                if live { reply(eventID, "LivechatRecovered", data: nil, to: connection, state: &state) } else {
                    state.connections[connection]?.send(operationError(eventID, "RecoveringThreadFailed", "no thread"))
                }
                return
            }
            let page = Array(thread.messages.suffix(configuration.pageSize))
            let older = thread.messages.count > page.count
            reply(eventID, live ? "LivechatRecovered" : "ThreadRecovered", data: [
                "contact": contactJSON(thread), "inboxAssignee": thread.assignee ?? .null,
                // A live chat's messages come newest first (protocols/cxone.md §4.6).
                "messages": .array((live ? page.reversed() : page).map(messageJSON)),
                "messagesScrollToken": .string(older ? "before:\(thread.messages.count - page.count)" : ""),
                "thread": threadJSON(thread), "customer": ["customFields": Self.fieldsJSON(state.customerFields[customer] ?? [:], at: clock.date)],
            ], to: connection, state: &state)
        case "LoadMoreMessages":
            guard let threadID, let thread = state.threads[threadID], let token = data["scrollToken"]?.stringValue,
                token.hasPrefix("before:"), let end = Int(token.dropFirst("before:".count))
            else {
                reply(eventID, "MoreMessagesLoaded", data: ["messages": [], "scrollToken": ""], to: connection, state: &state)
                return
            }
            // The client names the oldest message it has (the first after this page), to the second.
            let named = data["oldestMessageDatetime"]?.stringValue.flatMap { try? Self.wireDate.parse($0) }
            // (Hidden messages are not the customer's to count.)
            let expected = thread.messages[min(end, thread.messages.count)...].first { !$0.isHidden }?.createdAt
            let matches = named != nil && expected.map { abs($0.timeIntervalSince(named!)) < 1 } ?? true
            state.oldestChecks.append(matches)
            guard matches else {
                state.connections[connection]?.send(operationError(eventID, "InconsistentData", "oldestMessageDatetime is not the oldest message loaded"))
                return
            }
            let start = max(0, end - configuration.pageSize)
            let page = Array(thread.messages[start..<min(end, thread.messages.count)])
            reply(eventID, "MoreMessagesLoaded", data: ["messages": .array(page.map(messageJSON)), "scrollToken": .string(start > 0 ? "before:\(start)" : "")], to: connection, state: &state)
        case "SendMessage":
            guard let threadID else { return }
            openThread(threadID, customer: customer, data: data, state: &state)
            guard !(state.threads[threadID]!.archived) else {
                state.connections[connection]?.send(operationError(eventID, "InconsistentData", "the thread is archived"))
                return
            }
            let messageID = data["idOnExternalPlatform"]?.stringValue?.lowercased() ?? UUID().uuidString.lowercased()
            send(["eventId": .string(eventID)], to: connection, state: &state)
            if data["messageContent"]?["parameters"]?["isInactivityPopupAnswer"]?.boolValue == true {
                // The answer to an inactivity pop-up: the countdown is reset, or the case closes.
                let postback = data["messageContent"]?["postback"]?.stringValue ?? ""
                state.popupAnswers.append((threadID, postback))
                if postback.range(of: #""isExpired"\s*:\s*true"#, options: .regularExpression) != nil { setStatus("closed", of: threadID, state: &state) }
                return
            }
            if state.threads[threadID]!.messages.contains(where: { $0.id == messageID }) { return }
            if state.threads[threadID]!.status == "closed" { state.threads[threadID]!.status = "new" }
            let message = StoredMessage(
                id: messageID, thread: threadID, direction: "inbound",
                text: data["messageContent"]?["payload"]?["text"]?.stringValue ?? "", createdAt: messageTime(&state), customerID: customer,
                attachments: data["attachments"]?.arrayValue ?? [], content: data["messageContent"]
            )
            if !message.isHidden { state.threads[threadID]!.customerTyping = false }
            appendAndPush(message, state: &state)
            if let position = state.threads[threadID]!.positionInQueue, state.threads[threadID]!.assignee == nil {
                push(["eventId": .string(UUID().uuidString.lowercased()), "eventType": "SetPositionInQueue", "data": ["consumerContact": ["id": .string(state.threads[threadID]!.contactID)], "positionInQueue": .int(Int64(position))]], toCustomer: customer, state: &state)
            }
            if !message.isHidden, let (robot, answer) = state.autoReply, let text = answer(message.text) {
                if state.threads[threadID]!.assignee == nil { robot.assign(threadID, server: self, state: &state) }
                robot.post(text, in: threadID, content: nil, server: self, state: &state)
            }
        case "ArchiveThread":
            guard let threadID else { return }
            guard state.threads[threadID] != nil else {
                // A thread the server never had: refused, as a record that is not there.
                send(["eventId": .string(eventID), "error": ["errorCode": "RecordNotFound", "errorMessage": .string("no thread \(threadID)"), "transactionId": "tx"]], to: connection, state: &state)
                return
            }
            state.threads[threadID]?.archived = true
            reply(eventID, "ThreadArchived", data: nil, to: connection, state: &state)
        case "UpdateThread":
            if let threadID, let name = data["thread"]?["threadName"]?.stringValue { state.threads[threadID]?.name = name }
        case "EndContact":
            guard let threadID, state.threads[threadID] != nil else { return }
            setStatus("closed", of: threadID, state: &state)
        case "SendTranscript":
            reply(eventID, "TranscriptSent", data: nil, to: connection, state: &state)
        case "SendOutbound":
            // The welcome message the customer saw, as the thread's first (agent-side) message.
            guard let threadID, let text = data["messageContent"]?["payload"]?["text"]?.stringValue else { return }
            openThread(threadID, customer: customer, data: data, state: &state)
            let messageID = data["idOnExternalPlatform"]?.stringValue?.lowercased() ?? UUID().uuidString.lowercased()
            guard !state.threads[threadID]!.messages.contains(where: { $0.id == messageID }) else { return }
            appendAndPush(StoredMessage(id: messageID, thread: threadID, direction: "outbound", text: text, createdAt: messageTime(&state)), state: &state)
        case "MessageSeenByCustomer":
            // Every agent message of the thread is seen; each customer's connection is told
            // (`MessageSeenChanged`), so their other devices learn it.
            guard let threadID, let thread = state.threads[threadID] else { return }
            for index in thread.messages.indices where thread.messages[index].direction == "outbound" && thread.messages[index].seenByCustomerAt == nil {
                state.threads[threadID]!.messages[index].seenByCustomerAt = clock.date
                push(
                    [
                        "eventId": .string(UUID().uuidString.lowercased()), "eventType": "MessageSeenChanged", "createdAt": .string(Self.date(clock.date)),
                        "data": ["message": messageJSON(state.threads[threadID]!.messages[index])],
                    ],
                    toCustomer: thread.customerID, state: &state
                )
            }
        case "SenderTypingStarted", "SenderTypingEnded":
            if let threadID, state.threads[threadID] != nil { state.threads[threadID]!.customerTyping = type == "SenderTypingStarted" }
        case "SetContactCustomFields", "SetCustomerCustomFields", "ExecuteTrigger":
            break
        default:
            state.connections[connection]?.send(operationError(eventID, "InconsistentData", "unknown event \(type)"))
        }
    }

    /// The thread a customer's first message (or welcome message) creates.
    /// The custom fields a request carries (protocols/cxone.md §3.8, §3.17, §3.18), kept: the
    /// customer's from `SendMessage` and `SetCustomerCustomFields`, a contact's from `SendMessage`
    /// and `SetContactCustomFields`. An empty value removes a field.
    private func keepCustomFields(_ type: String, data: JSONValue, customer: String, state: inout State) {
        func merge(_ fields: JSONValue?, into target: inout [String: String]) {
            for field in fields?.arrayValue ?? [] {
                guard let ident = field["ident"]?.stringValue, let value = field["value"]?.stringValue else { continue }
                target[ident] = value.isEmpty ? nil : value
            }
        }
        let thread = data["thread"]?["idOnExternalPlatform"]?.stringValue?.lowercased()
        switch type {
        case "SendMessage":
            merge(data["customer"]?["customFields"], into: &state.customerFields[customer, default: [:]])
            if let thread {
                openThread(thread, customer: customer, data: data, state: &state)
                merge(data["contact"]?["customFields"], into: &state.threads[thread]!.contactFields)
            }
        case "SetCustomerCustomFields":
            merge(data["customFields"], into: &state.customerFields[customer, default: [:]])
        case "SetContactCustomFields":
            if let thread, state.threads[thread] != nil { merge(data["customFields"], into: &state.threads[thread]!.contactFields) }
        default:
            break
        }
    }

    static func fieldsJSON(_ fields: [String: String], at date: Date) -> JSONValue {
        .array(fields.sorted { $0.key < $1.key }.map { ["ident": .string($0.key), "value": .string($0.value), "updatedAt": .string(Self.date(date))] })
    }

    private func openThread(_ threadID: String, customer: String, data: JSONValue, state: inout State) {
        guard state.threads[threadID] == nil else { return }
        state.nextID += 1
        state.threads[threadID] = StoredThread(id: threadID, customerID: customer, name: data["thread"]?["threadName"]?.stringValue ?? "", contactID: "contact-\(state.nextID)", positionInQueue: 1)
        state.order.append(threadID)
    }

    /// A proactive `WelcomeMessage` action (`FireProactiveAction`) to every socket of the customer,
    /// as a workflow fires it; returns the action id.
    @discardableResult
    public func fireWelcomeMessage(toCustomer customer: String, bodyText: String, handoverFields: [String: String] = [:]) -> String {
        fireProactiveAction(toCustomer: customer, name: "Welcome", type: "WelcomeMessage", data: [
            "content": ["bodyText": .string(bodyText)],
            "handover": ["customFields": .array(handoverFields.sorted { $0.key < $1.key }.map {
                ["ident": .string($0.key), "value": .string($0.value), "updatedAt": .string(Self.date(clock.date))]
            })],
        ])
    }

    /// A `CustomPopupBox` proactive action (a headline and a body, as a workflow's pop-up);
    /// returns the action id.
    @discardableResult
    public func fireCustomPopup(toCustomer customer: String, headline: String, body: String) -> String {
        fireProactiveAction(toCustomer: customer, name: "Offer", type: "CustomPopupBox", data: [
            "content": ["headlineText": .string(headline), "bodyText": .string(body)],
            "handover": ["customFields": []],
        ])
    }

    private func fireProactiveAction(toCustomer customer: String, name: String, type: String, data: JSONValue) -> String {
        defer { changes.signal() }
        let actionID = UUID().uuidString.lowercased()
        state.withLock { state in
            push([
                "eventId": .string(UUID().uuidString.lowercased()), "eventObject": "ChatWindow", "eventType": "FireProactiveAction",
                "createdAt": .string(Self.date(clock.date)),
                "data": [
                    "destination": ["id": .string(UUID().uuidString)],
                    "proactiveAction": ["action": ["actionId": .string(actionID), "actionName": .string(name), "actionType": .string(type), "data": data]],
                ],
            ], toCustomer: customer, state: &state)
        }
        return actionID
    }

    // MARK: Rendering (lock held)

    func appendAndPush(_ message: StoredMessage, state: inout State) {
        state.threads[message.thread]!.messages.append(message)
        let thread = state.threads[message.thread]!
        let frame: JSONValue = [
            "eventId": .string(UUID().uuidString.lowercased()), "eventObject": "Message", "eventType": "MessageCreated",
            "createdAt": .string(Self.date(message.createdAt)),
            "data": ["brand": ["id": .int(Int64(configuration.brandID))], "channel": ["id": .string(configuration.channelID)], "case": contactJSON(thread),
                     "thread": ["idOnExternalPlatform": .string(thread.id), "threadName": .string(thread.name)], "message": messageJSON(message)],
        ]
        push(frame, toCustomer: thread.customerID, state: &state)
        if state.duplicateMessages > 0 {
            state.duplicateMessages -= 1
            push(frame, toCustomer: thread.customerID, state: &state)
            let sockets = state.connections.values.filter { $0.customerID == thread.customerID }.count
            state.applied[.duplicateEvents] += sockets
            if sockets > 0 { noteFault("duplicateEvents: MessageCreated \(message.id) went out twice to \(sockets) socket(s)", state: &state) }
        }
    }

    /// CXone message times have whole seconds; the emulator gives each message a second of its
    /// own, so that their order survives the resolution.
    func messageTime(_ state: inout State) -> Date {
        let now = Date(timeIntervalSince1970: clock.date.timeIntervalSince1970.rounded(.down))
        let next = state.lastMessageTime.map { max(now, $0.addingTimeInterval(1)) } ?? now
        state.lastMessageTime = next
        return next
    }

    func setStatus(_ status: String, of threadID: String, state: inout State) {
        state.threads[threadID]!.status = status
        let thread = state.threads[threadID]!
        push([
            "eventId": .string(UUID().uuidString.lowercased()), "eventObject": "Case", "eventType": "CaseStatusChanged", "createdAt": .string(Self.date(clock.date)),
            "data": ["brand": ["id": .int(Int64(configuration.brandID))], "channel": ["id": .string(configuration.channelID)], "case": contactJSON(thread)],
        ], toCustomer: thread.customerID, state: &state)
    }

    func threadJSON(_ thread: StoredThread) -> JSONValue {
        ["idOnExternalPlatform": .string(thread.id), "channelId": .string(configuration.channelID), "threadName": .string(thread.name), "canAddMoreMessages": .bool(!thread.archived)]
    }

    func contactJSON(_ thread: StoredThread) -> JSONValue {
        ["id": .string(thread.contactID), "threadIdOnExternalPlatform": .string(thread.id), "status": .string(thread.status), "createdAt": .string(Self.date(clock.date)), "customFields": Self.fieldsJSON(thread.contactFields, at: clock.date)]
    }

    func messageJSON(_ message: StoredMessage) -> JSONValue {
        var object: [String: JSONValue] = [
            "idOnExternalPlatform": .string(message.id), "threadIdOnExternalPlatform": .string(message.thread),
            "messageContent": message.content ?? ["type": "TEXT", "payload": ["text": .string(message.text)]],
            "createdAt": .string(Self.date(message.createdAt)), "direction": .string(message.direction),
            "attachments": .array(message.attachments),
            "userStatistics": ["seenAt": .null, "readAt": message.readAt.map { .string(Self.date($0)) } ?? .null],
            "customerStatistics": ["seenAt": message.seenByCustomerAt.map { .string(Self.date($0)) } ?? .null],
            "authorUser": message.agent ?? .null,
        ]
        if let customer = message.customerID { object["authorEndUserIdentity"] = ["idOnExternalPlatform": .string(customer)] }
        return .object(object)
    }

    /// ISO 8601 without fractional seconds, as the SDK requires.
    static func date(_ date: Date) -> String { date.formatted(wireDate) }

    private static let wireDate = Date.ISO8601FormatStyle()
}

/// An agent acting on a ``CXoneServer``: assigns itself, types, writes, reads, closes, transfers.
public struct CXoneAgentRobot: Sendable {
    public let server: CXoneServer
    let user: JSONValue

    public var id: Int64 { user["id"]?.intValue ?? 0 }

    /// Assigns the agent to the thread's case (`CaseInboxAssigneeChanged`) and opens it.
    public func assign(_ thread: String) {
        change(thread) { server, id, state in assign(id, server: server, state: &state) }
    }

    func assign(_ id: String, server: CXoneServer, state: inout CXoneServer.State, previous: JSONValue = .null) {
        state.threads[id]!.assignee = user
        state.threads[id]!.positionInQueue = nil
        state.threads[id]!.status = "open"
        let stored = state.threads[id]!
        server.push([
            "eventId": .string(UUID().uuidString.lowercased()), "eventObject": "Case", "eventType": "CaseInboxAssigneeChanged", "createdAt": .string(CXoneServer.date(server.clock.date)),
            "data": ["case": server.contactJSON(stored), "inboxAssignee": user, "previousInboxAssignee": previous],
        ], toCustomer: stored.customerID, state: &state)
    }

    /// Hands the thread's case to `other` (`CaseInboxAssigneeChanged` with this agent as the
    /// previous assignee).
    public func transfer(_ thread: String, to other: CXoneAgentRobot) {
        change(thread) { server, id, state in other.assign(id, server: server, state: &state, previous: user) }
    }

    public func typing(_ isTyping: Bool, in thread: String) {
        change(thread) { server, id, state in
            state.threads[id]!.agentTyping = isTyping
            let stored = state.threads[id]!
            server.push([
                "eventId": .string(UUID().uuidString.lowercased()), "eventObject": "SenderAction", "eventType": .string(isTyping ? "SenderTypingStarted" : "SenderTypingEnded"),
                "createdAt": .string(CXoneServer.date(server.clock.date)),
                "data": ["brand": ["id": .int(Int64(server.configuration.brandID))], "channel": ["id": .string(server.configuration.channelID)], "thread": ["idOnExternalPlatform": .string(id), "threadName": .string(stored.name)], "user": user],
            ], toCustomer: stored.customerID, state: &state)
        }
    }

    /// Writes a message; `content` replaces plain text with rich content.
    @discardableResult
    public func send(_ text: String, in thread: String, content: JSONValue? = nil) -> String {
        var messageID = ""
        change(thread) { server, id, state in messageID = post(text, in: id, content: content, server: server, state: &state) }
        return messageID
    }

    /// Writes a message with a file and no text, as CXone carries one: an `attachments` entry
    /// (`url`, `friendlyName`, `mimeType`, `fileName`). The bytes are kept with ``CXoneServer/uploads``
    /// under the id in the URL. Returns the message id.
    @discardableResult
    public func sendFile(named name: String, contentType: String, data: Data, in thread: String) -> String {
        var messageID = ""
        change(thread) { server, id, state in
            state.nextID += 1
            let file = "file-\(state.nextID)"
            state.uploads[file] = data
            var allowed = CharacterSet.urlPathAllowed
            allowed.remove("/")
            let path = name.addingPercentEncoding(withAllowedCharacters: allowed) ?? file
            let attachment: JSONValue = [
                "url": .string("https://files.emulator/\(file)/\(path)"), "friendlyName": .string(name), "mimeType": .string(contentType), "fileName": .string(name),
            ]
            messageID = post("", in: id, content: nil, attachments: [attachment], server: server, state: &state)
        }
        return messageID
    }

    @discardableResult
    func post(_ text: String, in id: String, content: JSONValue?, attachments: [JSONValue] = [], server: CXoneServer, state: inout CXoneServer.State) -> String {
        let messageID = UUID().uuidString.lowercased()
        state.threads[id]!.agentTyping = false
        server.appendAndPush(
            CXoneServer.StoredMessage(
                id: messageID, thread: id, direction: "outbound", text: text, createdAt: server.messageTime(&state), agent: user, attachments: attachments, content: content
            ),
            state: &state
        )
        return messageID
    }

    /// Reads every customer message (`MessageReadChanged`).
    public func markRead(_ thread: String) {
        change(thread) { server, id, state in
            for index in state.threads[id]!.messages.indices where state.threads[id]!.messages[index].direction == "inbound" && state.threads[id]!.messages[index].readAt == nil {
                state.threads[id]!.messages[index].readAt = server.clock.date
                let message = state.threads[id]!.messages[index]
                server.push([
                    "eventId": .string(UUID().uuidString.lowercased()), "eventObject": "Message", "eventType": "MessageReadChanged", "createdAt": .string(CXoneServer.date(server.clock.date)),
                    "data": ["brand": ["id": .int(Int64(server.configuration.brandID))], "message": server.messageJSON(message)],
                ], toCustomer: state.threads[id]!.customerID, state: &state)
            }
        }
    }

    /// The workflow's inactivity pop-up (a `PLUGIN` message with an `INACTIVITY_POPUP` element):
    /// a countdown of `seconds`, a button that keeps the chat (`"isExpired": false`) and one that
    /// ends it. Returns the message id.
    @discardableResult
    public func sendInactivityPopup(in thread: String, seconds: Int = 60) -> String {
        var messageID = ""
        change(thread) { server, id, state in
            func element(_ type: String, _ fields: [String: JSONValue]) -> JSONValue {
                .object(fields.merging(["id": .string(UUID().uuidString.lowercased()), "type": .string(type)]) { old, _ in old })
            }
            let content: JSONValue = [
                "type": "PLUGIN",
                "payload": ["elements": [element("INACTIVITY_POPUP", ["elements": [
                    element("TITLE", ["text": "Are you still there?"]),
                    element("TEXT", ["text": "This chat will end soon because nobody wrote for a while."]),
                    element("TEXT", ["text": "Do you want to keep chatting?"]),
                    element("COUNTDOWN", ["variables": ["startedAt": .string(CXoneServer.date(server.clock.date)), "numberOfSeconds": .int(Int64(seconds))]]),
                    element("BUTTON", ["text": "Yes, keep chatting", "postback": #"{"isExpired":false}"#]),
                    element("BUTTON", ["text": "No, end the chat", "postback": #"{"isExpired":true}"#]),
                ]])]],
                "fallbackText": "Are you still there?",
            ]
            messageID = post("", in: id, content: content, server: server, state: &state)
        }
        return messageID
    }

    /// Closes the case (`CaseStatusChanged` closed).
    public func close(_ thread: String) {
        change(thread) { server, id, state in server.setStatus("closed", of: id, state: &state) }
    }

    private func change(_ thread: String, _ body: (CXoneServer, String, inout CXoneServer.State) -> Void) {
        defer { server.changes.signal() }
        server.state.withLock { state in
            let id = thread.lowercased()
            guard state.threads[id] != nil else { return }
            body(server, id, &state)
        }
    }
}
