import Foundation
import Switchboard

/// The emulator's server-side model of the Webim mobile API (protocols/webim.md), rendered to the
/// SDK's JSON by the `json` properties.
struct WebimOperator {
    var id: Int
    var fullname: String
    var avatar: String?

    var json: JSONValue {
        // The fields of the SDK's operator payload (`OperatorItem`).
        var object: [String: JSONValue] = [
            "id": .int(Int64(id)), "fullname": .string(fullname), "robotType": .null, "departmentKeys": ["sales", "support"],
            "langToFullname": ["en": .string(fullname)], "sip": .string("1000\(id)"),
        ]
        if let avatar { object["avatar"] = .string(avatar) }
        return .object(object)
    }
}

struct WebimMessage {
    var id: String
    var clientSideId: String
    var kind: String
    var text: String
    var name: String
    var authorId: Int?
    var avatar: String?
    /// Microseconds; unique per server, as the SDK's storage requires.
    var tsMicros: Int64
    var read = false
    var edited = false
    var canBeEdited = false
    var canBeReplied = true
    var data: JSONValue?
    var quote: JSONValue?
    /// The appeal or chat it belongs to.
    var chatID: Int?
    /// The visit session it was written in.
    var sessionID: String?
    /// The visitor's history revision when it last changed (history-since pages by it).
    var revision = 0

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(id), "clientSideId": .string(clientSideId), "kind": .string(kind), "text": .string(text),
            "name": .string(name), "ts": .double(Double(tsMicros) / 1_000_000), "ts_m": .int(tsMicros),
            "read": .bool(read), "edited": .bool(edited), "canBeEdited": .bool(canBeEdited),
            "canBeReplied": .bool(canBeReplied), "chatId": chatID.map { .string(String($0)) } ?? .null,
            "deleted": false, "data": .null, "sessionId": sessionID.map(JSONValue.string) ?? .null,
            // Reactions are not offered by the emulator: none, and the visitor may not react.
            "reaction": .null, "canVisitorReact": false, "canVisitorChangeReaction": false,
        ]
        if let authorId { object["authorId"] = .int(Int64(authorId)) }
        if let avatar { object["avatar"] = .string(avatar) }
        if let data { object["data"] = data }
        if let quote { object["quote"] = quote }
        return .object(object)
    }
}

struct WebimChat {
    var id: Int
    var clientSideId: String
    var state: String
    var creationTs: Double
    var messages: [WebimMessage] = []
    var operatorInChat: WebimOperator?
    var operatorTyping = false
    var readByVisitor = true
    var unreadByVisitor = 0
    /// When the oldest message the visitor has not read came (unix s).
    var unreadByVisitorSinceTs: Double?
    var rates: [Int: Int] = [:]

    var isClosed: Bool { ["closed", "closed_by_visitor", "closed_by_operator"].contains(state) }

    var json: JSONValue {
        [
            "id": .int(Int64(id)), "clientSideId": .string(clientSideId), "state": .string(state),
            "creationTs": .double(creationTs), "messages": .array(messages.map(\.json)),
            "operator": operatorInChat?.json ?? .null, "operatorTyping": .bool(operatorTyping),
            "visitorTyping": .null, "readByVisitor": .bool(readByVisitor),
            "unreadByVisitorMsgCnt": .int(Int64(unreadByVisitor)),
            "unreadByVisitorSinceTs": unreadByVisitorSinceTs.map(JSONValue.double) ?? .null,
            "operatorIdToRate": .object(Dictionary(uniqueKeysWithValues: rates.map {
                (String($0.key), ["operatorId": .int(Int64($0.key)), "rating": .int(Int64($0.value))] as JSONValue)
            })),
            // The rest of the SDK's `ChatItem`, as the emulator has none of them.
            "category": .null, "subcategory": .null, "subject": .null, "requestedForm": .null, "needToBeClosed": false,
            "offline": false, "unreadByOperatorSinceTs": .null, "visitorMessageDraft": .null,
        ]
    }
}

struct WebimUpload {
    var guid: String
    var filename: String
    var contentType: String
    var data: Data
    var visitorID: String

    var params: JSONValue {
        var params: [String: JSONValue] = [
            "guid": .string(guid), "filename": .string(filename), "content_type": .string(contentType),
            "client_content_type": .string(contentType), "size": .int(Int64(data.count)), "visitor_id": .string(visitorID),
        ]
        if let (width, height) = pngSize { params["image"] = ["size": ["width": .int(Int64(width)), "height": .int(Int64(height))]] }
        return .object(params)
    }

