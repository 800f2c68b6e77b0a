import Foundation
import Switchboard
import SwitchboardSQLite
import SwitchboardTestKit
@_spi(WireReaders) import SwitchboardXMPP
import Testing

/// Rooms (XEP-0045) against a real Prosody: the app is a `ChatSession` as `customer@localhost`,
/// the other members are agent accounts driven by ``XMPPTestClient``, and the truth is the room's
/// own archive on the server.
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPRoomTests {
    let live = XMPPLiveTests()

    static func joined(_ jid: String) -> @Sendable (ChatEvent) -> Bool {
        { event in
            if case .participantsAdded(let added) = event.kind { return added.contains { $0.id == ParticipantID(jid) } }
            return false
        }
    }

    /// The session starts a room and says its first message; members join, write and leave; it
    /// writes back. Closed, then the agent writes three while it is away: a restart on the same
    /// SQLite file joins the room again and catches up from the room's archive id it stored.
    /// Then it leaves the room. Every stored row is compared with the room's archive.
    @Test func aRoomWithMembersJoiningAndLeavingAndARestart() async throws {
        try await Prosody.withServer { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let first = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            var events: [String] = []
            let typingFigures = Locked("")
            let invited = Locked("")
            let room = try await withConnectedRecording(first) { recorder in
                let started = try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk", presence: true) { agent in
                    let started = try await first.startConversation(
                        ConversationDraft(kind: .group, title: "Team", participants: [Participant(id: ParticipantID(XMPPLiveTests.agent), role: .user)], firstMessage: MessageDraft(text: "welcome"))
                    )
                    let room = started.id.rawValue
                    // Invited through the room (XEP-0045 §7.8.2), by the session's user.
                    let invitation = try await agent.waitForStanza("the invitation") { $0.name == "message" && $0["from"] == room && $0.child("x", "http://jabber.org/protocol/muc#user")?.child("invite") != nil }
                    invited.withLock { $0 = XMPPTestClient.bare(invitation.child("x")?.child("invite")?["from"] ?? "") }
                    try await agent.joinRoom(room, nick: "agent1")
                    try await recorder.first("agent1 joins", where: Self.joined(XMPPLiveTests.agent))
                    // Typing both ways: the agent's chat state reaches the session as the agent's
                    // typing; the session's reaches the agent from the session's nick.
                    try await agent.write(
                        "<message xmlns='jabber:client' type='groupchat' to='\(room)'><composing xmlns='http://jabber.org/protocol/chatstates'/><no-store xmlns='urn:xmpp:hints'/></message>"
                    )
                    try await recorder.first("agent1 typing") { event in
                        if case .typing(let who, let isTyping, _) = event.kind { return who == ParticipantID(XMPPLiveTests.agent) && isTyping }
                        return false
                    }
                    _ = try await started.userTyping(draft: "th")
                    let typing = try await agent.waitForStanza("the session's typing") {
                        $0.name == "message" && $0["from"] == "\(room)/customer" && $0.child("composing") != nil
                    }
                    typingFigures.withLock { $0 = "typing: agent → session seen, session → agent \(typing.child("composing") != nil ? "composing" : "nothing")" }
                    try await agent.sendToRoom("hello team", room: room)
                    try await recorder.first("agent1's message") { $0.addedMessage?.text == "hello team" }
                    try await XMPPTestClient.withClient(server, user: "agent2", resource: "desk") { other in
                        try await other.joinRoom(room, nick: "agent2")
                        try await recorder.first("agent2 joins", where: Self.joined("agent2@localhost"))
                        try await other.leaveRoom(room, nick: "agent2")
                    }
                    try await recorder.first("agent2 leaves") { event in
                        if case .participantsRemoved(let removed) = event.kind { return removed == [ParticipantID("agent2@localhost")] }
                        return false
                    }
                    let sent = try await started.send(text: "thanks")
                    try await recorder.first("the send confirmed") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                    try await agent.leaveRoom(room, nick: "agent1")
                    return started
                }
                let room = started.id.rawValue
                try await recorder.first("agent1 leaves") { event in
                    if case .participantsRemoved(let removed) = event.kind { return removed == [ParticipantID(XMPPLiveTests.agent)] }
                    return false
                }
                let info = try await started.info()
                events = recorder.events.compactMap { event in
                    switch event.kind {
                    case .participantsAdded(let added): "+" + added.map(\.id.rawValue).joined(separator: ",")
                    case .participantsRemoved(let removed): "-" + removed.map(\.rawValue).joined(separator: ",")
                    default: nil
                    }
                }
                #expect(info.kind == .group)
                #expect(info.title == "Team")
                return room
            }
            // Away: three from the agent.
            let away = (0..<3).map { "while away \($0)" }
            try await server.asUser("agent1") { agent in
                try await agent.joinRoom(room, nick: "agent1")
                for text in away { try await agent.sendToRoom(text, room: room) }
            }
            let second = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(second) { recorder in
                let chat = try await second.conversation(ConversationID(room))
                try await recorder.waitUntil("the three sent while away stored", check: { try await chat.storedMessages(before: nil, limit: 100).count == 6 })
                try await recorder.waitUntil("the three sent while away announced") { events in events.compactMap(\.addedMessage).count >= 3 }
                let stored = try await chat.storedMessages(before: nil, limit: 100)
                let archive = try await server.archive(of: "customer", with: nil, room: room).filter(\.isMessage)
                let storedIDs = stored.compactMap(\.serverID).map(\.rawValue)
                let archived = archive.map(\.archiveID)
                let added = recorder.events.compactMap(\.addedMessage).map(\.text)
                // Nothing the first session had comes again (as an update, with another time).
                let updated = recorder.events.compactMap(\.updatedMessage).map(\.text)
                print(
                    "xmpp rooms: invited by \(invited.withLock { $0 }); \(typingFigures.withLock { $0 }); members \(events); \(archive.count) in the room's archive, \(stored.count) stored (pending \(stored.filter { $0.serverID == nil }.count)), "
                        + "lost \(Set(archived).subtracting(storedIDs).count), phantom \(Set(storedIDs).subtracting(archived).count), duplicated \(storedIDs.count - Set(storedIDs).count), "
                        + "in the archive's order \(storedIDs == archived); after the restart \(added.count) announced, \(updated.count) updated"
                )
                #expect(invited.withLock { $0 } == XMPPLiveTests.customer)
                #expect(events == ["+\(XMPPLiveTests.agent)", "+agent2@localhost", "-agent2@localhost", "-\(XMPPLiveTests.agent)"])
                #expect(stored.map(\.text) == ["welcome", "hello team", "thanks"] + away)
                #expect(storedIDs == archived)
                #expect(added == away, "only what came while away is new")
                #expect(updated.isEmpty, "nothing stored comes again")
                #expect(stored.first?.sender == ParticipantID(XMPPLiveTests.customer))
                #expect(stored[1].sender == ParticipantID(XMPPLiveTests.agent))

                try await chat.close()
                try await recorder.first("the room left") { event in
                    if case .conversationRemoved = event.kind { return event.conversationID == ConversationID(room) }
                    return false
                }
                let remaining = try await second.conversations().map(\.id)
                #expect(!remaining.contains(ConversationID(room)))
            }
            // Left for good: the next run on the store does not join it again.
            let third = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(third) { recorder in
                // Its login is over once a ping of the agent's comes through to it.
                try await server.send(["after the leave"], from: "agent1", to: XMPPLiveTests.customer)
                try await recorder.first("a message after the leave") { $0.addedMessage?.text == "after the leave" }
                let rejoined = recorder.events.contains { $0.conversationID == ConversationID(room) }
                let archived = try await server.archive(of: "customer", with: nil, room: room).count
                print("xmpp rooms: after the leave, the next run's events of the room: \(rejoined ? "some" : "none"); the room's archive still holds \(archived)")
                #expect(!rejoined, "a room left is not joined again")
                #expect(try await !third.conversations().map(\.id).contains(ConversationID(room)))
            }
        }
    }

    /// A room destroyed while the user is in it is removed; one destroyed while the session was
    /// closed is found gone on the next link's join and removed from the store: the server says
    /// `gone` where it keeps tombstones (Prosody's default), and without them the join makes the
    /// room again, which the link destroys again.
    @Test(arguments: [true, false])
    func aDestroyedRoomIsRemoved(tombstones: Bool) async throws {
        try await Prosody.withServer(roomTombstones: tombstones) { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let doomed = "doomed@conference.localhost"
            let gone = "gone@conference.localhost"
            let first = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(first) { recorder in
                try await XMPPRequests(session: first).join(doomed)
                try await XMPPRequests(session: first).join(gone)
                try await server.asUser("customer", resource: "admin") { admin in try await admin.destroyRoom(doomed) }
                try await recorder.first("the room destroyed while in it is removed") { event in
                    if case .conversationRemoved = event.kind { return event.conversationID == ConversationID(doomed) }
                    return false
                }
            }
            try await server.asUser("customer", resource: "admin") { admin in try await admin.destroyRoom(gone) }
            let second = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(second) { recorder in
                try await recorder.first("the room destroyed while closed is removed") { event in
                    if case .conversationRemoved = event.kind { return event.conversationID == ConversationID(gone) }
                    return false
                }
                // The problem is reported after the removal (the link removes the room, then its
                // login reports why): waited for, not read at once.
                try await recorder.first("the reason reported") { event in
                    if case .error(let error) = event.kind { return error.vendorCode == "gone" }
                    return false
                }
                let remaining = try await second.conversations().map(\.id)
                let problems = recorder.events.compactMap { event -> String? in
                    if case .error(let error) = event.kind { return error.vendorCode }
                    return nil
                }
                print("xmpp rooms: destroyed rooms (tombstones \(tombstones)) — stored after \(remaining.map(\.rawValue)), problems \(problems)")
                #expect(!remaining.contains(ConversationID(doomed)) && !remaining.contains(ConversationID(gone)))
                #expect(problems.contains("gone"))
            }
            // Not left behind, made again by the join that found it gone.
            let exists = try await XMPPTestClient.withClient(server, user: "agent1", resource: "look") { agent in
                let id = UUID().uuidString
                let answer = try? await agent.request("<iq xmlns='jabber:client' type='get' id='\(id)' to='\(gone)'><query xmlns='http://jabber.org/protocol/disco#info'/></iq>", id: id)
                return answer != nil
            }
            #expect(!exists, "the room the rejoin made was destroyed again")
        }
    }

    /// A room started without a message, closed, then written to: the next run catches up from
    /// the room's clock (its archive had shown nothing yet), and the message is news.
    @Test func aRoomThatHadShownNothingCatchesUpFromItsTime() async throws {
        try await Prosody.withServer { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let first = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            let room = try await withConnectedRecording(first) { _ in
                try await first.startConversation(ConversationDraft(kind: .group, title: "Quiet")).id.rawValue
            }
            try await server.asUser("agent1") { agent in
                try await agent.joinRoom(room, nick: "agent1")
                try await agent.sendToRoom("anyone here?", room: room)
            }
            let second = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            let added = try await withConnectedRecording(second) { recorder in
                try await recorder.first("the message written while away") { $0.addedMessage?.text == "anyone here?" }
            }
            print("xmpp rooms: a room that had shown nothing — the message written while away came as \(added.addedMessage.map { _ in "news" } ?? "nothing")")
            if case .messageAdded(_, let position) = added.kind { #expect(position == .newest) }
        }
    }

    /// A user kicked out of a room by its moderator is removed from it: the store drops the
    /// room, and the next run does not join it again.
    @Test func aUserKickedOutOfARoomLosesIt() async throws {
        try await Prosody.withServer { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let room = "desk@conference.localhost"
            let first = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            let kicked = try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk") { agent in
                // The agent makes the room, and so moderates it.
                try await agent.joinRoom(room, nick: "agent1")
                return try await withConnectedRecording(first) { recorder in
                    try await XMPPRequests(session: first).join(room)
                    try await agent.kick("customer", from: room)
                    let removed = try await recorder.first("the room removed") { event in
                        if case .conversationRemoved = event.kind { return event.conversationID == ConversationID(room) }
                        return false
                    }
                    return removed.conversationID
                }
            }
            let second = live.session(try live.backend(server), store: try SQLiteChatStore(path: path))
            let stored = try await withConnectedRecording(second) { recorder in
                try await server.send(["after the kick"], from: "agent1", to: XMPPLiveTests.customer)
                try await recorder.first("a message after the kick") { $0.addedMessage?.text == "after the kick" }
                return try await second.conversations().map(\.id)
            }
            print("xmpp rooms: kicked — removed \(kicked?.rawValue ?? "nothing"); the next run's conversations \(stored.map(\.rawValue))")
            #expect(kicked == ConversationID(room))
            #expect(!stored.contains(ConversationID(room)))
        }
    }

    /// A join the server refuses (a room on another server, where this one talks to none) fails
    /// classified, with the condition as the vendor code; a room of its own service is joined
    /// (made, as Prosody makes rooms on a first join) and is a group conversation.
    @Test func aJoinRefusedByTheServerIsClassified() async throws {
        try await Prosody.withServer { server in
            let session = live.session(try live.backend(server))
            try await withConnectedRecording(session) { _ in
                // No such service.
                await #expect {
                    try await XMPPRequests(session: session).join("nowhere@no-such-service.localhost")
                } throws: { error in
                    let code = (error as? SwitchboardError)?.code
                    print("xmpp rooms: a join of a room on no service — \(String(describing: code)) (\((error as? SwitchboardError)?.vendorCode ?? ""))")
                    return code == .permissionDenied && (error as? SwitchboardError)?.vendorCode == "not-allowed"
                }
                let joined = try await XMPPRequests(session: session).join("lobby@conference.localhost")
                #expect(joined == ConversationID("lobby@conference.localhost"))
                #expect(try await session.conversation(joined).info().kind == .group)
            }
        }
    }
}
