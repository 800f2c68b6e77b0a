import Foundation
import Switchboard
import Testing

@_spi(WireReaders) @testable import SwitchboardVoximplant

/// The adapter's side of the wire against the spec's golden frames.
@Suite struct VoximplantCodecTests {
    let me = "alice@app.acc"

    @Test func theSpecHasTenGoldenFrames() {
        #expect(GoldenFrames.all.count == 10)
    }

    @Test func requestsEncodeAsTheSpecShowsThem() throws {
        let login = VoximplantWire.Request(id: "1", name: "login", params: ["user": "alice@app.acc", "token": "secret-a"])
        #expect(try JSONValue(parsing: VoximplantWire.encode(login)) == GoldenFrames.json(GoldenFrames.loginRequest))
        let send = VoximplantWire.Request(
            id: "7",
            name: "sendMessage",
            params: ["conversation": "conv-1", "text": "Hi", "payload": [], "clientMessageId": "c-42"]
        )
        #expect(try JSONValue(parsing: VoximplantWire.encode(send)) == GoldenFrames.json(GoldenFrames.sendRequest))
        let retransmit = VoximplantWire.Request(id: "9", name: "retransmitEvents", params: ["conversation": "conv-1", "eventsFrom": 5, "eventsTo": 5])
        #expect(try JSONValue(parsing: VoximplantWire.encode(retransmit)) == GoldenFrames.json(GoldenFrames.retransmitRequest))
    }

