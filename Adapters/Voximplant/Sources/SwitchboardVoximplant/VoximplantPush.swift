public import Foundation
public import Switchboard

/// A notification a user asks to be pushed while offline (`managePushNotifications`, the SDK's
/// `VIMessengerNotification`; Docs/Protocols/voximplant-style.md §5.1).
public enum VoximplantPushNotification: String, Sendable, Hashable, CaseIterable {
    /// A message sent in one of the user's conversations.
    case onSendMessage
    /// A message edited in one of the user's conversations.
    case onEditMessage
}

/// Where a push token comes from: APNs on Apple platforms, FCM on Android.
public enum VoximplantPushPlatform: String, Sendable, Hashable {
    case apns
    case fcm
}

/// What a push announces (the SDK's `VIMessageEvent` from `processPushNotification`): a message
/// sent or edited while the app was not connected. The session's catch-up delivers the same
/// message, with the same id, when it next connects.
public struct VoximplantPushMessage: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case sent
        case edited
    }

    public var action: Action
    /// The message as of the event. A sent message has its sequence; an edited one keeps the
    /// place it was sent at (its `sequence` is `nil`, as in the session's events).
    public var message: Message
    /// The event's sequence in its conversation.
    public var sequence: Int64
    public var time: Date
}

/// Reads the pushes of the service (Docs/Protocols/voximplant-style.md §5.1), as Webim's
/// `WebimPushNotifications` reads Webim's: no connection needed, so an app's notification
/// service extension can show the message.
public enum VoximplantPushNotifications {
    /// Whether a push's data came from the messaging service (`"voximplant": "im"`).
    public static func isVoximplant(_ data: [String: String]) -> Bool {
        data["voximplant"] == "im"
    }

    public static func isVoximplant(_ userInfo: [AnyHashable: Any]) -> Bool {
        isVoximplant(strings(userInfo))
    }

    /// The message a push announces, or `nil` for a push that is not the service's (another
    /// SDK's, a call's).
    ///
    /// - Throws: `protocolViolation` for a push of the service whose event cannot be read, or
    ///   that is not a `sendMessage` or `editMessage` event.
    public static func process(_ data: [String: String]) throws -> VoximplantPushMessage? {
        guard isVoximplant(data) else { return nil }
        guard let text = data["event"] else { throw SwitchboardError(.protocolViolation, "a Voximplant push without its event") }
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: text)
        guard let message = event.message, let sequence = event.seq else {
            throw SwitchboardError(.protocolViolation, "a Voximplant push without a message or its sequence")
        }
        let time = VoximplantMapping.date(event.timestamp ?? message.timestamp ?? 0)
        switch event.eventType {
        case "sendMessage":
            return VoximplantPushMessage(action: .sent, message: VoximplantMapping.message(message, keepSequence: true), sequence: sequence, time: time)
        case "editMessage":
            return VoximplantPushMessage(
                action: .edited,
                message: VoximplantMapping.message(message, keepSequence: false, edited: true),
                sequence: sequence,
                time: time
            )
        default:
            throw SwitchboardError(.protocolViolation, "a Voximplant push of a \(event.eventType) event")
        }
    }

    /// An APNs `userInfo` (the same keys beside `aps`) or an FCM `RemoteMessage.data` bridged to
    /// a dictionary.
    public static func process(_ userInfo: [AnyHashable: Any]) throws -> VoximplantPushMessage? {
        try process(strings(userInfo))
    }

    private static func strings(_ userInfo: [AnyHashable: Any]) -> [String: String] {
        Dictionary(userInfo.compactMap { key, value in (key as? String).flatMap { key in (value as? String).map { (key, $0) } } }) { first, _ in first }
    }
}

extension VoximplantRequests {
    /// `managePushNotifications`: the notifications pushed to this user's registered tokens while
    /// none of their clients is connected; an empty set turns them off. Returns the user with
    /// the notifications the server keeps (``VoximplantUser/pushNotifications``).
    @discardableResult
    public func managePushNotifications(_ notifications: Set<VoximplantPushNotification>) async throws -> VoximplantUser {
        let kinds = notifications.map(\.rawValue).sorted().map(JSONValue.string)
        return try Self.user(in: try await call("managePushNotifications", ["notifications": .array(kinds)]))
    }

    /// `registerPushToken`: pushes for this user go to `token` from now on (a token registered
    /// twice is kept once).
    public func registerPushToken(_ token: String, platform: VoximplantPushPlatform) async throws {
        _ = try await call("registerPushToken", ["token": .string(token), "platform": .string(platform.rawValue)])
    }

    /// Registers the device token APNs gave the app (`didRegisterForRemoteNotificationsWithDeviceToken`),
    /// as lowercase hex.
    public func registerPushToken(apnsDeviceToken: Data) async throws {
        try await registerPushToken(apnsDeviceToken.map { String(format: "%02x", $0) }.joined(), platform: .apns)
    }

    /// `unregisterPushToken`: nothing more is pushed to `token`.
    public func unregisterPushToken(_ token: String) async throws {
        _ = try await call("unregisterPushToken", ["token": .string(token)])
    }
}
