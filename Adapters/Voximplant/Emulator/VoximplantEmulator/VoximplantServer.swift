import DequeModule
import Foundation
@_spi(TestKit) public import Switchboard
public import SwitchboardTestKit

/// The server side of the Voximplant-style protocol (Docs/Protocols/voximplant-style.md):
/// users and tokens, conversations with an immutable per-conversation log, broadcast to every
/// connected client of every participant, retransmit with its parameter rules, permissions and
/// direct/uber/public rules, rate limits — plus fault injection and a log of what it accepted.
///
/// The lock guards all state; frames are queued to clients under it, so each client receives a
/// conversation's events in sequence order unless a fault says otherwise.
public final class VoximplantServer: Sendable {
    public struct Configuration: Sendable {
        /// `username@application.account` suffix for users.
        public var domain: String
        /// Sends per user per second and per minute before errors 32 and 33; `nil` for no limit.
        public var messagesPerSecond: Int?
        public var messagesPerMinute: Int?

        public init(domain: String = "app.acc", messagesPerSecond: Int? = nil, messagesPerMinute: Int? = nil) {
            self.domain = domain
            self.messagesPerSecond = messagesPerSecond
            self.messagesPerMinute = messagesPerMinute
        }
    }

    struct Client {
        var user: String?
        var send: @Sendable (String) -> Void
        var close: @Sendable () -> Void
        var faults = DeliveryFaults<String>()
    }

    struct State {
        var users: [String: VoxUser] = [:]
        var conversations: [String: VoxConversation] = [:]
        var clients: [Int: Client] = [:]
        var nextClient = 0
        var nextID = 0
        var sendTimes: [String: Deque<Int64>] = [:]
        var loginFaults: Deque<Int> = []
        var requestFaults: Deque<(name: String?, code: Int)> = []
        var typingLog: [(user: String, conversation: String)] = []
        var lastTyping: [String: Int64] = [:]
        var deliveries: [(user: String, conversation: String, sequence: Int64)] = []
        var readLog: [(user: String, conversation: String, sequence: Int64)] = []
        var delivered = 0
        var dropped = 0
        var applied = AppliedFaults()
        var duplicateSends = 0
        /// Users whose sends are applied and not answered (``withholdSendAnswers(of:)``).
        var unansweredSenders: Set<String> = []
        var withheldSendAnswers = 0
        var retransmittedEvents = 0
        var retransmits: [(client: Int, user: String, conversation: String, from: Int64, to: Int64)] = []
        var oversizedFrames = 0
        var pingsSent: [String] = []
        var pongs: [String?] = []
        var autoReplies: [String: @Sendable (_ from: String, _ text: String) -> String?] = [:]
        var pushes: [VoximplantPush] = []
        /// What the faults did where they took effect, for the agent console: the last 200.
        var faultLines: Deque<String> = []

        /// Counts `count` faults of `kind` as taken effect, and notes what they did.
        mutating func took(_ kind: EmulatorFault.Kind, _ count: Int = 1, _ line: @autoclosure () -> String) {
            guard count > 0 else { return }
            applied[kind] += count
            note(line())
        }

        mutating func note(_ line: String) {
            faultLines.append(line)
            if faultLines.count > 200 { faultLines.removeFirst() }
        }
    }

    public let configuration: Configuration
    let clock: SessionClock
    let state = Locked(State())
    /// Fires after every change.
    @_spi(TestKit) public let changes = AsyncSignal()

    public init(configuration: Configuration = Configuration(), clock: SessionClock = .continuous) {
        self.configuration = configuration
        self.clock = clock
    }

    var now: Int64 { Int64(clock.date.timeIntervalSince1970) }

    /// §1: the largest frame a client may send.
    public static let maxClientFrameBytes = 64 * 1024
    /// §5.1: the notifications a user may ask for, and the push platforms.
    static let pushNotifications: Set<String> = ["onSendMessage", "onEditMessage"]
    static let pushPlatforms: Set<String> = ["apns", "fcm"]

    /// §4.3: the most Unicode code points a message text holds.
    public static let maxTextCodePoints = 5000

    /// Client frames refused for their size.
    public var oversizedFrames: Int { state.withLock { $0.oversizedFrames } }

    /// Sends a `ping` to every client of `user` (§2: both directions); returns its id. The pongs
    /// come back in ``pongs``.
    @discardableResult
    public func ping(user: String) -> String {
        defer { changes.signal() }
        return state.withLock { state in
            state.nextID += 1
            let id = "srv-ping-\(state.nextID)"
            state.pingsSent.append(id)
            for (_, client) in state.clients where client.user == user {
                client.send(JSONValue.object(["type": "ping", "id": .string(id)]).jsonString)
            }
            return id
        }
    }

    /// The ids of the pongs clients answered the server's pings with, in order.
    public var pongs: [String?] { state.withLock { $0.pongs } }

    /// Every push the service sent (§5.1), oldest first.
    public var pushes: [VoximplantPush] { state.withLock { $0.pushes } }

    /// Whether `user` has a logged-in client: §5.1 pushes go only to users without one.
    public func isConnected(_ user: String) -> Bool {
        state.withLock { $0.clients.values.contains { $0.user == user } }
    }

    // MARK: Users and the server's truth

    /// Adds a user who can log in with `token`; returns the full user id.
    @discardableResult
    public func addUser(_ name: String, token: String, displayName: String? = nil) -> String {
        let id = name.contains("@") ? name : "\(name)@\(configuration.domain)"
        state.withLock { state in
            state.users[id] = VoxUser(id: id, imId: 100 + state.users.count + 1, token: token, displayName: displayName ?? name)
        }
        return id
    }

