import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// One CXone WebSocket: authorization, thread recovery or listing, requests matched to replies
/// by `eventId`, push events as updates, the heartbeat, and large events fetched from S3.
///
/// This file holds the link's state, its inbound side (reading, routing, applying pushed events)
/// and the request/reply plumbing; by concern, `CXoneLink+Authorization` (tokens, the visitor,
/// authorizing), `+Threads` (listing, recovering, the local thread, welcome messages),
/// `+Requests` (the engine's requests) and `+Analytics`.
///
/// The lock guards the known threads and the credentials; `replies` holds the requests waiting.
final class CXoneLink: Sendable {
    struct Thread {
        var name: String?
        var contactID: String?
        var scrollToken: String?
        /// The oldest message loaded (recovery, then each older page): `LoadMoreMessages` names it.
        var oldestLoaded: Date?
        /// The token of the thread's last recovery on this link, and its oldest message: the top
        /// of its history, where a page asked for by time starts.
        var recoveryToken: String?
        var recoveryOldest: Date?
        var closed = false
        /// The customer has sent into it: the server knows it.
        var sent = false
        /// Live chat: the hidden "Begin Conversation" went out.
        var begun = false
        /// Made by `startConversation` on this link: unknown to the server until it is sent into.
        var createdHere = false
    }

    struct State {
        var threads: [String: Thread] = [:]
        var credentials: Credentials
        var lastPong: Duration = .zero
        var contactFields: [String: [String: String]] = [:]
        /// The customer's custom fields as this link knows them: set by the app, handed over by a
        /// welcome message. Welcome-message variables are filled from them.
        var customerFields: [String: String] = [:]
        var refreshingToken = false
        /// The recovery is done and its window yielded. Until then the link yields no snapshot of
        /// its own (a local thread), so the engine's hold ends at the window (CXone is windowed).
        var recovered = false
    }

    /// The update stream, its one end, and the loops of the link's scope.
    let output: LinkOutput
    var updates: BackendUpdates { output.updates }
    /// The backend's configuration with what the app set since (``CXoneCustomer``), read at each use.
    var configuration: CXoneConfiguration { customer.applied(to: baseConfiguration) }
    private let baseConfiguration: CXoneConfiguration
    private let customer: CXoneCustomer
    let channel: CXoneChannelConfiguration
    let transport: HTTPTransport
    let webSockets: WebSocketTransport
    let context: ConnectionContext
    let state: Locked<State>
    /// A reply: the event type (`nil` for a bare acknowledgment) and the frame.
    struct Reply: Sendable {
        var type: String?
        var frame: JSONValue
    }

    let replies = PendingReplies<Reply>()
    let url: String
    /// The backend's analytics: the visitor, the visit and the page, shared with the app.
    let analytics: CXoneAnalytics
    /// The SDK makes a new destination id on every prepare; here, per backend (its analytics').
    var destinationID: String { analytics.destinationID }

    init(
        configuration: CXoneConfiguration, customer: CXoneCustomer, channel: CXoneChannelConfiguration, transport: HTTPTransport, webSockets: WebSocketTransport,
        context: ConnectionContext, credentials: Credentials, url: String, analytics: CXoneAnalytics
    ) {
        self.analytics = analytics
        let replies = self.replies
        self.output = LinkOutput { replies.close($0) }
        self.baseConfiguration = configuration
        self.customer = customer
        self.channel = channel
        self.transport = transport
        self.webSockets = webSockets
        self.context = context
        var initial = State(credentials: credentials)
        Self.restorePending(from: credentials, into: &initial)
        self.state = Locked(initial)
        self.url = url
    }

    /// Prepares a link: ids, the transaction token for secured sessions, the socket URL.
    static func open(
        configuration base: CXoneConfiguration, customer: CXoneCustomer, channel: CXoneChannelConfiguration, transport: HTTPTransport, webSockets: WebSocketTransport,
        context: ConnectionContext, analytics: CXoneAnalytics
    ) async throws -> CXoneLink {
        let configuration = customer.applied(to: base)
        var credentials = context.credentials
        // The session merges credentials, so a cleared one is stored as "".
        credentials.values = credentials.values.filter { !$0.value.isEmpty }
        if let configured = configuration.customerID, credentials["customer-id"]?.lowercased() != configured.lowercased() {
            // The configured customer wins over a stored one (the store scope's user is the
            // configured customer, so only a store written before that held another): nothing of
            // the other customer's sign-in is used.
            for key in CXoneLink.customerCredentials { credentials[key] = nil }
            for key in credentials.values.keys where key.hasPrefix("pending-thread-") { credentials[key] = nil }
            credentials["customer-id"] = configured
        }
        // One visitor for analytics and the socket: what was stored, unless the app's analytics
        // made one before this first connection (then that one).
        analytics.adopt(credentials)
        credentials["visitor-id"] = analytics.visitorID
        if credentials["customer-id"] == nil { credentials["customer-id"] = UUID().uuidString.lowercased() }
        await putVisitor(configuration: configuration, transport: transport, credentials: credentials)
        var token: String?
        if channel.isEnabled("securedSessions") {
            token = try await transactionToken(configuration: configuration, channel: channel, transport: transport, credentials: &credentials, now: context.clock.date)
        }
        let url = try configuration.environment.webSocketURL(
            brandID: configuration.brandID, channelID: configuration.channelID, visitorID: credentials["visitor-id"]!, transactionToken: token
        )
        let link = CXoneLink(
            configuration: base, customer: customer, channel: channel, transport: transport, webSockets: webSockets, context: context,
            credentials: credentials, url: url, analytics: analytics
        )
        // With the customer, made up at the first connection when not configured: their markers
        // from another device are the user's own.
        link.publish(.credentials(credentials))
        return link
    }

