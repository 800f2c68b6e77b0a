import Foundation
import Switchboard
import SwitchboardTestKit
import Testing

@_spi(TestKit) @_spi(WireReaders) @testable import SwitchboardWebim

/// The adapter's reading of the Webim SDK's own test payloads (`Tests/Fixtures/webim`).
@Suite struct WebimCodecTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/Fixtures/webim")

    static func fixture(_ name: String) throws -> JSONValue {
        try JSONValue(parsing: Data(contentsOf: fixtures.appendingPathComponent(name)))
    }

    let context = WebimMapping.Context(
        baseURL: "https://demo.webim.ru", pageID: "page-1", authToken: "token-1", visitorID: "visitor-1",
        now: Date(timeIntervalSince1970: 1_700_000_000)
    )

    @Test func anOperatorMessage() throws {
        let message = try #require(WebimMapping.message(try Self.fixture("MessageItemTests__MESSAGE_ITEM_JSON_STRING__L37.json"), context: context))
        #expect(message.serverID == "26871")
        // The SDK's 32 hex digits, read back in the UUID form the engine's ids take (and sent as
        // the same 32 digits).
        #expect(message.clientID == "84e51d56-3852-4ee7-833a-1fe19a1f2448")
        #expect(WebimMapping.wireID(try #require(message.clientID)) == "84e51d5638524ee7833a1fe19a1f2448")
        #expect(WebimMapping.wireID("app-chosen-id") == "app-chosen-id", "an id that is no UUID goes as it is")
        #expect(WebimMapping.clientID(fromWire: "app-chosen-id") == "app-chosen-id")
        #expect(message.kind == .text)
        #expect(message.senderRole == .agent)
        #expect(message.sender == "operator-33202")
        #expect(message.senderName == "Евгения Техподдержка")
        #expect(message.text == "42")
        #expect(message.time == Date(timeIntervalSince1970: 1_518_609_964.579372))
        #expect(message.sequence == nil, "Webim orders by time, not sequence")
    }

    @Test func aVisitorMessageWithoutReadIsRead() throws {
        // protocols/webim.md §7: `read` missing ⇒ true.
        let base: JSONValue = ["id": "1", "clientSideId": "c1", "kind": "visitor", "text": "hi", "name": "", "ts": 1_700_000_000.0]
        #expect(WebimMapping.message(base, context: context)?.deliveryState == .read)
        #expect(WebimMapping.message(base.setting("read", to: false), context: context)?.deliveryState == .sent)
        #expect(WebimMapping.message(base.setting("read", to: true), context: context)?.deliveryState == .read)
    }

    /// Every message fixture maps, or is dropped for the reasons the SDK drops it; none crashes.
    @Test func everyMessageFixture() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path).filter {
            $0.contains("MESSAGE_ITEM_JSON_STRING") || $0.contains("MESSAGE_JSON_STRING")
        }.sorted()
        try #require(names.count >= 10)
        var mapped: [String] = []
        for name in names {
            let json = try Self.fixture(name)
            if let message = WebimMapping.message(json, context: context) {
                mapped.append("\(message.kind)")
                #expect(message.serverID?.rawValue == json["id"]?.stringValue, "\(name)")
            } else {
                let missing = json["id"]?.stringValue == nil || json["text"]?.stringValue == nil || json["name"]?.stringValue == nil
                    || json["kind"]?.stringValue == nil || json["kind"]?.stringValue == "for_operator"
                    || (json["ts"]?.nonNull == nil && json["ts_m"]?.nonNull == nil)
                #expect(missing, "\(name) was dropped without a reason")
            }
        }
        print("webim message fixtures: \(names.count), mapped \(mapped.count): \(mapped)")
    }

    @Test func aFileMessageHasAStableAddressSignedOnDemand() throws {
        let params = try Self.fixture("MessageImplTests__fileParametersJson__L212.json")
        let json: JSONValue = ["id": "9", "kind": "file_operator", "text": .string(params.jsonString), "name": "Bob", "ts_m": 1_700_000_000_000_000, "authorId": 7]
        let message = try #require(WebimMapping.message(json, context: context))
        #expect(message.kind == .file)
        let attachment = try #require(message.attachments.first)
        #expect(attachment.name == "asset.JPG")
        #expect(attachment.mimeType == "image/png")
        #expect(attachment.size == 758_611)
        #expect(attachment.imageSize == Message.Attachment.ImageSize(width: 700, height: 501))
        // The stable address is stored; a link is signed when asked, for 300 s.
        let url = try #require(attachment.url)
        #expect(url.absoluteString == "https://demo.webim.ru/l/v/m/download/010a56da72ee41e2a78d0509155de755/asset.JPG")
        #expect(attachment.thumbnailURL?.absoluteString == url.absoluteString + "?thumb=ios")
        let signed = try WebimMapping.signed(url, context: context).absoluteString
        #expect(signed.hasPrefix(url.absoluteString + "?page-id=page-1&expires=1700000300&hash="))
        #expect(try WebimMapping.signed(try #require(attachment.thumbnailURL), context: context).absoluteString.hasSuffix("&thumb=ios"))
        #expect(throws: SwitchboardError.self) { try WebimMapping.signed(URL(string: "https://elsewhere.example/l/v/m/download/x/y")!, context: context) }
        #expect(message.text == "asset.JPG")
    }

    /// The SDK's department items: a known status, an unknown one, and one without a key (dropped).
    @Test func departmentsAsTheSDKReadsThem() throws {
        let department = try #require(WebimDepartment(try Self.fixture("DepartmentItemTests__DEPARTMENT_ITEM_JSON_STRING__L32.json")))
        #expect(department.key == "mobile_test_1" && department.name == "Mobile Test 1" && department.order == 100)
        #expect(department.availability == .offline)
        #expect(department.localizedNames == ["ru": "Mobile Test 1"])
        #expect(department.logo == "/webim/images/department_logo/wmtest2_1.png")
        #expect(WebimDepartment(try Self.fixture("DepartmentItemTests__DEPARTMENT_ITEM_WITH_UNKNOWN_ONLINE_STATUS_JSON_STRING__L44.json"))?.availability == .unknown)
        #expect(WebimDepartment(try Self.fixture("DepartmentItemTests__INCORRECT_DEPARTMENT_ITEM_JSON_STRING__L56.json")) == nil)
    }

    @Test func theVisitorAsTheSDKReadsThem() throws {
        let visitor = try #require(WebimVisitor(try Self.fixture("VisitorItemTests__visitorItemJSONString__L36.json")))
        #expect(visitor.id == "877a920ede7082412656ac1cdec7ecde")
        #expect(visitor.name == "Посетитель")
        #expect(visitor.iconColor == "#5fa0ea" && visitor.iconShape == "rhombus")
        #expect(WebimVisitor(["fields": ["name": "x"]]) == nil, "no id, no visitor")
    }

    @Test func severalFilesInOneMessage() throws {
        let params = try Self.fixture("MessageImplTests__fewFileParametersJson__L229.json")
        let json: JSONValue = ["id": "9", "kind": "file_visitor", "text": .string(params.jsonString), "name": "Me", "ts": 1_700_000_000.5]
        let message = try #require(WebimMapping.message(json, context: context))
        #expect(message.attachments.count == params.arrayValue?.count)
    }

    @Test func aChatBecomesTheSupportConversation() throws {
        let chat = try Self.fixture("ChatItemTests__CHAT_ITEM_JSON_STRING__L34.json")
        let info = WebimMapping.conversationInfo(chat, context: context)
        #expect(info.id == "chat")
        #expect(info.kind == .supportChat)
        #expect(info.state == WebimMapping.state(chat["state"]?.stringValue))
        if let operatorID = chat["operator"]?["id"]?.intValue {
            #expect(info.assignedAgent?.id == ParticipantID("operator-\(operatorID)"))
        }
        #expect(info.participants.contains { $0.role == .customer })
        let empty = WebimMapping.conversationInfo(nil, context: context)
        #expect(empty.state == ConversationInfo.State.none)
    }

    @Test func chatStatesMap() {
        #expect(WebimMapping.state("queue") == .queued)
        #expect(WebimMapping.state("chatting") == .active)
        #expect(WebimMapping.state("chatting_with_robot") == .active)
        #expect(WebimMapping.state("closed_by_operator") == .closedByAgent)
        #expect(WebimMapping.state("closed_by_visitor") == .closedByCustomer)
        #expect(WebimMapping.state("invitation") == .invitation)
        #expect(WebimMapping.state("routing") == .unknown("routing"))
    }

    @Test func errorStringsClassify() {
        #expect(WebimMapping.error("reinit-required", during: "delta").code == .connectionLost)
        for fatal in ["account-blocked", "visitor_banned", "provided-visitor-expired", "wrong-provided-visitor-hash-value"] {
            let error = WebimMapping.error(fatal, during: "init")
            #expect(error.code == .fatal && error.vendorCode == fatal, "\(fatal)")
        }
        #expect(WebimMapping.error("max_file_size_exceeded", during: "upload").code == .payloadTooLarge)
        #expect(WebimMapping.error("not_allowed", during: "chat.message").code == .messageRejected)
        #expect(WebimMapping.error("provided-auth-token-not-found", during: "init").code == .authenticationFailed)
        #expect(WebimMapping.error("rate-value-incorrect", during: "rate").code == .invalidArgument)
        // Every row of the README's error table, as the code classifies it.
        let table: [(SwitchboardError.Code, [String])] = [
            (.connectionLost, ["reinit-required", "server-not-ready", "session_not_found"]),
            (.authenticationFailed, ["provided-auth-token-not-found", "unauthorized"]),
            (.fatal, ["account-blocked", "visitor_banned", "provided-visitor-expired", "wrong-provided-visitor-hash-value", "wrong-provided-visitor-expires-value", "wrong-init", "domain-not-from-whitelist"]),
            (.payloadTooLarge, ["max_file_size_exceeded", "max-message-length-exceeded"]),
            (.conversationNotFound, ["no-chat", "chat-required", "no_previous_chats", "chat-not-found"]),
            (.messageNotFound, ["message_not_found", "uploaded-file-not-found", "file-not-found", "quoted-message-not-found"]),
            (.serverError, ["internal_error"]),
            (.unsupported, ["unknown-method", "setting_disabled", "no-tariff-option", "rate-disabled", "survey_disabled"]),
            (.invalidArgument, ["argument-missing", "wrong-argument-value", "rate-value-incorrect", "wrong-operator-id", "note-is-too-long", "incorrect-survey-id", "button-id-not-set", "request-message-id-not-set", "invalid-coordinates-received"]),
            (.messageRejected, ["message_empty", "not_allowed", "message_not_owned", "wrong_message_kind", "something-new"]),
        ]
        for (code, strings) in table {
            for string in strings {
                let error = WebimMapping.error(string, during: "x")
                #expect(error.code == code && error.vendorCode == string, "\(string) → \(error.code), the README says \(code)")
            }
        }
    }

    @Test func pushNotifications() throws {
        let webim = try Self.fixture("WebimTests__WEBIM_REMOTE_NOTIFICATION_JSON_STRING__L34.json")
        #expect(WebimPushNotifications.isWebim(webim))
        let parsed = try #require(WebimPushNotifications.parse(webim))
        #expect(parsed.kind == .operatorMessage)
        #expect(parsed.parameters == ["Имя Оператора", "Сообщение"])
        #expect(!WebimPushNotifications.isWebim(try Self.fixture("WebimTests__NOT_WEBIM_REMOTE_NOTIFICATION_JSON_STRING__L46.json")))
        #expect(WebimPushNotifications.parse(try Self.fixture("WebimTests__INCORRECT_REMOTE_NOTIFICATION_JSON_STRING__L57.json")) == nil)
        let special = try #require(WebimPushNotifications.parse(try Self.fixture("WebimTests__REMOTE_NOTIFICATION_WITH_SPECIAL_FIELDS__L66.json")))
        #expect(special.location == "mobile")
        #expect(special.unreadByVisitorMessageCount == 1)
        let userInfo: [AnyHashable: Any] = ["webim": 1, "aps": ["alert": ["loc-key": "P.OA", "loc-args": ["Bob"]]]]
        #expect(WebimPushNotifications.isWebim(userInfo))
        #expect(WebimPushNotifications.parse(userInfo)?.kind == .operatorAccepted)
        let forAnotherVisitor: [AnyHashable: Any] = ["webim": 1, "aps": ["alert": ["loc-key": "P.OA", "loc-args": ["Bob", "visitor-2"]]]]
        #expect(WebimPushNotifications.parse(forAnotherVisitor) == nil, "the SDK drops a payload with an extra visitor id")
    }

    @Test func configurationIsValidatedLikeSessionBuilder() {
        #expect { try WebimConfiguration(accountName: "").validate() } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
        #expect {
            try WebimConfiguration(accountName: "demo", deviceToken: "abc").validate()
        } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
        #expect {
            try WebimConfiguration(accountName: "demo", visitorFieldsJSON: #"{"fields":{"name":"x"}}"#).validate()
        } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
        #expect(WebimConfiguration(accountName: "demo").baseURL == "https://demo.webim.ru")
        #expect(WebimConfiguration(accountName: "http://127.0.0.1:8080/").baseURL == "http://127.0.0.1:8080")
    }
}

