import Foundation
@_spi(TestKit) import Switchboard

/// The offline appeals of Mobile SDK 2.3 (protocols/webim.md §12a) on the legacy paths:
/// `GET /l/v/delta?event=init`, `GET /l/v/history?visitor-id&since`, `POST /l/v/action`
/// (`chat.offline_message`, `chat.read_by_visitor`, `chat.delete`) and `POST /l/v/upload` with
/// `chat-mode=offline`. A page is forgotten 30 minutes after its last request.
extension WebimServer {
    /// How long an offline page lives without a request.
    static let offlinePageLifetime: Duration = .seconds(30 * 60)

    /// A robot answer to an appeal, due at a time on the server's clock.
    struct PendingAnswer {
        var visitorID: String
        var chatID: Int
        var text: String
        var due: Duration
        var robot: WebimOperatorRobot
    }

    /// Every appeal of the visitor now: (chat id, state, texts of its messages, unread by the visitor).
    public func appeals(ofVisitor visitor: String) -> [(id: Int, state: String, texts: [String], unread: Bool)] {
        state.withLock { state in
            (state.visitors[visitor]?.appeals ?? []).map { ($0.id, $0.state, $0.messages.map(\.text), $0.unreadByVisitorSinceTs != nil) }
        }
    }

    /// The messages of one appeal, oldest first.
    public func appealMessages(ofVisitor visitor: String, chatID: Int) -> [(id: String, clientSideId: String, kind: String, text: String)] {
        state.withLock { state in
            (state.visitors[visitor]?.appeals.first { $0.id == chatID }?.messages ?? []).map { ($0.id, $0.clientSideId, $0.kind, $0.text) }
        }
    }

    /// The `since` of every history-since request so far (online and offline), in order.
    public var historySinces: [String] { state.withLock { $0.historySinces } }

    /// The `since` of the latest offline history request.
    public var lastHistorySince: String? { historySinces.last }

    /// The visitor a user token (`push-token`) was first seen with.
    public func visitor(ofUserToken token: String) -> String? {
        state.withLock { state in state.visitors.values.first { $0.pushToken == token }?.id }
    }

    /// Makes `robot` answer every new appeal message of a visitor with what `reply` returns,
    /// `delay` later on the server's clock: the answer appears on a later history poll.
    public func answerAppealsLater(as robot: WebimOperatorRobot, after delay: Duration, _ reply: @escaping @Sendable (String) -> String?) {
        state.withLock { $0.appealReply = (robot, delay, reply) }
    }

    // MARK: Endpoints

