import CXoneEmulator
import Foundation
import Switchboard
import SwitchboardCXone
import SwitchboardTestKit
import Testing

/// The emulator's frames against the CXone SDK's own test payloads (`Tests/Fixtures/cxone`): in
/// each event the emulator sends, and in its channel configuration, every key the SDK's decoding
/// requires (protocols/cxone.md §2.3, §5: the DTOs' required keys, with the nested message,
/// contact, agent and thread DTOs) is there, with the JSON type the SDK's own payload of that
/// event has. The adapter reads the same payloads (`CXoneFixtureTests`); this is the emulator's
/// half. (The payloads carry many keys no SDK reads — routing, statistics, branding — which the
/// emulator leaves out.)
@Suite(.timeLimit(.minutes(2)))
struct CXoneEmulatorFixtureTests {
    static let message = ["idOnExternalPlatform", "threadIdOnExternalPlatform", "messageContent.type", "messageContent.payload", "createdAt", "attachments", "direction"]
    static let agent = ["id", "firstName", "surname", "isBotUser", "isSurveyUser", "publicImageUrl"]
    static let contact = ["id", "threadIdOnExternalPlatform", "status", "createdAt", "customFields"]
    static let thread = ["idOnExternalPlatform", "channelId", "threadName", "canAddMoreMessages"]
    static let event = ["eventId", "eventObject", "eventType", "createdAt"]

    static func under(_ prefix: String, _ keys: [String]) -> [String] { keys.map { "\(prefix).\($0)" } }

    /// The keys the SDK's decoding requires, per event type.
    static let required: [String: [String]] = [
        "MessageCreated": event + ["data.brand.id", "data.channel.id", "data.thread.idOnExternalPlatform"] + under("data.case", contact) + under("data.message", message),
        "MessageReadChanged": event + ["data.brand"] + under("data.message", message),
        "SenderTypingStarted": event + ["data.brand", "data.channel", "data.thread"] + under("data.user", agent),
        "SenderTypingEnded": event + ["data.brand", "data.channel", "data.thread"] + under("data.user", agent),
        "CaseInboxAssigneeChanged": event + under("data.case", contact) + under("data.inboxAssignee", agent),
        "CaseStatusChanged": event + ["data.brand", "data.channel"] + under("data.case", contact),
        "SetPositionInQueue": ["eventId", "data.consumerContact.id", "data.positionInQueue"],
        "FireProactiveAction": event + ["data.destination.id", "data.proactiveAction.action.actionId", "data.proactiveAction.action.actionName", "data.proactiveAction.action.actionType"],
        "ConsumerAuthorized": ["eventId", "postback.eventType", "postback.data.consumerIdentity.idOnExternalPlatform"],
        "TokenRefreshed": ["postback.eventType", "postback.data.accessToken.token", "postback.data.accessToken.expiresIn"],
        "ThreadRecovered": ["postback.eventType", "postback.data.messagesScrollToken", "postback.data.customer.customFields"] + under("postback.data.contact", contact)
            + under("postback.data.messages[]", message) + under("postback.data.thread", thread),
        "ThreadListFetched": ["postback.eventType"] + under("postback.data.threads[]", thread),
        "MoreMessagesLoaded": ["postback.eventType", "postback.data.scrollToken"] + under("postback.data.messages[]", message),
        "ThreadArchived": ["eventId", "postback.eventType"],
    ]

    /// What the adapter's and the SDK's channel configuration decoding requires (H1).
    static let channelKeys = [
        "isLiveChat", "isAuthorizationEnabled", "settings.hasMultipleThreadsPerEndUser", "settings.isProactiveChatEnabled",
        "settings.fileRestrictions.allowedFileSize", "settings.fileRestrictions.allowedFileTypes", "settings.fileRestrictions.isAttachmentsEnabled",
        "settings.features",
    ]

    static func fixture(_ name: String) throws -> JSONValue {
        try JSONValue(parsing: Data(contentsOf: CXoneFixtureTests.directory.appendingPathComponent(name)))
    }

    @Test func theEmulatorsFramesHaveTheFieldsAndTypesOfTheSDKsPayloads() async throws {
        try await withCXoneEmulator(.init(mode: .multi, tokenLifetime: 20)) { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let chat = try await probe.openConversation()
                let thread = chat.id.rawValue
                control.agent.assign(thread)
                control.agent.typing(true, in: thread)
                control.agent.typing(false, in: thread)
                for index in 1...30 { control.agent.send("answer \(index)", in: thread) }
                try await probe.waitForMessages(["answer 30"], in: chat)
                control.agent.markRead(thread)
                _ = control.server.fireWelcomeMessage(toCustomer: control.customerID, bodyText: "Welcome!")
                _ = try await chat.send(text: "thanks")
                try await probe.waitForMessages(["thanks"], in: chat)
                // Older pages (LoadMoreMessages), a reconnect (the list, a recovery), an archive.
                var before = try await chat.storedMessages(before: nil, limit: .max).first?.orderKey
                while let oldest = try await chat.history(before: before, limit: 10).first, oldest.orderKey != before { before = oldest.orderKey }
                control.server.inject(.closeSocket)
                try await probe.recorder.waitUntil("reconnected") { $0.filter(\.isConnected).count >= 2 }
                control.agent.close(thread)
                try await probe.recorder.first("closed") {
                    if case .conversationStateChanged(let state, _) = $0.kind { return $0.conversationID == chat.id && state.isClosed } else { return false }
                }
                let other = try await probe.session.startConversation(ConversationDraft(title: "to archive"))
                _ = try await other.send(text: "archive me")
                try await probe.waitForMessages(["archive me"], in: other)
                try await other.archive()
            }
            let frames = control.server.lastFrames
            var compared: [String] = []
            let names = try FileManager.default.contentsOfDirectory(atPath: CXoneFixtureTests.directory.path).filter { $0.hasSuffix(".json") }.sorted()
            // The fallback payload is the SDK's tolerance of an older server (`consumerContact`).
            for name in names where name != "ThreadRecoveredEvent_fallback.json" {
                guard let payload = try? Self.fixture(name) else { continue }
                let type = payload["eventType"]?.stringValue ?? payload["postback"]?["eventType"]?.stringValue
                guard let type, let keys = Self.required[type], let served = frames[type] else { continue }
                let found = FixtureShape.differences(served, payload, requiring: keys)
                #expect(found.isEmpty, "\(type) against \(name): \(found)")
                compared.append(type)
            }
            let channel = FixtureShape.differences(control.server.channelConfiguration, try Self.fixture("ChannelConfiguration.json"), requiring: Self.channelKeys)
            #expect(channel.isEmpty, "the channel configuration: \(channel)")
            let expected: Set<String> = [
                "MessageCreated", "CaseInboxAssigneeChanged", "SenderTypingStarted", "SenderTypingEnded", "MessageReadChanged",
                "ThreadListFetched", "ThreadRecovered", "ThreadArchived", "TokenRefreshed", "CaseStatusChanged", "FireProactiveAction",
                "MoreMessagesLoaded", "ConsumerAuthorized", "SetPositionInQueue",
            ]
            #expect(expected.isSubset(of: Set(compared)), "not produced: \(expected.subtracting(compared).sorted())")
            print("cxone emulator against the SDK's payloads: \(Set(compared).count) event types compared \(Set(compared).sorted()), and the channel configuration")
        }
    }
}