/// Delta, full update and history payloads from the SDK's tests, through the pure mappings.
@Suite struct WebimUpdateFixtureTests {
    let context = WebimMapping.Context(baseURL: "https://demo.webim.ru", pageID: "p", authToken: "t", visitorID: "v", now: Date(timeIntervalSince1970: 1_700_000_000))

    @Test func theDeltaResponseMapsItemByItemInOrder() throws {
        let response = try WebimCodecTests.fixture("DeltaResponseTests__DELTA_RESPONSE_JSON_STRING__L34.json")
        #expect(response["revision"]?.stringValue == "12")
        let items = try #require(response["deltaList"]?.arrayValue)
        let kinds = items.flatMap { WebimMapping.updates(forDelta: $0, operatorID: nil, context: context) }.compactMap { update -> String? in
            guard case .event(let event) = update else { return nil }
            return "\(event.kind.category)"
        }
        print("webim delta fixture: \(items.map { $0["objectType"]?.stringValue ?? "?" }) → \(kinds)")
        #expect(kinds.count == items.count, "one normalized event per item")
        let state = items.first { $0["objectType"] == "CHAT_STATE" }.map { WebimMapping.updates(forDelta: $0, operatorID: nil, context: context) }
        guard case .event(let event)?? = state?.first else {
            Issue.record("no CHAT_STATE event")
            return
        }
        #expect(event.kind == .conversationStateChanged(.queued, previous: nil))
    }

