import Foundation
import Logging
import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardVoximplant
import Testing
@_spi(TestKit) import VoximplantEmulator

/// The issue's scenarios, adapter against emulator in the same process, on virtual time.
@Suite(.timeLimit(.minutes(3)))
struct VoximplantScenarioTests {
    func harness(_ control: VoximplantEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func twoHundredFiftyDroppedEventsAreFilledInBatchesOfAtMostAHundred() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                control.server.dropNext(250, for: control.customer)
                let texts = (1...251).map { "burst \($0)" }
                for text in texts { try control.agent.send(text, in: chat.id.rawValue) }
                try await probe.waitForMessages(texts, in: chat)
                let stored = try await chat.storedMessages(before: nil, limit: .max).filter { $0.text.hasPrefix("burst ") }
                let truth = control.server.messages(in: chat.id.rawValue).map(\.uuid)
                let statistics = await probe.session.statistics
                let announced = probe.recorder.events.compactMap(\.addedMessage).filter { $0.text.hasPrefix("burst ") }
                print(
                    "voximplant gap: 251 sent, \(control.server.counts.dropped) dropped by the server, "
                        + "\(statistics.retransmitRequests) retransmits of ≤100 (\(statistics.retransmittedEvents) events), "
                        + "\(stored.count) stored, \(announced.count) announced"
                )
                #expect(stored.map { $0.serverID!.rawValue } == truth, "every message once, in the server's order")
                #expect(announced.map(\.text) == texts, "announced once each, in order")
                #expect(statistics.retransmitRequests >= 3, "250 events need at least three retransmits of ≤100")
                #expect(control.server.counts.dropped == 250)
            }
        }
    }

    /// A session whose link heard no event at all — its send applied by the server and never
    /// answered — ends as a killed gateway process's does (cancelled: no drain, no close), and the
    /// next session on its store resumes from where the first link started: what the agent wrote
    /// meanwhile is news, delivered and stored, and the send is confirmed once. (The gateway
    /// failover test found it: such a conversation had no stored sequence, so the next link took
    /// the agent's message for history.)
    @Test func aSessionThatHeardNoEventResumesWhereItsLinkStarted() async throws {
        try await withVoximplantEmulator { control in
            let store = InMemoryChatStore()
            let harness = harness(control)
            // The conversation is there before the first link, so that link hears no event of it.
            let conversation = ConversationID(try control.agent.createConversation(title: "Support", with: [control.customer]))
            control.server.withholdSendAnswers(of: [control.customer])
            let killed = ChatSession(
                backend: try await control.makeCustomerBackend(),
                store: store,
                configuration: harness.context.configuration,
                clock: harness.context.makeClock(),
                logger: .quiet
            )
            try await withRecording(killed) { recorder in
                try await killed.resume()
                try await recorder.first("the conversation") { $0.conversationID == conversation }
                let chat = try await killed.conversation(conversation)
                _ = try await chat.send(text: "unanswered")
                try await waitUntil("the send applied", timeout: .seconds(30), signal: control.server.changes) {
                    control.server.messages(in: chat.id.rawValue).contains { $0.text == "unanswered" }
                }
            }
            let withheld = control.server.withheldSendAnswers
            control.server.answerSends(of: [control.customer])
            try control.agent.send("while away", in: conversation.rawValue)
            try await harness.withSession(store: store) { probe in
                let chat = try await probe.session.conversation(conversation)
                try await probe.waitForMessages(["while away"], in: chat)
                try await probe.recorder.waitUntil("the send confirmed") { events in
                    events.contains { $0.updatedMessage?.text == "unanswered" && $0.updatedMessage?.serverID != nil }
                }
                let truth = control.server.messages(in: conversation.rawValue).map(\.text)
                let stored = try await chat.storedMessages(before: nil, limit: .max).map(\.text)
                print("voximplant resume after an unanswered send: \(withheld) answer withheld; server \(truth), stored \(stored)")
                #expect(withheld >= 1, "the first session's send was applied and not answered")
                #expect(stored == truth, "every message once, in the server's order")
            }
        }
    }

    @Test func aThousandEventsWhileOfflineAreCaughtUpFromTheStoredCursor() async throws {
        try await withVoximplantEmulator { control in
            let store = InMemoryChatStore()
            try await harness(control).withSession(store: store) { probe in
                let chat = try await probe.openConversation()
                try control.agent.send("before", in: chat.id.rawValue)
                try await probe.waitForMessages(["before"], in: chat)
                try await probe.session.pause()
                let texts = (1...1000).map { "offline \($0)" }
                for text in texts { try control.agent.send(text, in: chat.id.rawValue) }
                let before = await probe.session.statistics
                try await probe.session.resume()
                try await probe.waitForMessages(texts, in: chat)
                let after = await probe.session.statistics
                let stored = try await chat.storedMessages(before: nil, limit: .max).compactMap(\.serverID).map(\.rawValue)
                let truth = control.server.messages(in: chat.id.rawValue).map(\.uuid)
                print(
                    "voximplant catch-up: 1000 events while offline, \(after.retransmitRequests - before.retransmitRequests) "
                        + "retransmits, \(after.retransmittedEvents - before.retransmittedEvents) events, \(stored.count) stored, "
                        + "lost \(Set(truth).subtracting(stored).count), duplicated \(stored.count - Set(stored).count)"
                )
                #expect(stored == truth)
                #expect(after.retransmitRequests - before.retransmitRequests == 10, "1,000 events in ten batches of 100")
            }
        }
    }

    @Test func readMarkersAreSeenByOtherClientsAndParticipants() async throws {
        try await withVoximplantEmulator { control in
            let carol = control.server.addUser("carol", token: "carol-token", displayName: "Carol")
            let conversation = try control.agent.createConversation(title: "Three", with: [control.customer, carol])
            let harness = harness(control)
            try await harness.withSession { alice in
                try await harness.withSession(backend: control.makeBackend(user: carol, token: "carol-token")) { carolSession in
                    try await harness.withSession { aliceTablet in
                        for probe in [alice, carolSession, aliceTablet] {
                            try await probe.recorder.first("knows the conversation") { $0.conversationID == ConversationID(conversation) }
                        }
                        try control.agent.send("read me", in: conversation)
                        try await alice.waitForMessages(["read me"], in: try await alice.session.conversation(ConversationID(conversation)))
                        try await alice.session.conversation(ConversationID(conversation)).markRead()
                        let last = control.server.lastSequence(of: conversation)
                        for (name, probe) in [("Carol", carolSession), ("Alice's tablet", aliceTablet)] {
                            let event = try await probe.recorder.first("\(name) sees Alice's read marker") {
                                if case .readMarker(let who, .sequence(let sequence)) = $0.kind {
                                    return who == ParticipantID(control.customer) && sequence == last
                                }
                                return false
                            }
                            #expect(event.conversationID == ConversationID(conversation))
                        }
                        let stored = try await carolSession.session.conversation(ConversationID(conversation)).info()
                        #expect(stored.participant(ParticipantID(control.customer))?.lastReadSequence == last)
                    }
                }
            }
        }
    }

    @Test func typingFasterThanTenSecondsIsThrottledLocally() async throws {
        try await withVoximplantEmulator { control in
            // On virtual time the throttle's ten seconds pass only when the test moves the clock:
            // on the real clock, a loaded machine once took longer than 10 s for the 25 keystrokes.
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for _ in 0..<25 { try await chat.userTyping(draft: nil) }
                try await chat.send(text: "sentinel")
                try await probe.recorder.first("the sentinel is confirmed") { $0.updatedMessage?.text == "sentinel" && $0.updatedMessage?.serverID != nil }
                let sent = control.server.typingLog.filter { $0.user == control.customer }.count
                print("voximplant typing: 25 keystrokes within 10 s of the session clock, \(sent) typing request sent")
                #expect(sent == 1)
            }
        }
    }

    @Test func anUberConversationHidesWhatWasPostedWhileAway() async throws {
        try await withVoximplantEmulator { control in
            let conversation = try control.agent.createConversation(title: "Uber", with: [control.customer], uber: true)
            try control.agent.send("while here", in: conversation)
            try await harness(control).withSession { probe in
                let chat = try await probe.session.conversation(ConversationID(conversation))
                try control.agent.removeParticipants([control.customer], from: conversation)
                try await probe.recorder.first("removed") { $0.kind == .conversationRemoved }
                try control.agent.send("while away 1", in: conversation)
                try control.agent.send("while away 2", in: conversation)
                try control.agent.addParticipants([control.customer], to: conversation)
                try control.agent.send("back again", in: conversation)
                try await probe.waitForMessages(["back again"], in: chat)
                let texts = try await chat.storedMessages(before: nil, limit: .max).map(\.text)
                #expect(!texts.contains { $0.hasPrefix("while away") }, "hidden events are neither delivered nor retransmitted")
                #expect(texts.contains("back again"))
                let tracked = await probe.session.statistics
                print("voximplant uber: \(texts.count) visible messages, \(tracked.retransmitRequests) retransmits to step over hidden sequences")
            }
        }
    }

    @Test func rateLimitsSurfaceAsRateLimitedErrors() async throws {
        try await withVoximplantEmulator(configuration: .init(messagesPerMinute: 2)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...2 {
                    let pending = try await chat.send(text: "allowed \(index)")
                    try await probe.recorder.first("allowed \(index) confirmed") {
                        $0.updatedMessage?.clientID == pending.clientID && $0.updatedMessage?.serverID != nil
                    }
                }
                let error = try await vendorError(probe.session, "sendMessage", ["conversation": .string(chat.id.rawValue), "text": "third", "clientMessageId": "x-3"])
                #expect(error.code == .rateLimited)
                #expect(error.vendorCode == "33")
                #expect(error.retryAfter == .seconds(60))
            }
        }
    }

    /// Every protocol error the issue names surfaces as a typed error carrying its code.
    @Test func everyErrorCodeSurfacesTyped() async throws {
        try await withVoximplantEmulator(configuration: .init(messagesPerSecond: 1_000_000)) { control in
            let carol = control.server.addUser("carol", token: "carol-token", displayName: "Carol")
            let dave = control.server.addUser("dave", token: "dave-token", displayName: "Dave")
            let agentOwned = try control.agent.createConversation(title: "Agent's", with: [control.customer])
            let closedToAlice = try control.agent.createConversation(title: "Not Alice's", with: [carol])
            let direct = try control.agent.createConversation(title: nil, with: [control.customer], direct: true)
            let openToAll = try control.agent.createConversation(title: "Public", with: [control.customer], publicJoin: true)
            let (agentMessage, _) = try control.agent.send("agent's words", in: agentOwned)
            let (gone, _) = try control.agent.send("soon gone", in: agentOwned)
            try control.agent.remove(gone, in: agentOwned)
            try await harness(control).withSession { probe in
                let session = probe.session
                let started = try await session.startConversation(ConversationDraft(title: "Alice's", participants: [Participant(id: ParticipantID(carol), role: .user)]))
                let mine = started.id.rawValue
                let cases: [(Int, String, JSONValue)] = [
                    (8, "getConversation", ["conversation": "no-such-conversation"]),
                    (10, "editMessage", ["conversation": .string(agentOwned), "message": "no-such-message", "text": "x"]),
                    (11, "editMessage", ["conversation": .string(agentOwned), "message": .string(gone), "text": "x"]),
                    (12, "editMessage", ["conversation": .string(agentOwned), "message": .string(agentMessage), "text": "x"]),
                    (13, "addParticipants", ["conversation": .string(mine), "participants": [["userId": .string(carol)]]]),
                    (15, "joinConversation", ["conversation": .string(closedToAlice)]),
                    (13, "joinConversation", ["conversation": .string(openToAll)]),
                    (39, "joinConversation", ["conversation": .string(direct)]),
                    (19, "sendMessage", ["conversation": .string(closedToAlice), "text": "x", "clientMessageId": "c-19"]),
                    (21, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 1, "count": 0]),
                    (22, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 1, "count": 101]),
                    // §6's order: a bound above lastSequence (24) before a span over 100 (22).
                    (24, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 1, "eventsTo": 101]),
                    (21, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 0, "eventsTo": 1]),
                    (1, "read", ["conversation": .string(mine), "seq": "3"]),
                    (23, "sendMessage", ["conversation": .string(mine), "text": .string(String(repeating: "x", count: 5001)), "clientMessageId": "c-23"]),
                    (24, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 999, "count": 1]),
                    (24, "read", ["conversation": .string(mine), "seq": 999]),
                    (25, "getUser", ["user": "nobody@app.acc"]),
                    (28, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 2, "eventsTo": 1]),
                    (34, "createConversation", ["direct": true, "uber": true, "participants": [["userId": .string(carol)]]]),
                    (35, "createConversation", ["direct": true, "participants": [["userId": .string(carol)], ["userId": .string(dave)]]]),
                    (36, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 1, "eventsTo": 1, "count": 1]),
                    (37, "addParticipants", ["conversation": .string(direct), "participants": [["userId": .string(dave)]]]),
                    (38, "removeParticipants", ["conversation": .string(direct), "participants": [.string(control.customer)]]),
                    (39, "editParticipants", ["conversation": .string(direct), "participants": [["userId": .string(control.customer)]]]),
                    (40, "leaveConversation", ["conversation": .string(direct)]),
                    (41, "retransmitEvents", ["conversation": .string(mine), "eventsFrom": 1]),
                    (2, "noSuchRequest", [:]),
                ]
                // The README's classification, written out here rather than read from the mapping.
                func typed(_ code: Int) -> SwitchboardError.Code {
                    switch code {
                    case 1, 2: .protocolViolation
                    case 8, 16: .conversationNotFound
                    case 10, 11: .messageNotFound
                    case 12, 13, 15, 19, 34, 35, 37, 38, 39, 40: .permissionDenied
                    case 23: .payloadTooLarge
                    default: .invalidArgument
                    }
                }
                var seen: [String] = []
                for (code, name, params) in cases {
                    let error = try await vendorError(session, name, params)
                    #expect(error.vendorCode == String(code), "\(name) fails with \(code), got \(error.vendorCode ?? "none"): \(error)")
                    #expect(error.code == typed(code), "\(code) is \(typed(code)), got \(error.code)")
                    seen.append("\(code)→\(error.code)")
                }
                print("voximplant error codes: \(seen.joined(separator: ", "))")
            }
        }
    }

    private func vendorError(_ session: ChatSession, _ name: String, _ params: JSONValue) async throws -> SwitchboardError {
        do {
            _ = try await session.perform(VoximplantCall(name, params: params))
        } catch let error as SwitchboardError {
            return error
        }
        throw ConformanceFailure("\(name) succeeded")
    }
}

