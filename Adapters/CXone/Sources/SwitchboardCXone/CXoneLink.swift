import Foundation
import Logging
import Switchboard
import SwitchboardTransport
import Synchronization

/// One CXone WebSocket: authorization, thread recovery or listing, requests matched to replies
/// by `eventId`, push events as updates, the heartbeat, and large events fetched from S3.
///
/// The lock guards the known threads and the credentials; `replies` holds the requests waiting.
final class CXoneLink: BackendConnection {
    struct Thread {
        var name: String?
        var contactID: String?
        var scrollToken: String?
        /// The oldest message loaded (recovery, then each older page): `LoadMoreMessages` names it.
        var oldestLoaded: Date?
        var closed = false
        /// The customer has sent into it: the server knows it.
        var sent = false
        /// Live chat: the hidden "Begin Conversation" went out.
        var begun = false
    }

    private struct State {
        var threads: [String: Thread] = [:]
        var credentials: Credentials
        var lastPong: Duration = .zero
        var ended: SwitchboardError?
        var contactFields: [String: [String: String]] = [:]
        /// The customer's custom fields as this link knows them: set by the app, handed over by a
        /// welcome message. Welcome-message variables are filled from them.
        var customerFields: [String: String] = [:]
        var refreshingToken = false
        /// Until the threads are recovered, pushed events wait here and follow the recovery: a
        /// message pushed before the recovery answers must not land before the window that shows
        /// what was missed, or the window looks already stored and the gap below it goes unseen.
        var recovering = true
        var pushedWhileRecovering: [BackendUpdate] = []
    }

    let updates: AsyncThrowingStream<BackendUpdate, any Error>
    private let continuation: AsyncThrowingStream<BackendUpdate, any Error>.Continuation
    private let configuration: CXoneConfiguration
    private let channel: CXoneChannelConfiguration
    private let transport: HTTPTransport
    private let context: ConnectionContext
    private let state: Mutex<State>
    /// A reply: the event type (`nil` for a bare acknowledgment) and the frame.
    struct Reply: Sendable {
        var type: String?
        var frame: JSONValue
    }

    private let replies = PendingReplies<Reply>()
    private let url: String
    /// The SDK makes a new destination id on every prepare; here, on every link.
    private let destinationID = UUID().uuidString.lowercased()

    private init(configuration: CXoneConfiguration, channel: CXoneChannelConfiguration, transport: HTTPTransport, context: ConnectionContext, credentials: Credentials, url: String) {
        (updates, continuation) = AsyncThrowingStream.makeStream(of: BackendUpdate.self)
        self.configuration = configuration
        self.channel = channel
        self.transport = transport
        self.context = context
        self.state = Mutex(State(credentials: credentials))
        self.url = url
    }

    /// Prepares a link: ids, the transaction token for secured sessions, the socket URL.
    static func open(configuration: CXoneConfiguration, channel: CXoneChannelConfiguration, transport: HTTPTransport, context: ConnectionContext) async throws -> CXoneLink {
        var credentials = context.credentials
        // The session merges credentials, so a cleared one (sign-out) is stored as "".
        credentials.values = credentials.values.filter { !$0.value.isEmpty }
        if credentials["visitor-id"] == nil { credentials["visitor-id"] = UUID().uuidString.lowercased() }
        if credentials["customer-id"] == nil { credentials["customer-id"] = configuration.customerID ?? UUID().uuidString.lowercased() }
        await putVisitor(configuration: configuration, transport: transport, credentials: credentials)
        var token: String?
        if channel.isEnabled("securedSessions") {
            token = try await transactionToken(configuration: configuration, channel: channel, transport: transport, credentials: &credentials, now: context.clock.date)
        }
        let url = try configuration.environment.webSocketURL(
            brandID: configuration.brandID, channelID: configuration.channelID, visitorID: credentials["visitor-id"]!, transactionToken: token
        )
        let link = CXoneLink(configuration: configuration, channel: channel, transport: transport, context: context, credentials: credentials, url: url)
        link.continuation.yield(.credentials(credentials))
        return link
    }