    @Test func deltaItemsWithoutAStringIDAreProblemsNotCrashes() throws {
        let nullID = try WebimCodecTests.fixture("DeltaItemTests__deltaItemNullIDJSONString__L107.json")
        guard case .problem(let error) = WebimMapping.updates(forDelta: nullID, operatorID: nil, context: context).first else {
            Issue.record("a null id is a problem report")
            return
        }
        #expect(error.code == .protocolViolation)
        let unknown: JSONValue = ["id": "1", "objectType": "SOMETHING_NEW", "event": "upd", "data": 5]
        guard case .event(let event) = WebimMapping.updates(forDelta: unknown, operatorID: nil, context: context).first,
            case .custom(let name, _) = event.kind
        else {
            Issue.record("an unknown type is kept as a vendor event")
            return
        }
        #expect(name == "webim.SOMETHING_NEW")
    }

    @Test(arguments: ["DeltaCallbackTests__surveyJson__L502.json", "MessageStreamImplTests__surveyJson__L994.json"])
    func surveyFixturesDecode(_ name: String) throws {
        let json = try WebimCodecTests.fixture(name)
        let survey = try WebimSurvey(json: json)
        #expect(survey.id == "123" && survey.configID == 12 && survey.version == "91", "\(name)")
        #expect(survey.forms.map(\.id) == [15123])
        #expect(survey.forms.first?.questions == [WebimSurvey.Question(type: "stars", text: "someText", options: ["some"])])
        #expect(survey.currentFormID == 124 && survey.currentQuestionIndex == 89891)
        #expect(survey.currentQuestion == nil, "\(name): the current pointer names a form the survey does not hold")
        let item: JSONValue = ["id": "123", "objectType": "SURVEY", "event": "upd", "data": json]
        guard case .event(let event) = WebimMapping.updates(forDelta: item, operatorID: nil, context: context).first,
            case .custom("webim.SURVEY", let payload) = event.kind
        else {
            Issue.record("\(name): a SURVEY delta is a webim.SURVEY event")
            return
        }
        #expect(try WebimSurvey.fromEvent(payload: payload) == survey)
        var broken = json.objectValue ?? [:]
        broken["config"] = .null
        #expect(throws: SwitchboardError.self, "\(name) without config") { try WebimSurvey(json: .object(broken)) }
        #expect(try WebimSurvey.fromEvent(payload: ["objectType": "SURVEY", "data": .null]) == nil, "a null survey ends it")
    }

