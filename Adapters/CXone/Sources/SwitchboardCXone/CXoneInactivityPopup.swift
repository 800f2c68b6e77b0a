public import Foundation
public import Switchboard

/// The inactivity pop-up an agent's workflow sends when the customer has been quiet
/// (protocols/cxone.md §5.2): a `PLUGIN` message whose element is `INACTIVITY_POPUP`. It is not a
/// message of the thread's history; the session announces it as
/// `custom(name: "cxone.InactivityPopup", payload: <the message>)`, and the app answers it with
/// ``CXoneRequests/answer(_:refresh:)`` before ``expiresAt``.
public struct CXoneInactivityPopup: Sendable, Hashable {
    public struct Button: Sendable, Hashable {
        public var id: String
        public var text: String
        public var postback: String
    }

    /// The event name the session uses for a pop-up.
    public static let eventName = "cxone.InactivityPopup"

    public var messageID: String
    public var threadID: ConversationID
    public var title: String
    public var body: String
    public var callToAction: String
    public var numberOfSeconds: Int
    public var startedAt: Date
    /// The button that keeps the chat going: its postback says `"isExpired": false`.
    public var refreshButton: Button
    /// The button that lets the chat end.
    public var expireButton: Button

    /// What the SDK shows: the body, then the call to action.
    public var message: String { callToAction.isEmpty ? body : "\(body) \(callToAction)" }
    /// When the countdown runs out.
    public var expiresAt: Date { startedAt.addingTimeInterval(TimeInterval(numberOfSeconds)) }

    /// Whether a wire message (`MessageDTO`) is an inactivity pop-up.
    public static func isPopup(_ message: JSONValue) -> Bool {
        message["messageContent"]?["type"]?.stringValue == "PLUGIN"
            && message["messageContent"]?["payload"]?["elements"]?[0]?["type"]?.stringValue == "INACTIVITY_POPUP"
    }

    /// Decodes a pop-up from its wire message — the payload of a `cxone.InactivityPopup` event.
    /// - Throws: `SwitchboardError.Code.protocolViolation` naming what is missing.
    public init(message json: JSONValue) throws {
        func missing(_ what: String) -> SwitchboardError {
            SwitchboardError(.protocolViolation, "CXone inactivity pop-up: missing or bad \(what)")
        }
        guard Self.isPopup(json), let popup = json["messageContent"]?["payload"]?["elements"]?[0],
            let elements = popup["elements"]?.arrayValue
        else { throw missing("payload.elements[0] of type INACTIVITY_POPUP") }
        guard let id = json["idOnExternalPlatform"]?.stringValue else { throw missing("idOnExternalPlatform") }
        guard let thread = json["threadIdOnExternalPlatform"]?.stringValue else { throw missing("threadIdOnExternalPlatform") }
        func ofType(_ type: String) -> [JSONValue] { elements.filter { $0["type"]?.stringValue == type } }
        guard let title = ofType("TITLE").first?["text"]?.stringValue else { throw missing("the TITLE element") }
        let texts = ofType("TEXT").compactMap { $0["text"]?.stringValue }
        guard let body = texts.first else { throw missing("the TEXT element") }
        guard let countdown = ofType("COUNTDOWN").first?["variables"], let seconds = countdown["numberOfSeconds"]?.intValue,
            let started = CXoneMapping.date(countdown["startedAt"])
        else { throw missing("the COUNTDOWN element's numberOfSeconds and startedAt") }
        let buttons = try ofType("BUTTON").map { button -> Button in
            guard let id = button["id"]?.stringValue, let text = button["text"]?.stringValue, let postback = button["postback"]?.stringValue else {
                throw missing("a BUTTON's id, text or postback")
            }
            return Button(id: id, text: text, postback: postback)
        }
        let refresh = buttons.firstIndex { $0.postback.range(of: #""isExpired"\s*:\s*false"#, options: .regularExpression) != nil }
        guard buttons.count == 2, let refresh else { throw missing("the two BUTTONs, one with \"isExpired\": false") }
        self.messageID = id.lowercased()
        self.threadID = ConversationID(thread.lowercased())
        self.title = title
        self.body = body
        self.callToAction = texts.dropFirst().first ?? ""
        self.numberOfSeconds = Int(seconds)
        self.startedAt = started
        self.refreshButton = buttons[refresh]
        self.expireButton = buttons[1 - refresh]
    }
}
