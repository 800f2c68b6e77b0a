import Foundation
import Switchboard
import SwitchboardTransport
import SwitchboardEmulation
import Testing

@_spi(TestKit) @_spi(WireReaders) @testable import SwitchboardCXone

/// Every payload from the CXone SDK's own tests (`Tests/Fixtures/cxone`), named, with what it
/// must decode to — or, where the SDK rejects it, the clear error it must fail with.
@Suite struct CXoneFixtureTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/Fixtures/cxone")

    static func text(_ name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    }

    static func json(_ name: String) throws -> JSONValue { try JSONValue(parsing: try text(name)) }

    /// Classifies a frame and maps it, as the adapter does.
    static func outcome(_ name: String, thread: ConversationID? = nil) throws -> CXoneMapping.Outcome {
        guard case .event(_, let type, let frame) = CXoneWire.classify(try text(name)) else {
            throw SwitchboardError(.protocolViolation, "\(name) is not an event frame")
        }
        return try CXoneMapping.outcome(of: frame, type: type, thread: thread)
    }

    static func kinds(_ outcome: CXoneMapping.Outcome) -> [BackendEvent.Kind] {
        guard case .updates(let updates) = outcome else { return [] }
        return updates.compactMap { if case .event(let event) = $0 { return event.kind } else { return nil } }
    }

    typealias Check = @Sendable () throws -> Void

    /// Every fixture file and what it must do.
    static let expectations: [String: Check] = [
        "AgentTypingStarted.json": {
            guard case .typing(let who, true, _)? = kinds(try outcome("AgentTypingStarted.json")).first else { throw failure("typing started") }
            #expect(who == "agent-62713628")
        },
        "AgentTypingEnded.json": {
            guard case .typing(_, false, _)? = kinds(try outcome("AgentTypingEnded.json")).first else { throw failure("typing ended") }
        },
        "CaseInboxAssigneeChanged.json": {
            guard case .agentChanged(let agent?)? = kinds(try outcome("CaseInboxAssigneeChanged.json")).first else { throw failure("an agent") }
            #expect(agent.role == .agent && agent.displayName != nil)
        },
        "CaseInboxAssigneeChanged+NoAgent.json": {
            let mapped = kinds(try outcome("CaseInboxAssigneeChanged+NoAgent.json"))
            #expect(mapped.first == .agentChanged(nil))
        },
        "CaseStatusChanged.json": {
            guard case .conversationStateChanged(.closed, _)? = kinds(try outcome("CaseStatusChanged.json")).first else { throw failure("closed") }
        },
        "ConsumerAuthorizedWithAccessToken.json": {
            guard case .updates(let updates) = try outcome("ConsumerAuthorizedWithAccessToken.json"), case .credentials(let credentials)? = updates.first
            else { throw failure("credentials") }
            #expect(credentials["access-token"] != nil && credentials["customer-id"] != nil)
        },
        "CustomerAuthorizedEvent.json": {
            guard case .updates(let updates) = try outcome("CustomerAuthorizedEvent.json"), case .credentials(let credentials)? = updates.first
            else { throw failure("credentials") }
            #expect(credentials["customer-id"] == "E0C4BD81-0864-4A8C-9B65-4F4D67DA0AF0")
            #expect(credentials["access-token"] == nil, "no token without authorization")
        },
        "CustomerReconnectedEvent.json": {
            // iOS does not know "CustomerReconnected": kept as a vendor event, never a crash.
            guard case .custom(let name, _)? = kinds(try outcome("CustomerReconnectedEvent.json")).first else { throw failure("vendor event") }
            #expect(name == "cxone.CustomerReconnected")
        },
        "MessageCreatedEvent.json": {
            guard case .messageAdded(let message, _)? = kinds(try outcome("MessageCreatedEvent.json")).first else { throw failure("message") }
            #expect(message.kind == .text && message.senderRole == .customer && !message.text.isEmpty)
            #expect(message.conversationID.rawValue == message.conversationID.rawValue.lowercased())
        },
        "CustomMessageCreatedEvent.json": {
            guard case .messageAdded(let message, _)? = kinds(try outcome("CustomMessageCreatedEvent.json")).first else { throw failure("message") }
            #expect(message.payload != nil)
        },
        "MessageAddedIntoCaseEvent.json": {
            guard case .custom(let name, _)? = kinds(try outcome("MessageAddedIntoCaseEvent.json")).first else { throw failure("vendor event") }
            #expect(name == "cxone.MessageAddedIntoCase")
        },
        "MessageReadEventByAgent.json": {
            guard case .messageUpdated(let message)? = kinds(try outcome("MessageReadEventByAgent.json")).first else { throw failure("update") }
            #expect(message.serverID != nil)
        },
        "SetPositionInQueue.json": {
            let mapped = kinds(try outcome("SetPositionInQueue.json"))
            #expect(mapped == [.queuePosition(10)])
        },
        "ThreadListFetchedEvent.json": {
            guard case .updates(let updates) = try outcome("ThreadListFetchedEvent.json"), case .snapshot(let snapshot)? = updates.first
            else { throw failure("snapshot") }
            #expect(snapshot.isComplete && !snapshot.conversations.isEmpty)
            #expect(snapshot.conversations.allSatisfy { $0.conversation.kind == .thread })
        },
        "ThreadMetadataLoadedEvent.json": {
            let mapped = kinds(try outcome("ThreadMetadataLoadedEvent.json"))
            guard case .messageAdded? = mapped.first else { throw failure("the last message") }
        },
        "ThreadRecoveredEvent.json": { try recovered("ThreadRecoveredEvent.json") },
        "ThreadRecoveredEvent_fallback.json": { try recovered("ThreadRecoveredEvent_fallback.json") },
        "LivechatRecoveredEvent.json": { try recovered("LivechatRecoveredEvent.json") },
        "MoreMessagesLoaded.json": {
            guard case .moreMessages(let messages, let token) = try outcome("MoreMessagesLoaded.json") else { throw failure("a page") }
            #expect(messages.isEmpty && token.isEmpty, "an empty scroll token: no more messages")
        },
        "ThreadArchived.json": {
            let mapped = kinds(try outcome("ThreadArchived.json", thread: "t1"))
            #expect(mapped == [.conversationStateChanged(.archived, previous: nil)])
        },
        "TokenRefreshed.json": {
            guard case .updates(let updates) = try outcome("TokenRefreshed.json"), case .credentials(let credentials)? = updates.first
            else { throw failure("credentials") }
            #expect(credentials["access-token"]?.hasPrefix("Atza|") == true)
        },
        "EventInS3+ThreadRecovered.json": {
            guard case .download(let url, let origin) = try outcome("EventInS3+ThreadRecovered.json") else { throw failure("a download") }
            #expect(url.absoluteString.hasPrefix("https://") && origin == "ThreadRecovered")
        },
        "FireProactiveAction+WelcomeMessage.json": { try proactive("FireProactiveAction+WelcomeMessage.json") },
        "WelcomeMessage.json": { try proactive("WelcomeMessage.json") },
        "CustomPopup.json": { try proactive("CustomPopup.json") },
        "ProActiveActionCustomPopupWithEmtyVariables.json": { try proactive("ProActiveActionCustomPopupWithEmtyVariables.json") },
        "OperationError.json": { try operationError("OperationError.json") },
        "InternalServerError.json": { try operationError("InternalServerError.json") },
        "ServerError.json": {
            let frame = try text("ServerError.json")
            #expect(CXoneWire.classify(frame) == .serverError("Message error"))
        },
        "ChannelConfiguration.json": {
            let configuration = try CXoneChannelConfiguration(json: try json("ChannelConfiguration.json"))
            #expect(configuration.fileRestrictions.allowedFileSizeMegabytes > 0)
            #expect(!configuration.features.isEmpty)
        },
        "ChannelConfiguration+SSKVersionNotSupported.json": {
            #expect { try CXoneChannelConfiguration(json: try json("ChannelConfiguration+SSKVersionNotSupported.json")) } throws: { ($0 as? SwitchboardError)?.code == .fatal }
        },
        "MessageTypeText.json": {
            let message = try #require(try CXoneMapping.message(try json("MessageTypeText.json")))
            #expect(message.kind == .text && message.text == "Hello world")
            #expect(message.payload?["postback"] == "/hello_world")
        },
        "MessageTypeQuickReplies.json": { try rich("MessageTypeQuickReplies.json", "QUICK_REPLIES") },
        "MessageTypeListPicker.json": { try rich("MessageTypeListPicker.json", "LIST_PICKER") },
        "MessageTypeRichLink.json": { try rich("MessageTypeRichLink.json", "RICH_LINK") },
        "MessageTypePluginCustom.json": { try rich("MessageTypePluginCustom.json", "PLUGIN") },
        "MessageTypePluginDeeplink.json": { try rich("MessageTypePluginDeeplink.json", "PLUGIN") },
        "MessageTypePluginGallery.json": { try rich("MessageTypePluginGallery.json", "PLUGIN") },
        "MessageTypePluginMenu.json": { try rich("MessageTypePluginMenu.json", "PLUGIN") },
        "MessageTypePluginQuickReplies.json": { try rich("MessageTypePluginQuickReplies.json", "PLUGIN") },
        "MessageTypePluginSatisfactionSurvey.json": { try rich("MessageTypePluginSatisfactionSurvey.json", "PLUGIN") },
        "MessageTypePluginTextAndButtons.json": { try rich("MessageTypePluginTextAndButtons.json", "PLUGIN") },
        "AccessToken.json": {
            // The token object as a `TokenRefreshed` carries it, through the adapter's reading.
            let token = try json("AccessToken.json")
            let frame: JSONValue = ["eventId": "e-1", "postback": ["eventType": "TokenRefreshed", "data": ["accessToken": token]]]
            guard case .event(_, let type, let event) = CXoneWire.classify(frame.jsonString),
                case .updates(let updates) = try CXoneMapping.outcome(of: event, type: type, thread: nil),
                case .credentials(let credentials)? = updates.first
            else { throw failure("credentials") }
            #expect(credentials["access-token"] == token["token"]?.stringValue)
            #expect(credentials["access-token-expires-in"] == "3600")
        },
        "AttachmentUpload.json": {
            let url = try CXoneHTTPAnswers.uploadedFileURL(status: 200, body: Data(try text("AttachmentUpload.json").utf8), name: "photo.jpeg")
            #expect(try url == json("AttachmentUpload.json")["fileUrl"]?.stringValue)
        },
        "AttachmentUploadSuccessResponse.json": {
            let url = try CXoneHTTPAnswers.uploadedFileURL(status: 200, body: Data(try text("AttachmentUploadSuccessResponse.json").utf8), name: "file")
            #expect(url.hasPrefix("http"))
        },
        "AttachmentUploadFailResponse.json": {
            // Not strict JSON (a no-break space): refused with a clear error, as the notes say.
            #expect { try json("AttachmentUploadFailResponse.json") } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
        },
        "AuthorizeCustomer.json": {
            let fixture = try json("AuthorizeCustomer.json")
            #expect(fixture["authorization"]?["codeVerifier"] != nil)
            let event = CXoneWire.event("AuthorizeCustomer", eventID: "ABC", identity: .init(brandID: 1, channelID: "chat_1", customerID: "c1"), data: ["authorization": fixture["authorization"]!])
            #expect(event["action"] == "register" && event["eventId"] == "abc")
            #expect(event["payload"]?["customerIdentity"]?["idOnExternalPlatform"] == "c1")
        },
        "EndContact.json": {
            let fixture = try json("EndContact.json")
            let event = CXoneWire.event("EndContact", eventID: "e1", identity: .init(brandID: 1234, channelID: "chat_111", customerID: "a91082b7-46f8-4d0d-af43-079994de98c6"), data: fixture["data"])
            #expect(event["payload"]?["consumerIdentity"] != nil, "EndContact uses consumerIdentity")
            #expect(event["payload"]?["data"] == fixture["data"])
            #expect(event["payload"]?["brand"] == fixture["brand"] && event["payload"]?["channel"] == fixture["channel"])
        },
        "MessagePostSuccess.json": {
            // Placeholder-typed ("String" values): a message it is not.
            let fixture = try json("MessagePostSuccess.json")
            #expect { _ = try CXoneMapping.message(fixture) } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
        },
        "StoreVisitorEventsPayloadDTO.json": {
            let payload = try json("StoreVisitorEventsPayloadDTO.json")
            #expect(payload["data"]?["browserFingerprint"]?["applicationType"] == "native")
        },
    ]

    @Test func everyFixtureHasAnExpectation() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".json") }.sorted()
        #expect(files.count == 50)
        #expect(Set(files) == Set(Self.expectations.keys), "fixtures without an expectation: \(Set(files).subtracting(Self.expectations.keys).sorted())")
    }

    @Test(arguments: Array(expectations.keys).sorted())
    func fixture(_ name: String) throws {
        try Self.expectations[name]!()
    }

    static func failure(_ what: String) -> SwitchboardError { SwitchboardError(.protocolViolation, "expected \(what)") }

    static func recovered(_ name: String) throws {
        guard case .updates(let updates) = try outcome(name), case .snapshot(let snapshot)? = updates.first,
            let thread = snapshot.conversations.first
        else { throw failure("a thread snapshot") }
        #expect(!snapshot.isComplete)
        #expect(thread.conversation.kind == .thread)
        #expect(thread.conversation.customData?["scrollToken"] != nil)
        #expect(thread.messages.allSatisfy { $0.conversationID == thread.conversation.id })
    }

    static func proactive(_ name: String) throws {
        guard case .custom(let event, let payload)? = kinds(try outcome(name)).first else { throw failure("a proactive action") }
        #expect(event == "cxone.FireProactiveAction" && payload["proactiveAction"] != nil)
        let welcome = try CXoneWelcomeMessage(proactiveActionData: payload)
        switch name {
        case "FireProactiveAction+WelcomeMessage.json":
            let message = try #require(welcome, "\(name) is a welcome message")
            #expect(message.actionName == "Offer" && message.handoverFields.isEmpty)
            #expect(message.text(firstName: nil, lastName: nil, customerFields: [:]) == "Dear customer, we would like to offer you a discount of 5%.", "\(name): the fallbacks")
            #expect(
                message.text(firstName: "Anna", lastName: nil, customerFields: ["discountValue": "15%"]) == "Dear Anna, we would like to offer you a discount of 15%.",
                "\(name): the values"
            )
        case "WelcomeMessage.json":
            let message = try #require(welcome, "\(name) is a welcome message")
            #expect(message.bodyText == "This is my message")
            #expect(message.handoverFields == ["myFieldIdent": "This is new value"], "\(name): the handover fields")
        default:
            #expect(welcome == nil, "\(name): a custom pop-up box is not a welcome message")
        }
    }

    static func operationError(_ name: String) throws {
        guard case .operationError(let eventID, let error) = CXoneWire.classify(try text(name)) else { throw failure("an OperationError") }
        #expect(eventID == eventID.lowercased())
        #expect(error.vendorCode == "InconsistentData" && error.code == .messageRejected)
    }

    static func rich(_ name: String, _ type: String) throws {
        let message = try #require(try CXoneMapping.message(try json(name)))
        #expect(message.kind == .rich(type))
        #expect(message.payload?["type"]?.stringValue == type, "the rich content is kept whole")
        #expect(!message.text.isEmpty)
    }
}

