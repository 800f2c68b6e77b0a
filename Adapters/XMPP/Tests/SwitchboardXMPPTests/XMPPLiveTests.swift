import Foundation
import Switchboard
import SwitchboardSQLite
import SwitchboardTestKit
@_spi(WireReaders) import SwitchboardXMPP
import Testing

/// The adapter against a real Prosody: the app is a `ChatSession` on `XMPPBackend` as
/// `customer@localhost`; the other side is an agent account driven by ``XMPPTestClient``, and the
/// truth is the customer's own archive on the server. Skipped, saying so, where Prosody is not
/// installed (failed under `CI`).
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPLiveTests {
    static let customer = "customer@localhost"
    static let agent = "agent1@localhost"

    func backend(_ server: ProsodyServer, password: String = "secret-customer") throws -> XMPPBackend {
        try XMPPBackend(
            configuration: XMPPConfiguration(jid: Self.customer, password: password, url: server.url, requestTimeout: .seconds(10), allowsPlainText: true),
            logger: .quiet
        )
    }

    func session(_ backend: XMPPBackend, store: any ChatStore = InMemoryChatStore()) -> ChatSession {
        ChatSession(backend: backend, store: store, configuration: .fastForTests, logger: .quiet)
    }

    /// Runs `session` with a recorder until `body` returns; connected first.
    func connected<T: Sendable>(_ session: ChatSession, _ body: (EventRecorder) async throws -> T) async throws -> T {
        try await withRecording(session) { recorder in
            try await session.resume()
            try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
            let result = try await body(recorder)
            await session.close()
            return result
        }
    }

    /// Sends each text from the agent to the customer on one connection.
    func agentSends(_ texts: [String], on server: ProsodyServer) async throws {
        try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk") { agent in
            for text in texts { try await agent.send(text, to: Self.customer) }
        }
    }

    /// The customer's archive with the agent, as the server has it.
    func truth(on server: ProsodyServer) async throws -> [ArchivedMessage] {
        try await XMPPTestClient.withClient(server, user: "customer", resource: "truth") { customer in
            try await customer.archive(with: Self.agent)
        }
    }

    @Test func aConversationBothWays() async throws {
        try await Prosody.withServer { server in
            let session = session(try backend(server))
            try await connected(session) { recorder in
                try await agentSends(["hello from the agent"], on: server)
                let event = try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello from the agent" }
                let conversation = try #require(event.conversationID)
                #expect(conversation == ConversationID(Self.agent))
                let chat = try await session.conversation(conversation)
                let sent = try await chat.send(text: "hello & <welcome>")
                try await recorder.first("the send confirmed") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let archive = try await truth(on: server)
                let stored = try await chat.storedMessages(before: nil, limit: 10)
                print("xmpp live: both ways — \(archive.count) archived, \(stored.count) stored, ids equal \(stored.compactMap(\.serverID).map(\.rawValue) == archive.map(\.archiveID))")
                #expect(archive.map(\.body) == ["hello from the agent", "hello & <welcome>"])
                #expect(stored.compactMap(\.serverID).map(\.rawValue) == archive.map(\.archiveID))
                #expect(archive.last?.originID == sent.clientID?.rawValue)
            }
        }
    }

    /// The outbox resends a message whose answer was lost with the same client id: the archive's
    /// origin id recognizes it, as XMPP servers themselves do not.
    @Test func aResentMessageIsDeliveredOnce() async throws {
        try await Prosody.withServer { server in
            let backend = try backend(server)
            let outgoing = OutgoingMessage(clientID: ClientMessageID("resend-\(UUID().uuidString)"), conversationID: ConversationID(Self.agent), content: MessageDraft(text: "sent three times"))
            let ids = try await backend.withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { link in
                var ids: [MessageID] = []
                for _ in 0..<3 {
                    if case .message(let message) = try await link.perform(.send(outgoing)), let id = message.serverID { ids.append(id) }
                }
                return ids
            }
            let copies = try await truth(on: server).filter { $0.body == "sent three times" }
            print("xmpp live: one message sent 3 times — \(Set(ids).count) archive id, \(copies.count) in the archive, duplicated \(copies.count - 1)")
            #expect(ids.count == 3 && Set(ids).count == 1)
            #expect(copies.count == 1)
            #expect(copies.first?.archiveID == ids.first?.rawValue)
        }
    }

    /// Messages sent while the app was closed (several in one archived second, which Prosody
    /// stamps alike and gives random ids) come from the archive after the stored archive id: each
    /// once, in the archive's order, and nothing stored before is announced again.
    @Test func aRestartOnSQLiteCatchesUpFromTheStoredArchiveID() async throws {
        try await Prosody.withServer { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let first = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await connected(first) { recorder in
                try await agentSends(["before the restart"], on: server)
                try await recorder.first("the first message") { $0.addedMessage?.text == "before the restart" }
            }
            let offline = (0..<10).map { "while closed \($0)" }
            try await agentSends(offline, on: server)
            let second = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await connected(second) { recorder in
                let chat = try await second.conversation(ConversationID(Self.agent))
                try await recorder.waitUntil("the ten sent while closed announced") { events in
                    events.compactMap(\.addedMessage).filter { $0.text.hasPrefix("while closed") }.count >= 10
                }
                try await recorder.waitUntil("the ten stored", check: { try await chat.storedMessages(before: nil, limit: 100).count == 11 })
                let added = recorder.events.compactMap(\.addedMessage).map(\.text)
                let stored = try await chat.storedMessages(before: nil, limit: 100)
                let archive = try await truth(on: server)
                let order = stored.compactMap(\.serverID).map(\.rawValue) == archive.map(\.archiveID)
                print(
                    "xmpp live: a restart on SQLite — \(added.count) messages announced after it (10 new), \(stored.count) stored of \(archive.count) archived, "
                        + "lost \(archive.count - stored.count), duplicated \(added.count - Set(added).count), in the archive's order \(order)"
                )
                #expect(stored.map(\.text) == ["before the restart"] + offline)
                #expect(added == offline, "only what came while closed is new")
                #expect(order)
            }
        }
    }

    /// 120 messages archived before the first connection: the first link takes the newest page as
    /// its window, and history pages back to the first, in the archive's order.
    @Test func historyPagesBackToTheFirstMessage() async throws {
        try await Prosody.withServer { server in
            let texts = (0..<120).map { "old \($0)" }
            try await agentSends(texts, on: server)
            let session = session(try backend(server))
            try await connected(session) { recorder in
                try await recorder.first("the conversation") { $0.conversationID == ConversationID(Self.agent) && $0.kind.category == .conversation }
                let chat = try await session.conversation(ConversationID(Self.agent))
                try await recorder.waitUntil("the newest window", check: { try await chat.storedMessages(before: nil, limit: 200).count >= 50 })
                var oldest = try await chat.storedMessages(before: nil, limit: 200).first?.orderKey
                var pages = 0
                while pages < 10 {
                    let page = try await chat.history(before: oldest, limit: 50)
                    guard let first = page.first, first.orderKey != oldest else { break }
                    oldest = first.orderKey
                    pages += 1
                }
                let stored = try await chat.storedMessages(before: nil, limit: 200)
                let archive = try await truth(on: server)
                print("xmpp live: history paging — \(pages) pages, \(stored.count) of 120 stored, in order \(stored.map(\.text) == texts)")
                #expect(stored.map(\.text) == texts)
                #expect(stored.compactMap(\.serverID).map(\.rawValue) == archive.map(\.archiveID))
            }
        }
    }

    /// The user writes from another device (carbons carry no archive id); the agent answers.
    /// This device gets both, the first from the archive, and a restart announces nothing again:
    /// the live answer did not move the cursor past the other device's message.
    @Test func aMessageFromTheUsersOtherDeviceArrivesAndTheCursorDoesNotSkipIt() async throws {
        try await Prosody.withServer { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let first = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await connected(first) { recorder in
                try await agentSends(["hello"], on: server)
                try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello" }
                try await XMPPTestClient.withClient(server, user: "customer", resource: "desk", presence: true) { desk in
                    _ = try await desk.send("from my desk", to: Self.agent)
                }
                try await recorder.first("the desk's message, from the archive") { $0.addedMessage?.text == "from my desk" }
                try await agentSends(["answer to the desk"], on: server)
                try await recorder.first("the answer") { $0.addedMessage?.text == "answer to the desk" }
            }
            let second = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await connected(second) { recorder in
                // What comes live after the link's catch-up: anything announced before it was
                // announced again.
                try await agentSends(["after the restart"], on: server)
                try await recorder.first("the message after the restart") { $0.addedMessage?.text == "after the restart" }
                let chat = try await second.conversation(ConversationID(Self.agent))
                let archive = try await truth(on: server)
                let stored = try await chat.storedMessages(before: nil, limit: 20)
                let announced = recorder.events.compactMap(\.addedMessage).map(\.text)
                // A message delivered again with another time would come as an update.
                let updated = recorder.events.compactMap(\.updatedMessage).map(\.text)
                print(
                    "xmpp live: another device's message — \(stored.count) stored of \(archive.count) archived, announced after a restart \(announced) (1 new), "
                        + "updated \(updated.count)"
                )
                #expect(updated.isEmpty)
                #expect(stored.compactMap(\.serverID).map(\.rawValue) == archive.map(\.archiveID))
                #expect(stored.map(\.text) == ["hello", "from my desk", "answer to the desk", "after the restart"])
                #expect(announced == ["after the restart"])
            }
        }
    }

    /// A cursor whose archive id the server does not know (an expired archive, another server's
    /// id): reported, and the link catches up from the cursor's time instead.
    @Test func aRefusedCursorCatchesUpFromItsTime() async throws {
        try await Prosody.withServer { server in
            try await agentSends(["one", "two", "three"], on: server)
            let since = Date().addingTimeInterval(-60)
            let refused = XMPPCursor(archiveID: "no-such-archive-id", last: since).token
            let updates = try await backend(server).withConnection(
                ConnectionContext(session: "direct", cursor: refused, clock: .continuous, logger: .quiet)
            ) { link in
                var updates: [BackendUpdate] = []
                for try await update in link.updates {
                    updates.append(update)
                    if case .cursor = update, updates.contains(where: { if case .problem = $0 { return true } else { return false } }) { break }
                }
                return updates
            }
            let added = updates.compactMap { update -> String? in
                if case .event(let event) = update, case .messageAdded(let message, _) = event.kind { return message.text }
                return nil
            }
            let problems = updates.filter { if case .problem = $0 { return true } else { return false } }.count
            print("xmpp live: a refused cursor — \(problems) problem reported, \(added.count) messages caught up from its time")
            #expect(problems == 1)
            #expect(added == ["one", "two", "three"])
            // Refused with nothing archived after its time: the link still comes up (the body
            // runs once the login is done).
            let ahead = XMPPCursor(archiveID: "no-such-archive-id", last: Date().addingTimeInterval(3600)).token
            let cameUp = try await backend(server).withConnection(
                ConnectionContext(session: "direct", cursor: ahead, clock: .continuous, logger: .quiet)
            ) { _ in true }
            #expect(cameUp)
        }
    }

    /// The agent corrects one message and retracts another (XEP-0308, XEP-0424): the store shows
    /// the correction and not the retracted message.
    @Test func theAgentsCorrectionsAndRetractionsApply() async throws {
        try await Prosody.withServer { server in
            let session = session(try backend(server))
            try await connected(session) { recorder in
                try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk") { agent in
                    let typo = try await agent.send("helo", to: Self.customer, id: "typo-1")
                    let oops = try await agent.send("wrong chat", to: Self.customer, id: "oops-1")
                    try await recorder.waitUntil("both arrive") { events in events.compactMap(\.addedMessage).count >= 2 }
                    try await agent.write(
                        "<message xmlns='jabber:client' type='chat' to='\(Self.customer)' id='fix-1'><body>hello</body>"
                            + "<replace xmlns='urn:xmpp:message-correct:0' id='\(typo)'/></message>"
                    )
                    try await agent.write(
                        "<message xmlns='jabber:client' type='chat' to='\(Self.customer)' id='retract-1'><retract xmlns='urn:xmpp:message-retract:1' id='\(oops)'/>"
                            + "<fallback xmlns='urn:xmpp:fallback:0' for='urn:xmpp:message-retract:1'/><body>retracted</body><store xmlns='urn:xmpp:hints'/></message>"
                    )
                }
                try await recorder.first("the correction") { $0.updatedMessage.map { $0.text == "hello" && $0.isEdited } ?? false }
                try await recorder.first("the retraction") { if case .messageRemoved = $0.kind { return true } else { return false } }
                let chat = try await session.conversation(ConversationID(Self.agent))
                // The user's own edit and retraction, read back from the archive by the link,
                // are not news and report nothing.
                let mine = try await chat.send(text: "mine")
                let sent = try await recorder.first("mine confirmed") { $0.updatedMessage.map { $0.clientID == mine.clientID && $0.serverID != nil } ?? false }
                let id = try #require(sent.updatedMessage?.serverID)
                try await chat.edit(id, text: "mine, edited")
                try await chat.delete(id)
                let mark = recorder.events.count
                try await agentSends(["sentinel"], on: server)
                try await recorder.first("the sentinel") { $0.addedMessage?.text == "sentinel" }
                let problems = recorder.events.dropFirst(mark).filter { if case .error = $0.kind { return true } else { return false } }
                let stored = try await chat.storedMessages(before: nil, limit: 20).map(\.text)
                // What the agent's client gets: the server archived the user's correction and
                // retraction naming the message by the id the agent knows it by.
                let archive = try await truth(on: server)
                let clientID = try #require(mine.clientID?.rawValue)
                let corrections = archive.filter { $0.replaces == clientID && $0.from == Self.customer }
                let retractions = archive.filter { $0.retracts == clientID && $0.from == Self.customer }
                print(
                    "xmpp live: corrections and retractions both ways — stored \(stored), problems after the user's own \(problems.count), "
                        + "the user's correction archived \(corrections.count) (\(corrections.first?.body ?? "none")), retraction \(retractions.count)"
                )
                #expect(stored == ["hello", "sentinel"])
                #expect(problems.isEmpty)
                #expect(corrections.map(\.body) == ["mine, edited"])
                #expect(retractions.count == 1)
            }
        }
    }

    @Test func aMessageToNobodyFailsAsConversationNotFound() async throws {
        try await Prosody.withServer { server in
            let outgoing = OutgoingMessage(clientID: "to-nobody", conversationID: "nobody@localhost", content: MessageDraft(text: "anyone?"))
            do {
                _ = try await backend(server).withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { link in
                    try await link.perform(.send(outgoing))
                }
                Issue.record("a message to a user who does not exist was accepted")
            } catch let error as SwitchboardError {
                #expect(error.code == .conversationNotFound)
                #expect(error.vendorCode == "service-unavailable")
            }
        }
    }

    @Test func aWrongPasswordEndsWithAuthenticationFailed() async throws {
        try await Prosody.withServer { server in
            do {
                try await backend(server, password: "wrong").withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { _ in }
                Issue.record("a wrong password connected")
            } catch let error as SwitchboardError {
                #expect(error.code == .authenticationFailed)
                #expect(error.vendorCode == "not-authorized")
            }
        }
    }
}