    /// `GET /l/v/delta?event=init`: the page of an offline session. The visitor is the provided
    /// one (`visitor-ext`), the stored one (`visitor`), or the one the user token (`push-token`,
    /// required) was first seen with.
    func offlineInitialize(_ params: [String: String]) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            if let fault = takeFault(.initialize, action: nil, state: &state) { return answer(for: fault) }
            guard params["event"] == "init", let location = params["location"], let token = params["push-token"], !token.isEmpty else {
                return .error("argument-missing")
            }
            state.initLocations.append(location)
            var visitorID: String?
            var fields: [String: String] = [:]
            if let ext = params["visitor-ext"], let provided = try? JSONValue(parsing: ext),
                let id = (provided["fields"]?["id"] ?? provided["id"])?.stringValue
            {
                visitorID = "provided-\(id)"
                fields = (provided["fields"]?.objectValue ?? provided.objectValue ?? [:]).compactMapValues(\.stringValue)
            } else if let known = state.visitors.values.first(where: { $0.pushToken == token }) {
                // The user token binds the appeals: it wins over a stored visitor.
                visitorID = known.id
            } else if let stored = params["visitor"], let id = (try? JSONValue(parsing: stored))?["id"]?.stringValue,
                let visitor = state.visitors[id], visitor.pushToken == nil || visitor.pushToken == token
            {
                visitorID = id
            }
            let id = visitorID ?? newID("visitor", &state)
            if state.visitors[id] == nil {
                state.visitors[id] = WebimVisitor(id: id, fields: fields, visitSessionID: newID("session", &state))
            }
            state.visitors[id]!.pushToken = token
            let page = WebimPage(pageID: newID("page", &state), authToken: newID("token", &state), visitorID: id, lastUsed: clock.now)
            state.pages[page.pageID] = page
            let visitor = state.visitors[id]!
            return .json([
                "revision": .int(Int64(visitor.revision)),
                "fullUpdate": [
                    "pageId": .string(page.pageID), "authToken": .string(page.authToken), "visitSessionId": .string(visitor.visitSessionID),
                    "visitor": visitor.visitorJSON, "state": "offline-message", "onlineStatus": .string(visitor.onlineStatus),
                ],
            ])
        }
    }

    /// `GET /l/v/history?visitor-id&since`: the chats whose own fields changed after `since` (with
    /// their messages), the messages added after it to the other chats (each naming its chat), and
    /// the `lastChangeTs` to ask from next time. `since=0` reads everything.
    func offlineHistory(_ params: [String: String]) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            guard let page = offlinePage(params, state: &state) else { return .error("reinit-required") }
            if let fault = takeFault(.history, action: nil, state: &state) { return answer(for: fault) }
            state.historySinces.append(params["since"] ?? "")
            guard params["visitor-id"] == page.visitorID else { return .error("wrong-argument-value") }
            guard let since = Int64(params["since"] ?? "0") else { return .error("wrong-argument-value") }
            deliverDueAnswers(state: &state)
            let appeals = state.visitors[page.visitorID]!.appeals
            let changed = appeals.filter { $0.changedMicros > since }
            let changedIDs = Set(changed.map(\.id))
            var messages = appeals.filter { !changedIDs.contains($0.id) }.flatMap { $0.messages.filter { $0.tsMicros > since } }
            // The `duplicateNextMessages` fault: loose messages listed twice.
            let twice = min(state.duplicateNextMessages, messages.count)
            state.duplicateNextMessages -= twice
            state.duplicatesDelivered += twice
            messages = messages.prefix(twice).flatMap { [$0, $0] } + messages.dropFirst(twice)
            let last = appeals.flatMap { [$0.changedMicros] + $0.messages.map(\.tsMicros) }.max() ?? since
            return .json([
                "result": "ok", "chats": .array(changed.map(\.json)), "messages": .array(messages.map(\.json)),
                "lastChangeTs": .int(max(last, since)),
            ])
        }
    }

    /// `POST /l/v/action` of an offline page.
    func offlineAction(_ params: [String: String]) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            guard let page = offlinePage(params, state: &state) else { return .error("reinit-required") }
            let name = params["action"] ?? ""
            if let fault = takeFault(.action, action: name, state: &state) { return answer(for: fault) }
            let visitorID = page.visitorID
            state.actions.append((visitorID, name))
            state.lastParameters[name] = params.filter { $0.key != "page-id" && $0.key != "action" }
            deliverDueAnswers(state: &state)
            switch name {
            case "chat.offline_message":
                return offlineMessage(params, visitorID: visitorID, state: &state)
            case "chat.read_by_visitor":
                guard let index = appealIndex(params, visitorID: visitorID, state: state) else { return .error("chat-not-found") }
                state.readLog.append((visitorID, params["chat-id"]))
                state.visitors[visitorID]!.appeals[index].unreadByVisitorSinceTs = nil
                state.visitors[visitorID]!.appeals[index].changedMicros = nextMicros(&state)
            case "chat.delete":
                guard let index = appealIndex(params, visitorID: visitorID, state: state) else { return .error("chat-not-found") }
                state.visitors[visitorID]!.appeals.remove(at: index)
            default:
                return .error("unknown-method")
            }
            return .json(["result": "ok"])
        }
    }

    /// `POST /l/v/upload` with `chat-mode=offline`: keeps the file and answers its descriptor; the
    /// message comes with the `chat.offline_message` that names it in `file-descs`.
    func offlineUpload(fields: [String: String], filename: String, contentType: String, data: Data) -> Answer {
        defer { changes.signal() }
        return state.withLock { state in
            guard let page = offlinePage(fields, state: &state) else { return .error("reinit-required") }
            if let fault = takeFault(.upload, action: nil, state: &state) { return answer(for: fault) }
            guard fields["chat-mode"] == "offline", fields["visit-session-id"] == page.visitorID else { return .error("argument-missing") }
            guard configuration.uploadAllowed else { return .error("not_allowed_file_type") }
            guard data.count <= configuration.maxUploadMegabytes * 1024 * 1024 else { return .error("max_file_size_exceeded") }
            guard !data.isEmpty else { return .error("file_size_too_small") }
            guard configuration.allowedFileTypes.contains((filename as NSString).pathExtension.lowercased()) else { return .error("not_allowed_file_type") }
            let upload = WebimUpload(guid: newID("file", &state), filename: filename, contentType: contentType, data: data, visitorID: page.visitorID)
            state.uploads[upload.guid] = upload
            return .json(["result": "ok", "data": upload.params])
        }
    }

    // MARK: Appeals (lock held)

    private func offlineMessage(_ params: [String: String], visitorID: String, state: inout State) -> Answer {
        guard let clientID = params["client-message-id"], !clientID.isEmpty else { return .error("argument-missing") }
        let text = params["text"] ?? ""
        let files = params["file-descs"].flatMap { try? JSONValue(parsing: $0) }?.arrayValue ?? []
        // The same client message id again (a resend whose answer was lost): the message it made.
        for appeal in state.visitors[visitorID]!.appeals {
            if let message = appeal.messages.first(where: { $0.clientSideId == clientID }) {
                return .json(["result": "ok", "data": params["chat-id"] == nil ? appeal.json : message.json])
            }
        }
        guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty || !files.isEmpty else { return .error("message_empty") }
        guard text.count <= configuration.maxMessageLength else { return .error("max-message-length-exceeded") }
        for file in files {
            guard let guid = file["guid"]?.stringValue, state.uploads[guid]?.visitorID == visitorID else { return .error("uploaded-file-not-found") }
        }
        let index: Int
        if params["chat-id"] != nil {
            guard let found = appealIndex(params, visitorID: visitorID, state: state) else { return .error("chat-not-found") }
            index = found
        } else {
            let appeal = WebimAppeal(
                id: state.nextChatID, clientSideId: newID("chat", &state), departmentKey: params["department-key"],
                subject: params["subject"], changedMicros: nextMicros(&state)
            )
            state.nextChatID += 1
            state.visitors[visitorID]!.appeals.append(appeal)
            index = state.visitors[visitorID]!.appeals.count - 1
        }
        let chatID = state.visitors[visitorID]!.appeals[index].id
        let message = WebimMessage(
            id: newID("msg", &state), clientSideId: clientID, kind: files.isEmpty ? "visitor" : "file_visitor",
            text: files.isEmpty ? text : (files.count == 1 ? files[0] : .array(files)).jsonString,
            name: visitorName(visitorID, state: state), tsMicros: nextMicros(&state), read: false, chatID: chatID
        )
        state.visitors[visitorID]!.appeals[index].messages.append(message)
        state.visitors[visitorID]!.appeals[index].unreadByOperatorSinceTs = Double(message.tsMicros) / 1_000_000
        if let (robot, delay, reply) = state.appealReply, files.isEmpty, let answer = reply(text) {
            state.pendingAnswers.append(PendingAnswer(visitorID: visitorID, chatID: chatID, text: answer, due: clock.now + delay, robot: robot))
        }
        return .json(["result": "ok", "data": params["chat-id"] == nil ? state.visitors[visitorID]!.appeals[index].json : message.json])
    }

    /// Posts the robot answers whose time has come.
    func deliverDueAnswers(state: inout State) {
        let now = clock.now
        let due = state.pendingAnswers.filter { $0.due <= now }
        state.pendingAnswers.removeAll { $0.due <= now }
        for answer in due {
            answer.robot.answerAppeal(answer.chatID, of: answer.visitorID, text: answer.text, state: &state)
        }
    }

    private func appealIndex(_ params: [String: String], visitorID: String, state: State) -> Int? {
        guard let raw = params["chat-id"], let id = Int(raw) else { return nil }
        return state.visitors[visitorID]?.appeals.firstIndex { $0.id == id }
    }

    /// The offline page a request names, kept alive by it; `nil` when unknown or forgotten.
    private func offlinePage(_ params: [String: String], state: inout State) -> WebimPage? {
        guard let pageID = params["page-id"], let page = state.pages[pageID], let lastUsed = page.lastUsed else { return nil }
        guard clock.now - lastUsed <= Self.offlinePageLifetime else {
            state.pages[pageID] = nil
            return nil
        }
        state.pages[pageID]!.lastUsed = clock.now
        return page
    }
}

