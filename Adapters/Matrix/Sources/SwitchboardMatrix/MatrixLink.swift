import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// One link to a homeserver: a login (or the stored token, checked), then the `/sync` long-poll
/// in the link's scope, and requests as they come.
///
/// The lock guards the token, the user, the sync reader (rooms' state, recent messages, windows)
/// and the transaction counter.
final class MatrixLink: BackendConnection {
    private let output = LinkOutput()
    var updates: BackendUpdates { output.updates }
    private let configuration: MatrixConfiguration
    private let transport: HTTPTransport
    private let context: ConnectionContext

    private struct State {
        var token = ""
        var userID = ""
        var reader: MatrixSyncReader?
    }

    private let state = Locked(State())

    init(configuration: MatrixConfiguration, transport: HTTPTransport, context: ConnectionContext) {
        self.configuration = configuration
        self.transport = transport
        self.context = context
    }

    private var base: String { configuration.base }
    private var me: String { state.withLock { $0.userID } }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        try await logIn()
        return try await output.whileRunning([{ await self.syncLoop() }]) { try await body(self) }
    }

    // MARK: Login

    /// A token from the configuration or the stored credentials is checked with `whoami`; without
    /// one, a password login whose token is kept with the credentials.
    private func logIn() async throws {
        let stored = context.credentials
        let token: String
        switch configuration.login {
        case .accessToken(let given):
            token = given
        case .password(let user, let password):
            if let kept = stored["access_token"] {
                token = kept
            } else {
                var body: [String: JSONValue] = [
                    "type": "m.login.password",
                    "identifier": ["type": "m.id.user", "user": .string(user)],
                    "password": .string(password),
                    "initial_device_display_name": .string(configuration.deviceName),
                ]
                if let device = stored["device_id"] ?? configuration.deviceID { body["device_id"] = .string(device) }
                let answer = try await call("POST", "/_matrix/client/v3/login", body: .object(body), request: "login", authorized: false)
                guard let newToken = answer["access_token"]?.stringValue, let userID = answer["user_id"]?.stringValue else {
                    throw SwitchboardError(.protocolViolation, "login: no access_token or user_id")
                }
                state.withLock { state in
                    state.token = newToken
                    state.userID = userID
                    state.reader = MatrixSyncReader(me: userID, homeserver: base)
                }
                var credentials = Credentials(["access_token": newToken, "user_id": userID])
                credentials["device_id"] = answer["device_id"]?.stringValue
                output.yield(.credentials(credentials))
                output.yield(.user(ParticipantID(userID)))
                context.logger.debug("matrix: logged in", metadata: ["device": .string(answer["device_id"]?.stringValue ?? "")])
                return
            }
        }
        state.withLock { $0.token = token }
        let answer = try await call("GET", "/_matrix/client/v3/account/whoami", request: "whoami")
        guard let userID = answer["user_id"]?.stringValue else { throw SwitchboardError(.protocolViolation, "whoami: no user_id") }
        state.withLock { state in
            state.userID = userID
            state.reader = MatrixSyncReader(me: userID, homeserver: base)
        }
        output.yield(.user(ParticipantID(userID)))
    }

    // MARK: Sync

    /// The long-poll, in the link's scope. The first sync of the link asks for the full state
    /// (a complete snapshot) and returns at once; the next ones wait up to `syncTimeout`. A failed
    /// sync ends the link (the engine reconnects from the stored cursor); an answer that cannot
    /// be read is reported and asked again.
    private func syncLoop() async {
        var since: String?
        if case .token(let token)? = context.cursor { since = token }
        var first = true
        let filter = JSONValue.object([
            "room": ["timeline": ["limit": .int(Int64(configuration.timelineLimit))], "state": ["lazy_load_members": false]],
            "presence": ["not_types": ["*"]],
        ]).jsonString
        while !Task.isCancelled {
            var query: [(String, String)] = [
                ("filter", filter), ("set_presence", "offline"),
                ("timeout", first ? "0" : String(MatrixMapping.milliseconds(configuration.syncTimeout))),
            ]
            if let since { query.append(("since", since)) }
            if first { query.append(("full_state", "true")) }
            let body: Data
            do {
                body = try await send("GET", "/_matrix/client/v3/sync", query: query, request: "sync", timeout: configuration.syncTimeout + configuration.requestTimeout)
            } catch let error as SwitchboardError where error.code == .timedOut {
                continue
            } catch let error as SwitchboardError where since != nil && Self.refusesCursor(error) {
                // A cursor this server does not know (another server's, a restored backup, a
                // corrupted store): start over with a full sync; the snapshot and the history
                // below its windows catch up, and the engine drops what it already has.
                output.yield(.problem(SwitchboardError(.protocolViolation, "the stored sync cursor was refused; syncing from the start", underlying: error)))
                since = nil
                first = true
                continue
            } catch {
                end(SwitchboardError.classify(error))
                return
            }
            let batch: MatrixSyncReader.Batch
            do {
                batch = try state.withLock { state throws(SwitchboardError) in
                    guard var reader = state.reader else { throw SwitchboardError(.notConnected, "sync before login") }
                    defer { state.reader = reader }
                    return try reader.read(body, first: first, since: since)
                }
            } catch {
                // Asked again from the same cursor, after a second: a server answering garbage at
                // once is not asked in a tight loop.
                output.yield(.problem(SwitchboardError.classify(error)))
                try? await context.clock.sleep(for: .seconds(1))
                continue
            }
            for item in batch.items {
                switch item {
                case .update(let update):
                    output.yield(update)
                case .resolveEdit(let room, let target):
                    await resolveEdit(of: target, in: room)
                }
            }
            since = batch.nextBatch
            first = false
        }
    }

    /// Synapse answers an unknown `since` with 400 (`M_UNKNOWN` "Invalid stream token" or
    /// `M_INVALID_PARAM`).
    static func refusesCursor(_ error: SwitchboardError) -> Bool {
        (error.code == .messageRejected || error.code == .invalidArgument)
            && (error.vendorCode == "M_UNKNOWN" || error.vendorCode == "M_INVALID_PARAM" || error.vendorCode == "400")
    }

    /// An edit of a message the reader has not seen: the original, fetched with its latest edit.
    private func resolveEdit(of target: MessageID, in room: ConversationID) async {
        do {
            let event = try await call("GET", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/event/\(segment(target.rawValue))", request: "event")
            guard let message = MatrixMapping.message(event, room: room, me: me, homeserver: base) else { return }
            state.withLock { $0.reader?.remember(message) }
            output.yield(.event(BackendEvent(.messageUpdated(message), conversation: room, time: message.time)))
        } catch {
            output.yield(.problem(SwitchboardError(.protocolViolation, "an edit of \(target) could not be placed: \(SwitchboardError.classify(error).code)")))
        }
    }

    private func end(_ error: SwitchboardError) {
        context.logger.debug("matrix: link ended", metadata: ["code": .string(error.code.description)])
        output.end(error)
    }

    // MARK: Requests

    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        let room = outgoing.conversationID
        var content = MatrixMapping.content(of: outgoing.content)
        var attachments: [Message.Attachment] = []
        if var attachment = try single(outgoing.content.attachments) {
            let (mxc, size) = try await upload(attachment)
            attachment.size = attachment.size ?? Int64(size)
            content = MatrixMapping.fileContent(of: attachment, mxc: mxc, caption: outgoing.content.text)
            var sent = attachment.withoutData
            sent.url = MatrixMapping.downloadURL(mxc: mxc, homeserver: base)
            attachments = [sent]
        }
        // The client id is the transaction id: a resend of the same message is the same
        // transaction, which the server answers with the first event instead of a second one.
        let answer = try await call(
            "PUT", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/send/m.room.message/\(segment(outgoing.clientID.rawValue))",
            body: content, request: "send"
        )
        guard let eventID = answer["event_id"]?.stringValue else { throw SwitchboardError(.protocolViolation, "send: no event_id") }
        return Message(
            serverID: MessageID(eventID), clientID: outgoing.clientID, conversationID: room, sender: ParticipantID(me),
            senderRole: .user, kind: attachments.isEmpty ? outgoing.content.kind : .file, text: outgoing.content.text,
            attachments: attachments, time: context.clock.date, quote: outgoing.content.quote
        )
    }

    func edit(_ message: MessageID, in room: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        let content: JSONValue = [
            "msgtype": "m.text", "body": .string("* \(text)"),
            "m.new_content": ["msgtype": "m.text", "body": .string(text)],
            "m.relates_to": ["rel_type": "m.replace", "event_id": .string(message.rawValue)],
        ]
        _ = try await call(
            "PUT", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/send/m.room.message/\(transactionID())",
            body: content, request: "edit"
        )
        return nil
    }

    func delete(_ message: MessageID, in room: ConversationID) async throws {
        _ = try await call(
            "PUT", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/redact/\(segment(message.rawValue))/\(transactionID())",
            body: [:], request: "redact"
        )
    }

    func typing(in room: ConversationID, isTyping: Bool, draft: String?) async throws {
        var body: [String: JSONValue] = ["typing": .bool(isTyping)]
        if isTyping { body["timeout"] = 30_000 }
        _ = try await call("PUT", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/typing/\(segment(me))", body: .object(body), request: "typing")
    }

    func markRead(_ room: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        let eventID: MessageID
        switch marker {
        case .message(let id):
            eventID = id
        case .time(let time):
            guard let newest = state.withLock({ $0.reader?.newestMessage(in: room, atOrBefore: time) })?.serverID else { return }
            eventID = newest
        case .sequence:
            throw SwitchboardError(.invalidArgument, "Matrix read markers name an event, not a sequence")
        }
        _ = try await call(
            "POST", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/receipt/m.read/\(segment(eventID.rawValue))",
            body: [:], request: "receipt"
        )
    }

    func closeConversation(_ room: ConversationID) async throws -> ClosedConversation {
        _ = try await call("POST", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/leave", body: [:], request: "leave")
        return .done
    }

    func updateConversation(_ room: ConversationID, _ changes: ConversationChanges) async throws -> ConversationInfo? {
        if let title = changes.title {
            _ = try await call("PUT", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/state/m.room.name", body: ["name": .string(title)], request: "name")
        }
        if let topic = changes.customData?["topic"]?.stringValue {
            _ = try await call("PUT", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/state/m.room.topic", body: ["topic": .string(topic)], request: "topic")
        }
        return nil
    }

    // Changing a member's power level (`updateParticipants`) is not offered: it answers unsupported.

    func addParticipants(_ participants: [Participant], to room: ConversationID) async throws -> ConversationInfo? {
        for participant in participants {
            _ = try await call("POST", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/invite", body: ["user_id": .string(participant.id.rawValue)], request: "invite")
        }
        return nil
    }

    func removeParticipants(_ participants: [ParticipantID], from room: ConversationID) async throws -> ConversationInfo? {
        for participant in participants {
            _ = try await call("POST", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/kick", body: ["user_id": .string(participant.rawValue)], request: "kick")
        }
        return nil
    }

    /// `POST /join/{room}`: the room, known at once so the app can open it when `join` returns;
    /// the next sync brings its state and members.
    func join(_ room: String) async throws -> (ConversationID, [BackendUpdate]) {
        let answer = try await call("POST", "/_matrix/client/v3/join/\(segment(room))", body: [:], request: "join")
        guard let roomID = answer["room_id"]?.stringValue else { throw SwitchboardError(.protocolViolation, "join: no room_id") }
        let info = ConversationInfo(
            id: ConversationID(roomID), kind: .group, state: .active, participants: [Participant(id: ParticipantID(me), role: .user)]
        )
        return (info.id, [.event(BackendEvent(.conversationAdded(info), conversation: info.id, time: context.clock.date))])
    }

    /// A Matrix event carries one file.
    private func single(_ attachments: [Message.Attachment]) throws -> Message.Attachment? {
        guard attachments.count <= 1 else {
            throw SwitchboardError(.invalidArgument, "a Matrix message carries one file: send each in a message of its own")
        }
        return attachments.first
    }

    /// `POST /_matrix/media/v3/upload?filename=…` with the file's bytes; returns its `mxc://`
    /// address and the size sent. The server's size limit answers `M_TOO_LARGE`
    /// (`payloadTooLarge`).
    private func upload(_ attachment: Message.Attachment) async throws -> (mxc: String, size: Int) {
        let data = try attachment.contents()
        let response = try await transport.postData(
            base + "/_matrix/media/v3/upload?" + HTTPTransport.formEncode([("filename", attachment.name)]),
            data: data,
            contentType: attachment.mimeType ?? "application/octet-stream",
            headers: [("User-Agent", "Switchboard Matrix adapter"), ("Authorization", "Bearer \(state.withLock { $0.token })")],
            timeout: configuration.requestTimeout
        )
        guard response.status == 200 else { throw MatrixMapping.error(status: response.status, body: response.body, request: "upload") }
        guard let mxc = (try? JSONValue(parsing: response.body))?["content_uri"]?.stringValue else {
            throw SwitchboardError(.protocolViolation, "upload: no content_uri")
        }
        return (mxc, data.count)
    }

    /// `POST /createRoom`: a private room with the draft's title and invitations; its first
    /// message, if any, sent with the draft's client id.
    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot {
        var body: [String: JSONValue] = [
            "preset": "private_chat",
            "invite": .array(draft.participants.map { .string($0.id.rawValue) }),
            "is_direct": .bool(draft.kind == .direct),
        ]
        if let title = draft.title { body["name"] = .string(title) }
        if let topic = draft.customData?["topic"]?.stringValue { body["topic"] = .string(topic) }
        let answer = try await call("POST", "/_matrix/client/v3/createRoom", body: .object(body), request: "createRoom")
        guard let roomID = answer["room_id"]?.stringValue else { throw SwitchboardError(.protocolViolation, "createRoom: no room_id") }
        let room = ConversationID(roomID)
        let info = ConversationInfo(
            id: room, kind: draft.kind == .direct ? .direct : .group, title: draft.title, state: .active,
            participants: [Participant(id: ParticipantID(me), role: .user, permissions: .owner)],
            customData: draft.customData, createdAt: context.clock.date
        )
        guard let first = draft.firstMessage else { return ConversationSnapshot(conversation: info) }
        let clientID = draft.clientID ?? ClientMessageID(UUID().uuidString)
        let sent = try await send(OutgoingMessage(clientID: clientID, conversationID: room, content: first))
        return ConversationSnapshot(conversation: info, messages: sent.map { [$0] } ?? [])
    }

    /// `GET /rooms/{room}/messages?dir=b`: a page older than the anchor, oldest first. A time
    /// anchor is the oldest message of a sync's window (its `prev_batch` pages back from there)
    /// or else found with `timestamp_to_event` and `/context`.
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        let room = query.conversationID
        var from: String?
        switch query.before {
        case .token(let token):
            from = token
        case .time(let time):
            if let prevBatch = state.withLock({ $0.reader?.prevBatch(in: room, before: time) }) {
                from = prevBatch
            } else {
                from = try await token(before: time, in: room)
            }
        case .sequence:
            throw SwitchboardError(.invalidArgument, "Matrix history pages from an event or a time, not a sequence")
        case nil:
            from = nil
        }
        var parameters: [(String, String)] = [("dir", "b"), ("limit", String(query.limit)), ("filter", #"{"types":["m.room.message"]}"#)]
        if let from { parameters.append(("from", from)) }
        // A gap the engine fills: the pages stop at the sync position it starts from.
        var bounded = false
        if case .token(let to)? = query.after {
            parameters.append(("to", to))
            bounded = true
        }
        let answer = try await call("GET", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/messages", query: parameters, request: "messages")
        let userID = me
        var messages: [Message] = []
        for event in answer["chunk"]?.arrayValue ?? [] {
            guard case .message(var message) = MatrixMapping.item(event, room: room, me: userID, homeserver: base) else { continue }
            message.senderName = nil
            messages.append(message)
        }
        messages.reverse()
        state.withLock { state in for message in messages { state.reader?.remember(message) } }
        let end = answer["end"]?.stringValue
        let chunk = answer["chunk"]?.arrayValue?.count ?? 0
        // Bounded by `to`, a short page is the last; the server may still name an `end`.
        let hasMore = end != nil && (!bounded || chunk >= query.limit)
        return HistoryPage(messages: messages, hasMore: hasMore, nextAnchor: end.map { .token($0) })
    }

    /// A pagination token at or after the last event of `time`'s millisecond: just before the
    /// event nearest the next millisecond. Events share a millisecond; a token before the first
    /// of them would skip those of its neighbours that are older in the room, so the page may
    /// repeat a message of that millisecond instead (the engine drops what it has).
    private func token(before time: Date, in room: ConversationID) async throws -> String? {
        let nearest: JSONValue
        do {
            nearest = try await call(
                "GET", "/_matrix/client/v1/rooms/\(segment(room.rawValue))/timestamp_to_event",
                query: [("ts", String(MatrixMapping.milliseconds(time) + 1)), ("dir", "b")], request: "timestamp_to_event"
            )
        } catch let error as SwitchboardError where error.code == .conversationNotFound {
            // Nothing at or before that time: the room's history ends there.
            return nil
        }
        guard let eventID = nearest["event_id"]?.stringValue else { return nil }
        let context = try await call(
            "GET", "/_matrix/client/v3/rooms/\(segment(room.rawValue))/context/\(segment(eventID))",
            query: [("limit", "0")], request: "context"
        )
        return context["start"]?.stringValue
    }

    // MARK: HTTP

    /// One call, its answer as JSON; an error answer classified.
    private func call(
        _ method: String,
        _ path: String,
        query: [(String, String)] = [],
        body: JSONValue? = nil,
        request: String,
        authorized: Bool = true
    ) async throws -> JSONValue {
        let data = try await send(method, path, query: query, body: body, request: request, timeout: configuration.requestTimeout, authorized: authorized)
        do {
            return try JSONValue(parsing: data)
        } catch {
            throw SwitchboardError(.protocolViolation, "\(request): the answer is not JSON", underlying: error)
        }
    }

    private func send(
        _ method: String,
        _ path: String,
        query: [(String, String)] = [],
        body: JSONValue? = nil,
        request: String,
        timeout: Duration,
        authorized: Bool = true
    ) async throws -> Data {
        var headers = [("User-Agent", "Switchboard Matrix adapter")]
        if authorized { headers.append(("Authorization", "Bearer \(state.withLock { $0.token })")) }
        let url = base + path
        let response: HTTPTransport.Response
        if method == "GET" {
            response = try await transport.get(url, query: query, headers: headers, timeout: timeout)
        } else {
            let full = query.isEmpty ? url : url + "?" + HTTPTransport.formEncode(query)
            response = try await transport.postJSON(full, body: body ?? [:], method: method, headers: headers, timeout: timeout)
        }
        guard response.status == 200 else {
            throw MatrixMapping.error(status: response.status, body: response.body, request: request)
        }
        return response.body
    }

    /// One path segment, percent-encoded (room ids hold `!` and `:`, event ids `$`).
    private func segment(_ text: String) -> String {
        HTTPTransport.percentEncode(text)
    }

    /// A transaction id for what has no client id of its own (edits, redactions).
    private func transactionID() -> String {
        "sb-\(UUID().uuidString)"
    }
}
