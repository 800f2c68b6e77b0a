public import Switchboard
public import SwitchboardTransport

/// The adapter for the real Webim mobile API (protocols/webim.md): `GET /l/v/m/init`, the
/// `/l/v/m/delta` long-poll, FIFO `POST /l/v/m/action`, `history`, `upload` — pointed at
/// `https://<account>.webim.ru` or at the emulator.
///
/// A visitor has one support conversation (``WebimBackend/conversationID``) whose state follows
/// the current chat; messages of earlier chats stay in it as history. Credentials (device id,
/// visitor, visit session, page id, auth token) are kept in the session's store.
public struct WebimBackend: ChatBackend {
    /// The id of the visitor's one conversation.
    public static let conversationID = WebimMapping.conversation

    public let configuration: WebimConfiguration
    public let descriptor: BackendDescriptor
    let transport: HTTPTransport
    /// A location ``WebimRequests/changeLocation(_:)`` moved to: this backend's next links init
    /// there; a new backend (the app's next launch) starts at the configured one.
    let changedLocation = ChangedLocation()

    final class ChangedLocation: Sendable {
        private let value = Locked<String?>(nil)
        var location: String? { value.withLock { $0 } }
        func set(_ location: String) { value.withLock { $0 = location } }
    }

    /// - Throws: `SwitchboardError.Code.invalidArgument` for what SessionBuilder refuses.
    public init(configuration: WebimConfiguration, transport: HTTPTransport = HTTPTransport()) throws {
        try configuration.validate()
        self.configuration = configuration
        self.transport = transport.allowingPlainText(configuration.allowsPlainText)
        self.descriptor = BackendDescriptor(
            name: "webim",
            capabilities: [
                .typing, .readMarkers, .historyPaging, .files, .conversationLifecycle, .agentRating, .customFields, .edit,
                .delete, .quotes, .vendorRequests, .unreadCounts,
            ],
            limits: BackendLimits(
                maxTextLength: 20_000,
                maxPayloadBytes: 64 * 1024,
                typingPolicy: .coalesce(interval: .seconds(1), autoStop: .seconds(5)),
                historyPageSize: 25,
                // Each upload is a message of its own.
                attachmentsPerMessage: 1
            ),
            // Each init answers the full update, the current chat with its messages; deltas
            // follow by revision, older messages by history.
            sync: .windowed(pageSize: 25)
        )
    }

    /// The identified visitor (the `id` of the identification fields, or the provided
    /// authorization token, by a digest of it), so each visitor on a device has their own rows;
    /// `nil` for the anonymous visitor the server makes up.
    public var storeUser: String? { configuration.visitorKey }

    /// `clearVisitorData`: the session forgets the stored visitor, and every row of theirs, before
    /// it starts; its later links (after a network drop) keep the visitor the first one made.
    public var startsAsNewUser: Bool { configuration.clearVisitorData }

    public func withConnection<Result: Sendable>(
        _ context: ConnectionContext,
        _ body: @Sendable (any BackendConnection) async throws -> Result
    ) async throws -> Result {
        let link = WebimLink(configuration: configuration, transport: transport, context: context, changedLocation: changedLocation)
        return try await link.run(body)
    }
}

/// Webim calls the normalized API does not cover, as typed vendor requests (``WebimAction`` and
/// the adapter's own requests, run with `Session.perform(_:)`). Each returns the action's JSON
/// answer.
public struct WebimRequests: Sendable {
    public let session: any Session

    public init(session: any Session) {
        self.session = session
    }

    /// The SDK's `destroyWithClearVisitorData()`: closes the session and deletes the visitor and
    /// every row of theirs from the store (`ChatSession.forgetUser()`); queued messages are
    /// never sent. The next session on this store starts a new visitor. The server is not told,
    /// as with the SDK.
    public func destroyWithClearVisitorData() async throws {
        try await session.forgetUser()
    }

    /// `set_push_token`; `nil` unsubscribes (`none`).
    @discardableResult
    public func setPushToken(_ token: String?) async throws -> JSONValue {
        try await call("set_push_token", ["push-token": .string(token ?? "none")])
    }

    /// `chat.keyboard_response`: the visitor pressed a keyboard button.
    @discardableResult
    public func sendKeyboardResponse(buttonID: String, requestMessageID: MessageID) async throws -> JSONValue {
        try await call("chat.keyboard_response", ["button-id": .string(buttonID), "request-message-id": .string(requestMessageID.rawValue)])
    }

    /// `survey.answer`.
    @discardableResult
    public func answerSurvey(surveyID: String, formID: Int, questionID: Int, answer: String) async throws -> JSONValue {
        try await call("survey.answer", ["survey-id": .string(surveyID), "form-id": .string(String(formID)), "question-id": .string(String(questionID)), "answer": .string(answer)])
    }

