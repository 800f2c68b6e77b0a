public import Foundation
@_spi(TestKit) import Switchboard

/// An error of the emulator's robot API (not of the protocol).
public struct WebimEmulatorError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// An operator acting on a ``WebimServer`` without the operator UI: joins a visitor's chat,
/// types, sends text and files, reads, closes, invites.
public struct WebimOperatorRobot: Sendable {
    public let server: WebimServer
    let operatorItem: WebimOperator

    public var id: Int { operatorItem.id }
    public var name: String { operatorItem.fullname }

    /// Takes the visitor's chat: the operator is assigned and the chat is `chatting`.
    public func join(visitor: String) throws {
        try change(visitor) { server, chat, state in join(&chat, visitor: visitor, server: server, state: &state) }
    }

    func join(_ chat: inout WebimChat, visitor: String, server: WebimServer, state: inout WebimServer.State) {
        chat.operatorInChat = operatorItem
        chat.state = "chatting"
        server.record(["objectType": "CHAT_OPERATOR", "event": "upd", "id": .string(String(chat.id)), "data": operatorItem.json], for: visitor, state: &state)
        server.record(["objectType": "CHAT_STATE", "event": "upd", "id": .string(String(chat.id)), "data": "chatting"], for: visitor, state: &state)
    }

    public func typing(_ isTyping: Bool, visitor: String) throws {
        try change(visitor) { server, chat, state in
            chat.operatorTyping = isTyping
            server.record(["objectType": "CHAT_OPERATOR_TYPING", "event": "upd", "id": .string(String(chat.id)), "data": .bool(isTyping)], for: visitor, state: &state)
        }
    }

    /// Sends a text message; returns its server id.
    @discardableResult
    public func send(_ text: String, to visitor: String, kind: String = "operator") throws -> String {
        try post(visitor, kind: kind, text: text)
    }

    /// A system message (`info`), such as "the operator left the chat".
    @discardableResult
    public func sendInfo(_ text: String, to visitor: String) throws -> String {
        try post(visitor, kind: "info", text: text)
    }

    /// The "all operators are busy" notice (`operator_busy`).
    @discardableResult
    public func sendOperatorBusy(_ text: String = "All operators are busy", to visitor: String) throws -> String {
        try post(visitor, kind: "operator_busy", text: text)
    }

    /// An action request (`action_request`): the visitor is asked to act, such as to call back.
    @discardableResult
    public func sendActionRequest(_ text: String, to visitor: String) throws -> String {
        try post(visitor, kind: "action_request", text: text)
    }

    /// Sends a file as the operator; returns the message id.
    @discardableResult
    public func sendFile(named filename: String, contentType: String, data: Data, to visitor: String) throws -> String {
        var guid = ""
        server.state.withLock { state in
            guid = server.newID("file", &state)
            state.uploads[guid] = WebimUpload(guid: guid, filename: filename, contentType: contentType, data: data, visitorID: visitor)
        }
        let params = server.state.withLock { $0.uploads[guid]!.params }
        return try post(visitor, kind: "file_operator", text: params.jsonString)
    }

    /// Marks every visitor message of the chat read (`MESSAGE_READ`).
    public func markRead(visitor: String) throws {
        try change(visitor) { server, chat, state in
            for index in chat.messages.indices where chat.messages[index].kind.hasSuffix("visitor") && !chat.messages[index].read {
                chat.messages[index].read = true
                server.record(["objectType": "MESSAGE_READ", "event": "upd", "id": .string(chat.messages[index].id), "data": true], for: visitor, state: &state)
            }
        }
    }

    /// Closes the chat (`closed_by_operator`).
    public func close(visitor: String) throws {
        try change(visitor) { server, chat, state in
            chat.state = "closed_by_operator"
            server.record(["objectType": "CHAT_STATE", "event": "upd", "id": .string(String(chat.id)), "data": "closed_by_operator"], for: visitor, state: &state)
        }
    }

