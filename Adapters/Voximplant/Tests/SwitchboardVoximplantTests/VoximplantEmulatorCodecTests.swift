import Foundation
import Switchboard
import Testing

@testable import VoximplantEmulator

/// The emulator's side of the wire against the spec's golden frames, without a socket.
@Suite struct VoximplantEmulatorCodecTests {
    final class Frames: Sendable {
        let frames = Locked<[String]>([])
        var all: [JSONValue] { frames.withLock { $0 }.compactMap { try? JSONValue(parsing: $0) } }
    }

    /// A server whose clock stands at the golden frames' time, with Alice, Bob and conv-1.
    func server() -> (VoximplantServer, String) {
        let server = VoximplantServer(clock: SessionClock(ContinuousClock(), wallClock: { Date(timeIntervalSince1970: 1_700_000_000) }))
        let alice = server.addUser("alice", token: "secret-a", displayName: "Alice")
        let bob = server.addUser("bob", token: "secret-b", displayName: "Bob")
        let conversation = (try? server.robot(bob).createConversation(title: "Support", with: [alice])) ?? ""
        return (server, conversation)
    }

    func attach(_ server: VoximplantServer) -> (Int, Frames) {
        let frames = Frames()
        let client = server.attach(send: { frame in frames.frames.withLock { $0.append(frame) } }, close: {})
        return (client, frames)
    }

    @Test func loginAnswersAsTheSpecShows() throws {
        let (server, conversation) = server()
        #expect(conversation == "conv-1")
        let (client, frames) = attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        #expect(frames.all == [try GoldenFrames.json(GoldenFrames.loginResponse)])
    }

    @Test func aMessageEventHasTheSpecsShape() throws {
        let (server, conversation) = server()
        let (client, frames) = attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        let bob = server.robot("bob@app.acc")
        for index in 1...3 { try bob.send("filler \(index)", in: conversation) }
        try bob.send("Hello, Alice", in: conversation)
        var event = try #require(frames.all.last?.objectValue)
        var golden = try GoldenFrames.json(GoldenFrames.messageEvent).objectValue!
        // Ids are the server's to choose; everything else must match.
        var message = event["message"]!.objectValue!
        message["uuid"] = golden["message"]!["uuid"]
        event["message"] = .object(message)
        golden["message"] = golden["message"]
        #expect(JSONValue.object(event) == .object(golden))
    }