    @Test func theFullUpdateIsACompleteSnapshotWithCredentials() throws {
        let fullUpdate = try WebimCodecTests.fixture("FullUpdateTests__defaultFullUpdateJson__L36.json")
        let credentials = WebimMapping.credentials(fromFullUpdate: fullUpdate)
        #expect(credentials["auth-token"] == "17778d49ecf342b5aef702479a99bb65")
        #expect(credentials["visitor-id"] == "877a920ede7082412656ac1cdec7ecde")
        #expect(credentials["page-id"] != nil && credentials["visit-session-id"] != nil)
        let updates = WebimMapping.updates(forFullUpdate: fullUpdate, context: context)
        guard case .snapshot(let snapshot) = updates.first else {
            Issue.record("a full update starts with a snapshot")
            return
        }
        #expect(snapshot.isComplete)
        #expect(snapshot.conversations.count == 1)
        let chatMessages = fullUpdate["chat"]?["messages"]?.arrayValue?.count ?? 0
        #expect(snapshot.conversations[0].messages.count <= chatMessages)
        #expect(snapshot.conversations[0].conversation.participants.contains { $0.id == "877a920ede7082412656ac1cdec7ecde" && $0.role == .customer })
        #expect(updates.contains { update in
            if case .event(let event) = update, case .availability = event.kind { return true }
            return false
        })
    }

    @Test func historyResponsesMapToMessagesInTimeOrder() throws {
        for name in ["HistoryBeforeResponseTests__defaultHistoryBeforeResponseJson__L36.json", "HistorySinceResponseTests__defaultHistorySinceResponseJson__L37.json"] {
            let response = try WebimCodecTests.fixture(name)
            let items = response["data"]?["messages"]?.arrayValue ?? []
            let messages = items.compactMap { WebimMapping.message($0, context: context) }
            #expect(messages.count == items.count, "\(name): every history message maps")
            #expect(messages.allSatisfy { $0.serverID != nil })
        }
        let empty = try WebimCodecTests.fixture("HistoryBeforeResponseTests__nullHistoryBeforeResponseDataJson__L71.json")
        let emptyMessages: [JSONValue] = empty["data"]?["messages"]?.arrayValue ?? []
        #expect(emptyMessages.isEmpty, "a null messages list is an empty page")
    }

    @Test func anUploadAnswerGivesItsFileOrATypedError() throws {
        let ok = try WebimDeltaReader.readUploadAnswer(Data(#"{"result":"ok","data":{"guid":"g1","filename":"a.png","content_type":"image/png","size":3}}"#.utf8))
        #expect(ok["guid"]?.stringValue == "g1")
        #expect(throws: SwitchboardError.self) { try WebimDeltaReader.readUploadAnswer(Data("<html>502</html>".utf8)) }
        do {
            _ = try WebimDeltaReader.readUploadAnswer(Data(#"{"error":"max_file_size_exceeded"}"#.utf8))
            Issue.record("a vendor error is thrown")
        } catch let error as SwitchboardError {
            #expect(error.code == .payloadTooLarge && error.vendorCode == "max_file_size_exceeded")
        }
    }

    @Test func anAccountConfigGivesTheSettingsAndTheUploadLimits() throws {
        let config = try WebimDeltaReader.readConfigAnswer(Data(#"""
            {"accountConfig": {"max_visitor_upload_file_size": 10, "allowed_upload_file_types": "PNG, jpg", "visitor_upload_file": false},
             "locationSettings": {"hintsEnabled": true}}
            """#.utf8))
        #expect(config.maxUploadBytes == 10 * 1024 * 1024)
        #expect(config.allowedFileTypes == ["png", "jpg"])
        #expect(config.uploadAllowed == false)
        #expect(config.settings?["locationSettings"]?["hintsEnabled"]?.boolValue == true)
        #expect(try WebimDeltaReader.readConfigAnswer(Data("{}".utf8)) == WebimDeltaReader.AccountConfig(), "what the answer does not say stays unset")
        for body in ["webimApplyServerSideSettings({})", #"{"accountConfig": {"max_visitor_upload_file_size": 9223372036854775807}}"#,
                     #"{"accountConfig": {"max_visitor_upload_file_size": -1}}"#] {
            // The second trapped (`Int(megabytes) * 1024 * 1024`).
            #expect { try WebimDeltaReader.readConfigAnswer(Data(body.utf8)) } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
        }
    }

    @Test func anActionAnswerIsDoneRefusedOrThePagesError() {
        func read(_ body: String) -> WebimDeltaReader.ActionOutcome { WebimDeltaReader.readActionAnswer(Data(body.utf8), during: "chat.message") }
        guard case .done(let json) = read(#"{"result":"ok"}"#) else { Issue.record("ok is done"); return }
        #expect(json["result"]?.stringValue == "ok")
        guard case .refused(let refused) = read(#"{"result":"ok","data":{"error":"quoted-message-not-found"}}"#) else { Issue.record("data.error is a refusal"); return }
        #expect(refused.code == .messageNotFound && refused.vendorCode == "quoted-message-not-found")
        guard case .error(let error) = read(#"{"error":"reinit-required"}"#) else { Issue.record("error is the page's"); return }
        #expect(error.vendorCode == "reinit-required")
        for body in ["[]", "\"ok\"", "<html>502</html>", ""] {
            guard case .malformed(let malformed) = read(body) else { Issue.record("\(body) is malformed"); continue }
            #expect(malformed.code == .protocolViolation)
        }
    }

    @Test func anAppealsHistoryAnswerGivesItsAppealsTheOperatorsReadingAndTheCursor() throws {
        let body = #"""
            {"result": "ok", "lastChangeTs": 1700000200.0,
             "chats": [{"id": 7, "offline": true, "operator": {"id": 3, "fullname": "Anna"}, "unreadByOperatorSinceTs": 1700000150.0,
                        "messages": [{"id": "m1", "kind": "visitor", "text": "a", "name": "V", "ts": 1700000000.25, "chatId": "7"},
                                     {"id": "m2", "kind": "visitor", "text": "b", "name": "V", "ts": 1700000160.0, "chatId": "7"}]}],
             "messages": [{"id": "m3", "kind": "operator", "text": "c", "name": "Anna", "ts": 1700000170.0, "chatId": "7"}]}
            """#
        let answer = try WebimAppealsBackend.readHistoryAnswer(
            Data(body.utf8), complete: false, baseURL: "https://demo.webim.ru", credentials: Credentials(), now: Date(timeIntervalSince1970: 1_700_000_300)
        )
        #expect(answer.since == "1700000200")
        #expect(answer.operatorRead.map(\.appeal) == ["7"] && answer.operatorRead.map(\.message) == ["m1"] && answer.operatorRead.map(\.reader) == ["operator-3"])
        guard case .snapshot(let snapshot)? = answer.updates.first else { Issue.record("the appeals first"); return }
        #expect(snapshot.conversations.map(\.conversation.id) == ["7"] && snapshot.conversations.first?.messages.count == 2)
        #expect(answer.updates.count == 2, "then the loose message")
        #expect { try WebimAppealsBackend.readHistoryAnswer(Data("[]".utf8), complete: true, baseURL: "", credentials: Credentials(), now: .now) } throws: {
            ($0 as? SwitchboardError)?.code == .protocolViolation
        }
    }

    /// An operator's reading counts for a message whose time comes only as `ts_m` (#30: it
    /// never did; the marker read only `ts`).
    @Test func theOperatorsReadingCountsAMessageTimedOnlyInMicroseconds() throws {
        let body = #"""
            {"result": "ok", "lastChangeTs": 1700000200.0,
             "chats": [{"id": 7, "offline": true, "operator": {"id": 3, "fullname": "Anna"}, "unreadByOperatorSinceTs": 1700000150.0,
                        "messages": [{"id": "m1", "kind": "visitor", "text": "a", "name": "V", "ts_m": 1700000000250000, "chatId": "7"},
                                     {"id": "m2", "kind": "visitor", "text": "b", "name": "V", "ts_m": 1700000160000000, "chatId": "7"}]}]}
            """#
        let answer = try WebimAppealsBackend.readHistoryAnswer(
            Data(body.utf8), complete: false, baseURL: "https://demo.webim.ru", credentials: Credentials(), now: Date(timeIntervalSince1970: 1_700_000_300)
        )
        #expect(answer.operatorRead.map(\.message) == ["m1"], "read up to the last message before unreadByOperatorSinceTs")
    }

    @Test func aMessageTimePastWebimsMicrosecondsIsNoTime() throws {
        // FuzzWebim's crash (Fuzz/Seeds/webim/crash-history-page-time-past-int64.json): the page's
        // anchor, `Int64(ts * 1_000_000)`, trapped.
        let reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        for time in [#""ts":17000000250000"#, #""ts":-1e300"#, #""ts_m":9223372036854775807"#] {
            let body = #"{"data":{"messages":[{"id":"m1","kind":"operator","text":"a","name":"A",\#(time)}]}}"#
            let page = try reader.readHistoryPage(Data(body.utf8), credentials: Credentials(), now: .now)
            #expect(page.messages.isEmpty && page.nextAnchor == nil, "\(time)")
        }
        let page = try reader.readHistoryPage(Data(#"{"data":{"messages":[{"id":"m1","kind":"operator","text":"a","name":"A","ts":1700000000.5}]}}"#.utf8), credentials: Credentials(), now: .now)
        #expect(page.nextAnchor == .token("1700000000500000"))
    }
}