/// The emulator's own rules, without a client.
@Suite struct VoximplantServerRuleTests {
    @Test func deliveriesShowWhatFaultsDid() async throws {
        try await withVoximplantEmulator { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let chat = try await probe.openConversation()
                control.server.dropNext(1, for: control.customer)
                try control.agent.send("lost on the way", in: chat.id.rawValue)
                try control.agent.send("arrives", in: chat.id.rawValue)
                try await probe.waitForMessages(["lost on the way", "arrives"], in: chat)
                let delivered = control.server.deliveries.filter { $0.user == control.customer && $0.conversation == chat.id.rawValue }
                    .map(\.sequence)
                #expect(delivered == [1, 3], "sequence 2 was dropped for the customer and came by retransmit instead")
            }
        }
    }
}

/// The client's side of the rules an independent implementation of the spec found unclear.
@Suite(.timeLimit(.minutes(2)))
struct VoximplantSpecClientTests {
    func harness(_ control: VoximplantEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func aLongNonASCIIMessageGoesThroughAndAnOversizedRequestIsRefusedHere() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let long = String(repeating: "😀", count: 5000)
                let sent = try await chat.send(text: long)
                try await probe.recorder.first("5,000 emoji confirmed") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let decomposed = try await chat.send(text: String(repeating: "e\u{301}", count: 2501))
                let failed = try await probe.recorder.first("5,002 code points refused") {
                    $0.updatedMessage.map { $0.clientID == decomposed.clientID && $0.deliveryState.isFailed } ?? false
                }
                #expect(failed.updatedMessage?.serverID == nil)
                do {
                    _ = try await probe.session.perform(VoximplantCall("getUser", params: ["user": .string(String(repeating: "x", count: 70 * 1024))]))
                    Issue.record("a 70 KiB frame was sent")
                } catch let error as SwitchboardError {
                    #expect(error.code == .payloadTooLarge)
                }
                #expect(control.server.oversizedFrames == 0, "nothing over 64 KiB reached the server")
                #expect(await probe.session.connectionState == .connected)
                print("voximplant: a 5,000-emoji message (\(long.utf8.count) bytes of UTF-8) sent, 5,002 code points refused with 23, a 70 KiB request refused before sending")
            }
        }
    }

    /// A message's payload is a map or a list of maps (§1.8) and comes back as it was sent; no
    /// 5 KB limit applies to it. `customData` is the one with 5 KB, refused before sending. A
    /// `.direct` draft makes a direct conversation without the flag, and a change can clear the
    /// title and the custom data.
    @Test func payloadsCustomDataDirectDraftsAndClearingGoAsTheProtocolSays() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let map: JSONValue = ["order": 42, "items": ["a", "b"]]
                let list: JSONValue = [["kind": "card"], ["kind": "button", "label": "OK"]]
                let big: JSONValue = ["blob": .string(String(repeating: "x", count: 10 * 1024))]
                var sent: [(Message, JSONValue)] = []
                for payload in [map, list, big] { sent.append((try await chat.send(MessageDraft(text: "with a payload", payload: payload)), payload)) }
                let wrong = try await chat.send(MessageDraft(text: "a string payload", payload: "just text"))
                for (message, payload) in sent {
                    let confirmed = try await probe.recorder.first("confirmed") { $0.updatedMessage.map { $0.clientID == message.clientID && $0.serverID != nil } ?? false }
                    let stored = try #require(confirmed.updatedMessage)
                    #expect(stored.payload == payload, "comes back as it was sent")
                    let onServer = control.server.payload(ofMessage: try #require(stored.serverID).rawValue, in: chat.id.rawValue)
                    #expect(onServer == (payload.arrayValue != nil ? payload : [payload]), "a list of maps on the wire")
                }
                let refused = try await probe.recorder.first("refused") { $0.updatedMessage.map { $0.clientID == wrong.clientID && $0.deliveryState.isFailed } ?? false }
                #expect(refused.updatedMessage?.serverID == nil)

                let conversations = control.server.conversationCount
                let tooMuch: JSONValue = ["note": .string(String(repeating: "y", count: 6 * 1024))]
                let error = await #expect(throws: SwitchboardError.self) {
                    _ = try await probe.session.startConversation(ConversationDraft(kind: .group, title: "big", participants: [Participant(id: ParticipantID(control.agent.user), role: .user)], customData: tooMuch))
                }
                #expect(error?.code == .payloadTooLarge)
                #expect(control.server.conversationCount == conversations, "nothing was sent")

                let direct = try await probe.session.startConversation(ConversationDraft(kind: .direct, participants: [Participant(id: ParticipantID(control.agent.user), role: .user)]))
                let directInfo = try await direct.info()
                #expect(directInfo.kind == .direct && directInfo.flags.contains(.direct))
                #expect(control.server.conversationJSON(direct.id.rawValue)?["direct"] == true)

                let group = try await probe.session.startConversation(
                    ConversationDraft(kind: .group, title: "Team", participants: [Participant(id: ParticipantID(control.agent.user), role: .user)], customData: ["topic": "billing"])
                )
                // Over 5 KB in an update too; and the server's own error 0 on a request carrying
                // customData reads as the same refusal.
                let updateError = await #expect(throws: SwitchboardError.self) { try await group.update(ConversationChanges(customData: tooMuch)) }
                #expect(updateError?.code == .payloadTooLarge)
                control.server.failNextRequest(code: 0, named: "editConversation")
                let serverError = await #expect(throws: SwitchboardError.self) { try await group.update(ConversationChanges(customData: ["small": true])) }
                #expect(serverError?.code == .payloadTooLarge && serverError?.vendorCode == "0")
                try await group.update(ConversationChanges(clearing: [.title, .customData]))
                let cleared = try await group.info()
                #expect(cleared.title == nil && cleared.customData == nil)
                #expect(control.server.conversationJSON(group.id.rawValue)?["title"] == "" && control.server.conversationJSON(group.id.rawValue)?["customData"] == [:])
                print("voximplant payloads: a map, a list of two and a 10 KB map round-trip, a string refused; 6 KB customData refused before sending; a .direct draft is direct; title and customData cleared")
            }
        }
    }

    /// The server's refusal of a read marker or of typing reaches the call that sent it, typed
    /// (it used to reach only the bus); a marker set offline is answered at once and sent when the
    /// next link opens.
    @Test func readAndTypingErrorsReachTheCaller() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let sent = try control.agent.send("hello", in: chat.id.rawValue)
                try await probe.waitForMessages(["hello"], in: chat)
                control.server.failNextRequest(code: 19, named: "typing")
                let typing = await #expect(throws: SwitchboardError.self) { _ = try await chat.userTyping(draft: "hi") }
                #expect(typing?.code == .permissionDenied && typing?.vendorCode == "19")
                control.server.failNextRequest(code: 24, named: "read")
                let read = await #expect(throws: SwitchboardError.self) { try await chat.markRead(upTo: .sequence(sent.sequence)) }
                #expect(read?.code == .invalidArgument && read?.vendorCode == "24")
                // Answered: the marker reached the server, and the call returned after it did.
                try await chat.markRead(upTo: .sequence(sent.sequence))
                #expect(control.server.readLog.contains { $0.user == control.customer && $0.sequence == sent.sequence })
                // Offline: answered at once, sent by the next link.
                try await probe.session.pause()
                let second = try control.agent.send("while away", in: chat.id.rawValue)
                try await probe.session.resume()
                try await probe.waitForMessages(["while away"], in: chat)
                try await probe.session.pause()
                try await chat.markRead(upTo: .sequence(second.sequence))
                try await probe.session.resume()
                try await waitUntil("the marker sent by the next link", timeout: .seconds(20), signal: control.server.changes) {
                    control.server.readLog.contains { $0.user == control.customer && $0.sequence == second.sequence }
                }
                print("voximplant completions: typing refused with \(typing?.vendorCode ?? "-"), read refused with \(read?.vendorCode ?? "-") at the caller; an offline marker sent on the next link")
            }
        }
    }

    /// User-level calls are typed (the SDK's `VIUser`, `VIStatusEvent`, `VIUserEvent`): a user
    /// read by id and IM id, the session's own conversations, subscriptions, and the presence and
    /// edits of a subscribed user heard as typed events.
    @Test func userCallsAndTheirEventsAreTyped() async throws {
        try await withVoximplantEmulator { control in
            let bobID = control.server.addUser("bob", token: "bob-token", displayName: "Bob")
            let bob = ParticipantID(bobID)
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let requests = VoximplantRequests(session: probe.session)
                let me = try await requests.user(ParticipantID(control.customer))
                #expect(me.conversations.contains(chat.id), "the user's own conversation list")
                let byIM = try await requests.user(imID: me.imID)
                #expect(byIM.id == me.id)
                let other = try await requests.user(bob)
                #expect(other.displayName == "Bob" && other.conversations.isEmpty && other.privateCustomData == nil, "another user's private parts are not sent")
                #expect(try await requests.users([bob, ParticipantID(control.customer)]).map(\.id).sorted() == [bob, ParticipantID(control.customer)].sorted())
                #expect(try await requests.subscribe(to: [bob]) == [bob])
                #expect(try await requests.subscriptions() == [bob])
                let missing = await #expect(throws: SwitchboardError.self) { _ = try await requests.user(ParticipantID("nobody@\(control.server.configuration.domain)")) }
                #expect(missing?.vendorCode == "25")
                // Bob, on his own session, goes online and edits his custom data.
                try await harness(control).withSession(backend: control.makeBackend(user: bobID, token: "bob-token")) { bobProbe in
                    let bobRequests = VoximplantRequests(session: bobProbe.session)
                    #expect(try await bobRequests.setPresence(online: true))
                    let edited = try await bobRequests.editUser(setting: ["mood": "happy"], privateCustomData: nil)
                    #expect(edited.customData == ["mood": "happy"])
                }
                let presence = try await probe.recorder.first("Bob's presence") { VoximplantPresence($0) != nil }
                #expect(VoximplantPresence(presence)?.user == bob && VoximplantPresence(presence)?.isOnline == true)
                let edit = try await probe.recorder.first("Bob's edit") { VoximplantUserEdit($0) != nil }
                #expect(VoximplantUserEdit(edit)?.user.customData == ["mood": "happy"])
                #expect(try await requests.unsubscribe(from: [bob]) == [bob])
                #expect(try await requests.subscriptions().isEmpty)
                // A conversation the user leaves is in their leaveConversationList.
                let leaving = ConversationID(try control.agent.createConversation(title: "Leaving", with: [control.customer]))
                try await probe.recorder.first("the second conversation") { $0.conversationID == leaving && $0.kind.category == .conversation }
                try await probe.session.conversation(leaving).close()
                #expect(try await requests.leftConversations(of: me.id).contains(leaving))
                #expect(try await !requests.user(me.id).conversations.contains(leaving))
                print("voximplant users: \(me.id) in \(me.conversations.count) conversation(s); subscribed to \(bob), heard online and an edit, typed")
            }
        }
    }

    /// Push (§5.1, the SDK's `managePushNotifications`, token registration and
    /// `processPushNotification`): a user who asked for `onSendMessage` and registered two tokens
    /// gets one push per token for a message sent while none of their clients is connected, and
    /// none while connected or for an edit they did not ask for; the push reads, without a
    /// connection, as the message the next session's catch-up stores with the same id and
    /// sequence. Asking for `onEditMessage` only and unregistering a token changes what comes.
    @Test func pushesReachAnOfflineUserAndReadAsTheMessageTheCatchUpStores() async throws {
        try await withVoximplantEmulator { control in
            let store = InMemoryChatStore()
            let customer = control.customer
            func offline() async throws {
                try await waitUntil("the customer offline", timeout: .seconds(30), signal: control.server.changes) { !control.server.isConnected(customer) }
            }
            let chat = try await harness(control).withSession(store: store) { probe in
                let chat = try await probe.openConversation()
                let requests = VoximplantRequests(session: probe.session)
                try await requests.registerPushToken(apnsDeviceToken: Data([0xDE, 0xAD, 0xBE, 0xEF]))
                try await requests.registerPushToken("fcm-1", platform: .fcm)
                try await requests.registerPushToken("fcm-1", platform: .fcm)
                let me = try await requests.managePushNotifications([.onSendMessage])
                #expect(me.pushNotifications == [.onSendMessage])
                let refused = await #expect(throws: SwitchboardError.self) {
                    _ = try await probe.session.perform(VoximplantCall("managePushNotifications", params: ["notifications": ["onCall"]]))
                }
                #expect(refused?.vendorCode == "1", "an unknown notification is a malformed request")
                try await control.agentSend("while online", in: chat.id)
                try await probe.waitForMessages(["while online"], in: chat)
                return chat.id
            }
            #expect(control.server.pushes.isEmpty, "nothing is pushed to a connected user")
            try await offline()
            let sent = try control.agent.send("while offline", in: chat.rawValue)
            try control.agent.edit(sent.uuid, in: chat.rawValue, text: "edited offline")
            let pushes = control.server.pushes
            #expect(pushes.map(\.token) == ["deadbeef", "fcm-1"], "one push per token, the token registered twice once, no push for the edit")
            #expect(pushes.map(\.platform) == ["apns", "fcm"])
            let apns = try #require(try VoximplantPushNotifications.process(pushes[0].data))
            #expect(apns.action == .sent && apns.sequence == sent.sequence && apns.message.text == "while offline")
            #expect(apns.message.serverID == MessageID(sent.uuid) && apns.message.conversationID == chat)
            var userInfo: [AnyHashable: Any] = ["aps": ["alert": "while offline"]]
            for (key, value) in pushes[1].data { userInfo[key] = value }
            #expect(try VoximplantPushNotifications.process(userInfo) == apns, "an APNs userInfo reads as the FCM data")
            #expect(try VoximplantPushNotifications.process(["webim": "1"]) == nil, "another service's push is not read")
            let broken = #expect(throws: SwitchboardError.self) { _ = try VoximplantPushNotifications.process(["voximplant": "im", "event": "{"]) }
            #expect(broken?.code == .protocolViolation)

            try await harness(control).withSession(store: store) { probe in
                let conversation = try await probe.session.conversation(chat)
                try await probe.recorder.waitUntil("the pushed message caught up, edited") {
                    try await conversation.storedMessages(before: nil, limit: .max).contains { $0.text == "edited offline" }
                }
                let stored = try await conversation.storedMessages(before: nil, limit: .max).first { $0.serverID == apns.message.serverID }
                #expect(stored?.sequence == apns.sequence, "the catch-up stores the pushed message, with its id, at its sequence")
                let requests = VoximplantRequests(session: probe.session)
                #expect(try await requests.managePushNotifications([.onEditMessage]).pushNotifications == [.onEditMessage])
                try await requests.unregisterPushToken("fcm-1")
            }
            try await offline()
            let before = control.server.pushes.count
            try control.agent.edit(sent.uuid, in: chat.rawValue, text: "edited again")
            _ = try control.agent.send("not pushed", in: chat.rawValue)
            let later = Array(control.server.pushes.dropFirst(before))
            #expect(later.map(\.token) == ["deadbeef"], "only the edit, only to the token still registered")
            let edit = try #require(try later.first.flatMap { try VoximplantPushNotifications.process($0.data) })
            #expect(edit.action == .edited && edit.message.isEdited && edit.message.text == "edited again" && edit.message.sequence == nil)
            print("voximplant push: \(control.server.pushes.count) pushes (\(pushes.count) for a send to 2 tokens, \(later.count) for an edit), 0 while connected; the pushed message stored at sequence \(apns.sequence)")
        }
    }

    /// Login syncs every conversation of the user's `conversationList`, 30 at a time (the server
    /// answers 22 to more in one `getConversations`), and a draft's uber and public flags reach
    /// the server as `createConversation`'s.
    @Test func loginSyncsSixtyFiveConversationsAndADraftsFlagsReachTheServer() async throws {
        try await withVoximplantEmulator { control in
            let existing = try (1...65).map { try control.agent.createConversation(title: "Room \($0)", with: [control.customer]) }
            try await harness(control).withSession { probe in
                try await probe.recorder.waitUntil("the 65 conversations synced") {
                    try await probe.session.conversations().count == 65
                }
                #expect(Set(try await probe.session.conversations().map(\.id.rawValue)) == Set(existing))
                let bob = ParticipantID("bob@\(control.server.configuration.domain)")
                let chat = try await probe.session.startConversation(
                    ConversationDraft(kind: .group, title: "Open", participants: [Participant(id: bob, role: .user)], flags: [.uber, .publicJoin])
                )
                let json = try #require(control.server.conversationJSON(chat.id.rawValue))
                #expect(json["uber"] == true && json["publicJoin"] == true && json["direct"] == false)
                #expect(try await VoximplantRequests(session: probe.session).publicConversations().contains(chat.id))
                print("voximplant login: 65 conversations synced; a draft's uber and publicJoin flags on the server")
            }
        }
    }

    /// A message removed, or edited, after it was sent keeps its removal or its edit when history
    /// pages back past the events that carried them: the log still holds its first `sendMessage`
    /// event, and the later events are not on the older page (it used to come back, or with its
    /// old text). Across a restart too: the first session sees the newest page (with the removal
    /// and the edit) and ends; the next pages back to the message.
    @Test func historyPastTheCatchUpDoesNotBringBackARemovedMessage() async throws {
        try await withVoximplantEmulator { control in
            let conversation = try control.agent.createConversation(title: "Support", with: [control.customer])
            let removed = try control.agent.send("to be removed", in: conversation)
            let edited = try control.agent.send("first version", in: conversation)
            for index in 1...150 { _ = try control.agent.send("filler \(index)", in: conversation) }
            try control.agent.remove(removed.uuid, in: conversation)
            try control.agent.edit(edited.uuid, in: conversation, text: "second version")
            let store = InMemoryChatStore()
            let harness = harness(control)
            try await harness.withSession(store: store) { probe in
                try await probe.recorder.first("the conversation") { $0.conversationID == ConversationID(conversation) && $0.kind.category == .conversation }
                let chat = try await probe.session.conversation(ConversationID(conversation))
                _ = try await chat.history(before: nil, limit: 100)
                #expect(try await chat.storedMessages(before: nil, limit: .max).count >= 90, "the newest page")
            }
            try await harness.withSession(store: store) { probe in
                // Stored by the first session: known at once.
                try await probe.waitForConnection()
                let chat = try await probe.session.conversation(ConversationID(conversation))
                var before = try await chat.storedMessages(before: nil, limit: .max).first?.orderKey
                while let oldest = try await chat.history(before: before, limit: 100).first, oldest.orderKey != before { before = oldest.orderKey }
                let stored = try await chat.storedMessages(before: nil, limit: .max)
                let truth = control.server.messages(in: conversation)
                #expect(!stored.contains { $0.serverID?.rawValue == removed.uuid }, "the removed message stays removed")
                #expect(stored.first { $0.serverID?.rawValue == edited.uuid }?.text == "second version", "the edit wins over the older copy")
                #expect(Set(stored.compactMap(\.serverID?.rawValue)) == Set(truth.map(\.uuid)), "the store holds the server's messages")
                print("voximplant history past the newest page, after a restart: \(stored.count) stored, \(truth.count) on the server, the removed one absent, the edited one at its new text")
            }
        }
    }

    @Test func theClientAnswersTheServersPingAndIgnoresAnUnknownFrameType() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let id = control.server.ping(user: control.customer)
                try await waitUntil("the pong", timeout: .seconds(30), signal: control.server.changes) { control.server.pongs.contains(id) }
                let from = probe.recorder.events.count
                try await control.inject(.rawFrame(#"{"type":"presence","id":"p-1","users":[]}"#))
                try await control.agentSend("after the unknown frame", in: chat.id)
                try await probe.waitForMessages(["after the unknown frame"], in: chat)
                let problems = probe.recorder.events.dropFirst(from).filter { if case .error = $0.kind { return true } else { return false } }
                #expect(problems.isEmpty, "§2: a client ignores an unknown type")
            }
        }
    }

    @Test func markingReadBelowOneLeavesTheFirstEventRead() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try await control.agentSend("one", in: chat.id)
                try await probe.waitForMessages(["one"], in: chat)
                try await chat.markRead(upTo: .sequence(0))
                _ = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(30)) { $0.readMarkers >= 1 }
                #expect(control.server.readLog.last?.sequence == 1)
            }
        }
    }

    @Test func aReadMarkerMovesBackAsTheSpecAllows() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for text in ["one", "two", "three"] { try await control.agentSend(text, in: chat.id) }
                try await probe.waitForMessages(["one", "two", "three"], in: chat)
                let newest = try await chat.storedMessages(before: nil, limit: 10).compactMap(\.sequence).max() ?? 0
                try await chat.markRead(upTo: .sequence(newest))
                try await chat.markRead(upTo: .sequence(newest - 1))
                _ = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(30)) { $0.readMarkers >= 2 }
                #expect(control.server.readLog.suffix(2).map(\.sequence) == [newest, newest - 1], "the marker goes where the client puts it (§5)")
            }
        }
    }

    /// §5: `markRead()` sends the sequence the newest stored message from others was sent at (its
    /// edit does not move it), and never a marker lower than one set before: after an explicit
    /// marker further on, it sends nothing until a newer message comes.
    @Test func markReadSendsTheNewestMessagesSequenceAndNeverGoesBack() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                _ = try control.agent.send("one", in: chat.id.rawValue)
                let two = try control.agent.send("two", in: chat.id.rawValue)
                try control.agent.edit(two.uuid, in: chat.id.rawValue, text: "two, edited")
                try await probe.recorder.first("the edit") { $0.updatedMessage?.text == "two, edited" }
                try await chat.markRead()
                let edit = control.server.lastSequence(of: chat.id.rawValue)
                try await chat.markRead(upTo: .sequence(edit))
                try await chat.markRead()
                let three = try control.agent.send("three", in: chat.id.rawValue)
                try await probe.waitForMessages(["three"], in: chat)
                try await chat.markRead()
                print("voximplant markRead: \(control.server.readLog.map(\.sequence)) for messages at \(two.sequence) (edited at \(edit)) and \(three.sequence)")
                #expect(control.server.readLog.map(\.sequence) == [two.sequence, edit, three.sequence], "the second markRead() sent nothing")
            }
        }
    }

    /// The agent removes a message the user has not read: the badge counts one less.
    @Test func aRemovedUnreadMessageLowersTheUnreadCount() async throws {
        try await withVoximplantEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for text in ["keep me", "take me back"] { try await control.agentSend(text, in: chat.id) }
                try await probe.waitForMessages(["keep me", "take me back"], in: chat)
                let before = try await chat.info().unreadCount
                let removed = try #require(try await chat.storedMessages(before: nil, limit: 10).first { $0.text == "take me back" }?.serverID)
                try control.agent.remove(removed.rawValue, in: chat.id.rawValue)
                try await probe.recorder.first("the removal") { if case .messageRemoved(removed) = $0.kind { return true } else { return false } }
                let after = try await chat.info().unreadCount
                print("voximplant removal: unread \(before) before, \(after) after the agent removed an unread message")
                #expect(after == before - 1)
            }
        }
    }
}