    /// Makes `robot` answer every message another participant sends in a conversation the robot
    /// is in, with what `reply` returns (nothing for `nil`). For `switchboard emulate`.
    public func autoReply(as robot: String, _ reply: @escaping @Sendable (_ from: String, _ text: String) -> String?) {
        state.withLock { $0.autoReplies[robot] = reply }
    }

    /// A robot acting as `user` without a socket (the agent of tests and the demo).
    public func robot(_ user: String) -> VoximplantRobot { VoximplantRobot(server: self, user: user) }

    /// The live messages of a conversation in sequence order of their creation.
    public func messages(in conversation: String) -> [(uuid: String, sender: String, text: String, clientMessageId: String?, sequence: Int64)] {
        state.withLock { state in
            guard let stored = state.conversations[conversation] else { return [] }
            return stored.messageOrder.compactMap { stored.messages[$0] }.map { ($0.uuid, $0.sender, $0.text, $0.clientMessageId, $0.sequence) }
        }
    }

    /// A message's `payload` as the server keeps it (a list of maps), `nil` when there is no such
    /// message.
    public func payload(ofMessage uuid: String, in conversation: String) -> JSONValue? {
        state.withLock { $0.conversations[conversation]?.messages[uuid]?.payload }
    }

    /// The number of conversations the server has.
    public var conversationCount: Int { state.withLock { $0.conversations.count } }

    /// The conversation's messages as the server's log that `StoreAudit` compares a client's
    /// store with, in sequence order, `customer`'s own marked as theirs.
    public func log(of conversation: String, customer: String) -> [ServerMessage] {
        messages(in: conversation).map {
            ServerMessage(
                serverID: MessageID($0.uuid), clientID: $0.clientMessageId.map(ClientMessageID.init), text: $0.text,
                fromCustomer: $0.sender == customer, sequence: $0.sequence
            )
        }
    }

    /// The conversation as the server has it now (§4.2), `nil` when there is none.
    public func conversationJSON(_ conversation: String) -> JSONValue? {
        state.withLock { $0.conversations[conversation]?.json }
    }

    public func lastSequence(of conversation: String) -> Int64 {
        state.withLock { $0.conversations[conversation]?.lastSequence ?? 0 }
    }

    /// Typing requests received (before the server's 10 s limit).
    public var typingLog: [(user: String, conversation: String)] { state.withLock { $0.typingLog } }
    /// Logged events handed to a client as event frames (not as a requester's result): who got
    /// which sequence of which conversation. Faults show here: a dropped event is missing, a
    /// duplicated one is listed once.
    public var deliveries: [(user: String, conversation: String, sequence: Int64)] { state.withLock { $0.deliveries } }
    public var readLog: [(user: String, conversation: String, sequence: Int64)] { state.withLock { $0.readLog } }
    public var counts: (delivered: Int, dropped: Int, duplicateSends: Int) {
        state.withLock { ($0.delivered, $0.dropped, $0.duplicateSends) }
    }
    /// The faults that took effect on a client's traffic (see `AppliedFaults` for the units).
    public var appliedFaults: AppliedFaults { state.withLock { $0.applied } }
    /// Events the server has sent again in answer to `retransmitEvents`, over its life: how much
    /// catch-up cost it.
    public var retransmittedEvents: Int { state.withLock { $0.retransmittedEvents } }
    /// Every `retransmitEvents` the server answered, in order: on which connection (-1 for the robot; numbered as
    /// ``connectionsOpened`` counts them), who asked, for what range.
    public var retransmits: [(client: Int, user: String, conversation: String, from: Int64, to: Int64)] { state.withLock { $0.retransmits } }
    /// The connections the server has accepted over its life; the next one is numbered this.
    public var connectionsOpened: Int { state.withLock { $0.nextClient } }
    public var connectedClients: Int { state.withLock { $0.clients.values.filter { $0.user != nil }.count } }

    // MARK: Faults

    /// Closes the sockets of `user` (of everyone for `nil`); each closed socket of a logged-in
    /// user counts as a disconnect that took effect.
    public func disconnect(user: String? = nil) {
        let closers = state.withLock { state in
            let cut = state.clients.values.filter { user == nil || $0.user == user }
            let loggedIn = cut.filter { $0.user != nil }.count
            state.took(.disconnect, loggedIn, "closed \(loggedIn) logged-in socket\(loggedIn == 1 ? "" : "s") of \(user ?? "every user")")
            return cut.map(\.close)
        }
        for close in closers { close() }
        changes.signal()
    }

    /// The service restarts without its data (a process without its volume, a restore from an
    /// empty backup): every conversation and its events are gone and ids are numbered afresh,
    /// the users and their tokens stay, and every socket closes (each a disconnect that took
    /// effect). `seed` runs on the restarted service before any client can reach it again (what
    /// its robots make is numbered from 1); the sockets it closes hear nothing of it.
    @discardableResult
    public func restartWithoutData<T>(_ seed: (VoximplantServer) throws -> T = { _ in () }) rethrows -> T {
        let cut = state.withLock { state in
            state.conversations = [:]
            state.nextID = 0
            for id in state.users.keys {
                state.users[id]!.conversations = []
                state.users[id]!.left = []
            }
            let cut = Array(state.clients.values)
            state.clients = [:]
            let loggedIn = cut.filter { $0.user != nil }.count
            state.took(.disconnect, loggedIn, "restarted without data: closed \(loggedIn) logged-in socket\(loggedIn == 1 ? "" : "s")")
            return cut
        }
        defer {
            for client in cut { client.close() }
            changes.signal()
        }
        return try seed(self)
    }

