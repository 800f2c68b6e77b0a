public import Foundation
public import Switchboard

/// CXone's requests that have no vendor-neutral form: analytics (§3.15), transcripts and
/// triggers. Each is a `VendorRequest` the session runs on its live link
/// (`Switchboard.Session.perform(_:)`), so it needs a connected session.
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
        try await session.perform(SendTranscript(conversation: conversation, email: email))
    }

    /// Answers an inactivity pop-up (§3.21): `refresh` keeps the chat going, otherwise it may
    /// end. Sent as `SendMessage` with the button's text and postback and
    /// `{"isInactivityPopupAnswer": true}`; the answer is not a message of the thread.
    public func answer(_ popup: CXoneInactivityPopup, refresh: Bool) async throws {
        let button = refresh ? popup.refreshButton : popup.expireButton
        try await session.perform(InactivityPopupAnswer(thread: popup.threadID, text: button.text, postback: button.postback))
    }

    /// The customer's id (`nil` before the server made one) and the visitor's id (made by the
    /// client, the SDK's `analytics.visitorId`), as the link keeps them.
    public func identity() async throws -> (customerID: String?, visitorID: String?) {
        try await session.perform(Identity())
    }

    /// Whether older messages of the thread can be loaded (the SDK's `hasMoreMessagesToLoad`):
    /// `nil` until the thread's first page is known on this connection.
    public func hasMoreMessages(in thread: ConversationID) async throws -> Bool? {
        try await session.perform(HasMoreMessages(thread: thread))
    }

    /// The version of the CXone mobile SDK whose wire the adapter speaks, sent as `sdkVersion` and
    /// `x-sdk-version` (the server refuses versions it no longer supports): the vendor's wire
    /// version, not this library's (``switchboardVersion``).
    public static let sdkVersion = CXoneWire.sdkVersion

    /// This library's own version (`SwitchboardVersion.string`), for an app's about screen or
    /// logs; the wire carries ``sdkVersion`` instead.
    public static let switchboardVersion = SwitchboardVersion.string

    /// The customer's custom fields: what the server returned with the last thread recovery, with
    /// what the app set since (the SDK's `customerCustomFields.get()`).
    public func customerCustomFields() async throws -> [String: String] {
        try await session.perform(CustomerCustomFields())
    }

    /// A thread's (contact's) custom fields as the server last reported them (its recovery), from
    /// the session's store (the SDK's `threads.customFields.get(for:)`).
    public func customFields(ofThread thread: ConversationID) async throws -> [String: String] {
        let info = try await session.conversation(thread).info()
        return (info.customData?["customFields"]?.objectValue ?? [:]).compactMapValues(\.stringValue)
    }

    /// `ExecuteTrigger` with the trigger's id.
    public func executeTrigger(_ id: String) async throws {
        try await session.perform(ExecuteTrigger(trigger: id))
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
        try await session.perform(Analytics(type: type, data: data))
    }
}

// The vendor requests behind the calls above, one type each: each finds the open CXone link
// (another backend's session answers `unsupported`) and carries the call out there.
extension CXoneRequests {
    /// `SendTranscript` of a thread to an e-mail address.
    struct SendTranscript: VendorRequest {
        var conversation: ConversationID
        var email: String
        var name: String { "SendTranscript" }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
            let sender = try link(connection, as: CXoneLink.Sender.self)
            try await sender.link.sendTranscript(of: conversation, to: email, socket: sender.socket)
            return VendorResult(())
        }
    }

    /// The answer to an inactivity pop-up: the chosen button's text and postback.
    struct InactivityPopupAnswer: VendorRequest {
        var thread: ConversationID
        var text: String
        var postback: String
        var name: String { "InactivityPopupAnswer" }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
            let sender = try link(connection, as: CXoneLink.Sender.self)
            try await sender.link.answerInactivityPopup(in: thread, text: text, postback: postback, socket: sender.socket)
            return VendorResult(())
        }
    }

    /// The customer's and the visitor's ids, as the link keeps them.
    struct Identity: VendorRequest {
        var name: String { "identity" }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<(customerID: String?, visitorID: String?)> {
            VendorResult(try link(connection, as: CXoneLink.Sender.self).link.customerAndVisitor)
        }
    }

    /// Whether older messages of a thread can be loaded; `nil` until known on this connection.
    struct HasMoreMessages: VendorRequest {
        var thread: ConversationID
        var name: String { "hasMoreMessages" }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<Bool?> {
            VendorResult(try link(connection, as: CXoneLink.Sender.self).link.hasMoreMessages(in: thread))
        }
    }

    /// The customer's custom fields as the link knows them.
    struct CustomerCustomFields: VendorRequest {
        var name: String { "customerCustomFields" }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<[String: String]> {
            VendorResult(try link(connection, as: CXoneLink.Sender.self).link.customerCustomFields)
        }
    }

    /// `ExecuteTrigger` with the trigger's id.
    struct ExecuteTrigger: VendorRequest {
        var trigger: String
        var name: String { "ExecuteTrigger" }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<Void> {
            let sender = try link(connection, as: CXoneLink.Sender.self)
            try await sender.link.executeTrigger(trigger, socket: sender.socket)
            return VendorResult(())
        }
    }

    /// One analytics event (§3.15) of `type`, through the link: returns the events sent, in order.
    struct Analytics: VendorRequest {
        var type: String
        var data: JSONValue
        var name: String { "analytics." + type }

        func perform(on connection: any BackendConnection) async throws -> VendorResult<[JSONValue]> {
            VendorResult(try await link(connection, as: CXoneLink.Sender.self).link.analytics(type, data: data))
        }
    }
}