/// Participants and conversation changes through the typed `Conversation` calls, with the
/// emulator enforcing the permission rules (§5), each allowed and refused (issue 14).
@Suite(.timeLimit(.minutes(2)))
struct VoximplantParticipantTests {
    func refused(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as SwitchboardError {
            return error.vendorCode
        } catch {
            return "\(error)"
        }
    }

    @Test func permissionsDecideWhatTheUserMayDoAndTheServerHoldsIt() async throws {
        try await withVoximplantEmulator { control in
            let dave = control.server.addUser("dave", token: "d", displayName: "Dave")
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let chat = try await probe.openConversation()
                let id = chat.id.rawValue
                let bob = control.agent
                let bobs = try bob.send("Bob's message", in: id)
                let mine = try await chat.send(text: "Alice's message")
                let confirmed = try await probe.recorder.first("sent") { $0.updatedMessage.map { $0.clientID == mine.clientID && $0.serverID != nil } ?? false }
                let mineID = try #require(confirmed.updatedMessage?.serverID)
                var outcomes: [String] = []
                // Default permissions: her own messages only; no participants; not the owner.
                try await chat.edit(mineID, text: "Alice's message, edited")
                #expect(await refused { try await chat.edit(MessageID(bobs.uuid), text: "x") } == "12", "canEditAll")
                #expect(await refused { try await chat.delete(MessageID(bobs.uuid)) } == "12", "canRemoveAll")
                #expect(await refused { try await chat.addParticipants([Participant(id: ParticipantID(dave), role: .user)]) } == "12", "canManageParticipants")
                #expect(await refused { try await chat.removeParticipants([ParticipantID(bob.user)]) } == "12")
                #expect(await refused { try await chat.update(ConversationChanges(title: "Mine now")) } == "12", "owner only")
                outcomes.append("defaults: own edit ok; others' edit/remove, participants, update refused (12)")
                // Bob grants everything but ownership.
                try bob.editParticipant(control.customer, in: id, ["canEditAll": true, "canRemoveAll": true, "canManageParticipants": true])
                try await probe.recorder.waitUntil("the grant") { _ in control.server.lastSequence(of: id) >= 5 }
                try await chat.edit(MessageID(bobs.uuid), text: "Bob's, edited by Alice")
                try await chat.delete(MessageID(bobs.uuid))
                let daveAsParticipant = Participant(id: ParticipantID(dave), role: .user)
                try await chat.addParticipants([daveAsParticipant, daveAsParticipant])   // listed twice: added once
                var restricted = daveAsParticipant
                restricted.permissions.canWrite = false
                try await chat.updateParticipants([restricted])
                #expect(await refused { try await chat.updateParticipants([Participant(id: ParticipantID(bob.user), role: .user)]) } == "12", "editing the owner needs isOwner")
                #expect(throws: VoximplantProtocolError.self) { try control.server.robot(dave).send("Dave may not write", in: id) }
                try await chat.removeParticipants([ParticipantID(dave), ParticipantID(dave)])
                outcomes.append("manager: others' edit/remove ok, add (a duplicate ignored), restrict, remove ok; the owner untouchable (12)")
                // Ownership: the conversation's title, public join and custom data.
                try bob.editParticipant(control.customer, in: id, ["isOwner": true, "canManageParticipants": true])
                try await probe.recorder.waitUntil("owner") { _ in control.server.conversationJSON(id)?["participants"]?.arrayValue?.contains { $0["userId"]?.stringValue == control.customer && $0["isOwner"]?.boolValue == true } == true }
                try await chat.update(ConversationChanges(title: "Alice's now", isPublicJoin: true, customData: ["topic": "billing"]))
                let info = try await chat.info()
                #expect(info.title == "Alice's now" && info.flags.contains(.publicJoin) && info.customData?["topic"] == "billing")
                let server = try #require(control.server.conversationJSON(id))
                #expect(server["title"] == "Alice's now" && server["publicJoin"] == true && server["customData"]?["topic"] == "billing")
                // Without canWrite her sends fail.
                try bob.editParticipant(control.customer, in: id, ["canWrite": false])
                try await probe.recorder.waitUntil("muted") { _ in control.server.conversationJSON(id)?["participants"]?.arrayValue?.contains { $0["userId"]?.stringValue == control.customer && $0["canWrite"]?.boolValue == false } == true }
                let muted = try await chat.send(text: "muted")
                try await probe.recorder.first("refused") { $0.updatedMessage.map { $0.clientID == muted.clientID && $0.deliveryState.isFailed } ?? false }
                outcomes.append("owner: title, public join, custom data ok; without canWrite a send fails")
                let members = server["participants"]?.arrayValue?.compactMap { $0["userId"]?.stringValue } ?? []
                #expect(!members.contains(dave), "Dave was removed")
                print("voximplant permissions: \(outcomes.joined(separator: "; "))")
            }
        }
    }

    @Test func publicConversationsAreListedAndJoinedThroughTypedCalls() async throws {
        try await withVoximplantEmulator { control in
            let lobby = try control.agent.createConversation(title: "Lobby", with: [], publicJoin: true)
            let closed = try control.agent.createConversation(title: "Staff", with: [])
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let requests = VoximplantRequests(session: probe.session)
                #expect(try await requests.publicConversations() == [ConversationID(lobby)])
                let joined = try await requests.joinConversation(ConversationID(lobby))
                #expect(try await joined.info().title == "Lobby", "stored when the call returns")
                try await joined.send(text: "hello, lobby")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "hello, lobby" && $0.updatedMessage?.serverID != nil }
                do {
                    _ = try await requests.joinConversation(ConversationID(closed))
                    Issue.record("joined a conversation that is not public")
                } catch let error as SwitchboardError {
                    #expect(error.vendorCode == "15")
                }
            }
        }
    }

    @Test func anAppsOwnRetransmitYieldsTypedEvents() async throws {
        try await withVoximplantEmulator { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...5 { try control.agent.send("logged \(index)", in: chat.id.rawValue) }
                try await probe.waitForMessages((1...5).map { "logged \($0)" }, in: chat)
                let events = try await VoximplantRequests(session: probe.session).retransmitEvents(in: chat.id, from: 2, count: 3)
                #expect(events.map(\.sequence) == [2, 3, 4])
                let texts = events.compactMap { event -> String? in
                    if case .messageAdded(let message, _) = event.kind { return message.text }
                    return nil
                }
                #expect(texts == ["logged 1", "logged 2", "logged 3"], "sequence 1 is the conversation's creation")
                #expect(events.allSatisfy { $0.conversationID == chat.id })
            }
        }
    }

    @Test func typingFasterThanTheLimitSaysItWasThrottled() async throws {
        try await withVoximplantEmulator { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let chat = try await probe.openConversation()
                #expect(try await chat.userTyping(draft: nil) == .sent)
                #expect(try await chat.userTyping(draft: nil) == .throttled, "within 10 s: discarded, as the SDK's 10000")
            }
        }
    }
}
