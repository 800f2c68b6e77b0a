import Foundation
import Switchboard
import Testing

@_spi(WireReaders) @testable import SwitchboardWebim

/// The reader every `init` and `delta` answer goes through: what it remembers of the chat and
/// what it reports for answers that are not a change.
@Suite struct WebimDeltaReaderTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    @Test func theSDKsDeltaResponseIsAChangeWithItsRevision() throws {
        var reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        let body = try Data(contentsOf: WebimCodecTests.fixtures.appendingPathComponent("DeltaResponseTests__DELTA_RESPONSE_JSON_STRING__L34.json"))
        guard case .changed(let revision, let credentials, let updates) = reader.read(body, credentials: Credentials(), now: now) else {
            Issue.record("expected a change")
            return
        }
        #expect(revision == "12")
        #expect(credentials == nil, "a delta list carries no credentials")
        #expect(!updates.isEmpty)
    }

    @Test func aFullUpdateBringsThePagesCredentialsAndIsRemembered() {
        var reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        let body = Data(#"""
            {"revision": 7, "fullUpdate": {"pageId": "p1", "authToken": "t1", "visitor": {"id": "v1"}, "historyRevision": 3,
             "onlineStatus": "online", "chat": {"id": 1, "state": "chatting", "operator": {"id": 42, "fullname": "Ann"},
             "messages": [{"id": "m1", "clientSideId": "c1", "kind": "visitor", "text": "hi", "ts": 1700000000}]}}}
            """#.utf8)
        guard case .changed(let revision, let credentials?, let updates) = reader.read(body, credentials: Credentials(), now: now) else {
            Issue.record("expected a full update")
            return
        }
        #expect(revision == "7")
        #expect(credentials["page-id"] == "p1" && credentials["auth-token"] == "t1" && credentials["visitor-id"] == "v1")
        #expect(updates.count >= 2, "the snapshot and the availability")
        #expect(reader.chatState == "chatting" && reader.operatorID == 42 && reader.clientSideIDs["m1"] == "c1")
        #expect(reader.announcedHistoryRevision == "3")
        // A later delta moves what is remembered.
        let delta = Data(#"{"revision": "8", "deltaList": [{"objectType": "CHAT_STATE", "event": "upd", "id": "1", "data": "closed"}]}"#.utf8)
        guard case .changed("8", nil, let more) = reader.read(delta, credentials: credentials, now: now) else {
            Issue.record("expected a delta")
            return
        }
        #expect(more.count == 1 && reader.chatState == "closed")
    }

    @Test func theServersUnreadCountReachesTheConversation() throws {
        var reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        let full = Data(#"{"revision": 1, "fullUpdate": {"visitor": {"id": "v1"}, "chat": {"id": 1, "state": "chatting", "messages": []}}}"#.utf8)
        _ = reader.read(full, credentials: Credentials(), now: now)
        // The SDK's own payload for the delta (`DeltaCallbackTests.unreadByVisitorJson`).
        let data = try WebimCodecTests.fixture("DeltaCallbackTests__unreadByVisitorJson__L555.json")
        let item: JSONValue = ["objectType": "UNREAD_BY_VISITOR", "event": "upd", "id": "chat", "data": data]
        let body = try JSONValue.object(["revision": "2", "deltaList": [item]]).jsonData()
        guard case .changed(_, _, let updates) = reader.read(body, credentials: Credentials(), now: now),
            case .snapshot(let snapshot)? = updates.last
        else {
            Issue.record("the count goes out as the conversation it changes")
            return
        }
        #expect(snapshot.conversations.first?.conversation.unreadCount == 5)
        #expect(!snapshot.isComplete)
    }

    @Test func answersThatAreNotAChange() {
        var reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        guard case .malformed(let error) = reader.read(Data("<html>".utf8), credentials: Credentials(), now: now) else {
            Issue.record("expected malformed")
            return
        }
        #expect(error.code == .protocolViolation)
        guard case .malformed = reader.read(Data("[1]".utf8), credentials: Credentials(), now: now) else {
            Issue.record("an array is not an answer")
            return
        }
        guard case .error("reinit-required") = reader.read(Data(#"{"error": "reinit-required"}"#.utf8), credentials: Credentials(), now: now) else {
            Issue.record("expected the vendor error")
            return
        }
        guard case .unchanged = reader.read(Data("{}".utf8), credentials: Credentials(), now: now) else {
            Issue.record("expected no change")
            return
        }
    }

    /// The SDK's history answers, before and since, through the reader the link uses.
    @Test func historyAnswers() throws {
        let reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        let folder = WebimCodecTests.fixtures
        let before = try Data(contentsOf: folder.appendingPathComponent("HistoryBeforeResponseTests__defaultHistoryBeforeResponseJson__L36.json"))
        let page = try reader.readHistoryPage(before, credentials: Credentials(), now: now)
        #expect(!page.messages.isEmpty)
        #expect(page.messages.map(\.time) == page.messages.map(\.time).sorted(), "oldest first")
        let since = try Data(contentsOf: folder.appendingPathComponent("HistorySinceResponseTests__defaultHistorySinceResponseJson__L37.json"))
        let changes = try #require(try reader.readHistoryChanges(since, credentials: Credentials(), now: now))
        #expect(!changes.updates.isEmpty)
        #expect(throws: SwitchboardError.self) { try reader.readHistoryPage(Data("[]".utf8), credentials: Credentials(), now: now) }
        #expect { try reader.readHistoryPage(Data(#"{"error":"reinit-required"}"#.utf8), credentials: Credentials(), now: now) } throws: {
            ($0 as? SwitchboardError)?.vendorCode == "reinit-required"
        }
    }

    /// The four online statuses, and `offline-message` forcing offline whatever the status was
    /// (protocols/webim.md §2.3); leaving it brings the last status back.
    @Test func availabilityFollowsTheStatusAndTheVisitSessionState() {
        var reader = WebimDeltaReader(baseURL: "https://demo.webim.ru")
        func availabilities(_ updates: [BackendUpdate]) -> [ChatEvent.Availability] {
            updates.compactMap { update in
                if case .event(let event) = update, case .availability(let availability) = event.kind { return availability }
                return nil
            }
        }
        let full = Data(#"{"revision": 1, "fullUpdate": {"pageId": "p", "authToken": "t", "visitor": {"id": "v"}, "state": "offline-message", "onlineStatus": "online", "chat": null}}"#.utf8)
        guard case .changed(_, _, let updates) = reader.read(full, credentials: Credentials(), now: now) else { Issue.record("a full update"); return }
        #expect(availabilities(updates) == [.offline], "offline-message forces offline")
        let back = Data(#"{"revision": 2, "deltaList": [{"id": "s", "objectType": "VISIT_SESSION_STATE", "event": "upd", "data": "idle"}]}"#.utf8)
        guard case .changed(_, _, let moved) = reader.read(back, credentials: Credentials(), now: now) else { Issue.record("a delta"); return }
        #expect(availabilities(moved) == [.online], "leaving offline-message brings the status back")
        var seen: [ChatEvent.Availability?] = []
        for status in ["busy_online", "busy_offline", "offline", "online", "online", "surprise"] {
            seen.append(reader.readOnlineStatus(Data(#"{"onlineStatus": "\#(status)", "onlineOperators": true}"#.utf8)))
        }
        #expect(seen == [.busyOnline, .busyOffline, .offline, .online, nil, .unknown], "each change once; an unknown string is unknown")
        #expect(reader.readOnlineStatus(Data("<html>".utf8)) == nil, "an answer that is not one changes nothing")
    }
}