    /// The width and height of a PNG (from its `IHDR`), as the server describes an image.
    var pngSize: (Int, Int)? {
        let bytes = [UInt8](data.prefix(24))
        guard bytes.count == 24, bytes[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] else { return nil }
        func number(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (number(16), number(20))
    }
}

/// One visitor: the chat, the delta log and the history every page of the visitor shares.
struct WebimVisitor {
    var id: String
    var fields: [String: String]
    var visitSessionID: String
    var revision = 1
    /// Delta items after each revision: (revision, item).
    var deltas: [(revision: Int, item: JSONValue)] = []
    /// The revisions of the delta items listed twice (`duplicateNextMessages`) that no delta
    /// answer has delivered yet.
    var undeliveredDuplicates: [Int] = []
    var chat: WebimChat?
    /// Messages of closed chats, oldest first.
    var history: [WebimMessage] = []
    var historyRevision = 1
    var pushToken: String?
    var onlineStatus = "online"
    /// The visit session state is `offline-message`: no operator takes chats, the visitor may
    /// leave a message.
    var offlineMessage = false
    var survey: WebimSurvey?
    /// Offline appeals (protocols/webim.md §12a), oldest first.
    var appeals: [WebimAppeal] = []

    var visitorJSON: JSONValue { ["id": .string(id), "fields": .object(fields.mapValues(JSONValue.string))] }
    /// The SDK's `VisitorItem`, with the fields of its test payload.
    var visitorFullJSON: JSONValue {
        [
            "id": .string(id), "icon": ["color": "#5fa0ea", "shape": "rhombus"], "fields": .object(fields.mapValues(JSONValue.string)),
            "channelType": .null, "channelId": .null, "channelUserName": .null, "channelUserId": .null,
            "creationTs": 1_518_790_888.5, "modificationTs": 1_518_790_888.5, "hasProvidedFields": .bool(!fields.isEmpty), "tags": [],
        ]
    }

    /// The visit session state a full update reports.
    var visitSessionState: String {
        if offlineMessage { return "offline-message" }
        return chat.map { $0.isClosed ? "idle-after-chat" : "chat" } ?? "idle"
    }

    var allMessages: [WebimMessage] { history + (chat?.messages ?? []) }
}

struct WebimPage {
    var pageID: String
    var authToken: String
    var visitorID: String
    /// An offline (2.x) page: forgotten 30 min after its last request.
    var lastUsed: Duration?
}

/// An offline appeal (Mobile SDK 2.3's `WMChat`): a chat the visitor wrote to while no operator
/// was online, answered later.
struct WebimAppeal {
    var id: Int
    var clientSideId: String
    var state = "queue"
    var messages: [WebimMessage] = []
    var operatorInChat: WebimOperator?
    var departmentKey: String?
    var subject: String?
    /// The first message the visitor has not read, as unix seconds (`nil`: all read).
    var unreadByVisitorSinceTs: Double?
    var unreadByOperatorSinceTs: Double?
    /// When the chat's own fields (not its messages) last changed, in µs.
    var changedMicros: Int64

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "id": .int(Int64(id)), "clientSideId": .string(clientSideId), "state": .string(state), "offline": true,
            "messages": .array(messages.map(\.json)), "operator": operatorInChat?.json ?? .null, "operatorTyping": false,
            "unreadByVisitorSinceTs": unreadByVisitorSinceTs.map(JSONValue.double) ?? .null,
            "unreadByOperatorSinceTs": unreadByOperatorSinceTs.map(JSONValue.double) ?? .null,
        ]
        if let subject { object["subject"] = .string(subject) }
        if let departmentKey { object["departmentKey"] = .string(departmentKey) }
        return .object(object)
    }
}

/// A survey shown to the visitor (protocols/webim.md §2.5 `SurveyItem`): one config of forms, and
/// the question the visitor is on. `question_id` is the question's index within its form.
struct WebimSurvey {
    struct Question {
        var type: String
        var text: String
        var options: [String] = []
    }

    var id: String
    var configID: Int
    var formID: Int
    var questions: [Question]
    var current = 0
    /// The operator whose rating a `stars` answer sets (the rate form), if any.
    var ratedOperatorID: Int?

    var json: JSONValue {
        [
            "id": .string(id),
            "config": [
                "id": .int(Int64(configID)), "version": "1",
                "descriptor": [
                    "forms": [
                        [
                            "id": .int(Int64(formID)),
                            "questions": .array(questions.map {
                                ["type": .string($0.type), "text": .string($0.text), "options": .array($0.options.map(JSONValue.string))]
                            }),
                        ]
                    ]
                ],
            ],
            "current_question": ["form_id": .int(Int64(formID)), "question_id": .int(Int64(current))],
        ]
    }
}
