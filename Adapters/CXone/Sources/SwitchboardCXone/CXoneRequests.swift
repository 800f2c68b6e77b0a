public import Foundation
public import Switchboard

/// CXone's requests that have no vendor-neutral form: analytics (§3.15), transcripts and
/// triggers. Each goes through `Switchboard.Session.performVendorRequest(_:payload:)`, so it
/// needs a connected session.
public struct CXoneRequests: Sendable {
    public let session: any Session

    public init(session: any Session) {
        self.session = session
    }

    /// What became of a proactive action.
    public enum ProactiveOutcome: String, Sendable, CaseIterable {
        case displayed = "ProactiveActionDisplayed"
        case clicked = "ProactiveActionClicked"
        case succeeded = "ProactiveActionSuccess"
        case failed = "ProactiveActionFailed"
    }

    /// `PageView`; starts a visit (`VisitorVisit`) when none is running, and ends the previous
    /// page (`TimeSpentOnPage`) when both its title and url differ.
    ///
    /// - Returns: the analytics events sent, in order.
    @discardableResult
    public func viewPage(title: String, url: String) async throws -> [JSONValue] {
        try await analytics("PageView", ["title": .string(title), "url": .string(url)])
    }

    /// `TimeSpentOnPage`, sent only when `title` and `url` are the page last viewed.
    @discardableResult
    public func viewPageEnded(title: String, url: String) async throws -> [JSONValue] {
        try await analytics("TimeSpentOnPage", ["title": .string(title), "url": .string(url)])
    }

    /// `ChatWindowOpened`. Needs a visit: ``viewPage(title:url:)`` first.
    @discardableResult
    public func chatWindowOpen() async throws -> [JSONValue] {
        try await analytics("ChatWindowOpened", [:])
    }

    /// `Conversion` of `type` worth `value`, converted at `time`.
    @discardableResult
    public func conversion(type: String, value: Double, at time: Date) async throws -> [JSONValue] {
        try await analytics(
            "Conversion",
            ["conversionType": .string(type), "conversionValue": .double(value), "conversionTimeWithMilliseconds": .string(time.formatted(CXoneServerDate.milliseconds))]
        )
    }

    /// A proactive action's display, click, success or failure (`actionType` is `WelcomeMessage`
    /// or `CustomPopupBox`).
    @discardableResult
    public func proactiveAction(_ outcome: ProactiveOutcome, actionID: String, name: String, type: String) async throws -> [JSONValue] {
        try await analytics(outcome.rawValue, ["actionId": .string(actionID), "actionName": .string(name), "actionType": .string(type)])
    }

    /// `SendTranscript` of a thread to an e-mail address (when the channel allows transcripts).
    public func sendTranscript(of conversation: ConversationID, to email: String) async throws {
        _ = try await session.performVendorRequest("SendTranscript", payload: ["conversation": .string(conversation.rawValue), "email": .string(email)])
    }

    /// Answers an inactivity pop-up (§3.21): `refresh` keeps the chat going, otherwise it may
    /// end. Sent as `SendMessage` with the button's text and postback and
    /// `{"isInactivityPopupAnswer": true}`; the answer is not a message of the thread.
    public func answer(_ popup: CXoneInactivityPopup, refresh: Bool) async throws {
        let button = refresh ? popup.refreshButton : popup.expireButton
        _ = try await session.performVendorRequest(
            "InactivityPopupAnswer",
            payload: ["conversation": .string(popup.threadID.rawValue), "text": .string(button.text), "postback": .string(button.postback)]
        )
    }

    /// The customer's id (`nil` before the server made one) and the visitor's id (made by the
    /// client, the SDK's `analytics.visitorId`), as the link keeps them.
    public func identity() async throws -> (customerID: String?, visitorID: String?) {
        let response = try await session.performVendorRequest("identity", payload: [:])
        guard case .vendor(let ids) = response else { throw SwitchboardError(.protocolViolation, "identity answered with \(response)") }
        return (ids["customerId"]?.stringValue, ids["visitorId"]?.stringValue)
    }

    /// Whether older messages of the thread can be loaded (the SDK's `hasMoreMessagesToLoad`):
    /// `nil` until the thread's first page is known on this connection.
    public func hasMoreMessages(in thread: ConversationID) async throws -> Bool? {
        let response = try await session.performVendorRequest("hasMoreMessages", payload: ["conversation": .string(thread.rawValue)])
        guard case .vendor(let value) = response else { throw SwitchboardError(.protocolViolation, "hasMoreMessages answered with \(response)") }
        return value.boolValue
    }

    /// The CXone mobile SDK whose wire the adapter speaks (sent as `sdkVersion`).
    public static let sdkVersion = CXoneWire.sdkVersion

    /// The customer's custom fields: what the server returned with the last thread recovery, with
    /// what the app set since (the SDK's `customerCustomFields.get()`).
    public func customerCustomFields() async throws -> [String: String] {
        let response = try await session.performVendorRequest("customerCustomFields", payload: [:])
        guard case .vendor(let fields) = response else { throw SwitchboardError(.protocolViolation, "customerCustomFields answered with \(response)") }
        return (fields.objectValue ?? [:]).compactMapValues(\.stringValue)
    }

    /// A thread's (contact's) custom fields as the server last reported them (its recovery), from
    /// the session's store (the SDK's `threads.customFields.get(for:)`).
    public func customFields(ofThread thread: ConversationID) async throws -> [String: String] {
        let info = try await session.conversation(thread).info()
        return (info.customData?["customFields"]?.objectValue ?? [:]).compactMapValues(\.stringValue)
    }

    /// `ExecuteTrigger` with the trigger's id.
    public func executeTrigger(_ id: String) async throws {
        _ = try await session.performVendorRequest("ExecuteTrigger", payload: ["trigger": .string(id)])
    }

    /// The SDK's `signOut()`: closes the session and deletes the customer — their threads,
    /// messages, queued sends (never sent), visitor, tokens and visit — from the store
    /// (`ChatSession.forgetUser()`). The server is not told, as with the SDK. The next session
    /// on this store is a new customer (or the configured ``CXoneConfiguration/customerID``).
    public func signOut() async throws {
        try await session.forgetUser()
        // The analytics' visitor and visit go too (the backend keeps them for the app's calls).
        if let backend = (session as? ChatSession)?.backend as? CXoneBackend { backend.analytics.forget() }
    }

    private func analytics(_ type: String, _ data: JSONValue) async throws -> [JSONValue] {
        guard case .vendor(let sent) = try await session.performVendorRequest("analytics." + type, payload: data) else { return [] }
        return sent.arrayValue ?? []
    }
}