    @Test func anUnauthorizedRequestAndAnUnknownFrameAreErrors() throws {
        let (server, _) = server()
        let (client, frames) = attach(server)
        server.receive(GoldenFrames.sendRequest, from: client)
        server.receive(#"{"type":"hello","id":"x"}"#, from: client)
        server.receive("not json", from: client)
        let codes = frames.all.map { $0["code"]?.intValue }
        #expect(codes == [3, 2, 1])
        #expect(frames.all.map { $0["id"] } == ["7", "x", .null])
    }

    @Test func retransmitAnswersWithTheLoggedEvents() throws {
        let (server, conversation) = server()
        let bob = server.robot("bob@app.acc")
        for index in 1...4 { try bob.send(index == 4 ? "Hello, Alice" : "filler \(index)", in: conversation) }
        let (client, frames) = attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        server.receive(GoldenFrames.retransmitRequest, from: client)
        let response = try #require(frames.all.last)
        #expect(response["id"] == "9")
        #expect(response["result"]?["from"] == 5)
        #expect(response["result"]?["to"] == 5)
        let events = try #require(response["result"]?["events"]?.arrayValue)
        #expect(events.count == 1)
        #expect(events[0]["seq"] == 5)
        #expect(events[0]["message"]?["text"] == "Hello, Alice")
        #expect(events[0]["type"] == nil)
    }

    @Test func typingReachesOthersOncePerTenSeconds() throws {
        let (server, conversation) = server()
        let (client, frames) = attach(server)
        server.receive(#"{"type":"request","id":"1","name":"login","params":{"user":"bob@app.acc","token":"secret-b"}}"#, from: client)
        for _ in 0..<5 { try server.robot("alice@app.acc").typing(in: conversation) }
        let typing = frames.all.filter { $0["eventType"] == "typing" }
        #expect(server.typingLog.count == 5, "every request is answered")
        #expect(typing.count == 1, "one notification per 10 s reaches the others")
    }
}

/// Rules the spec left open, written into it (Docs/Protocols/voximplant-style.md) after an
/// independent implementation chose differently; the server's side, frame by frame.
@Suite struct VoximplantSpecRuleTests {
    let codec = VoximplantEmulatorCodecTests()

    /// Logs Alice in and returns a sender of requests that answers with the frame the server sent.
    func session() -> (VoximplantServer, String, (String, JSONValue) -> JSONValue) {
        let (server, conversation) = codec.server()
        let (client, frames) = codec.attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        var next = 100
        let request: (String, JSONValue) -> JSONValue = { name, params in
            next += 1
            let frame: JSONValue = ["type": "request", "id": .string(String(next)), "name": .string(name), "params": params]
            server.receive(frame.jsonString, from: client)
            return frames.all.last ?? .null
        }
        return (server, conversation, request)
    }

    @Test func parametersOfTheWrongTypeAreAMalformedFrameAndChangeNothing() {
        let (server, conversation, request) = session()
        _ = request("read", ["conversation": .string(conversation), "seq": 1])
        let answer = request("read", ["conversation": .string(conversation), "seq": "3"])
        #expect(answer["code"]?.intValue == 1, "\(answer)")
        #expect(server.readLog.map(\.sequence) == [1], "the marker did not move (it was reset to 0 before)")
        #expect(request("sendMessage", ["conversation": .string(conversation), "text": 5, "clientMessageId": "c"])["code"]?.intValue == 1)
        #expect(request("noSuchRequest", [:])["code"]?.intValue == 2, "an unknown request name is 2")
    }

    @Test func aReadBelowOneLeavesOnlyTheFirstEventReadAndAMarkerMayMoveBack() {
        let (server, conversation, request) = session()
        for index in 1...3 { _ = try? server.robot("bob@app.acc").send("m\(index)", in: conversation) }
        #expect(request("read", ["conversation": .string(conversation), "seq": 4])["result"]?["seq"]?.intValue == 4)
        #expect(request("read", ["conversation": .string(conversation), "seq": 2])["result"]?["seq"]?.intValue == 2, "back, as the client asks")
        #expect(request("read", ["conversation": .string(conversation), "seq": 0])["result"]?["seq"]?.intValue == 1, "the SDK: all but event 1 unread")
        #expect(server.readLog.map(\.sequence) == [4, 2, 1])
    }

    @Test func retransmitsOwnErrorsComeInTheSpecsOrder() {
        let (_, conversation, request) = session()
        func code(_ params: JSONValue) -> Int64? {
            var object = params.objectValue!
            object["conversation"] = .string(conversation)
            return request("retransmitEvents", .object(object))["code"]?.intValue
        }
        #expect(code(["eventsFrom": 1, "eventsTo": 101]) == 24, "a bound above lastSequence before a span over 100")
        #expect(code(["eventsFrom": 0, "eventsTo": 1]) == 21, "a bound below 1")
        #expect(code(["eventsFrom": 2, "eventsTo": 1]) == 28)
        #expect(code(["eventsFrom": 0, "count": 101]) == 22, "count before bounds")
        #expect(code(["eventsFrom": 1, "eventsTo": 1, "count": 1]) == 36)
        #expect(code(["eventsFrom": 1]) == 41)
    }

    /// §5: a caller who never was a participant gets 19 for `retransmitEvents` (and 12 for
    /// `getConversation` of a conversation neither public nor theirs); a former participant may
    /// still retransmit what was logged while they were one.
    @Test func aNonParticipantsRetransmitIs19AndAFormerOneStillReadsTheLog() throws {
        let (server, conversation, request) = session()
        let bob = server.robot("bob@app.acc")
        let other = try bob.createConversation(title: "Private", with: [])
        #expect(request("retransmitEvents", ["conversation": .string(other), "eventsFrom": 1, "count": 1])["code"]?.intValue == 19)
        #expect(request("getConversation", ["conversation": .string(other)])["code"]?.intValue == 12)
        _ = try bob.send("while a participant", in: conversation)
        try bob.removeParticipants(["alice@app.acc"], from: conversation)
        let last = server.lastSequence(of: conversation)
        let answer = request("retransmitEvents", ["conversation": .string(conversation), "eventsFrom": 1, "eventsTo": .int(last)])
        #expect(answer["result"]?["events"]?.arrayValue?.count == Int(last), "\(answer)")
        #expect(request("sendMessage", ["conversation": .string(conversation), "text": "x", "clientMessageId": "c"])["code"]?.intValue == 19, "but may not write")
    }

    /// §5: a repeated `clientMessageId` is answered with the original event before the length
    /// check and the rate limits, and never counts against them; the creator listed in
    /// `participants` is ignored (the owner with every permission); `subscribe` answers with the
    /// ids of the request; `customData` over 5 KB is 0.
    @Test func aResendIsAnsweredBeforeEveryCheckAndTheCreatorsEntryIsIgnored() throws {
        let clock = SessionClock(ContinuousClock(), wallClock: { Date(timeIntervalSince1970: 1_700_000_000) })
        let server = VoximplantServer(configuration: .init(messagesPerSecond: 1), clock: clock)
        _ = server.addUser("alice", token: "secret-a")
        _ = server.addUser("bob", token: "secret-b")
        let (client, frames) = codec.attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        var next = 0
        func request(_ name: String, _ params: JSONValue) -> JSONValue {
            next += 1
            server.receive((["type": "request", "id": .string("r\(next)"), "name": .string(name), "params": params] as JSONValue).jsonString, from: client)
            return frames.all.last ?? .null
        }
        let created = request("createConversation", [
            "title": "Mine", "direct": false, "uber": false, "publicJoin": false,
            "participants": [["userId": "alice@app.acc", "canWrite": false, "isOwner": false], ["userId": "bob@app.acc"]],
        ])
        let conversation = try #require(created["result"]?["conversation"]?.stringValue, "\(created)")
        let me = server.conversationJSON(conversation)?["participants"]?.arrayValue?.first { $0["userId"] == "alice@app.acc" }
        #expect(me?["isOwner"] == true && me?["canWrite"] == true && me?["canManageParticipants"] == true, "the creator's own entry is ignored: \(String(describing: me))")
        #expect(server.conversationJSON(conversation)?["participants"]?.arrayValue?.count == 2)
        let first = request("sendMessage", ["conversation": .string(conversation), "text": "hello", "clientMessageId": "c-1"])
        #expect(first["result"]?["seq"]?.intValue == 2)
        // Within the same second: a second message is over the limit, a resend is not.
        #expect(request("sendMessage", ["conversation": .string(conversation), "text": "other", "clientMessageId": "c-2"])["code"]?.intValue == 32)
        let tooLong = String(repeating: "a", count: 5001)
        let resend = request("sendMessage", ["conversation": .string(conversation), "text": .string(tooLong), "clientMessageId": "c-1"])
        #expect(resend["result"] == first["result"], "the original event, before the length check and the rate limit: \(resend)")
        #expect(server.messages(in: conversation).map(\.text) == ["hello"])
        #expect(request("subscribe", ["users": ["bob@app.acc", "alice@app.acc"]])["result"]?["users"] == ["bob@app.acc", "alice@app.acc"])
        let big: JSONValue = ["blob": .string(String(repeating: "x", count: 6 * 1024))]
        #expect(request("editConversation", ["conversation": .string(conversation), "customData": big])["code"]?.intValue == 0, "customData over 5 KB is 0")
    }

    @Test func fiveThousandCountsCodePointsAndRateLimitTextsSayTheirLimit() {
        let (server, conversation, request) = session()
        let emoji = String(repeating: "😀", count: 5000)
        #expect(emoji.utf8.count > 16 * 1024, "a legal text larger than the socket's old 16 KiB")
        #expect(request("sendMessage", ["conversation": .string(conversation), "text": .string(emoji), "clientMessageId": "c-1"])["type"] == "response")
        // 2,501 characters as a person counts them, 5,002 code points: over the limit.
        let decomposed = String(repeating: "e\u{301}", count: 2501)
        #expect(decomposed.count == 2501 && decomposed.unicodeScalars.count == 5002)
        #expect(request("sendMessage", ["conversation": .string(conversation), "text": .string(decomposed), "clientMessageId": "c-2"])["code"]?.intValue == 23)
        _ = server
        let limited = VoximplantServer(configuration: .init(messagesPerSecond: 1), clock: SessionClock(ContinuousClock(), wallClock: { Date(timeIntervalSince1970: 1_700_000_000) }))
        let alice = limited.addUser("alice", token: "secret-a")
        let room = (try? limited.robot(alice).createConversation(title: "x", with: [])) ?? ""
        _ = try? limited.robot(alice).send("one", in: room)
        do {
            try limited.robot(alice).send("two", in: room)
            Issue.record("a second message in the second was allowed")
        } catch let error as VoximplantProtocolError {
            #expect(error.code == 32)
            #expect(error.description == "1 messages per second limit reached. Try again later", "N is filled in")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func aFrameOver64KiBIsRefusedUnreadAndTheConnectionStays() {
        let (server, _) = codec.server()
        let (client, frames) = codec.attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        let big = #"{"type":"request","id":"7","name":"getUser","params":{"user":"\#(String(repeating: "x", count: 70 * 1024))"}}"#
        server.receive(big, from: client)
        #expect(frames.all.last == ["type": "error", "id": .null, "code": 1, "description": "Transport message structure is wrong"])
        #expect(server.oversizedFrames == 1)
        server.receive(#"{"type":"request","id":"8","name":"getSubscriptions","params":{}}"#, from: client)
        #expect(frames.all.last?["type"] == "response", "the next frame is answered")
    }

    @Test func theServersPingIsAnsweredAndAPongIsNoError() {
        let (server, _) = codec.server()
        let (client, frames) = codec.attach(server)
        server.receive(GoldenFrames.loginRequest, from: client)
        let id = server.ping(user: "alice@app.acc")
        #expect(frames.all.last == ["type": "ping", "id": .string(id)])
        server.receive(#"{"type":"pong","id":"\#(id)"}"#, from: client)
        #expect(server.pongs == [id])
        #expect(frames.all.last?["type"] == "ping", "a pong is not answered with an error")
    }
}