    public func dropNext(_ count: Int, for user: String) { arm(user) { $0.drop += count } }
    public func duplicateNext(_ count: Int, for user: String) { arm(user) { $0.duplicate += count } }
    public func reorderNext(_ count: Int, for user: String) { arm(user) { $0.reorder += count } }
    public func delayNext(_ count: Int, for user: String) { arm(user) { $0.delay += count } }

    public func releaseDelayed() {
        state.withLock { state in
            var released = 0
            for id in state.clients.keys {
                for frame in state.clients[id]!.faults.release() {
                    state.clients[id]!.send(frame)
                    state.delivered += 1
                    released += 1
                }
            }
            if released > 0 { state.note("released \(released) held event\(released == 1 ? "" : "s")") }
        }
        changes.signal()
    }

    /// From now on `users`' sends are applied and never answered, until ``answerSends(of:)``: a
    /// client whose sends the server took while their answers never came, as when the process
    /// that sent them is killed mid-request. (The sending client gets no event of its own
    /// message, so nothing else confirms it either.) What was withheld stays unanswered.
    public func withholdSendAnswers(of users: Set<String>) {
        state.withLock { $0.unansweredSenders.formUnion(users) }
    }

    public func answerSends(of users: Set<String>) {
        state.withLock { $0.unansweredSenders.subtract(users) }
    }

    /// Answers to applied sends withheld so far: counted as each is withheld, not when armed.
    public var withheldSendAnswers: Int { state.withLock { $0.withheldSendAnswers } }

    public func rejectNextLogin(code: Int = 3) { state.withLock { $0.loginFaults.append(code) } }

    /// The next request (named `name`, or any) fails with `code`.
    public func failNextRequest(code: Int, named name: String? = nil) {
        state.withLock { $0.requestFaults.append((name, code)) }
    }

    /// Sends text that is not a frame to every client of `user`.
    public func sendMalformedFrame(to user: String) {
        send("{\"type\":\"event\",\"eventType\":", to: user, as: .malformedFrame)
    }

    /// Sends `text` as it is to every client of `user` (bad-input tests).
    public func sendRawFrame(_ text: String, to user: String) {
        send(text, to: user, as: .rawFrame)
    }

    private func send(_ text: String, to user: String, as kind: EmulatorFault.Kind) {
        state.withLock { state in
            for client in state.clients.values where client.user == user {
                client.send(text)
                state.took(kind, 1, "sent \(user) \(kind == .malformedFrame ? "a malformed frame" : "a raw frame")")
            }
        }
        changes.signal()
    }

    /// Revokes `user`'s session: an unsolicited error 3 on every client, then the sockets close,
    /// and the token no longer logs in.
    public func revoke(_ user: String) {
        let closers = state.withLock { state in
            state.users[user]?.token = "revoked-\(state.nextID)"
            state.nextID += 1
            let frame = VoximplantProtocolError(3).frame(id: nil).jsonString
            let sockets = state.clients.values.filter { $0.user == user }.count
            state.took(.fatal, sockets, "revoked \(user)'s session: error 3 on \(sockets) socket\(sockets == 1 ? "" : "s")")
            return state.clients.values.filter { $0.user == user }.map { client in
                client.send(frame)
                return client.close
            }
        }
        for close in closers { close() }
        changes.signal()
    }

    private func arm(_ user: String, _ change: (inout DeliveryFaults<String>) -> Void) {
        state.withLock { state in
            for id in state.clients.keys where state.clients[id]!.user == user { change(&state.clients[id]!.faults) }
        }
    }

    // MARK: Clients