    /// Answers the survey's current question (`stars`: "1"…"5"; `radio`: the option's index;
    /// `comment`: the text). The survey moves on, or ends with a `webim.SURVEY` event without data.
    @discardableResult
    public func answer(_ survey: WebimSurvey, with answer: String) async throws -> JSONValue {
        try await answerSurvey(surveyID: survey.id, formID: survey.currentFormID, questionID: survey.currentQuestionIndex, answer: answer)
    }

    /// Ends a survey unanswered: `survey.answer` with only `survey-id`, as the SDK's `closeSurvey`.
    @discardableResult
    public func closeSurvey(_ surveyID: String) async throws -> JSONValue {
        try await call("survey.answer", ["survey-id": .string(surveyID)])
    }

    /// `chat.resolution_survey_select`: whether the operator solved the question.
    @discardableResult
    public func answerResolutionSurvey(resolved: Bool, operatorID: Int) async throws -> JSONValue {
        try await call("chat.resolution_survey_select", ["answer": .string(resolved ? "1" : "0"), "operator_id": .string(String(operatorID))])
    }

    /// The SDK's `forceStartChat(departmentKey:)`: `chat.start` with `force-start=1`, which starts
    /// a chat past the account's department and first-question steps, whatever the chat's state.
    /// `Session.startConversation(_:)` is the SDK's `startChat`: no `force-start`, and only when no
    /// chat is open.
    public func forceStartChat(departmentKey: String? = nil) async throws {
        try await session.perform(WebimForceStartChat(departmentKey: departmentKey))
    }

    /// `chat.clear_history`: the server forgets the visitor's messages, and the session's store
    /// removes them (a `historyCleared` event: the SDK's `removedAllMessages`).
    public func clearHistory() async throws {
        try await session.perform(WebimClearHistory())
    }

    /// The visitor's last rating of an operator on the app's 1–5 scale, as the server reported
    /// it (kept up to date by `OPERATOR_RATE`); `nil` when never rated. The SDK's
    /// `getLastRatingOfOperatorWith(id:)`.
    public func lastRating(ofOperator operatorID: Int) async throws -> Int? {
        let chat = try await session.conversation(WebimBackend.conversationID)
        return try await chat.info().customData?["operatorRatings"]?[String(operatorID)]?.intValue.map(Int.init)
    }

    /// `chat.send_chat_history`: mail the transcript.
    @discardableResult
    public func sendChatHistory(to email: String) async throws -> JSONValue {
        try await call("chat.send_chat_history", ["email": .string(email)])
    }

    /// Moves the session to another location without a new session: the adapter re-initialises
    /// there; the conversation and the store stay.
    @discardableResult
    public func changeLocation(_ location: String) async throws -> JSONValue {
        try await session.perform(WebimChangeLocation(location: location))
    }

    private func call(_ name: String, _ params: [String: JSONValue]) async throws -> JSONValue {
        try await session.perform(WebimAction(name, params))
    }
}

/// Any Webim action by its name (`POST /l/v/m/action`), with its fields: how an app reaches an
/// action the adapter offers no call for, without a new release. Run it with
/// `Session.perform(_:)`; it answers with the action's JSON answer.
public struct WebimAction: VendorRequest {
    /// The action, such as `chat.react_message`.
    public var name: String
    /// The action's fields, each sent as its string (any other JSON value as its JSON text),
    /// in the order of their names.
    public var fields: [String: JSONValue]

    public init(_ name: String, _ fields: [String: JSONValue] = [:]) {
        self.name = name
        self.fields = fields
    }

    public func perform(on connection: any BackendConnection) async throws -> VendorResult<JSONValue> {
        let form = fields.map { ($0.key, $0.value.stringValue ?? $0.value.jsonString) }.sorted { $0.0 < $1.0 }
        return VendorResult(try await link(connection, as: WebimLink.self).rawAction(name, form))
    }
}

/// `chat.start` with `force-start=1` (``WebimRequests/forceStartChat(departmentKey:)``).
struct WebimForceStartChat: VendorRequest {
    var departmentKey: String?
    var name: String { "chat.start" }

    func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
        VendorResult(try await link(connection, as: WebimLink.self).forceStartChat(departmentKey: departmentKey))
    }
}

/// `chat.clear_history` (``WebimRequests/clearHistory()``): the server forgets the visitor's
/// messages, and the store removes them before the caller hears back.
struct WebimClearHistory: VendorRequest {
    var name: String { "chat.clear_history" }

    func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
        VendorResult((), updates: try await link(connection, as: WebimLink.self).clearHistory())
    }
}

/// Moves the page to another location (``WebimRequests/changeLocation(_:)``): the link ends and
/// the engine re-initialises at the new one. Answers `{"location": <the new location>}`.
struct WebimChangeLocation: VendorRequest {
    var location: String
    var name: String { "change-location" }

    func perform(on connection: any BackendConnection) async throws -> VendorResult<JSONValue> {
        VendorResult(try link(connection, as: WebimLink.self).changeLocation(to: location))
    }
}