extension WebimOperatorRobot {
    /// Answers the visitor's appeal: the operator takes it (state `chatting`) and the message is
    /// unread by the visitor until `chat.read_by_visitor`. Seen on the visitor's next history poll.
    public func answerAppeal(_ chatID: Int, of visitor: String, text: String) throws {
        defer { server.changes.signal() }
        try server.state.withLock { state throws(WebimEmulatorError) in
            guard state.visitors[visitor]?.appeals.contains(where: { $0.id == chatID }) == true else {
                throw WebimEmulatorError(description: "visitor \(visitor) has no appeal \(chatID)")
            }
            answerAppeal(chatID, of: visitor, text: text, state: &state)
        }
    }

    /// Reads the visitor's messages in the appeal (`unreadByOperatorSinceTs` becomes null).
    public func readAppeal(_ chatID: Int, of visitor: String) throws {
        defer { server.changes.signal() }
        try server.state.withLock { state throws(WebimEmulatorError) in
            guard let index = state.visitors[visitor]?.appeals.firstIndex(where: { $0.id == chatID }) else {
                throw WebimEmulatorError(description: "visitor \(visitor) has no appeal \(chatID)")
            }
            state.visitors[visitor]!.appeals[index].unreadByOperatorSinceTs = nil
            state.visitors[visitor]!.appeals[index].changedMicros = server.nextMicros(&state)
        }
    }

    func answerAppeal(_ chatID: Int, of visitor: String, text: String, state: inout WebimServer.State) {
        guard let index = state.visitors[visitor]?.appeals.firstIndex(where: { $0.id == chatID }) else { return }
        let message = WebimMessage(
            id: server.newID("msg", &state), clientSideId: server.newID("csid", &state), kind: "operator", text: text,
            name: operatorItem.fullname, authorId: operatorItem.id, avatar: operatorItem.avatar, tsMicros: server.nextMicros(&state),
            chatID: chatID
        )
        var appeal = state.visitors[visitor]!.appeals[index]
        appeal.messages.append(message)
        if appeal.operatorInChat == nil || appeal.state != "chatting" || appeal.unreadByVisitorSinceTs == nil {
            appeal.operatorInChat = operatorItem
            appeal.state = "chatting"
            appeal.unreadByVisitorSinceTs = appeal.unreadByVisitorSinceTs ?? Double(message.tsMicros) / 1_000_000
            appeal.changedMicros = message.tsMicros
        }
        state.visitors[visitor]!.appeals[index] = appeal
    }
}