    @Test func aMessageEventBecomesASequencedMessageAdded() throws {
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: GoldenFrames.messageEvent)
        let mapped = VoximplantMapping.event(event, me: me)
        #expect(mapped.sequence == 5)
        #expect(mapped.conversationID == "conv-1")
        #expect(mapped.time == Date(timeIntervalSince1970: 1_700_000_000))
        guard case .messageAdded(let message, .newest) = mapped.kind else {
            Issue.record("expected messageAdded, got \(mapped.kind)")
            return
        }
        #expect(message.serverID == "msg-5")
        #expect(message.sequence == 5)
        #expect(message.sender == "bob@app.acc")
        #expect(message.text == "Hello, Alice")
        #expect(message.payload == nil, "an empty payload list is no payload")
    }

    @Test func aParticipantEventCarriesTheConversationAsOfIt() throws {
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: GoldenFrames.participantEvent)
        let mapped = VoximplantMapping.event(event, me: me)
        #expect(mapped.sequence == 2)
        guard case .conversationUpdated(let info) = mapped.kind else {
            Issue.record("expected conversationUpdated, got \(mapped.kind)")
            return
        }
        #expect(info.lastSequence == 2)
        #expect(info.participants.map(\.id) == ["bob@app.acc", "carol@app.acc"])
        #expect(info.participants[0].permissions == .owner)
        #expect(info.participants[1].permissions == Participant.Permissions())
        #expect(info.kind == .group)
    }

    @Test func readAndTypingAreNotLogged() throws {
        let read = VoximplantMapping.event(try VoximplantWire.decode(VoximplantWire.Event.self, from: GoldenFrames.readEvent), me: me)
        #expect(read.kind == .readMarker("bob@app.acc", .sequence(4)))
        #expect(read.sequence == nil, "a read's seq is the marked sequence, not a log position")
        let typing = VoximplantMapping.event(try VoximplantWire.decode(VoximplantWire.Event.self, from: GoldenFrames.typingEvent), me: me)
        #expect(typing.kind == .typing("bob@app.acc", isTyping: true, draft: nil))
        #expect(typing.sequence == nil)
    }

    @Test func anErrorFrameIsATypedErrorWithTheVendorCode() throws {
        let frame = try VoximplantWire.decode(VoximplantWire.Incoming.self, from: GoldenFrames.aclError)
        let error = VoximplantMapping.error(code: frame.code ?? 0, description: frame.description ?? "", request: "sendMessage")
        #expect(error.code == .permissionDenied)
        #expect(error.vendorCode == "12")
        #expect(error.message.contains("ACL error"))
    }

    @Test func aRetransmitResponseHoldsIdenticalEvents() throws {
        let frame = try VoximplantWire.decode(VoximplantWire.Incoming.self, from: GoldenFrames.retransmitResponse)
        let events = try #require(frame.result?["events"]?.arrayValue)
        #expect(events.count == 1)
        var live = try GoldenFrames.json(GoldenFrames.messageEvent).objectValue!
        live["type"] = nil
        #expect(events[0] == .object(live), "a retransmitted event is the live event, minus the frame type")
    }

    @Test func errorCodesClassify() {
        // Every code of the README's table, as the code classifies it.
        let table: [(SwitchboardError.Code, [Int])] = [
            (.invalidArgument, [0, 18, 21, 22, 24, 25, 26, 28, 36, 41]),
            (.protocolViolation, [1, 2, 9999]),
            (.authenticationFailed, [3]),
            (.conversationNotFound, [8, 16]),
            (.messageNotFound, [10, 11]),
            (.permissionDenied, [12, 13, 15, 19, 34, 35, 37, 38, 39, 40]),
            (.payloadTooLarge, [23]),
            (.serverError, [30, 500]),
            (.rateLimited, [32, 33]),
        ]
        let cases = table.flatMap { code, numbers in numbers.map { ($0, code) } }
        for (code, expected) in cases {
            let error = VoximplantMapping.error(code: code, description: "x", request: "r")
            #expect(error.code == expected, "code \(code)")
            #expect(error.vendorCode == String(code))
        }
        #expect(VoximplantMapping.error(code: 32, description: "", request: "").retryAfter == .seconds(1))
        #expect(VoximplantMapping.error(code: 33, description: "", request: "").retryAfter == .seconds(60))
    }

    @Test func unknownEventTypesAreKeptAsVendorEvents() throws {
        let text = #"{"type":"event","eventType":"conferenceStarted","action":"conferenceStarted","initiator":"bob@app.acc","conversation":"conv-1","timestamp":1700000000}"#
        let mapped = VoximplantMapping.event(try VoximplantWire.decode(VoximplantWire.Event.self, from: text), me: me)
        guard case .custom(let name, let payload) = mapped.kind else {
            Issue.record("expected a vendor event, got \(mapped.kind)")
            return
        }
        #expect(name == "voximplant.conferenceStarted")
        #expect(payload["initiator"] == "bob@app.acc")
    }

    @Test func malformedFramesAreProtocolViolations() {
        #expect {
            try VoximplantWire.decode(VoximplantWire.Incoming.self, from: "{\"type\":")
        } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
        #expect {
            try VoximplantWire.decode(VoximplantWire.Event.self, from: #"{"type":"event"}"#)
        } throws: { ($0 as? SwitchboardError)?.code == .protocolViolation }
    }

    /// The reader every frame goes through: each golden frame the server sends, told apart.
    @Test func theFrameReaderTellsTheServersFramesApart() {
        let reader = VoximplantFrameReader(user: me)
        guard case .event(let message) = reader.read(GoldenFrames.messageEvent), case .messageAdded = message.kind else {
            Issue.record("a message event")
            return
        }
        guard case .reply("9", let result, nil) = reader.read(GoldenFrames.retransmitResponse) else {
            Issue.record("a reply")
            return
        }
        #expect(result["events"]?.arrayValue?.count == 1)
        guard case .error("7", 12, "ACL error") = reader.read(GoldenFrames.aclError) else {
            Issue.record("an error for request 7")
            return
        }
        let logged = #"{"type":"response","id":"3","result":{"eventType":"sendMessage","conversation":"conv-1","seq":6,"message":{"uuid":"m6","conversation":"conv-1","sequence":6}}}"#
        guard case .reply("3", _, let event?) = reader.read(logged), event.sequence == 6 else {
            Issue.record("a reply carrying the event it logged")
            return
        }
        for bad in [#"{"type":"pong","id":"1"}x"#, #"{"type":"response"}"#, #"{"type":"event","eventType":5}"#, "[]"] {
            guard case .malformed(let error) = reader.read(bad) else {
                Issue.record("\(bad) is malformed")
                continue
            }
            #expect(error.code == .protocolViolation)
        }
        guard case .pong = reader.read(#"{"type":"pong","id":"1"}"#) else {
            Issue.record("a pong")
            return
        }
        // §2: the server may ping too (answered with a pong of its id); an unknown type is ignored.
        guard case .ping(id: "s-1") = reader.read(#"{"type":"ping","id":"s-1"}"#) else {
            Issue.record("a ping")
            return
        }
        guard case .ignored(type: "surprise") = reader.read(#"{"type":"surprise","id":"x"}"#) else {
            Issue.record("an unknown type is ignored, not an error")
            return
        }
    }

    /// A member of the wrong type is an error, as `Codable` made it; a null one is absent.
    @Test func wireMembersAreTyped() throws {
        #expect(throws: SwitchboardError.self) {
            try VoximplantWire.decode(VoximplantWire.Event.self, from: #"{"eventType":"sendMessage","seq":"5"}"#)
        }
        let event = try VoximplantWire.decode(VoximplantWire.Event.self, from: #"{"eventType":"sendMessage","seq":null,"message":null}"#)
        #expect(event.seq == nil && event.message == nil)
    }
}
