import Foundation
import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
import Testing
import WebimEmulator

/// The emulator's answers against the SDK's own test payloads (`Tests/Fixtures/webim`): every
/// field a fixture has, the emulator's answer has, with the same JSON type. The adapter is read
/// against the same fixtures (`WebimCodecTests`); this is the emulator's half, so both sides meet
/// on the vendor's payloads rather than on each other.
@Suite(.timeLimit(.minutes(2)))
struct WebimEmulatorFixtureTests {
    /// Fields the emulator leaves `null` where the fixture has a value, each with its reason.
    static let mayBeNull: Set<String> = [
        // Reactions are not offered by the emulator.
        "reaction",
        // A chat not yet started, a survey not asked: the server's null.
        "chat", "survey",
        // The emulator's account has no chat categories.
        "category",
        // Nothing unread: the server's null.
        "unreadByOperatorSinceTs", "unreadByVisitorSinceTs",
    ]

    /// Objects whose keys are data, not field names.
    static let mapsByKey: Set<String> = ["localeToName", "operatorIdToRate", "langToFullname"]

    /// A PNG header of 640 × 480 (the server describes an image's size).
    static let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 2, 0x80, 0, 0, 1, 0xE0, 8, 6, 0, 0, 0])

    static func fixture(_ name: String) throws -> JSONValue {
        try JSONValue(parsing: Data(contentsOf: WebimCodecTests.fixtures.appendingPathComponent(name)))
    }

    @Test func theEmulatorsAnswersHaveTheFieldsAndTypesOfTheSDKsPayloads() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .milliseconds(1), helloMessage: "Hello!")) { control in
            let transport = control.transport
            let base = control.baseURL
            func json(_ response: HTTPTransport.Response) throws -> JSONValue { try JSONValue(parsing: response.body) }
            let initQuery = [
                ("device-id", "fixture-check"), ("event", "init"), ("location", "mobile"), ("platform", "ios"), ("respond-immediately", "1"),
                ("since", "0"), ("title", "t"), ("visitor-ext", #"{"fields":{"id":"fixtures","name":"Alice"}}"#),
            ]
            let first = try json(try await transport.get("\(base)/l/v/m/init", query: initQuery, timeout: .seconds(10)))
            let page = try #require(first["fullUpdate"]?["pageId"]?.stringValue), token = try #require(first["fullUpdate"]?["authToken"]?.stringValue)
            let credentials = [("page-id", page), ("auth-token", token)]
            // A chat with an operator, messages and a file.
            _ = try await transport.postForm("\(base)/l/v/m/action", fields: [("action", "chat.start"), ("client-side-id", "0123456789abcdef0123456789abcdef")] + credentials, timeout: .seconds(10))
            try control.agent.join(visitor: "provided-fixtures")
            _ = try control.agent.send("Hello, how can I help?", to: "provided-fixtures")
            _ = try await transport.postForm(
                "\(base)/l/v/m/action", fields: [("action", "chat.message"), ("message", "My parcel"), ("client-side-id", "fedcba9876543210fedcba9876543210")] + credentials,
                timeout: .seconds(10)
            )
            let upload = try json(
                try await transport.postMultipart(
                    "\(base)/l/v/m/upload", fields: [("chat-mode", "online"), ("client-side-id", "00112233445566778899aabbccddeeff")] + credentials,
                    file: HTTPTransport.FilePart(field: "webim_upload_file", filename: "photo.png", contentType: "image/png", data: Self.png),
                    timeout: .seconds(10)
                )
            )
            let since0 = try #require(first["revision"]?.stringValue)
            let delta = try json(try await transport.get("\(base)/l/v/m/delta", query: [("since", since0), ("ts", "1")] + credentials, timeout: .seconds(10)))
            let items = delta["deltaList"]?.arrayValue ?? []
            let again = try json(try await transport.get("\(base)/l/v/m/init", query: initQuery, timeout: .seconds(10)))
            let fullUpdate = try #require(again["fullUpdate"])
            let chat = try #require(fullUpdate["chat"])
            let since = try json(try await transport.get("\(base)/l/v/m/history", query: [("since", "0")] + credentials, timeout: .seconds(10)))
            let before = try json(try await transport.get("\(base)/l/v/m/history", query: [("before-ts", "99999999999999999")] + credentials, timeout: .seconds(10)))
            let online = try json(try await transport.get("\(base)/l/v/m/get-online-status", query: [("location", "mobile")] + credentials, timeout: .seconds(10)))

            let operatorMessage = try #require(chat["messages"]?.arrayValue?.first { $0["kind"] == "operator" })
            let fileMessage = try #require(chat["messages"]?.arrayValue?.first { $0["kind"] == "file_visitor" })
            let comparisons: [(String, JSONValue?, String)] = [
                ("full update", fullUpdate, "FullUpdateTests__defaultFullUpdateJson__L36.json"),
                ("chat", chat, "ChatItemTests__CHAT_ITEM_JSON_STRING__L34.json"),
                ("operator", chat["operator"], "ChatItemTests__OPERATOR_JSON_STRING__L140.json"),
                ("operator message", operatorMessage, "MessageItemTests__MESSAGE_ITEM_JSON_STRING__L37.json"),
                ("file parameters", try JSONValue(parsing: fileMessage["text"]?.stringValue ?? ""), "FileParametersItemTests__defaultFileParametersItemJson__L34.json"),
                ("upload answer", upload["data"], "FileParametersItemTests__defaultFileParametersItemJson__L34.json"),
                ("department", fullUpdate["departments"]?.arrayValue?.first, "DepartmentItemTests__DEPARTMENT_ITEM_JSON_STRING__L32.json"),
                ("visitor", fullUpdate["visitorFull"], "VisitorItemTests__visitorItemJSONString__L36.json"),
                ("delta answer", delta, "DeltaResponseTests__DELTA_RESPONSE_JSON_STRING__L34.json"),
                ("delta item", items.first { $0["objectType"] == "CHAT_MESSAGE" }, "DeltaItemTests__deltaItemDefaultJSONString__L37.json"),
                ("history since", since, "HistorySinceResponseTests__defaultHistorySinceResponseJson__L37.json"),
                ("history before", before, "HistoryBeforeResponseTests__defaultHistoryBeforeResponseJson__L36.json"),
                ("online status", online, "LocationStatusResponseTests__defaultLocationStatusResponseJson__L36.json"),
            ]
            var checked = 0
            for (what, served, name) in comparisons {
                let served = try #require(served, "\(what): the emulator answered nothing")
                let found = FixtureShape(mayBeNull: Self.mayBeNull, mapsByKey: Self.mapsByKey).differences(served, try Self.fixture(name))
                #expect(found.isEmpty, "\(what) against \(name): \(found)")
                checked += 1
            }
            print("webim emulator against the SDK's payloads: \(checked) answers compared, \(items.count) delta items")
        }
    }
}