    var identity: CXoneWire.Identity {
        state.withLock { state in
            CXoneWire.Identity(
                brandID: configuration.brandID, channelID: configuration.channelID, customerID: state.credentials["customer-id"] ?? "",
                firstName: configuration.firstName, lastName: configuration.lastName, visitorID: state.credentials["visitor-id"]
            )
        }
    }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        try await webSockets.withTextWebSocket(
            url: url, configuration: .init(allowsPlainText: configuration.allowsPlainText), logger: context.logger
        ) { socket in
            let heartbeat = Heartbeat(interval: configuration.heartbeatInterval, pongTimeout: configuration.pongTimeout, onlyWhenSilent: false)
            return try await output.whileRunning([
                { await self.read(socket) },
                {
                    // `{"action":"heartbeat"}` every interval; `"pong"` must come within the pong timeout.
                    await heartbeat.run(
                        clock: self.context.clock, lastHeard: { self.state.withLock { $0.lastPong } },
                        ping: { try await socket.send(CXoneWire.heartbeat.jsonString) }, ending: self.output
                    )
                },
            ]) {
                if !channel.isEnabled("securedSessions") { try await authorize(socket) }
                try await loadThreads(socket)
                // The window is in. The recovery yields it as the link's first snapshot, and the
                // engine holds what the server pushed meanwhile until then (CXone is windowed);
                // where there was nothing to recover, this empty one says so.
                state.withLock { $0.recovered = true }
                output.yield(.snapshot(BackendSnapshot(conversations: [], isComplete: false)))
                return try await body(Sender(link: self, socket: socket))
            }
        }
    }

    /// A `BackendConnection` bound to the open socket: what the engine and CXone's vendor
    /// requests (``CXoneRequests``) get. Each request goes to the link's method for it (`+Requests`);
    /// what CXone does not do (edits, deletes, ratings, participants, retransmits, polls) answers
    /// `unsupported` by the seam's defaults.
    struct Sender: BackendConnection {
        let link: CXoneLink
        let socket: TextWebSocket
        var updates: BackendUpdates { link.updates }

        func send(_ message: OutgoingMessage) async throws -> Message? {
            try await link.send(message, socket: socket)
            return nil
        }

        func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws {
            try await link.typing(in: conversation, isTyping: isTyping, socket: socket)
        }

        func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
            try await link.markRead(conversation, socket: socket)
        }

        func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
            ConversationSnapshot(conversation: try await link.startConversation(draft, socket: socket))
        }

        func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
            try await link.closeConversation(conversation, socket: socket)
        }

        func archiveConversation(_ conversation: ConversationID) async throws -> ClosedConversation {
            try await link.archive(conversation, socket: socket)
        }

        func updateConversation(_ conversation: ConversationID, _ changes: ConversationChanges) async throws -> ConversationInfo? {
            try await link.updateConversation(conversation, changes, socket: socket)
            return nil
        }

        func setCustomFields(_ fields: [String: String], of conversation: ConversationID?) async throws {
            try await link.setCustomFields(fields, of: conversation, socket: socket)
        }

        func history(_ query: HistoryQuery) async throws -> HistoryPage {
            try await link.history(query, socket: socket)
        }
    }

    func read(_ socket: TextWebSocket) async {
        do {
            for try await text in socket.messages { await route(text) }
            end(SwitchboardError(.connectionLost, "the server closed the WebSocket"))
        } catch {
            end(SwitchboardError.classify(error))
        }
    }

    func route(_ text: String) async {
        switch CXoneWire.classify(text) {
        case .pong:
            state.withLock { $0.lastPong = context.clock.now }
        case .serverError(let message):
            output.yield(.problem(SwitchboardError(.serverError, "server error: \(message)")))
        case .operationError(let eventID, let error):
            if !replies.fail(eventID, { _ in error }) {
                output.yield(.problem(error))
            }
        case .event(let eventID, let type, let frame):
            if replies.resolve(eventID, with: Reply(type: type, frame: frame)) { return }
            guard type != nil else {
                // A bare acknowledgment (`{"eventId": …}`) no request waits for any more (it timed
                // out, or the request did not wait) is nothing; a frame with content but no event
                // type is not one of the protocol's.
                let content = frame.objectValue?.filter { $0.key != "eventId" && $0.value != .null } ?? [:]
                if !content.isEmpty {
                    output.yield(.problem(SwitchboardError(.protocolViolation, "dropped a frame without an eventType that answers no request")))
                }
                return
            }
            await apply(frame, type: type)
        case .unrecognized(let reason):
            output.yield(.problem(SwitchboardError(.protocolViolation, "dropped a frame: \(reason)")))
        }
    }

    /// A push event (or a reply the link handles itself).
    func apply(_ frame: JSONValue, type: String?, thread: ConversationID? = nil) async {
        var thread = thread
        if type == "SetPositionInQueue", let contact = frame["data"]?["consumerContact"]?["id"]?.stringValue {
            thread = state.withLock { $0.threads.first { $0.value.contactID == contact }.map { ConversationID($0.key) } }
        }
        if type == "FireProactiveAction" { receiveProactiveAction(frame["data"] ?? .null) }
        do {
            let customer = state.withLock { $0.credentials["customer-id"] }.map(ParticipantID.init)
            switch try CXoneMapping.outcome(of: frame, type: type, thread: thread, customer: customer) {
            case .updates(let updates):
                for var update in updates {
                    if case .credentials(var credentials) = update, let lifetime = credentials["access-token-expires-in"].flatMap(Double.init) {
                        // Kept as a date, so the expiry survives reconnects (ReconnectCustomer brings none).
                        credentials["access-token-expires-at"] = String(context.clock.date.timeIntervalSince1970 + lifetime)
                        update = .credentials(credentials)
                    }
                    remember(update, frame: frame)
                    publish(update)
                }
                if channel.mode == .liveChat, state.withLock({ $0.recovered }) { openNewThreadIfAllClosed() }
            case .download(let url, _):
                let target = url.scheme == nil ? URL(string: url.absoluteString, relativeTo: URL(string: configuration.environment.chatURL))!.absoluteURL : url
                let response = try await transport.get(target.absoluteString, timeout: configuration.replyTimeout)
                guard (200..<300).contains(response.status) else { throw SwitchboardError(.serverError, "EventInS3: HTTP \(response.status)") }
                await route(String(decoding: response.body, as: UTF8.self))
            case .moreMessages:
                break
            }
        } catch {
            output.yield(.problem(error as? SwitchboardError ?? SwitchboardError(.protocolViolation, "undecodable \(type ?? "event")")))
        }
    }

    /// Keeps what later requests need: contact ids, scroll tokens, names, closed threads.
    func remember(_ update: BackendUpdate, frame: JSONValue) {
        state.withLock { state in
            switch update {
            case .snapshot(let snapshot):
                for item in snapshot.conversations {
                    var thread = state.threads[item.conversation.id.rawValue] ?? Thread()
                    thread.name = item.conversation.title
                    thread.closed = item.conversation.state.isClosed
                    if let contact = item.conversation.customData?["contactId"]?.stringValue { thread.contactID = contact }
                    if let token = item.conversation.customData?["scrollToken"]?.stringValue {
                        thread.scrollToken = token
                        thread.recoveryToken = token
                        thread.recoveryOldest = item.messages.map(\.time).min()
                    }
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

    /// The link is gone: every waiting request fails, and the update stream ends.
    func end(_ error: SwitchboardError) {
        output.end(error)
    }

    /// Sends one event; waits for the reply with the same `eventId` when `awaitReply`.
    @discardableResult
    func send(_ eventType: String, data: JSONValue? = nil, destination: String? = nil, awaitReply: Bool, socket: TextWebSocket) async throws -> Reply? {
        try output.checkOpen()
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

    /// Sets credentials on the link and hands exactly those to the session's store (`""` clears).
    func keep(_ values: [String: String]) {
        state.withLock { $0.credentials.values.merge(values) { _, new in new } }
        publish(.credentials(Credentials(values)))
    }

    /// Hands the engine an update. Credentials that name the customer (`ConsumerAuthorized`, a
    /// recovery that carries them, a new customer made up) also say who the user is, wherever
    /// they come from: that customer's messages and markers are the user's own.
    func publish(_ update: BackendUpdate) {
        output.yield(update)
        if case .credentials(let credentials) = update, let customer = credentials["customer-id"], !customer.isEmpty {
            output.yield(.user(ParticipantID(customer)))
        }
    }

    /// `keys` set to `""`: what forgetting them looks like to ``keep(_:)``.
    static func cleared(_ keys: [String]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: keys.map { ($0, "") })
    }

    /// The snapshot a `ThreadListFetched` or `ThreadRecovered` reply decodes to, and what else it
    /// brings (a recovery that carries the customer brings their identity too); `nil` for any
    /// other reply (an `EventInS3`, say), which then goes through ``apply(_:type:thread:)``.
    static func snapshot(in frame: JSONValue, type: String?) -> (snapshot: BackendSnapshot, rest: [BackendUpdate])? {
        guard case .updates(let updates)? = try? CXoneMapping.outcome(of: frame, type: type, thread: nil) else { return nil }
        let snapshots = updates.compactMap { update -> BackendSnapshot? in
            if case .snapshot(let snapshot) = update { return snapshot }
            return nil
        }
        guard snapshots.count == 1 else { return nil }
        return (
            snapshots[0],
            updates.filter { update in
                if case .snapshot = update { return false }
                return true
            }
        )
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
