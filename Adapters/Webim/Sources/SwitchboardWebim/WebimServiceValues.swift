public import Switchboard

/// A department of the account (the SDK's `Department`), from the full update's `departments`
/// and `DEPARTMENT_LIST`; start a chat in one with `ConversationDraft.customFields["department-key"]`.
public struct WebimDepartment: Sendable, Hashable {
    public var key: String
    public var name: String
    /// Whether its operators take chats (`online`, `busy_online`, `offline`, `busy_offline`;
    /// anything else is `unknown`, as the SDK's `DepartmentOnlineStatus.unknown`).
    public var availability: ChatEvent.Availability
    public var order: Int
    /// Its name per locale.
    public var localizedNames: [String: String]
    /// Its logo, a path on the server as the server wrote it.
    public var logo: String?

    /// A `DepartmentItem`, or `nil` without a key or a name (the SDK drops those too).
    public init?(_ json: JSONValue) {
        guard let key = json["key"]?.stringValue, let name = json["name"]?.stringValue else { return nil }
        self.key = key
        self.name = name
        self.availability = WebimMapping.availability(json["online"]?.stringValue)
        self.order = (json["order"]?.intValue).map(Int.init) ?? 0
        self.localizedNames = (json["localeToName"]?.objectValue ?? [:]).compactMapValues(\.stringValue)
        self.logo = json["logo"]?.stringValue
    }
}

extension WebimRequests {
    /// The account's departments as the server last listed them (`Session.settings["departments"]`),
    /// readable at any moment after connecting: the SDK's `getDepartmentList()`.
    public func departments() async -> [WebimDepartment] {
        (await session.settings["departments"]?.arrayValue ?? []).compactMap(WebimDepartment.init)
    }

    /// The hello message the location shows a visitor whose chat has no message yet
    /// (`showHelloMessage`, `helloMessageDescr`; the SDK's `HelloMessageListener`), or `nil`, as
    /// of the last full update (each init): it is not taken back when the visitor writes, so show
    /// it only while the conversation has no message, as the SDK (which also waits for the local
    /// history to be empty).
    public func helloMessage() async -> String? {
        await session.settings["helloMessage"]?.stringValue
    }

    /// The visitor as the server last described them (`visitorFull`, `VISITOR_FULL`), or `nil`.
    public func visitor() async -> WebimVisitor? {
        (await session.settings["visitor"]).flatMap(WebimVisitor.init)
    }

    /// The visit session state as the server last said it (`chat`, `offline-message`,
    /// `department-selection`, …; `Session.settings["visitSessionState"]`): the SDK's
    /// `getVisitSessionState()`. `nil` before the first init.
    public func visitSessionState() async -> String? {
        await session.settings["visitSessionState"]?.stringValue
    }
}

/// The visitor as the server describes them (the SDK's `VisitorItem`: `visitorFull`,
/// `VISITOR_FULL`).
public struct WebimVisitor: Sendable, Hashable {
    public var id: String
    /// The visitor's fields (`name`, `email`, `phone`, custom ones).
    public var fields: [String: String]
    /// The icon the operator sees: a colour (`#rrggbb`) and a shape.
    public var iconColor: String?
    public var iconShape: String?

    public var name: String? { fields["name"] }
    public var email: String? { fields["email"] }
    public var phone: String? { fields["phone"] }

    /// A `VisitorItem`, or `nil` without an id.
    public init?(_ json: JSONValue) {
        guard let id = json["id"]?.stringValue else { return nil }
        self.id = id
        self.fields = (json["fields"]?.objectValue ?? [:]).compactMapValues(\.stringValue)
        self.iconColor = json["icon"]?["color"]?.stringValue
        self.iconShape = json["icon"]?["shape"]?.stringValue
    }
}