    /// Asks the visitor to rate this operator: a `SURVEY` (the account's rate form) whose first
    /// question is `stars` (1–5), then, when `comment` is set, a `comment` question. A `stars`
    /// answer sets the operator's rating as `chat.operator_rate_select` would; after the last
    /// answer the survey ends (`SURVEY` with `data: null`). Returns the survey id.
    @discardableResult
    public func requestRating(visitor: String, question: String = "How would you rate the operator?", comment: String? = nil) throws -> String {
        var surveyID = ""
        try change(visitor) { server, chat, state in
            var questions = [WebimSurvey.Question(type: "stars", text: question)]
            if let comment { questions.append(WebimSurvey.Question(type: "comment", text: comment)) }
            let survey = WebimSurvey(id: server.newID("survey", &state), configID: 1, formID: 1, questions: questions, ratedOperatorID: operatorItem.id)
            surveyID = survey.id
            state.visitors[visitor]!.survey = survey
            server.record(["objectType": "SURVEY", "event": "upd", "id": .string(survey.id), "data": survey.json], for: visitor, state: &state)
        }
        return surveyID
    }

    /// Invites a visitor without a chat: a new chat in state `invitation` with this operator.
    public func invite(visitor: String, text: String) throws {
        try server.state.withLock { state throws(WebimEmulatorError) in
            guard state.visitors[visitor] != nil else { throw WebimEmulatorError(description: "no visitor \(visitor)") }
            server.startChat(visitor, state: &state)
            state.visitors[visitor]!.chat!.state = "invitation"
            state.visitors[visitor]!.chat!.operatorInChat = operatorItem
            let chat = state.visitors[visitor]!.chat!
            server.record(["objectType": "CHAT", "event": "upd", "id": .string(String(chat.id)), "data": chat.json], for: visitor, state: &state)
        }
        _ = try post(visitor, kind: "operator", text: text)
    }

    private func post(_ visitor: String, kind: String, text: String) throws -> String {
        defer { server.changes.signal() }
        return try server.state.withLock { state throws(WebimEmulatorError) in
            guard let chat = state.visitors[visitor]?.chat, !chat.isClosed else {
                throw WebimEmulatorError(description: "visitor \(visitor) has no open chat")
            }
            return post(visitor, kind: kind, text: text, state: &state)
        }
    }

    /// Posts into the visitor's open chat (lock held).
    func post(_ visitor: String, kind: String, text: String, state: inout WebimServer.State) -> String {
        let message = WebimMessage(
            id: server.newID("msg", &state), clientSideId: server.newID("csid", &state), kind: kind, text: text,
            name: operatorItem.fullname, authorId: operatorItem.id, avatar: operatorItem.avatar, tsMicros: server.nextMicros(&state)
        )
        server.appendMessage(message, visitorID: visitor, state: &state)
        state.visitors[visitor]!.chat!.readByVisitor = false
        state.visitors[visitor]!.chat!.unreadByVisitor += 1
        // As the real server does: the visitor's unread count follows each operator message.
        let since = state.visitors[visitor]!.chat!.unreadByVisitorSinceTs ?? Double(message.tsMicros) / 1_000_000
        state.visitors[visitor]!.chat!.unreadByVisitorSinceTs = since
        let unread = state.visitors[visitor]!.chat!.unreadByVisitor
        server.record(
            ["objectType": "UNREAD_BY_VISITOR", "event": "upd", "id": "chat", "data": ["msgCnt": .int(Int64(unread)), "sinceTs": .double(since)]],
            for: visitor, state: &state
        )
        return message.id
    }

    private func change(_ visitor: String, _ body: (WebimServer, inout WebimChat, inout WebimServer.State) -> Void) throws {
        defer { server.changes.signal() }
        try server.state.withLock { state throws(WebimEmulatorError) in
            guard var chat = state.visitors[visitor]?.chat else { throw WebimEmulatorError(description: "visitor \(visitor) has no chat") }
            body(server, &chat, &state)
            state.visitors[visitor]!.chat = chat
        }
    }
}
