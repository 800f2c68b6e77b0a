public import Switchboard

/// A Webim survey (protocols/webim.md §2.5, `SurveyItem`), such as the rate form an operator sends
/// to ask for a rating. It arrives as the payload of a `custom(name: "webim.SURVEY")` event — from a
/// `SURVEY` delta or from the full update — and is answered with ``WebimRequests/answer(_:with:)``.
/// A `SURVEY` event whose `data` is `null` means the survey ended (answered or cancelled).
public struct WebimSurvey: Sendable, Hashable {
    public struct Question: Sendable, Hashable {
        /// `stars` (answer 1–5), `radio` (answer = option index), `comment` (free text), or what
        /// the server sends.
        public var type: String
        public var text: String
        public var options: [String]
    }

    public struct Form: Sendable, Hashable {
        public var id: Int
        public var questions: [Question]
    }

    public var id: String
    public var configID: Int
    public var version: String?
    public var forms: [Form]
    /// The form and question (an index into the form's questions) the visitor is on.
    public var currentFormID: Int
    public var currentQuestionIndex: Int

    /// The question the visitor is on, or `nil` when the current pointer names no question.
    public var currentQuestion: Question? {
        guard let form = forms.first(where: { $0.id == currentFormID }), form.questions.indices.contains(currentQuestionIndex) else {
            return nil
        }
        return form.questions[currentQuestionIndex]
    }

    /// The survey on its next question — the next of the form, else the first of the next form —
    /// or `nil` after the last one. The server does not send a new `SURVEY` after each answer: like
    /// the SDK's survey controller, the app moves on itself after an accepted answer.
    public func nextQuestion() -> WebimSurvey? {
        guard let formIndex = forms.firstIndex(where: { $0.id == currentFormID }) else { return nil }
        var next = self
        if forms[formIndex].questions.indices.contains(currentQuestionIndex + 1) {
            next.currentQuestionIndex += 1
            return next
        }
        guard let form = forms[(formIndex + 1)...].first(where: { !$0.questions.isEmpty }) else { return nil }
        next.currentFormID = form.id
        next.currentQuestionIndex = 0
        return next
    }

    /// Decodes a survey object.
    /// - Throws: `SwitchboardError.Code.protocolViolation` naming the missing field.
    public init(json: JSONValue) throws {
        func missing(_ field: String) -> SwitchboardError {
            SwitchboardError(.protocolViolation, "a Webim survey without \(field)")
        }
        guard let id = json["id"]?.stringValue else { throw missing("a string id") }
        guard let config = json["config"]?.nonNull, let configID = config["id"]?.intValue else { throw missing("config.id") }
        guard let forms = config["descriptor"]?["forms"]?.arrayValue else { throw missing("config.descriptor.forms") }
        self.id = id
        self.configID = Int(configID)
        self.version = config["version"]?.stringValue
        self.forms = try forms.map { form in
            guard let formID = form["id"]?.intValue, let questions = form["questions"]?.arrayValue else { throw missing("a form's id and questions") }
            return Form(
                id: Int(formID),
                questions: try questions.map { question in
                    guard let type = question["type"]?.stringValue else { throw missing("a question's type") }
                    return Question(
                        type: type,
                        text: question["text"]?.stringValue ?? "",
                        options: question["options"]?.arrayValue?.compactMap(\.stringValue) ?? []
                    )
                }
            )
        }
        self.currentFormID = Int(json["current_question"]?["form_id"]?.intValue ?? self.forms.first.map { Int64($0.id) } ?? 0)
        self.currentQuestionIndex = Int(json["current_question"]?["question_id"]?.intValue ?? 0)
    }

    /// The survey of a `custom(name: "webim.SURVEY")` event's payload; `nil` when the event ends
    /// the survey.
    public static func fromEvent(payload: JSONValue) throws -> WebimSurvey? {
        guard let data = payload["data"]?.nonNull else { return nil }
        return try WebimSurvey(json: data)
    }
}
