public import Foundation
public import Switchboard

/// A messenger user (the SDK's `VIUser`; Docs/Protocols/voximplant-style.md §4.1).
public struct VoximplantUser: Sendable, Hashable {
    /// `username@application.account`.
    public var id: ParticipantID
    public var imID: Int64
    public var displayName: String?
    public var customData: JSONValue?
    /// The user themself only.
    public var privateCustomData: JSONValue?
    /// The conversations the user is in (the user themself only; empty for others).
    public var conversations: [ConversationID]
    /// The uber conversations the user left but was not removed from (the user themself only).
    public var leftConversations: [ConversationID]
    public var isDeleted: Bool
    /// The notifications pushed to the user while offline (the user themself only; §5.1).
    public var pushNotifications: Set<VoximplantPushNotification>

    /// A `User` object, or `nil` without its `userId`.
    public init?(_ json: JSONValue) {
        guard let id = json["userId"]?.stringValue else { return nil }
        self.id = ParticipantID(id)
        self.imID = json["imId"]?.intValue ?? 0
        self.displayName = json["displayName"]?.stringValue
        self.customData = json["customData"]?.nonNull
        self.privateCustomData = json["privateCustomData"]?.nonNull
        self.conversations = (json["conversationList"]?.arrayValue ?? []).compactMap(\.stringValue).map(ConversationID.init)
        self.leftConversations = (json["leaveConversationList"]?.arrayValue ?? []).compactMap(\.stringValue).map(ConversationID.init)
        self.isDeleted = json["isDeleted"]?.boolValue ?? false
        self.pushNotifications = Set((json["notifications"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(VoximplantPushNotification.init) })
    }
}

/// A user's presence changed (the SDK's `VIStatusEvent`, `onSetStatus`): a `setStatus` event of a
/// user the session subscribed to, or of the session's user on another device. The session
/// announces it as `custom(name: "voximplant.setStatus")`; read it typed from the event.
public struct VoximplantPresence: Sendable, Hashable {
    public var user: ParticipantID
    public var isOnline: Bool
    public var time: Date

    /// The presence an event announces, or `nil` for any other event.
    public init?(_ event: ChatEvent) {
        guard case .custom(let name, let payload) = event.kind, name == "voximplant.setStatus",
            let user = payload["initiator"]?.stringValue, let online = payload["online"]?.boolValue
        else { return nil }
        self.user = ParticipantID(user)
        self.isOnline = online
        self.time = event.time
    }
}

/// A user edited their custom data (the SDK's `VIUserEvent`, `onEditUser`), for the users the
/// session subscribed to: `custom(name: "voximplant.editUser")`, read typed from the event.
public struct VoximplantUserEdit: Sendable, Hashable {
    public var user: VoximplantUser

    /// The edit an event announces, or `nil` for any other event.
    public init?(_ event: ChatEvent) {
        guard case .custom(let name, let payload) = event.kind, name == "voximplant.editUser", let user = payload["user"].flatMap(VoximplantUser.init) else {
            return nil
        }
        self.user = user
    }
}

extension VoximplantRequests {
    /// `getUser` by id: the user, typed.
    ///
    /// - Throws: the server's 25 (no such user) as `invalidArgument`.
    public func user(_ user: ParticipantID) async throws -> VoximplantUser {
        try Self.user(in: try await getUser(user.rawValue))
    }

    /// `getUser` by IM id.
    public func user(imID: Int64) async throws -> VoximplantUser {
        try Self.user(in: try await getUser(imId: imID))
    }

    /// `getUsers`: at most 50 at a time (the server answers 22 over it).
    public func users(_ users: [ParticipantID]) async throws -> [VoximplantUser] {
        (try await getUsers(users.map(\.rawValue))["users"]?.arrayValue ?? []).compactMap(VoximplantUser.init)
    }

    /// `editUser`: `nil` leaves a field as it is, an empty object clears it. Returns the user
    /// as edited; subscribers hear a ``VoximplantUserEdit``.
    public func editUser(setting customData: JSONValue?, privateCustomData: JSONValue?) async throws -> VoximplantUser {
        try Self.user(in: try await editUser(customData: customData, privateCustomData: privateCustomData))
    }

    /// `setStatus`: the user's presence, which subscribers and the user's other clients hear as
    /// a ``VoximplantPresence``. Returns the status the server set.
    @discardableResult
    public func setPresence(online: Bool) async throws -> Bool {
        try await setStatus(online: online)["online"]?.boolValue ?? online
    }

    /// `subscribe`: presence and edits of `users` reach this session from now on. Returns the
    /// users subscribed to.
    @discardableResult
    public func subscribe(to users: [ParticipantID]) async throws -> [ParticipantID] {
        Self.ids(try await subscribe(users.map(\.rawValue)))
    }

    /// `unsubscribe`.
    @discardableResult
    public func unsubscribe(from users: [ParticipantID]) async throws -> [ParticipantID] {
        Self.ids(try await unsubscribe(users.map(\.rawValue)))
    }

    /// `getSubscriptions`: the users this user is subscribed to.
    public func subscriptions() async throws -> [ParticipantID] {
        Self.ids(try await getSubscriptions())
    }

    /// The uber conversations the session's user left but was not removed from
    /// (`leaveConversationList`, the SDK's `VIUser.leaveConversationList`).
    public func leftConversations(of me: ParticipantID) async throws -> [ConversationID] {
        try await user(me).leftConversations
    }

    static func user(in result: JSONValue) throws -> VoximplantUser {
        guard let user = result["user"].flatMap(VoximplantUser.init) else {
            throw SwitchboardError(.protocolViolation, "a user answer without a user")
        }
        return user
    }

    private static func ids(_ result: JSONValue) -> [ParticipantID] {
        (result["users"]?.arrayValue ?? []).compactMap(\.stringValue).map(ParticipantID.init)
    }
}