    /// H3: `PUT {chatHost}/web-analytics/1.0/tenants/{brand}/visitors/{visitor}` with the customer
    /// and the device fingerprint. The SDK ignores the answer; so does the link.
    private static func putVisitor(configuration: CXoneConfiguration, transport: HTTPTransport, credentials: Credentials) async {
        guard let visitor = credentials["visitor-id"], let customer = credentials["customer-id"],
            let url = URL(string: "/web-analytics/1.0/tenants/\(configuration.brandID)/visitors/\(visitor)", relativeTo: URL(string: configuration.environment.chatURL))
        else { return }
        let body: JSONValue = [
            "customerIdentity": ["idOnExternalPlatform": .string(customer)],
            "browserFingerprint": fingerprint(configuration),
        ]
        _ = try? await transport.postJSON(url.absoluteString, body: body, method: "PUT", headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
    }

    /// The device fingerprint of visitor records and messages, with the push token when there is one.
    static func fingerprint(_ configuration: CXoneConfiguration) -> JSONValue {
        var fingerprint: [String: JSONValue] = ["applicationType": "native", "os": "Linux", "deviceType": "mobile"]
        if let token = configuration.deviceToken { fingerprint["deviceToken"] = .string(token) }
        return .object(fingerprint)
    }

    /// H6: `POST {tokenURL}oauth/token?channelId&brandId&visitorId`, unless the stored transaction
    /// token has more than 30 s left (§4.4). A third-party OAuth token that has expired needs a
    /// new authorization code: `authenticationFailed`, vendor code `transactionTokenExpired`.
    private static func transactionToken(
        configuration: CXoneConfiguration,
        channel: CXoneChannelConfiguration,
        transport: HTTPTransport,
        credentials: inout Credentials,
        now: Date
    ) async throws -> String {
        if let stored = credentials["transaction-token"], let expiresAt = credentials["transaction-token-expires-at"].flatMap(Double.init) {
            if now.timeIntervalSince1970 + 30 < expiresAt { return stored }
            if channel.authenticationType == .thirdPartyOAuth {
                throw SwitchboardError(.authenticationFailed, "the transaction token has expired: authorize again", vendorCode: "transactionTokenExpired")
            }
        }
        let body: JSONValue
        switch channel.authenticationType {
        case .anonymous: body = ["type": "anonymous", "customerIdentity": ["idOnExternalPlatform": .string(credentials["customer-id"]!)]]
        case .securedCookie: body = [:]
        case .thirdPartyOAuth:
            guard let code = configuration.authorizationCode, let verifier = configuration.codeVerifier else {
                throw SwitchboardError(.authenticationFailed, "third-party OAuth needs an authorization code and a code verifier", vendorCode: "authorizationCode")
            }
            body = ["thirdParty": ["grant_type": "authorization_code", "authorization_code": .string(code), "code_verifier": .string(verifier)]]
        }
        let json = try await postToken(body, configuration: configuration, transport: transport, visitorID: credentials["visitor-id"]!, failure: "transactionTokenRequestFailed")
        guard let token = json["accessToken"]?.stringValue else {
            throw SwitchboardError(.authenticationFailed, "transaction token: no accessToken", vendorCode: "transactionTokenRequestFailed")
        }
        credentials["transaction-token"] = token
        credentials["transaction-token-expires-at"] = String(now.timeIntervalSince1970 + Double(json["expiresIn"]?.intValue ?? 0))
        if let customer = json["customerIdentity"]?["idOnExternalPlatform"]?.stringValue { credentials["customer-id"] = customer }
        if let thirdParty = json["thirdParty"]?.nonNull { keepThirdParty(thirdParty, in: &credentials, now: now) }
        return token
    }

    /// The third-party access token goes out as `accessToken.token`; its refresh token and expiry
    /// are kept for H7.
    private static func keepThirdParty(_ json: JSONValue, in credentials: inout Credentials, now: Date) {
        if let access = json["access_token"]?.stringValue { credentials["access-token"] = access }
        if let refresh = json["refresh_token"]?.stringValue { credentials["oauth-refresh-token"] = refresh }
        if let lifetime = json["expires_in"]?.intValue { credentials["access-token-expires-at"] = String(now.timeIntervalSince1970 + Double(lifetime)) }
    }

    private static func postToken(_ body: JSONValue, configuration: CXoneConfiguration, transport: HTTPTransport, visitorID: String, failure: String) async throws -> JSONValue {
        let tokenURL = configuration.environment.tokenURL
        guard !tokenURL.isEmpty else { throw SwitchboardError(.invalidArgument, "secured sessions need a token URL", vendorCode: "tokenServerUrl") }
        let query = "?channelId=\(configuration.channelID)&brandId=\(configuration.brandID)&visitorId=\(visitorID)"
        let response = try await transport.postJSON(tokenURL + "oauth/token" + query, body: body, headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
        if response.status >= 500 {
            // The token server failed, not the credentials: the engine's backoff retries.
            throw SwitchboardError(.serverError, "oauth/token: HTTP \(response.status)", vendorCode: failure)
        }
        guard (200..<300).contains(response.status), let json = try? JSONValue(parsing: response.body) else {
            throw SwitchboardError(.authenticationFailed, "oauth/token: HTTP \(response.status)", vendorCode: failure)
        }
        return json
    }

    private var identity: CXoneWire.Identity {
        state.withLock { state in
            CXoneWire.Identity(
                brandID: configuration.brandID, channelID: configuration.channelID, customerID: state.credentials["customer-id"] ?? "",
                firstName: configuration.firstName, lastName: configuration.lastName, visitorID: state.credentials["visitor-id"]
            )
        }
    }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        try await WebSocketTransport.withTextWebSocket(
            url: url, configuration: .init(allowsPlainText: configuration.allowsPlainText), logger: context.logger
        ) { socket in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.read(socket) }
                group.addTask { await self.heartbeat(socket) }
                defer { group.cancelAll() }
                if !channel.isEnabled("securedSessions") { try await authorize(socket) }
                try await loadThreads(socket)
                state.withLock { state in
                    for update in state.pushedWhileRecovering { continuation.yield(update) }
                    state.pushedWhileRecovering = []
                    state.recovering = false
                }
                return try await body(Sender(link: self, socket: socket))
            }
        }
    }

    /// A `BackendConnection` bound to the open socket.
    private struct Sender: BackendConnection {
        let link: CXoneLink
        let socket: TextWebSocket
        var updates: AsyncThrowingStream<BackendUpdate, any Error> { link.updates }
        func perform(_ request: BackendRequest) async throws -> BackendResponse { try await link.perform(request, socket: socket) }
    }

    func perform(_ request: BackendRequest) async throws -> BackendResponse {
        throw SwitchboardError(.notConnected, "the CXone link is not open")
    }

    // MARK: Inbound

    private func read(_ socket: TextWebSocket) async {
        do {
            for try await text in socket.messages { await route(text) }
            end(SwitchboardError(.connectionLost, "the server closed the WebSocket"))
        } catch {
            end(SwitchboardError.classify(error))
        }
    }

    private func route(_ text: String) async {
        switch CXoneWire.classify(text) {
        case .pong:
            state.withLock { $0.lastPong = context.clock.now }
        case .serverError(let message):
            continuation.yield(.problem(SwitchboardError(.serverError, "server error: \(message)")))
        case .operationError(let eventID, let error):
            if !replies.fail(eventID, { _ in error }) {
                continuation.yield(.problem(error))
            }
        case .event(let eventID, let type, let frame):
            if replies.resolve(eventID, with: Reply(type: type, frame: frame)) { return }
            guard type != nil else {
                // A bare acknowledgment (`{"eventId": …}`) no request waits for any more (it timed
                // out, or the request did not wait) is nothing; a frame with content but no event
                // type is not one of the protocol's.
                let content = frame.objectValue?.filter { $0.key != "eventId" && $0.value != .null } ?? [:]
                if !content.isEmpty {
                    continuation.yield(.problem(SwitchboardError(.protocolViolation, "dropped a frame without an eventType that answers no request")))
                }
                return
            }
            await apply(frame, type: type)
        case .unrecognized(let reason):
            continuation.yield(.problem(SwitchboardError(.protocolViolation, "dropped a frame: \(reason)")))
        }
    }

    /// A push event (or a reply the link handles itself).
    private func apply(_ frame: JSONValue, type: String?, thread: ConversationID? = nil) async {
        var thread = thread
        if type == "SetPositionInQueue", let contact = frame["data"]?["consumerContact"]?["id"]?.stringValue {
            thread = state.withLock { $0.threads.first { $0.value.contactID == contact }.map { ConversationID($0.key) } }
        }
        if type == "FireProactiveAction" { receiveProactiveAction(frame["data"] ?? .null) }
        do {
            switch try CXoneMapping.outcome(of: frame, type: type, thread: thread) {
            case .updates(let updates):
                for var update in updates {
                    if case .credentials(var credentials) = update, let lifetime = credentials["access-token-expires-in"].flatMap(Double.init) {
                        // Kept as a date, so the expiry survives reconnects (ReconnectCustomer brings none).
                        credentials["access-token-expires-at"] = String(context.clock.date.timeIntervalSince1970 + lifetime)
                        update = .credentials(credentials)
                    }
                    remember(update, frame: frame)
                    yieldPushed(update)
                }
                if channel.mode == .liveChat { openNewThreadIfAllClosed() }
            case .download(let url, _):
                let target = url.scheme == nil ? URL(string: url.absoluteString, relativeTo: URL(string: configuration.environment.chatURL))!.absoluteURL : url
                let response = try await transport.get(target.absoluteString, timeout: configuration.replyTimeout)
                guard (200..<300).contains(response.status) else { throw SwitchboardError(.serverError, "EventInS3: HTTP \(response.status)") }
                await route(String(decoding: response.body, as: UTF8.self))
            case .moreMessages:
                break
            }
        } catch {
            continuation.yield(.problem(error as? SwitchboardError ?? SwitchboardError(.protocolViolation, "undecodable \(type ?? "event")")))
        }
    }

    /// Yields a pushed update, or keeps an event for after the recovery (see `State.recovering`).
    /// Under the lock, so one that arrives as the recovery ends cannot overtake the kept ones.
    private func yieldPushed(_ update: BackendUpdate) {
        state.withLock { state in
            if state.recovering, case .event = update {
                state.pushedWhileRecovering.append(update)
            } else {
                continuation.yield(update)
            }
        }
    }

    /// Keeps what later requests need: contact ids, scroll tokens, names, closed threads.
    private func remember(_ update: BackendUpdate, frame: JSONValue) {
        state.withLock { state in
            switch update {
            case .snapshot(let snapshot):
                for item in snapshot.conversations {
                    var thread = state.threads[item.conversation.id.rawValue] ?? Thread()
                    thread.name = item.conversation.title
                    thread.closed = item.conversation.state.isClosed
                    if let contact = item.conversation.customData?["contactId"]?.stringValue { thread.contactID = contact }
                    if let token = item.conversation.customData?["scrollToken"]?.stringValue { thread.scrollToken = token }
                    if let oldest = item.messages.map(\.time).min() { thread.oldestLoaded = min(oldest, thread.oldestLoaded ?? oldest) }
                    state.threads[item.conversation.id.rawValue] = thread
                }
            case .credentials(let credentials):
                state.credentials.values.merge(credentials.values) { _, new in new }
            case .event(let event):
                if case .custom(CXoneMapping.customerFieldsEvent, let fields) = event.kind {
                    // What the server has; a field this link set since is newer.
                    let server = (fields.objectValue ?? [:]).compactMapValues(\.stringValue)
                    state.customerFields = server.merging(state.customerFields) { _, local in local }
                    return
                }
                guard let id = event.conversationID?.rawValue else { return }
                if let contact = frame["data"]?["case"]?["id"]?.stringValue { state.threads[id, default: Thread()].contactID = contact }
                if case .conversationStateChanged(let new, _) = event.kind { state.threads[id, default: Thread()].closed = new.isClosed }
            default:
                break
            }
        }
    }

    private func end(_ error: SwitchboardError) {
        state.withLock { state in
            if state.ended == nil { state.ended = error }
        }
        replies.close(error)
        continuation.finish(throwing: error)
    }

    /// `{"action":"heartbeat"}` every interval; `"pong"` must come within the pong timeout.
    private func heartbeat(_ socket: TextWebSocket) async {
        do {
            while true {
                try await context.clock.sleep(for: configuration.heartbeatInterval)
                let sent = context.clock.now
                try await socket.send(CXoneWire.heartbeat.jsonString)
                try await context.clock.sleep(for: configuration.pongTimeout)
                if state.withLock({ $0.lastPong }) < sent {
                    end(SwitchboardError(.timedOut, "no pong within \(configuration.pongTimeout)"))
                    return
                }
            }
        } catch {
            return
        }
    }

    // MARK: Requests

    /// Sends one event; waits for the reply with the same `eventId` when `awaitReply`.
    @discardableResult
    private func send(_ eventType: String, data: JSONValue? = nil, destination: String? = nil, awaitReply: Bool, socket: TextWebSocket) async throws -> Reply? {
        if let ended = state.withLock({ $0.ended }) { throw ended }
        if !Self.authorizationEvents.contains(eventType) { try await refreshTokenIfDue(socket) }
        let eventID = UUID().uuidString.lowercased()
        let text = CXoneWire.event(eventType, eventID: eventID, identity: identity, data: data, destination: destination).jsonString
        guard awaitReply else {
            try await socket.send(text)
            return nil
        }
        let timeout = configuration.replyTimeout
        return try await replies.request(
            eventID,
            label: eventType,
            timeout: timeout,
            clock: context.clock,
            timedOut: { SwitchboardError(.timedOut, "\(eventType): no reply within \(timeout)", vendorCode: "eventTimeout") },
            send: { try await socket.send(text) }
        )
    }

    /// What sign-out forgets.
    static let customerCredentials = [
        "customer-id", "visitor-id", "access-token", "access-token-expires-in", "access-token-expires-at", "thread-id",
        "visit-id", "visit-expires", "page-title", "page-url", "page-since",
        "transaction-token", "transaction-token-expires-at", "oauth-refresh-token",
        "local-thread",
    ] + welcomeCredentials

    private static let authorizationEvents: Set<String> = ["AuthorizeCustomer", "ReconnectCustomer", "RefreshToken"]

    /// §4.4: before a send, a token within 30 s of its expiry is refreshed: legacy tokens with
    /// `RefreshToken` (`TokenRefreshed` brings the new one), third-party OAuth tokens with H7.
    /// One refresh at a time.
    private func refreshTokenIfDue(_ socket: TextWebSocket) async throws {
        let secured = channel.isEnabled("securedSessions")
        guard !secured || channel.authenticationType == .thirdPartyOAuth else { return }
        let now = context.clock.date
        let due = state.withLock { state -> (token: String, refresh: String?)? in
            guard !state.refreshingToken, let token = state.credentials["access-token"], !token.isEmpty,
                let expiresAt = state.credentials["access-token-expires-at"].flatMap(Double.init), now.timeIntervalSince1970 + 30 >= expiresAt
            else { return nil }
            state.refreshingToken = true
            return (token, state.credentials["oauth-refresh-token"])
        }
        guard let due else { return }
        defer { state.withLock { $0.refreshingToken = false } }
        if secured {
            // H7: the third-party access token, refreshed over HTTP.
            guard let refresh = due.refresh, let visitor = state.withLock({ $0.credentials["visitor-id"] }) else {
                throw SwitchboardError(.authenticationFailed, "no refresh token", vendorCode: "refreshToken")
            }
            let json = try await Self.postToken(
                ["thirdParty": ["grant_type": "refresh_token", "refresh_token": .string(refresh)]],
                configuration: configuration, transport: transport, visitorID: visitor, failure: "tokenRefreshingFailed"
            )
            var kept = Credentials()
            Self.keepThirdParty(json, in: &kept, now: now)
            state.withLock { $0.credentials.values.merge(kept.values) { _, new in new } }
            continuation.yield(.credentials(kept))
            return
        }
        guard let reply = try await send("RefreshToken", data: ["accessToken": ["token": .string(due.token)]], awaitReply: true, socket: socket) else { return }
        await apply(reply.frame, type: reply.type)
    }

    /// The legacy flow: ReconnectCustomer with a stored token, else AuthorizeCustomer.
    private func authorize(_ socket: TextWebSocket) async throws {
        if let token = state.withLock({ $0.credentials["access-token"] }) {
            do {
                try await send("ReconnectCustomer", data: ["accessToken": ["token": .string(token)]], awaitReply: true, socket: socket)
                return
            } catch let error as SwitchboardError where error.code == .authenticationFailed {
                state.withLock { $0.credentials["access-token"] = nil }
            }
        }
        var data: JSONValue = ["disableChannelInfo": true, "sdkPlatform": "ios", "sdkVersion": .string(CXoneWire.sdkVersion)]
        if configuration.authorizationCode != nil || configuration.codeVerifier != nil, case .object(var object) = data {
            object["authorization"] = ["authorizationCode": .string(configuration.authorizationCode ?? ""), "codeVerifier": .string(configuration.codeVerifier ?? "")]
            data = .object(object)
        }
        guard let reply = try await send("AuthorizeCustomer", data: data, awaitReply: true, socket: socket) else { return }
        await apply(reply.frame, type: reply.type)
    }

    /// Multi-thread: the thread list, then each thread's metadata; otherwise: recover the thread.
    private func loadThreads(_ socket: TextWebSocket) async throws {
        switch channel.mode {
        case .multiThread:
            guard let list = try await send("FetchThreadList", awaitReply: true, socket: socket) else { return }
            guard var listing = Self.snapshot(in: list.frame, type: list.type) else {
                await apply(list.frame, type: list.type)
                return
            }
            remember(.snapshot(listing), frame: list.frame)
            // Recover the open threads (the SDK's load(with:)): their recent messages catch the
            // session up on what it missed while away, and give each thread its scroll token and
            // agent. The list and the recoveries go out as one snapshot, so the session never
            // sees a thread without its agent in between.
            let open = listing.conversations.filter { !$0.conversation.state.isClosed }.map(\.conversation.id.rawValue).sorted()
            for id in open.prefix(20) {
                let reply: Reply?
                do {
                    reply = try await send("RecoverThread", data: ["thread": ["idOnExternalPlatform": .string(id)]], awaitReply: true, socket: socket)
                } catch let error as SwitchboardError where error.code == .conversationNotFound {
                    continue
                }
                guard let reply, let recovered = Self.snapshot(in: reply.frame, type: reply.type) else {
                    if let reply { await apply(reply.frame, type: reply.type) }
                    continue
                }
                remember(.snapshot(recovered), frame: reply.frame)
                for item in recovered.conversations {
                    if let index = listing.conversations.firstIndex(where: { $0.conversation.id == item.conversation.id }) {
                        listing.conversations[index] = item
                    }
                }
            }
            continuation.yield(.snapshot(listing))
            // The open threads past the first 20 get their metadata instead (§3.6): the last
            // message and the owner; their messages come when the app opens or pages them.
            for id in open.dropFirst(20) {
                if let reply = try await send("LoadThreadMetadata", data: ["thread": ["idOnExternalPlatform": .string(id)]], awaitReply: true, socket: socket) {
                    await apply(reply.frame, type: reply.type)
                }
            }
        case .singleThread, .liveChat:
            let cached = state.withLock { $0.credentials["thread-id"] }
            let data: JSONValue? = cached.map { ["thread": ["idOnExternalPlatform": .string($0)]] }
            do {
                if let reply = try await send(channel.mode == .liveChat ? "RecoverLivechat" : "RecoverThread", data: data, awaitReply: true, socket: socket) {
                    await apply(reply.frame, type: reply.type)
                }
            } catch let error as SwitchboardError where error.code == .conversationNotFound {
                // RecoveringThreadFailed: nothing to recover.
            }
            openNewThreadIfAllClosed(reuseLocal: true)
            // The SDK's automatic create(): a live chat starts at once, so an agent sees it.
            if channel.mode == .liveChat, let local = state.withLock({ $0.credentials["local-thread"] }), !local.isEmpty {
                try await beginLiveChatIfNeeded(local, socket: socket)
            }
        }
    }

    /// §3.8: a live chat's create() sends the hidden `"Begin Conversation"` (`isInitialMessage`),
    /// which opens the contact so an agent sees the customer before they write; the customer's
    /// side never shows it. After the agent closes a chat, the next one begins with the
    /// customer's first message.
    private func beginLiveChatIfNeeded(_ id: String, socket: TextWebSocket) async throws {
        guard channel.mode == .liveChat else { return }
        let (thread, token) = state.withLock { ($0.threads[id], $0.credentials["access-token"]) }
        guard let thread, !thread.begun, !thread.sent, !thread.closed else { return }
        var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(id)]
        if let name = thread.name { threadJSON["threadName"] = .string(name) }
        try await sendWelcomeIfPending(in: id, threadJSON: .object(threadJSON), contactFields: [], token: token, socket: socket)
        try await sendMessage(
            in: .object(threadJSON), messageID: UUID().uuidString.lowercased(), text: "Begin Conversation", postback: .null,
            parameters: ["isInitialMessage": true], contactFields: [], attachments: [], token: token, socket: socket
        )
        state.withLock { state in
            state.threads[id]?.begun = true
            state.threads[id]?.sent = true
        }
        var known: [String: String] = ["thread-id": id]
        if state.withLock({ $0.credentials["local-thread"] == id }) { known["local-thread"] = "" }
        keep(known)
    }

    /// As the SDK's create(): with no open thread (none yet, or the live chat just closed), a
    /// local one waits for the customer's next message, which creates it on the server. After a
    /// reconnect, the local thread the customer never wrote in is the same one again
    /// (`reuseLocal`), so the session does not collect empty threads.
    private func openNewThreadIfAllClosed(reuseLocal: Bool = false) {
        let id = state.withLock { state -> String? in
            guard !state.threads.values.contains(where: { !$0.closed }) else { return nil }
            var id = UUID().uuidString.lowercased()
            if reuseLocal, let local = state.credentials["local-thread"], !local.isEmpty, state.threads[local] == nil { id = local }
            state.threads[id] = Thread()
            return id
        }
        guard let id else { return }
        keep(["thread-id": id, "local-thread": id])
        announceLocalThread(ConversationInfo(id: ConversationID(id), kind: .thread, state: .queued))
    }

    /// A thread only this client knows yet, with the stored welcome message in it, if any.
    private func announceLocalThread(_ info: ConversationInfo) {
        let welcome = welcomeMessage(for: info.id.rawValue)
        continuation.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info, messages: welcome.map { [$0] } ?? [])], isComplete: false)))
    }

    // MARK: Welcome messages

    /// `FireProactiveAction`: a welcome message is kept for the threads to come (as the SDK keeps
    /// it) and put into the current local thread if the customer has not written there yet; its
    /// handover fields join the customer's fields. Other actions stay events for the app.
    private func receiveProactiveAction(_ data: JSONValue) {
        do {
            guard let welcome = try CXoneWelcomeMessage(proactiveActionData: data) else { return }
            let pending = state.withLock { state -> String? in
                state.customerFields.merge(welcome.handoverFields) { _, new in new }
                guard let current = state.credentials["thread-id"], let thread = state.threads[current],
                    !thread.sent, !thread.closed, thread.contactID == nil
                else { return nil }
                return current
            }
            keep(["welcome-message": welcome.bodyText])
            if let pending, let message = welcomeMessage(for: pending) {
                continuation.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: message.conversationID)))
            }
        } catch {
            continuation.yield(.problem(error as? SwitchboardError ?? SwitchboardError(.protocolViolation, "FireProactiveAction: \(error)")))
        }
    }

    /// The stored welcome message, its variables filled, as the agent's first message of
    /// `thread`; remembered so the first send of that thread brings it to the server.
    private func welcomeMessage(for thread: String) -> Message? {
        let made = state.withLock { state -> (id: String, text: String, isNew: Bool)? in
            guard let body = state.credentials["welcome-message"], !body.isEmpty else { return nil }
            if state.credentials["welcome-thread"] == thread, let id = state.credentials["welcome-id"], !id.isEmpty, let text = state.credentials["welcome-text"] {
                // The same thread again (after a reconnect): the same message.
                return (id, text, false)
            }
            let text = CXoneWelcomeMessage.fill(body, firstName: configuration.firstName, lastName: configuration.lastName, customerFields: state.customerFields)
            return (UUID().uuidString.lowercased(), text, true)
        }
        guard let made else { return nil }
        if made.isNew { keep(["welcome-thread": thread, "welcome-id": made.id, "welcome-text": made.text]) }
        return Message(
            serverID: MessageID(made.id), conversationID: ConversationID(thread), senderRole: .agent, kind: .text, text: made.text,
            payload: ["welcomeMessage": true], time: context.clock.date
        )
    }

    /// §3.9: before the first message of the thread holding the welcome message, `SendOutbound`
    /// gives the server the welcome message; the stored one is then spent.
    private func sendWelcomeIfPending(in thread: String, threadJSON: JSONValue, contactFields: JSONValue, token: String?, socket: TextWebSocket) async throws {
        let welcome = state.withLock { state -> (id: String, text: String)? in
            guard state.credentials["welcome-thread"] == thread, let id = state.credentials["welcome-id"], !id.isEmpty,
                let text = state.credentials["welcome-text"]
            else { return nil }
            return (id, text)
        }
        guard let welcome else { return }
        var data: [String: JSONValue] = [
            "thread": threadJSON,
            "messageContent": ["type": "TEXT", "payload": ["text": .string(welcome.text)]],
            "idOnExternalPlatform": .string(welcome.id),
            "consumerContact": ["customFields": contactFields],
            "attachments": [],
            "browserFingerprint": Self.fingerprint(configuration),
        ]
        if let token { data["accessToken"] = ["token": .string(token)] }
        try await send("SendOutbound", data: .object(data), awaitReply: false, socket: socket)
        keep(Self.cleared(Self.welcomeCredentials))
    }

    static let welcomeCredentials = ["welcome-message", "welcome-thread", "welcome-id", "welcome-text"]

    /// Sets credentials on the link and hands exactly those to the session's store (`""` clears).
    private func keep(_ values: [String: String]) {
        state.withLock { $0.credentials.values.merge(values) { _, new in new } }
        continuation.yield(.credentials(Credentials(values)))
    }

    /// `keys` set to `""`: what forgetting them looks like to ``keep(_:)``.
    static func cleared(_ keys: [String]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: keys.map { ($0, "") })
    }

    /// The snapshot a `ThreadListFetched` or `ThreadRecovered` reply decodes to; `nil` for any
    /// other reply (an `EventInS3`, say), which then goes through ``apply(_:type:thread:)``.
    private static func snapshot(in frame: JSONValue, type: String?) -> BackendSnapshot? {
        guard case .updates(let updates)? = try? CXoneMapping.outcome(of: frame, type: type, thread: nil), updates.count == 1,
            case .snapshot(let snapshot) = updates[0]
        else { return nil }
        return snapshot
    }

    /// `RecoverThread` for one thread; a thread the server does not know is skipped.
    private func recover(_ id: String, socket: TextWebSocket) async throws {
        do {
            if let reply = try await send("RecoverThread", data: ["thread": ["idOnExternalPlatform": .string(id)]], awaitReply: true, socket: socket) {
                await apply(reply.frame, type: reply.type)
            }
        } catch let error as SwitchboardError where error.code == .conversationNotFound {
            return
        }
    }

    private func perform(_ request: BackendRequest, socket: TextWebSocket) async throws -> BackendResponse {
        switch request {
        case .send(let outgoing):
            let id = outgoing.conversationID.rawValue
            let (thread, token, fields) = state.withLock { ($0.threads[id] ?? Thread(), $0.credentials["access-token"], $0.contactFields.removeValue(forKey: id)) }
            if thread.closed, channel.mode != .liveChat {
                throw SwitchboardError(.messageRejected, "the thread is closed", vendorCode: "illegalChatState")
            }
            var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(id)]
            if let name = thread.name { threadJSON["threadName"] = .string(name) }
            let contactFields = Self.fields(fields ?? [:], clock: context.clock)
            try await sendWelcomeIfPending(in: id, threadJSON: .object(threadJSON), contactFields: contactFields, token: token, socket: socket)
            try await beginLiveChatIfNeeded(id, socket: socket)
            let attachments = try await upload(outgoing.content.attachments)
            state.withLock { $0.threads[id, default: Thread()].sent = true }
            try await sendMessage(
                in: .object(threadJSON), messageID: outgoing.clientID.rawValue.lowercased(), text: outgoing.content.text,
                postback: outgoing.content.payload?["postback"] ?? .null, contactFields: contactFields, attachments: attachments, token: token, socket: socket
            )
            // The server knows the thread now: it is no longer the local one.
            var known: [String: String] = state.withLock { $0.credentials["local-thread"] == id } ? ["local-thread": ""] : [:]
            if channel.mode != .multiThread { known["thread-id"] = id }
            if !known.isEmpty { keep(known) }
            return .done
        case .typing(let conversation, let isTyping, _):
            try await send(isTyping ? "SenderTypingStarted" : "SenderTypingEnded", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)]], awaitReply: false, socket: socket)
            return .done
        case .markRead(let conversation, _):
            // §3.13: with the thread's name; not for a thread the server does not know yet (the
            // local one before its first message), a closed one, or one still pending.
            let thread = state.withLock { $0.threads[conversation.rawValue] }
            guard let thread, thread.sent || thread.contactID != nil, !thread.closed else { return .done }
            var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(conversation.rawValue)]
            if let name = thread.name { threadJSON["threadName"] = .string(name) }
            try await send("MessageSeenByCustomer", data: ["thread": .object(threadJSON)], awaitReply: false, socket: socket)
            return .done
        case .startConversation(let draft):
            try channel.validatePreChat(draft.customFields)
            if channel.mode == .singleThread, state.withLock({ !$0.threads.isEmpty }) {
                throw SwitchboardError(.unsupported, "a single-thread channel has its thread already", vendorCode: "unsupportedChannelConfig")
            }
            let id = UUID().uuidString.lowercased()
            state.withLock { state in
                state.threads[id] = Thread(name: draft.title)
                state.contactFields[id] = draft.customFields
            }
            if channel.mode != .multiThread { keep(["thread-id": id, "local-thread": id]) }
            let info = ConversationInfo(id: ConversationID(id), kind: .thread, title: draft.title, state: .queued)
            announceLocalThread(info)
            try await beginLiveChatIfNeeded(id, socket: socket)
            return .conversation(info)
        case .closeConversation(let conversation):
            if channel.mode == .liveChat {
                let contact = state.withLock { $0.threads[conversation.rawValue]?.contactID }
                state.withLock { $0.threads[conversation.rawValue, default: Thread()].closed = true }
                guard let contact else {
                    // The server never saw this thread: it ends here.
                    continuation.yield(.event(BackendEvent(.conversationStateChanged(.closedByCustomer, previous: nil), conversation: conversation)))
                    return .done
                }
                try await send("EndContact", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)], "contact": ["id": .string(contact)]], awaitReply: false, socket: socket)
                return .done
            }
            return try await archive(conversation, socket: socket)
        case .archiveConversation(let conversation):
            return try await archive(conversation, socket: socket)
        case .updateConversation(let conversation, let changes):
            guard let title = changes.title else { return .done }
            try await send("UpdateThread", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue), "threadName": .string(title)]], awaitReply: false, socket: socket)
            state.withLock { $0.threads[conversation.rawValue, default: Thread()].name = title }
            // The server does not answer UpdateThread: the session applies the title itself.
            return .done
        case .setCustomFields(let conversation?, let fields):
            let contact = state.withLock { $0.threads[conversation.rawValue]?.contactID }
            guard let contact else {
                state.withLock { $0.contactFields[conversation.rawValue, default: [:]].merge(fields) { _, new in new } }
                return .done
            }
            try await send("SetContactCustomFields", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)], "contact": ["id": .string(contact)], "customFields": Self.fields(fields, clock: context.clock)], awaitReply: false, socket: socket)
            return .done
        case .setCustomFields(nil, let fields):
            // §3.18: every current field of the customer, not only the new ones (empty ones left out).
            let all = state.withLock { state in
                state.customerFields.merge(fields) { _, new in new }
                return state.customerFields
            }
            try await send("SetCustomerCustomFields", data: ["customFields": Self.fields(all.filter { !$0.value.isEmpty }, clock: context.clock)], awaitReply: false, socket: socket)
            return .done
        case .history(let query):
            return .history(try await history(query, socket: socket))
        case .vendor("SendTranscript", let payload):
            guard channel.isSendTranscriptEnabled, let email = payload["email"]?.stringValue, email.contains("@") else {
                throw SwitchboardError(.messageRejected, "the transcript cannot be sent", vendorCode: "sendTranscriptFailed")
            }
            let contact = payload["conversation"]?.stringValue.flatMap { id in state.withLock { $0.threads[id]?.contactID } }
            guard let contact else { throw SwitchboardError(.invalidArgument, "no contact", vendorCode: "consumerContact") }
            try await send("SendTranscript", data: ["consumerContact": ["id": .string(contact)], "consumerRecipients": [["idOnExternalPlatform": .string(email)]]], awaitReply: true, socket: socket)
            return .vendor(["sent": true])
        case .vendor("InactivityPopupAnswer", let payload):
            // §3.21: the button's text and postback, marked as the answer; not a message of the thread.
            guard let thread = payload["conversation"]?.stringValue, let text = payload["text"]?.stringValue, let postback = payload["postback"] else {
                throw SwitchboardError(.invalidArgument, "an inactivity pop-up answer needs the thread, the button's text and postback")
            }
            let (name, token) = state.withLock { ($0.threads[thread]?.name, $0.credentials["access-token"]) }
            var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(thread)]
            if let name { threadJSON["threadName"] = .string(name) }
            try await sendMessage(
                in: .object(threadJSON), messageID: UUID().uuidString.lowercased(), text: text, postback: postback,
                parameters: ["isInactivityPopupAnswer": true], contactFields: [], attachments: [], token: token, socket: socket
            )
            return .vendor(["answered": true])
        case .vendor("identity", _):
            let credentials = state.withLock { $0.credentials }
            return .vendor(["customerId": credentials["customer-id"].map(JSONValue.string) ?? .null, "visitorId": credentials["visitor-id"].map(JSONValue.string) ?? .null])
        case .vendor("hasMoreMessages", let payload):
            // Unknown until a thread is recovered on this link (the first page brings its token).
            guard let id = payload["conversation"]?.stringValue, let token = state.withLock({ $0.threads[id]?.scrollToken }) else { return .vendor(.null) }
            return .vendor(.bool(!token.isEmpty))
        case .vendor("customerCustomFields", _):
            return .vendor(.object(state.withLock { $0.customerFields }.filter { !$0.value.isEmpty }.mapValues(JSONValue.string)))
        case .vendor("ExecuteTrigger", let payload):
            // §3.14: its own envelope (the destination and the visitor). Chat is available: a live
            // chat's link opens only while it is online.
            guard let trigger = payload["trigger"]?.stringValue, !trigger.isEmpty else {
                throw SwitchboardError(.invalidArgument, "ExecuteTrigger needs a trigger id")
            }
            guard state.withLock({ $0.credentials["customer-id"] }) != nil else {
                throw SwitchboardError(.invalidState, "no customer yet", vendorCode: "customerAssociationFailure")
            }
            try await send("ExecuteTrigger", data: ["trigger": ["id": .string(trigger)]], destination: destinationID, awaitReply: false, socket: socket)
            return .vendor([:])
        case .vendor("signOut", _):
            // As the SDK's signOut: forget the customer, the visitor, the tokens and the visit,
            // then drop the link. The next connection is a new customer; close the session to stop.
            keep(Self.cleared(Self.customerCredentials))
            end(SwitchboardError(.connectionLost, "signed out", vendorCode: "signOut"))
            return .vendor([:])
        case .vendor(let name, let payload) where name.hasPrefix("analytics."):
            return .vendor(try await analytics(String(name.dropFirst("analytics.".count)), data: payload))
        case .vendor(let name, _):
            throw SwitchboardError(.unsupported, "CXone has no vendor request \(name)")
        case .edit, .delete, .rateAgent, .addParticipants, .updateParticipants, .removeParticipants, .retransmit, .poll:
            throw SwitchboardError(.unsupported, "CXone has no \(request.name)")
        }
    }

    /// `SendMessage` (§3.8), awaiting its acknowledgment.
    private func sendMessage(
        in thread: JSONValue, messageID: String, text: String, postback: JSONValue, parameters: JSONValue = [:],
        contactFields: JSONValue, attachments: [JSONValue], token: String?, socket: TextWebSocket
    ) async throws {
        var data: [String: JSONValue] = [
            "thread": thread,
            "messageContent": ["type": "TEXT", "payload": ["text": .string(text)], "parameters": parameters, "postback": postback],
            "idOnExternalPlatform": .string(messageID),
            // §3.8: all of the customer's fields ride on every message.
            "customer": ["customFields": Self.fields(state.withLock { $0.customerFields }.filter { !$0.value.isEmpty }, clock: context.clock)],
            "contact": ["customFields": contactFields],
            "attachments": .array(attachments),
            "deviceFingerprint": Self.fingerprint(configuration),
        ]
        if let token { data["accessToken"] = ["token": .string(token)] }
        try await send("SendMessage", data: .object(data), awaitReply: true, socket: socket)
    }

    private func archive(_ conversation: ConversationID, socket: TextWebSocket) async throws -> BackendResponse {
        guard channel.mode == .multiThread else {
            throw SwitchboardError(.unsupported, "archiving needs a multi-thread channel", vendorCode: "unsupportedChannelConfig")
        }
        try await send("ArchiveThread", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)]], awaitReply: true, socket: socket)
        state.withLock { $0.threads[conversation.rawValue, default: Thread()].closed = true }
        continuation.yield(.event(BackendEvent(.conversationStateChanged(.archived, previous: nil), conversation: conversation)))
        return .done
    }

    /// `LoadMoreMessages` with the thread's scroll token; an empty token means there is no more.
    private func history(_ query: HistoryQuery, socket: TextWebSocket) async throws -> HistoryPage {
        let id = query.conversationID.rawValue
        var token = state.withLock { $0.threads[id]?.scrollToken }
        if token == nil {
            // Never recovered on this link: recover it; its messages arrive as a snapshot.
            try await recover(id, socket: socket)
            token = state.withLock { $0.threads[id]?.scrollToken }
        }
        if case .token(let given)? = query.before { token = given }
        guard let scrollToken = token, !scrollToken.isEmpty else { return HistoryPage(messages: [], hasMore: false) }
        // §3.7: the `createdAt` of the oldest message loaded so far (not "now", which the server
        // would take as the page's end).
        let oldest: Date
        if case .time(let date)? = query.before { oldest = date } else { oldest = state.withLock { $0.threads[id]?.oldestLoaded } ?? context.clock.date }
        guard let reply = try await send(
            "LoadMoreMessages",
            data: ["scrollToken": .string(scrollToken), "thread": ["idOnExternalPlatform": .string(id)], "oldestMessageDatetime": .string(oldest.formatted(CXoneServerDate.seconds))],
            awaitReply: true, socket: socket
        ) else { return HistoryPage(messages: [], hasMore: false) }
        guard case .moreMessages(let messages, let next) = try CXoneMapping.outcome(of: reply.frame, type: reply.type) else {
            throw SwitchboardError(.protocolViolation, "LoadMoreMessages answered with \(reply.type ?? "nothing")")
        }
        state.withLock { state in
            state.threads[id, default: Thread()].scrollToken = next
            if let page = messages.map(\.time).min() { state.threads[id]!.oldestLoaded = min(page, state.threads[id]!.oldestLoaded ?? page) }
        }
        return HistoryPage(messages: messages.sorted { $0.time < $1.time }, hasMore: !next.isEmpty, nextAnchor: next.isEmpty ? nil : .token(next))
    }

    /// H5: one base64 JSON upload per file, after the channel's limits.
    private func upload(_ attachments: [Message.Attachment]) async throws -> [JSONValue] {
        guard !attachments.isEmpty else { return [] }
        let restrictions = channel.fileRestrictions
        guard restrictions.isAttachmentsEnabled else { throw SwitchboardError(.unsupported, "attachments are disabled", vendorCode: "attachmentError") }
        var uploaded: [JSONValue] = []
        for attachment in attachments {
            guard let url = attachment.url, url.isFileURL else { throw SwitchboardError(.invalidArgument, "an attachment needs a local file URL") }
            let data = try Data(contentsOf: url)
            guard data.count <= Int(restrictions.allowedFileSizeMegabytes) * 1024 * 1024 else {
                throw SwitchboardError(.payloadTooLarge, "\(attachment.name) is over \(restrictions.allowedFileSizeMegabytes) MB", vendorCode: "invalidFileSize")
            }
            let mime = attachment.mimeType ?? "application/octet-stream"
            let allowed = restrictions.allowedMIMETypes.isEmpty || restrictions.allowedMIMETypes.contains { pattern in
                pattern == mime || (pattern.hasSuffix("/*") && mime.hasPrefix(String(pattern.dropLast())))
            }
            guard allowed else { throw SwitchboardError(.messageRejected, "files of type \(mime) are not allowed", vendorCode: "invalidFileType") }
            let response = try await transport.postJSON(
                "\(configuration.environment.chatURL)/1.0/brand/\(configuration.brandID)/channel/\(configuration.channelID)/attachment",
                body: ["content": .string(data.base64EncodedString()), "fileName": .string(attachment.name), "mimeType": .string(mime)],
                headers: CXoneWire.httpHeaders,
                timeout: configuration.replyTimeout
            )
            guard (200..<300).contains(response.status), let json = try? JSONValue(parsing: response.body) else {
                throw SwitchboardError(.serverError, "attachment upload: HTTP \(response.status)")
            }
            guard let fileURL = json["fileUrl"]?.stringValue else {
                throw SwitchboardError(.messageRejected, "the server refused \(attachment.name)", vendorCode: "invalidFileSize")
            }
            uploaded.append(["url": .string(fileURL), "friendlyName": .string(attachment.name), "mimeType": .string(mime), "fileName": .string(attachment.name)])
        }
        return uploaded
    }

    /// Analytics (§3.15) with the SDK's visit and page rules: a visit lasts 30 minutes and each
    /// `PageView` extends it (a new visit is announced with `VisitorVisit` first); a `PageView` of
    /// another page (title and url both differ) ends the previous one with `TimeSpentOnPage`;
    /// `TimeSpentOnPage` is sent only for the page last viewed. The visit and the page are kept
    /// with the credentials, so they outlive a reconnect.
    ///
    /// - Returns: the events sent, in order.
    private func analytics(_ type: String, data: JSONValue) async throws -> JSONValue {
        let now = context.clock.date
        var sent: [JSONValue] = []
        switch type {
        case "PageView":
            guard let title = data["title"]?.stringValue, let url = data["url"]?.stringValue else {
                throw SwitchboardError(.invalidArgument, "PageView needs a title and a url")
            }
            let (visit, isNew, previous) = state.withLock { state -> (String, Bool, (title: String, url: String, since: Double)?) in
                let expires = state.credentials["visit-expires"].flatMap(Double.init) ?? 0
                let current = state.credentials["visit-id"].flatMap { expires > now.timeIntervalSince1970 ? $0 : nil }
                let visit = current ?? UUID().uuidString.lowercased()
                state.credentials["visit-id"] = visit
                state.credentials["visit-expires"] = String(now.timeIntervalSince1970 + 30 * 60)
                var previous: (title: String, url: String, since: Double)?
                if let title = state.credentials["page-title"], let url = state.credentials["page-url"], let since = state.credentials["page-since"].flatMap(Double.init) {
                    previous = (title, url, since)
                }
                return (visit, current == nil, previous)
            }
            if isNew { sent.append(try await postAnalytics("VisitorVisit", data: [:], visit: visit)) }
            if let previous, previous.title != title, previous.url != url {
                sent.append(try await postAnalytics("TimeSpentOnPage", data: Self.timeSpent(on: previous, until: now), visit: visit))
            }
            sent.append(try await postAnalytics("PageView", data: ["title": .string(title), "url": .string(url)], visit: visit))
            keepAnalyticsState { credentials in
                credentials["page-title"] = title
                credentials["page-url"] = url
                credentials["page-since"] = String(now.timeIntervalSince1970)
            }
        case "TimeSpentOnPage":
            let visit = try currentVisit()
            let page = state.withLock { state -> (title: String, url: String, since: Double)? in
                guard let title = state.credentials["page-title"], let url = state.credentials["page-url"],
                    let since = state.credentials["page-since"].flatMap(Double.init),
                    title == data["title"]?.stringValue, url == data["url"]?.stringValue
                else { return nil }
                return (title, url, since)
            }
            guard let page else { return .array([]) }
            sent.append(try await postAnalytics("TimeSpentOnPage", data: Self.timeSpent(on: page, until: now), visit: visit))
            // The session merges credentials, so the ended page is blanked rather than removed.
            keepAnalyticsState { credentials in
                for key in ["page-title", "page-url", "page-since"] { credentials[key] = "" }
            }
        default:
            sent.append(try await postAnalytics(type, data: data, visit: try currentVisit()))
        }
        return .array(sent)
    }

    private func currentVisit() throws -> String {
        let now = context.clock.date.timeIntervalSince1970
        let visit = state.withLock { state in
            state.credentials["visit-id"].flatMap { (state.credentials["visit-expires"].flatMap(Double.init) ?? 0) > now ? $0 : nil }
        }
        guard let visit else { throw SwitchboardError(.invalidArgument, "no visit: view a page first", vendorCode: "missingVisitId") }
        return visit
    }

    private func keepAnalyticsState(_ change: (inout Credentials) -> Void) {
        let kept = state.withLock { state in
            change(&state.credentials)
            return state.credentials
        }
        continuation.yield(.credentials(kept))
    }

    private static func timeSpent(on page: (title: String, url: String, since: Double), until now: Date) -> JSONValue {
        ["url": .string(page.url), "title": .string(page.title), "timeSpentOnPage": .int(Int64(max(0, now.timeIntervalSince1970 - page.since)))]
    }

    /// H4: `POST {chatHost}/web-analytics/1.0/tenants/{brand}/visitors/{visitor}/events`.
    private func postAnalytics(_ type: String, data: JSONValue, visit: String) async throws -> JSONValue {
        let visitor = state.withLock { $0.credentials["visitor-id"] ?? "" }
        guard !visitor.isEmpty else { throw SwitchboardError(.invalidArgument, "no visitor id", vendorCode: "missingVisitorId") }
        let host = URL(string: "/web-analytics/1.0/tenants/\(configuration.brandID)/visitors/\(visitor)/events", relativeTo: URL(string: configuration.environment.chatURL))!.absoluteString
        let event: JSONValue = [
            "id": .string(UUID().uuidString.lowercased()), "type": .string(type), "visitId": .string(visit),
            "destination": ["id": .string(destinationID)], "createdAtWithMilliseconds": .string(CXoneServerDate.withMilliseconds(context.clock)), "data": data,
        ]
        let response = try await transport.postJSON(host, body: event, headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
        guard (200..<300).contains(response.status) else { throw SwitchboardError(.serverError, "analytics: HTTP \(response.status)") }
        return event
    }

    static func fields(_ fields: [String: String], clock: SessionClock) -> JSONValue {
        .array(fields.sorted { $0.key < $1.key }.map { ["ident": .string($0.key), "value": .string($0.value), "updatedAt": .string(CXoneServerDate.now(clock))] })
    }
}

/// The date forms CXone writes, made once (a formatter per call was on every send and message).
enum CXoneServerDate {
    /// `2024-01-01T12:00:00Z`.
    static let seconds = Date.ISO8601FormatStyle()
    /// `2024-01-01T12:00:00.123Z`, as analytics times are written.
    static let milliseconds = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func now(_ clock: SessionClock) -> String { clock.date.formatted(seconds) }
    static func withMilliseconds(_ clock: SessionClock) -> String { clock.date.formatted(milliseconds) }
}
