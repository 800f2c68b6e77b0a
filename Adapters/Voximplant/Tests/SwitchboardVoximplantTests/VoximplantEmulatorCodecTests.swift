import Foundation
import Switchboard
import Synchronization
import Testing

@testable import VoximplantEmulator

/// The emulator's side of the wire against the spec's golden frames, without a socket.
@Suite struct VoximplantEmulatorCodecTests {
    final class Frames: Sendable {
        let frames = Mutex<[String]>([])
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