    func attach(send: @escaping @Sendable (String) -> Void, close: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            defer { state.nextClient += 1 }
            state.clients[state.nextClient] = Client(send: send, close: close)
            return state.nextClient
        }
    }

    func detach(_ client: Int) {
        _ = state.withLock { $0.clients.removeValue(forKey: client) }
        changes.signal()
    }

    /// Handles one text frame from a client.
    func receive(_ text: String, from client: Int) {
        defer { changes.signal() }
        state.withLock { state in
            guard let sender = state.clients[client] else { return }
            guard text.utf8.count <= Self.maxClientFrameBytes else {
                // §1: refused with error 1 and not read; the connection stays.
                state.oversizedFrames += 1
                sender.send(VoximplantProtocolError(1).frame(id: nil).jsonString)
                return
            }
            let frame: JSONValue
            do {
                frame = try JSONValue(parsing: text)
            } catch {
                sender.send(VoximplantProtocolError(1).frame(id: nil).jsonString)
                return
            }
            let id = frame["id"]?.stringValue
            switch frame["type"]?.stringValue {
            case "ping":
                sender.send(JSONValue.object(["type": "pong", "id": id.map(JSONValue.string) ?? .null]).jsonString)
            case "pong":
                state.pongs.append(id)
            case "request":
                guard let name = frame["name"]?.stringValue else {
                    sender.send(VoximplantProtocolError(1).frame(id: id).jsonString)
                    return
                }
                let params = frame["params"] ?? [:]
                do {
                    try Self.checkTypes(params)
                    let result = try handle(name, params: params, client: client, state: &state)
                    if name == "sendMessage", let user = state.clients[client]?.user, state.unansweredSenders.contains(user) {
                        state.withheldSendAnswers += 1
                        state.note("withheld the answer to \(user)'s sendMessage")
                        return
                    }
                    state.clients[client]?.send(JSONValue.object(["type": "response", "id": id.map(JSONValue.string) ?? .null, "result": result]).jsonString)
                } catch let error as VoximplantProtocolError {
                    sender.send(error.frame(id: id).jsonString)
                } catch {
                    sender.send(VoximplantProtocolError(500).frame(id: id).jsonString)
                }
            default:
                sender.send(VoximplantProtocolError(2).frame(id: id).jsonString)
            }
        }
    }

    /// §5: a parameter of the protocol given with the wrong JSON type (`"seq": "3"`) makes the
    /// frame ill-formed: error 1, and nothing is done (it is not read as 0 or as absent).
    enum ParameterType: Sendable {
        case string, integer, bool, array, object, payload

        func matches(_ value: JSONValue) -> Bool {
            switch self {
            case .string: value.stringValue != nil
            case .integer: value.intValue != nil
            case .bool: value.boolValue != nil
            case .array: value.arrayValue != nil
            case .object: value.objectValue != nil || value.isNull
            case .payload: value.arrayValue != nil || value.isNull
            }
        }
    }

    static let parameterTypes: [String: ParameterType] = [
        "user": .string, "token": .string, "imId": .integer, "users": .array, "online": .bool,
        "customData": .object, "privateCustomData": .object, "conversation": .string, "conversations": .array,
        "title": .string, "participants": .array, "direct": .bool, "uber": .bool, "publicJoin": .bool,
        "text": .string, "payload": .payload, "clientMessageId": .string, "message": .string,
        "seq": .integer, "eventsFrom": .integer, "eventsTo": .integer, "count": .integer,
    ]

    static func checkTypes(_ params: JSONValue) throws {
        guard let object = params.objectValue else { throw VoximplantProtocolError(1) }
        for (key, value) in object {
            if let type = parameterTypes[key], !type.matches(value) { throw VoximplantProtocolError(1) }
        }
    }

    /// Performs a request as `user` without a socket (the robot).
    func perform(_ name: String, params: JSONValue, as user: String) throws -> JSONValue {
        defer { changes.signal() }
        return try state.withLock { state in try handle(name, params: params, as: user, client: nil, state: &state) }
    }

    // MARK: Requests (lock held)

    private func handle(_ name: String, params: JSONValue, client: Int, state: inout State) throws -> JSONValue {
        if name == "login" {
            guard let userId = params["user"]?.stringValue, let token = params["token"]?.stringValue else { throw VoximplantProtocolError(1) }
            if let code = state.loginFaults.popFirst() {
                state.took(.rejectLogin, 1, "refused \(userId)'s login with error \(code)")
                throw VoximplantProtocolError(code)
            }
            guard let user = state.users[userId], user.token == token, !user.isDeleted else { throw VoximplantProtocolError(3) }
            state.clients[client]?.user = userId
            return ["user": user.json(forSelf: true)]
        }
        guard let user = state.clients[client]?.user else { throw VoximplantProtocolError(3) }
        // Injected request failures are for clients; the robots' requests never take them.
        if let index = state.requestFaults.firstIndex(where: { $0.name == nil || $0.name == name }) {
            let code = state.requestFaults.remove(at: index).code
            state.took(.failRequest, 1, "failed \(user)'s \(name) with error \(code)")
            throw VoximplantProtocolError(code)
        }
        return try handle(name, params: params, as: user, client: client, state: &state)
    }

    private func handle(_ name: String, params: JSONValue, as user: String, client: Int?, state: inout State) throws -> JSONValue {
        let conversationID = params["conversation"]?.stringValue
        switch name {
        case "getUser":
            let target = try findUser(params["user"]?.stringValue, imId: params["imId"]?.intValue, state: state)
            return ["user": target.json(forSelf: target.id == user)]
        case "getUsers":
            let ids = params["users"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard !ids.isEmpty else { throw VoximplantProtocolError(21) }
            guard ids.count <= 50 else { throw VoximplantProtocolError(22) }
            return ["users": .array(try ids.map { try findUser($0, imId: nil, state: state).json(forSelf: $0 == user) })]
        case "editUser":
            if let custom = params["customData"], !custom.isNull { state.users[user]?.customData = custom }
            if let custom = params["privateCustomData"], !custom.isNull { state.users[user]?.privateCustomData = custom }
            let me = state.users[user]!
            sendUserEvent(["eventType": "editUser", "action": "editUser", "initiator": .string(user), "timestamp": .int(now), "user": me.json(forSelf: false)], about: user, except: client, state: &state)
            return ["user": me.json(forSelf: true)]
        case "setStatus":
            let online = params["online"]?.boolValue ?? false
            state.users[user]?.online = online
            sendUserEvent(["eventType": "setStatus", "action": "setStatus", "initiator": .string(user), "timestamp": .int(now), "online": .bool(online)], about: user, except: client, state: &state)
            return ["online": .bool(online)]
        case "subscribe", "unsubscribe":
            let ids = params["users"]?.arrayValue?.compactMap(\.stringValue) ?? []
            for id in ids where state.users[id] == nil { throw VoximplantProtocolError(25) }
            for id in ids {
                if name == "subscribe" { state.users[user]?.subscriptions.insert(id) } else { state.users[user]?.subscriptions.remove(id) }
            }
            return ["users": .array(ids.map(JSONValue.string))]
        case "getSubscriptions":
            return ["users": .array((state.users[user]?.subscriptions.sorted() ?? []).map(JSONValue.string))]
        case "managePushNotifications":
            let kinds: [String]
            switch params["notifications"] {
            case nil, .null?: kinds = []
            case .array(let items)?:
                kinds = try items.map { item in
                    guard let kind = item.stringValue, Self.pushNotifications.contains(kind) else { throw VoximplantProtocolError(1) }
                    return kind
                }
            default: throw VoximplantProtocolError(1)
            }
            state.users[user]?.notifications = Set(kinds)
            return ["user": state.users[user]!.json(forSelf: true)]
        case "registerPushToken":
            guard let token = params["token"]?.stringValue, !token.isEmpty, let platform = params["platform"]?.stringValue,
                Self.pushPlatforms.contains(platform)
            else { throw VoximplantProtocolError(1) }
            // A device's token belongs to the user who registered it last, on the platform given last.
            for id in state.users.keys { state.users[id]?.pushTokens.removeAll { $0.token == token && (id != user || $0.platform != platform) } }
            if !(state.users[user]?.pushTokens.contains { $0.token == token } ?? true) {
                state.users[user]?.pushTokens.append((token, platform))
            }
            return ["token": .string(token)]
        case "unregisterPushToken":
            guard let token = params["token"]?.stringValue, !token.isEmpty else { throw VoximplantProtocolError(1) }
            state.users[user]?.pushTokens.removeAll { $0.token == token }
            return ["token": .string(token)]
        case "createConversation":
            return try createConversation(params, by: user, except: client, state: &state)
        case "getConversation":
            let conversation = try find(conversationID, state: state)
            guard conversation.member(user) != nil || conversation.publicJoin || (state.users[user]?.left.contains(conversation.uuid) ?? false)
            else { throw VoximplantProtocolError(12) }
            return ["conversation": conversation.json]
        case "getConversations":
            let ids = params["conversations"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard !ids.isEmpty else { throw VoximplantProtocolError(21) }
            guard ids.count <= 30 else { throw VoximplantProtocolError(22) }
            return ["conversations": .array(try ids.map { try find($0, state: state).json })]
        case "getPublicConversations":
            return ["conversations": .array(state.conversations.values.filter(\.publicJoin).map(\.uuid).sorted().map(JSONValue.string))]
        case "joinConversation":
            var conversation = try find(conversationID, state: state)
            guard !conversation.direct else { throw VoximplantProtocolError(39) }
            guard conversation.publicJoin else { throw VoximplantProtocolError(15) }
            guard conversation.member(user) == nil else { throw VoximplantProtocolError(13) }
            let member = VoxMember(userId: user)
            conversation.members.append(member)
            rejoin(user, &conversation)
            state.conversations[conversation.uuid] = conversation
            membershipChanged(user, joined: conversation.uuid, state: &state)
            return log(["eventType": "editConversation", "action": "joinConversation", "participants": [member.json]], in: conversation.uuid, by: user, except: client, state: &state)
        case "leaveConversation":
            var conversation = try find(conversationID, state: state)
            guard !conversation.direct else { throw VoximplantProtocolError(40) }
            guard conversation.member(user) != nil else { throw VoximplantProtocolError(19) }
            let event = log(["eventType": "editConversation", "action": "leaveConversation", "participants": [.string(user)]], in: conversation.uuid, by: user, except: client, state: &state, alsoTo: [user])
            conversation = state.conversations[conversation.uuid]!
            conversation.members.removeAll { $0.userId == user }
            leave(user, &conversation)
            state.conversations[conversation.uuid] = conversation
            membershipChanged(user, left: conversation.uuid, state: &state)
            return event
        case "addParticipants", "editParticipants":
            var conversation = try find(conversationID, state: state)
            let caller = try member(user, of: conversation)
            guard !conversation.direct else { throw VoximplantProtocolError(name == "addParticipants" ? 37 : 39) }
            guard caller.canManageParticipants else { throw VoximplantProtocolError(12) }
            // A user listed twice in one request counts once (the first entry), as the SDK says.
            var listed = Set<String>()
            let participants = (params["participants"]?.arrayValue ?? []).compactMap(VoxMember.init(json:)).filter { listed.insert($0.userId).inserted }
            guard !participants.isEmpty else { throw VoximplantProtocolError(21) }
            for participant in participants {
                guard state.users[participant.userId] != nil else { throw VoximplantProtocolError(25) }
                let existing = conversation.members.firstIndex { $0.userId == participant.userId }
                if name == "addParticipants" {
                    guard existing == nil else { throw VoximplantProtocolError(13) }
                    conversation.members.append(participant)
                    rejoin(participant.userId, &conversation)
                } else {
                    guard let existing else { throw VoximplantProtocolError(19) }
                    if conversation.members[existing].isOwner || participant.isOwner, !caller.isOwner { throw VoximplantProtocolError(12) }
                    var edited = participant
                    edited.lastReadSequence = conversation.members[existing].lastReadSequence
                    conversation.members[existing] = edited
                }
            }
            state.conversations[conversation.uuid] = conversation
            if name == "addParticipants" {
                for participant in participants { membershipChanged(participant.userId, joined: conversation.uuid, state: &state) }
            }
            return log(["eventType": "editConversation", "action": .string(name), "participants": .array(participants.map(\.json))], in: conversation.uuid, by: user, except: client, state: &state)
        case "removeParticipants":
            var conversation = try find(conversationID, state: state)
            let caller = try member(user, of: conversation)
            guard !conversation.direct else { throw VoximplantProtocolError(38) }
            guard caller.canManageParticipants else { throw VoximplantProtocolError(12) }
            var listed = Set<String>()
            let ids = (params["participants"]?.arrayValue ?? []).compactMap { $0.stringValue ?? $0["userId"]?.stringValue }.filter { listed.insert($0).inserted }
            for id in ids where conversation.member(id) == nil { throw VoximplantProtocolError(19) }
            let event = log(["eventType": "editConversation", "action": "removeParticipants", "participants": .array(ids.map(JSONValue.string))], in: conversation.uuid, by: user, except: client, state: &state, alsoTo: Set(ids))
            conversation = state.conversations[conversation.uuid]!
            conversation.members.removeAll { ids.contains($0.userId) }
            for id in ids { leave(id, &conversation) }
            state.conversations[conversation.uuid] = conversation
            for id in ids { membershipChanged(id, left: conversation.uuid, state: &state) }
            return event
        case "editConversation":
            var conversation = try find(conversationID, state: state)
            guard try member(user, of: conversation).isOwner else { throw VoximplantProtocolError(12) }
            if let title = params["title"]?.stringValue { conversation.title = title }
            if let isPublic = params["publicJoin"]?.boolValue {
                guard !(isPublic && conversation.direct) else { throw VoximplantProtocolError(34) }
                conversation.publicJoin = isPublic
            }
            if let custom = params["customData"], !custom.isNull {
                guard custom.jsonData().count <= 5 * 1024 else { throw VoximplantProtocolError(0) }
                conversation.customData = custom
            }
            state.conversations[conversation.uuid] = conversation
            return log(["eventType": "editConversation", "action": "editConversation"], in: conversation.uuid, by: user, except: client, state: &state)
        case "sendMessage":
            return try sendMessage(params, by: user, except: client, state: &state)
        case "editMessage", "removeMessage":
            var conversation = try find(conversationID, state: state)
            let caller = try member(user, of: conversation)
            guard let messageID = params["message"]?.stringValue else { throw VoximplantProtocolError(1) }
            guard var message = conversation.messages[messageID] else {
                throw VoximplantProtocolError(conversation.log.contains { $0["message"]?["uuid"]?.stringValue == messageID } ? 11 : 10)
            }
            let own = message.sender == user
            if name == "editMessage" {
                guard own ? caller.canEdit : caller.canEditAll else { throw VoximplantProtocolError(12) }
                if let text = params["text"]?.stringValue {
                    guard text.unicodeScalars.count <= Self.maxTextCodePoints else { throw VoximplantProtocolError(23) }
                    message.text = text
                }
                if let payload = params["payload"], !payload.isNull { message.payload = payload }
            } else {
                guard own ? caller.canRemove : caller.canRemoveAll else { throw VoximplantProtocolError(12) }
            }
            message.sequence = conversation.lastSequence + 1
            message.timestamp = now
            if name == "editMessage" {
                conversation.messages[messageID] = message
            } else {
                conversation.messages[messageID] = nil
                conversation.messageOrder.removeAll { $0 == messageID }
            }
            state.conversations[conversation.uuid] = conversation
            return log(["eventType": .string(name), "action": .string(name), "message": message.json], in: conversation.uuid, by: user, except: client, state: &state)
        case "typing":
            let conversation = try find(conversationID, state: state)
            _ = try member(user, of: conversation)
            state.typingLog.append((user, conversation.uuid))
            // The typing limit: one notification per user and conversation per 10 s reaches the others.
            let key = "\(user)/\(conversation.uuid)"
            if let last = state.lastTyping[key], now - last < 10 { return ["conversation": .string(conversation.uuid)] }
            state.lastTyping[key] = now
            let event: JSONValue = ["type": "event", "eventType": "typing", "action": "typing", "initiator": .string(user), "conversation": .string(conversation.uuid), "timestamp": .int(now)]
            for (_, target) in state.clients where target.user != user && conversation.member(target.user ?? "") != nil {
                target.send(event.jsonString)
            }
            return ["conversation": .string(conversation.uuid)]
        case "read":
            var conversation = try find(conversationID, state: state)
            guard let index = conversation.members.firstIndex(where: { $0.userId == user }) else { throw VoximplantProtocolError(19) }
            guard let given = params["seq"]?.intValue else { throw VoximplantProtocolError(1) }
            guard given <= conversation.lastSequence else { throw VoximplantProtocolError(24) }
            // §5: the marker goes where the client puts it (back too: "unread from here"); below 1
            // it is 1, as the SDK's `markAsRead`: everything but the first event unread.
            let sequence = max(1, given)
            conversation.members[index].lastReadSequence = sequence
            state.conversations[conversation.uuid] = conversation
            state.readLog.append((user, conversation.uuid, sequence))
            let event: JSONValue = ["type": "event", "eventType": "read", "action": "read", "initiator": .string(user), "conversation": .string(conversation.uuid), "seq": .int(sequence), "timestamp": .int(now)]
            for (id, target) in state.clients where id != client && conversation.member(target.user ?? "") != nil {
                target.send(event.jsonString)
            }
            return ["conversation": .string(conversation.uuid), "seq": .int(sequence)]
        case "retransmitEvents":
            let result = try retransmit(params, for: user, state: state)
            state.retransmittedEvents += result["events"]?.arrayValue?.count ?? 0
            if let conversation = params["conversation"]?.stringValue, let from = params["eventsFrom"]?.intValue,
                let to = params["eventsTo"]?.intValue
            {
                state.retransmits.append((client ?? -1, user, conversation, from, to))
            }
            return result
        default:
            throw VoximplantProtocolError(2)
        }
    }

    private func createConversation(_ params: JSONValue, by user: String, except client: Int?, state: inout State) throws -> JSONValue {
        let direct = params["direct"]?.boolValue ?? false
        let uber = params["uber"]?.boolValue ?? false
        let publicJoin = params["publicJoin"]?.boolValue ?? false
        var members = [VoxMember.owner(user)]
        for participant in (params["participants"]?.arrayValue ?? []).compactMap(VoxMember.init(json:)) where participant.userId != user {
            guard state.users[participant.userId] != nil else { throw VoximplantProtocolError(25) }
            members.append(participant)
        }
        if direct {
            guard !uber, !publicJoin else { throw VoximplantProtocolError(34) }
            guard members.count == 2 else { throw VoximplantProtocolError(35) }
            let pair = Set(members.map(\.userId))
            if let existing = state.conversations.values.first(where: { $0.direct && Set($0.members.map(\.userId)) == pair }) {
                return existing.log[0]
            }
        }
        if let custom = params["customData"], custom.jsonData().count > 5 * 1024 { throw VoximplantProtocolError(0) }
        state.nextID += 1
        let uuid = "conv-\(state.nextID)"
        state.conversations[uuid] = VoxConversation(
            uuid: uuid,
            title: params["title"]?.stringValue,
            direct: direct,
            uber: uber,
            publicJoin: publicJoin,
            customData: params["customData"]?.nonNull ?? [:],
            createdTime: now,
            lastUpdateTime: now,
            members: members
        )
        for member in members { membershipChanged(member.userId, joined: uuid, state: &state) }
        return log(["eventType": "createConversation", "action": "createConversation"], in: uuid, by: user, except: client, state: &state)
    }

    private func sendMessage(_ params: JSONValue, by user: String, except client: Int?, state: inout State) throws -> JSONValue {
        var conversation = try find(params["conversation"]?.stringValue, state: state)
        guard try member(user, of: conversation).canWrite else { throw VoximplantProtocolError(12) }
        let clientMessageId = params["clientMessageId"]?.stringValue
        if let clientMessageId, let existing = conversation.clientMessageIDs["\(user)/\(clientMessageId)"],
            let original = conversation.log.first(where: {
                $0["eventType"]?.stringValue == "sendMessage" && $0["message"]?["uuid"]?.stringValue == existing
            })
        {
            state.duplicateSends += 1
            return original
        }
        let text = params["text"]?.stringValue ?? ""
        guard text.unicodeScalars.count <= Self.maxTextCodePoints else { throw VoximplantProtocolError(23) }
        try checkRate(user, state: &state)
        // The state's copy goes, so the conversation's log and messages grow in place instead of
        // being copied for every message.
        state.conversations[conversation.uuid] = nil
        state.nextID += 1
        let message = VoxMessage(
            uuid: "msg-\(state.nextID)",
            conversation: conversation.uuid,
            sequence: conversation.lastSequence + 1,
            sender: user,
            text: text,
            payload: params["payload"]?.nonNull ?? [],
            clientMessageId: clientMessageId,
            timestamp: now
        )
        conversation.messages[message.uuid] = message
        conversation.messageOrder.append(message.uuid)
        if let clientMessageId { conversation.clientMessageIDs["\(user)/\(clientMessageId)"] = message.uuid }
        let uuid = conversation.uuid
        let members = state.autoReplies.isEmpty ? [] : Set(conversation.members.map(\.userId))
        // The state holds the only copy again before `log` appends to it.
        state.conversations[uuid] = consume conversation
        let event = log(["eventType": "sendMessage", "action": "sendMessage", "message": message.json], in: uuid, by: user, except: client, state: &state)
        for (robot, reply) in state.autoReplies where robot != user && members.contains(robot) {
            if let answer = reply(user, text) {
                _ = try? sendMessage(["conversation": .string(uuid), "text": .string(answer)], by: robot, except: nil, state: &state)
            }
        }
        return event
    }

    private func checkRate(_ user: String, state: inout State) throws {
        let second = now
        var times = state.sendTimes[user] ?? []
        while let first = times.first, first <= second - 60 { times.removeFirst() }
        if let limit = configuration.messagesPerSecond, times.filter({ $0 == second }).count >= limit { throw VoximplantProtocolError(32, limit: limit) }
        if let limit = configuration.messagesPerMinute, times.count >= limit { throw VoximplantProtocolError(33, limit: limit) }
        times.append(second)
        state.sendTimes[user] = times
    }

    private func retransmit(_ params: JSONValue, for user: String, state: State) throws -> JSONValue {
        let conversation = try find(params["conversation"]?.stringValue, state: state)
        guard conversation.member(user) != nil || (state.users[user]?.left.contains(conversation.uuid) ?? false) else {
            throw VoximplantProtocolError(19)
        }
        let from = params["eventsFrom"]?.intValue
        let to = params["eventsTo"]?.intValue
        let count = params["count"]?.intValue
        let given = [from, to, count].compactMap { $0 }.count
        guard given < 3 else { throw VoximplantProtocolError(36) }
        guard given == 2 else { throw VoximplantProtocolError(41) }
        let last = conversation.lastSequence
        // §6, in this order: `count` out of 1…100 (21, 22), a bound below 1 (21), `from > to` (28),
        // a bound above `lastSequence` (24), then a span over 100 (22).
        if let count {
            guard count >= 1 else { throw VoximplantProtocolError(21) }
            guard count <= 100 else { throw VoximplantProtocolError(22) }
        }
        for bound in [from, to].compactMap({ $0 }) where bound < 1 { throw VoximplantProtocolError(21) }
        if let from, let to, from > to { throw VoximplantProtocolError(28) }
        for bound in [from, to].compactMap({ $0 }) where bound > last { throw VoximplantProtocolError(24) }
        let range: ClosedRange<Int64>
        switch (from, to, count) {
        case (let from?, let to?, nil):
            guard to - from + 1 <= 100 else { throw VoximplantProtocolError(22) }
            range = from...to
        case (let from?, nil, let count?):
            range = from...min(last, from + count - 1)
        case (nil, let to?, let count?):
            range = max(1, to - count + 1)...to
        default:
            throw VoximplantProtocolError(41)
        }
        let events = range.filter { conversation.canSee(user, sequence: $0) }.map { conversation.log[Int($0 - 1)] }
        return ["from": .int(range.lowerBound), "to": .int(range.upperBound), "events": .array(events)]
    }

    // MARK: Logging and delivery (lock held)

    /// Appends a logged event and sends it to the participants' clients, except the requesting
    /// client, which gets it as its result. `alsoTo` are users who receive it though no longer
    /// participants (removed, left).
    @discardableResult
    func log(
        _ fields: JSONValue,
        in uuid: String,
        by user: String,
        except client: Int?,
        state: inout State,
        alsoTo: Set<String> = []
    ) -> JSONValue {
        // Taken out while it changes, so its log grows in place (see sendMessage).
        var conversation = state.conversations.removeValue(forKey: uuid)!
        let sequence = conversation.lastSequence + 1
        conversation.lastUpdateTime = now
        var event = fields.objectValue ?? [:]
        event["initiator"] = .string(user)
        event["conversation"] = .string(uuid)
        event["seq"] = .int(sequence)
        event["timestamp"] = .int(now)
        conversation.log.append(.null)
        if event["message"] == nil || event["eventType"]?.stringValue == "createConversation" || event["eventType"]?.stringValue == "editConversation" {
            event["conversationSnapshot"] = conversation.json
        }
        conversation.log[Int(sequence - 1)] = .object(event)
        state.conversations[uuid] = conversation
        notifyOffline(about: event, in: conversation, by: user, state: &state)
        var frame = event
        frame["type"] = "event"
        let text = JSONValue.object(frame).jsonString
        let recipients = Set(conversation.members.map(\.userId)).union(alsoTo)
        for id in state.clients.keys.sorted() where id != client {
            guard let target = state.clients[id]?.user, recipients.contains(target) else { continue }
            let (frames, applied) = state.clients[id]!.faults.pass(text)
            if let applied {
                let which = "#\(sequence) of \(uuid)"
                let line: String = switch applied {
                case .dropEvents: "dropped \(which) to \(target)"
                case .delayEvents: "held \(which) for \(target)"
                case .duplicateEvents: "sent \(which) to \(target) twice"
                case .reorderEvents: "sent \(which) to \(target) before the event held for it"
                default: "\(applied.rawValue): \(which) to \(target)"
                }
                state.took(applied, 1, line)
            }
            if applied == .dropEvents { state.dropped += 1 }
            for frame in frames { state.clients[id]!.send(frame) }
            state.delivered += frames.count
            if !frames.isEmpty { state.deliveries.append((target, uuid, sequence)) }
        }
        return .object(event)
    }

    /// §5.1: a `sendMessage` or `editMessage` event becomes a push to each token of every other
    /// participant who asked for its kind and has no logged-in client.
    private func notifyOffline(about event: [String: JSONValue], in conversation: VoxConversation, by initiator: String, state: inout State) {
        let kind: String
        switch event["eventType"]?.stringValue {
        case "sendMessage"?: kind = "onSendMessage"
        case "editMessage"?: kind = "onEditMessage"
        default: return
        }
        let online = Set(state.clients.values.compactMap(\.user))
        let text = JSONValue.object(event).jsonString
        for member in conversation.members.map(\.userId) where member != initiator && !online.contains(member) {
            guard let target = state.users[member], target.notifications.contains(kind) else { continue }
            for (token, platform) in target.pushTokens {
                state.pushes.append(VoximplantPush(user: member, token: token, platform: platform, data: ["voximplant": "im", "event": text]))
            }
        }
    }

    private func sendUserEvent(_ fields: JSONValue, about user: String, except client: Int?, state: inout State) {
        var frame = fields.objectValue ?? [:]
        frame["type"] = "event"
        let text = JSONValue.object(frame).jsonString
        let subscribers = Set(state.users.values.filter { $0.subscriptions.contains(user) }.map(\.id)).union([user])
        for (id, target) in state.clients where id != client && subscribers.contains(target.user ?? "") {
            target.send(text)
        }
    }

    private func membershipChanged(_ user: String, joined uuid: String? = nil, left leftUUID: String? = nil, state: inout State) {
        if let uuid {
            if !(state.users[user]?.conversations.contains(uuid) ?? true) { state.users[user]?.conversations.append(uuid) }
            state.users[user]?.left.removeAll { $0 == uuid }
        }
        if let leftUUID {
            state.users[user]?.conversations.removeAll { $0 == leftUUID }
            if !(state.users[user]?.left.contains(leftUUID) ?? true) { state.users[user]?.left.append(leftUUID) }
        }
    }

    /// Uber: remember from which sequence on a departing user may not see events.
    private func leave(_ user: String, _ conversation: inout VoxConversation) {
        if conversation.uber { conversation.awaySince[user] = conversation.lastSequence + 1 }
    }

    private func rejoin(_ user: String, _ conversation: inout VoxConversation) {
        guard conversation.uber, let since = conversation.awaySince.removeValue(forKey: user) else { return }
        let until = conversation.lastSequence
        if since <= until { conversation.hidden[user, default: []].append(since...until) }
    }

    private func find(_ uuid: String?, state: State) throws -> VoxConversation {
        guard let uuid else { throw VoximplantProtocolError(1) }
        guard let conversation = state.conversations[uuid] else { throw VoximplantProtocolError(8) }
        return conversation
    }

    private func member(_ user: String, of conversation: VoxConversation) throws -> VoxMember {
        guard let member = conversation.member(user) else { throw VoximplantProtocolError(19) }
        return member
    }

    private func findUser(_ id: String?, imId: Int64?, state: State) throws -> VoxUser {
        if let id, let user = state.users[id] { return user }
        if let imId, let user = state.users.values.first(where: { Int64($0.imId) == imId }) { return user }
        throw VoximplantProtocolError(25)
    }
}