/// Welcome messages and inactivity pop-ups, whose wire forms the notes give but no fixture holds.
@Suite struct CXoneProactiveTests {
    @Test func aWelcomeMessageWithoutBodyTextIsInvalidData() throws {
        let data: JSONValue = ["proactiveAction": ["action": ["actionId": "a", "actionName": "n", "actionType": "WelcomeMessage", "data": ["content": [:]]]]]
        let error = #expect(throws: SwitchboardError.self) { try CXoneWelcomeMessage(proactiveActionData: data) }
        #expect(error?.vendorCode == "invalidData")
    }

    @Test func welcomeVariables() {
        let fill = { (text: String) in
            CXoneWelcomeMessage.fill(text, firstName: "Anna", lastName: "Lee", customerFields: ["customer.customFields.tier": "gold"])
        }
        #expect(fill("{{customer.fullName}} / {{customer.lastName|x}} / {{customer.customFields.tier|silver}}") == "Anna Lee / Lee / gold")
        #expect(fill("{{customer.customFields.unknown}}|{{contact.anything|fallback}}") == "|fallback", "no value and no fallback is nothing")
        #expect(fill("no variables {{ unclosed") == "no variables {{ unclosed")
    }

    static func popupMessage(buttons: [(String, String)] = [("Keep", #"{"isExpired":false}"#), ("End", #"{"isExpired": true}"#)]) -> JSONValue {
        var elements: [JSONValue] = [
            ["id": "t", "type": "TITLE", "text": "Still there?"],
            ["id": "b", "type": "TEXT", "text": "The chat will end."],
            ["id": "c", "type": "TEXT", "text": "Keep it?"],
            ["id": "d", "type": "COUNTDOWN", "variables": ["startedAt": "2024-03-12T10:35:21Z", "numberOfSeconds": 90]],
        ]
        for (index, button) in buttons.enumerated() {
            elements.append(["id": .string("button-\(index)"), "type": "BUTTON", "text": .string(button.0), "postback": .string(button.1)])
        }
        return [
            "idOnExternalPlatform": "6C2D2F5E-0000-4000-8000-000000000001", "threadIdOnExternalPlatform": "THREAD-1",
            "messageContent": ["type": "PLUGIN", "payload": ["elements": [["id": "p", "type": "INACTIVITY_POPUP", "elements": .array(elements)]]]],
            "createdAt": "2024-03-12T10:35:21Z", "direction": "outbound", "attachments": [],
        ]
    }

    @Test func anInactivityPopupIsAnEventNotAMessage() throws {
        let message = Self.popupMessage(buttons: [("End", #"{"isExpired":true}"#), ("Keep", #"{"isExpired" : false}"#)])
        let popup = try CXoneInactivityPopup(message: message)
        #expect(popup.title == "Still there?" && popup.message == "The chat will end. Keep it?")
        #expect(popup.numberOfSeconds == 90 && popup.expiresAt == popup.startedAt.addingTimeInterval(90))
        #expect(popup.refreshButton.text == "Keep" && popup.expireButton.text == "End", "the refresh button is found by its postback, wherever it is")
        #expect(popup.threadID == ConversationID("thread-1"))
        #expect(try CXoneMapping.message(message) == nil, "not a message of the history")
        let created: JSONValue = ["eventId": "e", "eventType": "MessageCreated", "createdAt": "2024-03-12T10:35:21Z", "data": ["message": message]]
        guard case .updates(let updates) = try CXoneMapping.outcome(of: created, type: "MessageCreated"),
            case .event(let event)? = updates.first, case .custom(CXoneInactivityPopup.eventName, let payload) = event.kind
        else {
            Issue.record("MessageCreated with a pop-up is a cxone.InactivityPopup event")
            return
        }
        #expect(event.conversationID == popup.threadID && payload == message)
        let recovered: JSONValue = [
            "eventId": "r", "eventType": "LivechatRecovered",
            "postback": ["eventType": "LivechatRecovered", "data": ["thread": ["idOnExternalPlatform": "thread-1"], "messages": [message], "messagesScrollToken": ""]],
        ]
        guard case .updates(let fromRecovery) = try CXoneMapping.outcome(of: recovered, type: "LivechatRecovered") else { return }
        #expect(fromRecovery.count == 2, "the snapshot, then the pop-up still waiting on top")
    }

    @Test func aBrokenPopupIsATypedError() {
        #expect(throws: SwitchboardError.self, "one button only") { try CXoneInactivityPopup(message: Self.popupMessage(buttons: [("Keep", #"{"isExpired":false}"#)])) }
        #expect(throws: SwitchboardError.self, "no refresh button") {
            try CXoneInactivityPopup(message: Self.popupMessage(buttons: [("A", "{}"), ("B", "{}")]))
        }
    }
}

@Suite struct CXoneWireTests {
    @Test func environmentsAndCustomURLs() throws {
        #expect(CXoneEnvironment.eu1.chatURL == "https://channels-de-eu1.niceincontact.com/chat")
        let custom = CXoneEnvironment(chatURL: "https://channels-de-xx.example.com/chat", socketURL: "wss://gw.example.com")
        #expect(custom.loggerURL == "https://app-de-xx.example.com/logger-public")
        #expect(custom.tokenURL == "https://digital-oauth-de-xx.example.com/")
        let local = CXoneEnvironment(chatURL: "http://127.0.0.1:8080/chat", socketURL: "ws://127.0.0.1:8080/ws?drop=me")
        #expect(local.loggerURL == "" && local.tokenURL == "", "derivations fail for an emulator URL")
        let url = try local.webSocketURL(brandID: 1386, channelID: "chat_1", visitorID: "v1")
        #expect(url == "ws://127.0.0.1:8080/ws?brandId=1386&channelId=chat_1&visitorId=v1&sdkPlatform=ios&sdkVersion=3.3.1")
    }

    @Test func identityKeysFollowTheEvent() {
        let identity = CXoneWire.Identity(brandID: 1, channelID: "c", customerID: "me", visitorID: "v")
        #expect(CXoneWire.event("SendMessage", eventID: "X", identity: identity)["payload"]?["customerIdentity"] != nil)
        #expect(CXoneWire.event("SendTranscript", eventID: "X", identity: identity)["payload"]?["consumerIdentity"] != nil)
        #expect(CXoneWire.event("FetchThreadList", eventID: "X", identity: identity)["payload"]?["data"] == nil)
        #expect(CXoneWire.event("FetchThreadList", eventID: "X", identity: identity)["payload"]?["visitor"] == ["id": "v"])
    }

    @Test func pongsAndStrayFrames() {
        #expect(CXoneWire.classify("\"pong\"") == .pong)
        if case .unrecognized = CXoneWire.classify("{\"hello\":1}") {} else { Issue.record("a frame without an eventId is dropped") }
        if case .unrecognized = CXoneWire.classify("not json") {} else { Issue.record("garbage is dropped") }
        guard case .event(_, nil, _) = CXoneWire.classify(#"{"eventId":"A"}"#) else {
            Issue.record("a bare acknowledgment is an event without a type")
            return
        }
    }

    @Test func datesInEveryFixtureForm() {
        for text in ["2022-08-04T18:27:34+00:00", "2022-12-12T15:41:18+0100", "2022-03-15T17:54:50+0000", "2024-04-16T07:44:51.462Z", "2024-01-01T12:00:00Z"] {
            #expect(CXoneMapping.date(.string(text)) != nil, "\(text)")
        }
        #expect(CXoneMapping.date(.string("yesterday")) == nil)
    }

    @Test func preChatSurveyValidation() throws {
        let configuration = try CXoneChannelConfiguration(json: try CXoneFixtureTests.json("ChannelConfiguration.json"))
        let required = configuration.preChatFields.filter(\.isRequired)
        if let first = required.first {
            #expect { try configuration.validatePreChat([:]) } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
            do {
                try configuration.validatePreChat([:])
            } catch let error as SwitchboardError {
                #expect(error.vendorCode == "missingPreChatCustomFields" && error.message.contains(first.ident))
            }
        }
        print("cxone pre-chat: \(configuration.preChatFields.map(\.ident)), required \(required.map(\.ident)), mode \(configuration.mode), auth \(configuration.authenticationType)")
    }

    @Test func theHTTPAnswersAreReadOrATypedError() throws {
        func data(_ text: String) -> Data { Data(text.utf8) }
        func code(_ body: () throws -> Any) -> SwitchboardError.Code? {
            do { _ = try body() } catch { return (error as? SwitchboardError)?.code }
            return nil
        }
        #expect(try CXoneHTTPAnswers.liveChatAvailability(status: 200, body: data(#"{"status":"online"}"#)))
        #expect(try !CXoneHTTPAnswers.liveChatAvailability(status: 200, body: data(#"{"status":"offline"}"#)))
        #expect(code { try CXoneHTTPAnswers.liveChatAvailability(status: 503, body: data("")) } == .serverError)

        let json = try CXoneHTTPAnswers.tokenAnswer(status: 200, body: data(#"""
            {"accessToken": "t1", "expiresIn": 3600, "customerIdentity": {"idOnExternalPlatform": "c1"},
             "thirdParty": {"access_token": "a1", "refresh_token": "r1", "expires_in": 60}}
            """#), failure: "transactionTokenRequestFailed")
        var credentials = Credentials()
        #expect(try CXoneHTTPAnswers.transactionToken(json, now: Date(timeIntervalSince1970: 1000), into: &credentials) == "t1")
        #expect(credentials["transaction-token-expires-at"] == "4600.0" && credentials["customer-id"] == "c1")
        #expect(credentials["access-token"] == "a1" && credentials["oauth-refresh-token"] == "r1" && credentials["access-token-expires-at"] == "1060.0")
        #expect(code { try CXoneHTTPAnswers.transactionToken(["token": "t"], now: .now, into: &credentials) } == .authenticationFailed)
        #expect(code { try CXoneHTTPAnswers.tokenAnswer(status: 502, body: data("{}"), failure: "f") } == .serverError)
        #expect(code { try CXoneHTTPAnswers.tokenAnswer(status: 401, body: data("{}"), failure: "f") } == .authenticationFailed)
        #expect(code { try CXoneHTTPAnswers.tokenAnswer(status: 200, body: data("<html>"), failure: "f") } == .authenticationFailed)

        let uploaded = try Data(contentsOf: CXoneFixtureTests.directory.appendingPathComponent("AttachmentUploadSuccessResponse.json"))
        #expect(try CXoneHTTPAnswers.uploadedFileURL(status: 200, body: uploaded, name: "a.jpeg").hasSuffix(".jpeg"))
        #expect(code { try CXoneHTTPAnswers.uploadedFileURL(status: 200, body: data("{}"), name: "a.jpeg") } == .messageRejected)
        #expect(code { try CXoneHTTPAnswers.uploadedFileURL(status: 500, body: uploaded, name: "a.jpeg") } == .serverError)
    }
}
