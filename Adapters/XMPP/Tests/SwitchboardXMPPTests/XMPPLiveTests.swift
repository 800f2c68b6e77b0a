import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardSQLite
import SwitchboardTestKit
import SwitchboardTransport
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

    func backend(
        _ server: ProsodyServer, password: String = "secret-customer", allowsPlainLogin: Bool = true, webSockets: WebSocketTransport = .network
    ) throws -> XMPPBackend {
        try XMPPBackend(
            configuration: XMPPConfiguration(
                jid: Self.customer, password: password, url: server.url, requestTimeout: .seconds(10), allowsPlainText: true, allowsPlainLogin: allowsPlainLogin
            ),
            logger: .quiet,
            webSockets: webSockets
        )
    }

    func session(_ backend: XMPPBackend, store: any ChatStore = InMemoryChatStore()) -> ChatSession {
        ChatSession(backend: backend, store: store, configuration: .fastForTests, logger: .quiet)
    }

    @Test func aConversationBothWays() async throws {
        try await Prosody.withServer { server in
            let session = session(try backend(server))
            try await withConnectedRecording(session) { recorder in
                try await server.send(["hello from the agent"], from: "agent1", to: Self.customer)
                let event = try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello from the agent" }
                let conversation = try #require(event.conversationID)
                #expect(conversation == ConversationID(Self.agent))
                let chat = try await session.conversation(conversation)
                let sent = try await chat.send(text: "hello & <welcome>")
                try await recorder.first("the send confirmed") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let archive = try await server.archive(of: "customer", with: Self.agent)
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
            let copies = try await server.archive(of: "customer", with: Self.agent).filter { $0.body == "sent three times" }
            print("xmpp live: one message sent 3 times — \(Set(ids).count) archive id, \(copies.count) in the archive, duplicated \(copies.count - 1)")
            #expect(ids.count == 3 && Set(ids).count == 1)
            #expect(copies.count == 1)
            #expect(copies.first?.archiveID == ids.first?.rawValue)
        }
    }

    /// The send reaches Prosody and the link is cut before its answer comes back: the outbox
    /// sends it again on the next link, which finds it in the archive by its origin id. The
    /// agent gets it once, and the store holds it once, confirmed with the archive's id.
    @Test func aSendWhoseAnswerWasLostOnTheWireIsDeliveredOnce() async throws {
        try await Prosody.withServer { server in
            let faults = XMPPFaults()
            let session = session(try backend(server, webSockets: faults.transport))
            try await withConnectedRecording(session) { recorder in
                try await server.send(["hello"], from: "agent1", to: Self.customer)
                try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello" }
                let chat = try await session.conversation(ConversationID(Self.agent))
                faults.loseNextAnswer(to: "send")
                _ = try await chat.send(text: "its answer was lost")
                try await recorder.waitUntil("the send confirmed on the next link", check: {
                    try await chat.storedMessages(before: nil, limit: 20).contains { $0.text == "its answer was lost" && $0.deliveryState == .sent }
                })
                let archive = try await server.archive(of: "customer", with: Self.agent).filter { $0.body == "its answer was lost" }
                let stored = try await chat.storedMessages(before: nil, limit: 20).filter { $0.text == "its answer was lost" }
                let reconnects = recorder.events.filter(\.isConnected).count - 1
                print(
                    "xmpp live: a send whose answer was lost on the wire — answers lost \(faults.lostAnswers), reconnects \(reconnects), "
                        + "\(archive.count) in the archive, \(stored.count) stored (duplicated \(max(0, archive.count - 1)))"
                )
                #expect(faults.lostAnswers == 1)
                #expect(reconnects >= 1)
                #expect(archive.count == 1)
                #expect(stored.count == 1)
                #expect(stored.first?.serverID?.rawValue == archive.first?.archiveID)
            }
        }
    }

    /// Whether a link comes up, or the code of the error it failed with.
    func comesUp(_ backend: XMPPBackend) async -> Result<Bool, SwitchboardError> {
        do {
            return .success(try await backend.withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { _ in true })
        } catch {
            return .failure(SwitchboardError.classify(error))
        }
    }

    /// The login is SCRAM (Prosody offers SCRAM-SHA-1 and PLAIN): a PLAIN login through the relay
    /// would be refused, and this one comes up. A server that cannot sign the exchange (its
    /// success replaced on the way) is refused, as `authenticationFailed`.
    @Test func theLoginIsSCRAMAndTheServerMustProveItself() async throws {
        try await Prosody.withServer { server in
            let faults = XMPPFaults()
            faults.relay.inject(.answer { _ in XMPPFaults.saslFailure("not-authorized") }, count: .max, label: "plain") { $0.contains("mechanism='PLAIN'") }
            let backend = try backend(server, webSockets: faults.transport)
            let scram = await comesUp(backend)
            // The client aborts only while the server waits for it: never after `<success>`.
            faults.relay.inject(.drop, count: .max, label: "abort") { $0 == "<abort xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" }
            let forgedSignature = Data("v=\(Data(count: 20).base64EncodedString())".utf8).base64EncodedString()
            faults.relay.inject(.answer { _ in "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(forgedSignature)</success>" }, direction: .toClient, label: "forged") {
                $0.hasPrefix("<success")
            }
            let forged = await comesUp(backend)
            // A server's first message whose nonce is not the client's: refused, and the client
            // says so (`<abort/>`) before the link ends.
            let foreignNonce = Data("r=someone-elses-nonce,s=QSXCR+Q6sek8bf92,i=4096".utf8).base64EncodedString()
            faults.relay.inject(.answer { _ in "<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(foreignNonce)</challenge>" }, direction: .toClient, label: "nonce") {
                $0.hasPrefix("<challenge")
            }
            let refusedNonce = await comesUp(backend)
            let applied = faults.relay.statistics.applied
            print(
                "xmpp live: a SCRAM login — \(scram), PLAIN logins \(applied["plain"] ?? 0); with the server's signature forged \(applied["forged"] ?? 0) time(s): \(forged); "
                    + "with another nonce: \(refusedNonce), aborts sent \(applied["abort"] ?? 0)"
            )
            #expect(try scram.get())
            #expect(applied["plain"] == nil)
            #expect(applied["forged"] == 1)
            #expect(forged.failureCode == .authenticationFailed)
            #expect(applied["nonce"] == 1 && applied["abort"] == 1)
            #expect(refusedNonce.failureCode == .authenticationFailed)
        }
    }

    /// A server that offers PLAIN only (the relay takes SCRAM out of its features): the login
    /// sends the password where the configuration allows it (to a loopback host here), and
    /// otherwise ends as `fatal` (trying again cannot help).
    @Test func aServerThatOffersOnlyPlain() async throws {
        try await Prosody.withServer { server in
            let faults = XMPPFaults()
            faults.relay.inject(.answer { $0.replacing(/<mechanism>SCRAM-[^<]*<\/mechanism>/, with: "") }, direction: .toClient, count: .max, label: "plain only") {
                $0.contains("<mechanisms")
            }
            let allowed = await comesUp(try backend(server, webSockets: faults.transport))
            let refused = await comesUp(try backend(server, allowsPlainLogin: false, webSockets: faults.transport))
            print("xmpp live: a server offering PLAIN only (\(faults.relay.statistics.applied["plain only"] ?? 0) features rewritten) — allowed: \(allowed), not allowed: \(refused)")
            #expect(try allowed.get())
            #expect(refused.failureCode == .fatal)
            #expect(faults.relay.statistics.applied["plain only"] == 2)
        }
    }

    /// Typing both ways, and its end: the customer's `composing` then `active` reach the agent,
    /// the agent's `composing` then `paused` reach the session as typing and its end.
    @Test func typingStartsAndStopsBothWays() async throws {
        try await Prosody.withServer { server in
            let session = session(try backend(server))
            try await withConnectedRecording(session) { recorder in
                try await server.send(["hello"], from: "agent1", to: Self.customer)
                try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello" }
                let chat = try await session.conversation(ConversationID(Self.agent))
                try await XMPPTestClient.withClient(server, user: "agent1", resource: "watch", presence: true) { agent in
                    _ = try await chat.userTyping(draft: "hel")
                    try await chat.userStoppedTyping()
                    let stanzas = try await agent.waitUntil("the customer's typing and its end", timeout: .seconds(20)) { stanzas in
                        ProsodyControl.activity(in: stanzas, of: Self.customer).typing.contains(false)
                    }
                    let toAgent = ProsodyControl.activity(in: stanzas, of: Self.customer).typing
                    try await agent.chatState("composing", to: Self.customer)
                    try await agent.chatState("paused", to: Self.customer)
                    try await recorder.waitUntil("the agent's typing and its end") { events in
                        events.contains { if case .typing(_, false, _) = $0.kind { return true } else { return false } }
                    }
                    let fromAgent = recorder.events.compactMap { event -> Bool? in
                        if case .typing(let who, let isTyping, _) = event.kind, who == ParticipantID(Self.agent) { return isTyping }
                        return nil
                    }
                    print("xmpp live: typing — to the agent \(toAgent), from the agent \(fromAgent)")
                    #expect(toAgent == [true, false])
                    #expect(fromAgent == [true, false])
                }
            }
        }
    }

    /// Text with a character XML cannot carry is refused before it is sent (the server would end
    /// the stream for it, and the outbox would send it again), and the link goes on.
    @Test func aTextXMLCannotCarryIsRefusedAndTheLinkGoesOn() async throws {
        try await Prosody.withServer { server in
            try await server.send(["hello"], from: "agent1", to: Self.customer)
            let backend = try backend(server)
            let (refused, after) = try await backend.withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { link in
                let bad = OutgoingMessage(clientID: "bad-1", conversationID: ConversationID(Self.agent), content: MessageDraft(text: "bell \u{7}"))
                var refused: SwitchboardError.Code?
                do {
                    _ = try await link.perform(.send(bad))
                } catch let error as SwitchboardError {
                    refused = error.code
                }
                let good = OutgoingMessage(clientID: "good-1", conversationID: ConversationID(Self.agent), content: MessageDraft(text: "after it"))
                guard case .message(let sent) = try await link.perform(.send(good)) else { throw SwitchboardError(.protocolViolation, "no message answered the send") }
                return (refused, sent.serverID?.rawValue ?? "none")
            }
            let archive = try await server.archive(of: "customer", with: Self.agent).compactMap(\.body)
            print("xmpp live: a text with U+0007 — \(refused.map { "\($0)" } ?? "sent"), then a send archived as \(after), archived \(archive)")
            #expect(refused == .invalidArgument)
            #expect(archive == ["hello", "after it"])
        }
    }

    /// A history anchor whose archive id the server no longer has: the page comes from the
    /// anchor's time instead.
    @Test func aHistoryAnchorTheServerDoesNotKnowPagesFromItsTime() async throws {
        try await Prosody.withServer { server in
            try await server.send(["one", "two", "three"], from: "agent1", to: Self.customer)
            let anchor = XMPPArchivePosition(archiveID: "no-such-archive-id", time: Date().addingTimeInterval(60)).anchor
            let page = try await backend(server).withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { link in
                let reply = try await link.perform(.history(HistoryQuery(conversationID: ConversationID(Self.agent), before: anchor, limit: 10)))
                guard case .history(let page) = reply else { throw SwitchboardError(.protocolViolation, "not a page: \(reply)") }
                return page
            }
            let texts = page.messages.map(\.text)
            let ordered = page.messages.map(\.time) == page.messages.map(\.time).sorted()
            print("xmpp live: history from an unknown anchor — \(texts), in order \(ordered), more \(page.hasMore)")
            #expect(texts == ["one", "two", "three"])
            #expect(ordered)
        }
    }

    /// The server goes silent (the relay drops all it sends once the link is up): the heartbeat's
    /// ping goes unanswered, and the link ends as timed out instead of hanging. On a test clock:
    /// the heartbeat fires when the test moves time, never because the machine is slow.
    @Test func aServerThatGoesSilentEndsTheLink() async throws {
        try await Prosody.withServer { server in
            let faults = XMPPFaults()
            let (interval, pongTimeout) = (Duration.seconds(37), Duration.seconds(11))
            let backend = try XMPPBackend(
                configuration: XMPPConfiguration(
                    jid: Self.customer, password: "secret-customer", url: server.url, requestTimeout: .seconds(10),
                    heartbeatInterval: interval, pongTimeout: pongTimeout, allowsPlainText: true
                ),
                logger: .quiet,
                webSockets: faults.transport
            )
            let clock = TestClock()
            let ended = try await backend.withConnection(ConnectionContext(session: "direct", clock: SessionClock(clock), logger: .quiet)) { link in
                faults.relay.inject(.drop, direction: .toClient, count: .max, label: "silenced") { _ in true }
                faults.relay.inject(.drop, count: .max, label: "ping") { $0.contains("urn:xmpp:ping") }
                try await clock.advance(toSleeperDueIn: interval)
                try await clock.advance(toSleeperDueIn: pongTimeout)
                do {
                    for try await _ in link.updates {}
                    return SwitchboardError(.invalidState, "the updates ended without an error")
                } catch {
                    return SwitchboardError.classify(error)
                }
            }
            print(
                "xmpp live: a silent server — pings \(faults.relay.statistics.applied["ping"] ?? 0), frames dropped \(faults.relay.statistics.applied["silenced"] ?? 0), the link ended: \(ended)"
            )
            #expect(faults.relay.statistics.applied["ping"] == 1)
            #expect(ended.code == .timedOut)
        }
    }

    @Test func aMarkerNamingAMessageTheLinkHasNotSeenReadsUpToItsTime() async throws {
        try await Prosody.withServer { server in
            let session = session(try backend(server))
            try await withConnectedRecording(session) { recorder in
                try await server.send(["hello"], from: "agent1", to: Self.customer)
                try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello" }
                let before = Date()
                try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk") { agent in
                    try await agent.displayed("an-id-nobody-sent", to: Self.customer)
                    try await agent.sync()
                }
                let event = try await recorder.first("the agent's read marker") { event in
                    if case .readMarker(let who, _) = event.kind { return who == ParticipantID(Self.agent) }
                    return false
                }
                guard case .readMarker(_, let marker) = event.kind else { return }
                print("xmpp live: a marker naming a message the link has not seen — \(marker)")
                guard case .time(let time) = marker else {
                    Issue.record("a marker on the time it was sent, not \(marker)")
                    return
                }
                #expect(time >= before.addingTimeInterval(-1) && time <= Date())
            }
        }
    }

    /// The user's archive leaves the chat out (MAM preferences `never`): the send goes out, named
    /// by its own id, and the agent gets it once.
    @Test func aSendTheArchiveLeavesOutIsNamedByItsOwnID() async throws {
        try await Prosody.withServer { server in
            try await XMPPTestClient.withClient(server, user: "customer", resource: "prefs") { customer in
                _ = try await customer.request("<iq xmlns='jabber:client' type='set' id='prefs-1'><prefs xmlns='urn:xmpp:mam:2' default='never'/></iq>", id: "prefs-1")
            }
            let session = session(try backend(server))
            try await withConnectedRecording(session) { recorder in
                try await server.send(["hello"], from: "agent1", to: Self.customer)
                try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello" }
                let chat = try await session.conversation(ConversationID(Self.agent))
                let local = try await chat.send(text: "not in my archive")
                let clientID = try #require(local.clientID)
                try await recorder.waitUntil("the send confirmed", check: {
                    try await chat.storedMessages(before: nil, limit: 20).contains { $0.clientID == clientID && $0.deliveryState == .sent }
                })
                let stored = try await chat.storedMessages(before: nil, limit: 20).filter { $0.text == "not in my archive" }
                let mine = try await server.archive(of: "customer", with: Self.agent).filter { $0.body == "not in my archive" }
                let agents = try await XMPPTestClient.withClient(server, user: "agent1", resource: "truth") { agent in
                    try await agent.archive(with: Self.customer)
                }.filter { $0.body == "not in my archive" }
                print(
                    "xmpp live: a send the user's archive leaves out — stored as \(stored.map { $0.serverID?.rawValue ?? "none" }), "
                        + "in the user's archive \(mine.count), in the agent's \(agents.count)"
                )
                #expect(stored.count == 1)
                #expect(stored.first?.serverID?.rawValue == "message:\(clientID.rawValue)")
                #expect(mine.isEmpty)
                #expect(agents.count == 1)
            }
        }
    }

    /// Messages sent while the app was closed (several in one archived second, which Prosody
    /// stamps alike and gives random ids) come from the archive after the stored archive id: each
    /// once, in the archive's order, and nothing stored before is announced again.
    @Test func aRestartOnSQLiteCatchesUpFromTheStoredArchiveID() async throws {
        try await Prosody.withServer { server in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let first = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(first) { recorder in
                try await server.send(["before the restart"], from: "agent1", to: Self.customer)
                try await recorder.first("the first message") { $0.addedMessage?.text == "before the restart" }
            }
            let offline = (0..<10).map { "while closed \($0)" }
            try await server.send(offline, from: "agent1", to: Self.customer)
            let second = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(second) { recorder in
                let chat = try await second.conversation(ConversationID(Self.agent))
                try await recorder.waitUntil("the ten sent while closed announced") { events in
                    events.compactMap(\.addedMessage).filter { $0.text.hasPrefix("while closed") }.count >= 10
                }
                try await recorder.waitUntil("the ten stored", check: { try await chat.storedMessages(before: nil, limit: 100).count == 11 })
                let added = recorder.events.compactMap(\.addedMessage).map(\.text)
                let stored = try await chat.storedMessages(before: nil, limit: 100)
                let archive = try await server.archive(of: "customer", with: Self.agent)
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
            try await server.send(texts, from: "agent1", to: Self.customer)
            let session = session(try backend(server))
            try await withConnectedRecording(session) { recorder in
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
                let archive = try await server.archive(of: "customer", with: Self.agent)
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
            try await withConnectedRecording(first) { recorder in
                try await server.send(["hello"], from: "agent1", to: Self.customer)
                try await recorder.first("the agent's message") { $0.addedMessage?.text == "hello" }
                try await XMPPTestClient.withClient(server, user: "customer", resource: "desk", presence: true) { desk in
                    _ = try await desk.send("from my desk", to: Self.agent)
                }
                try await recorder.first("the desk's message, from the archive") { $0.addedMessage?.text == "from my desk" }
                try await server.send(["answer to the desk"], from: "agent1", to: Self.customer)
                try await recorder.first("the answer") { $0.addedMessage?.text == "answer to the desk" }
            }
            let second = session(try backend(server), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(second) { recorder in
                // What comes live after the link's catch-up: anything announced before it was
                // announced again.
                try await server.send(["after the restart"], from: "agent1", to: Self.customer)
                try await recorder.first("the message after the restart") { $0.addedMessage?.text == "after the restart" }
                let chat = try await second.conversation(ConversationID(Self.agent))
                let archive = try await server.archive(of: "customer", with: Self.agent)
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
            try await server.send(["one", "two", "three"], from: "agent1", to: Self.customer)
            let since = Date().addingTimeInterval(-60)
            let refused = XMPPCursor(position: XMPPArchivePosition(archiveID: "no-such-archive-id", time: since)).token
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
            let ahead = XMPPCursor(position: XMPPArchivePosition(archiveID: "no-such-archive-id", time: Date().addingTimeInterval(3600))).token
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
            try await withConnectedRecording(session) { recorder in
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
                try await server.send(["sentinel"], from: "agent1", to: Self.customer)
                try await recorder.first("the sentinel") { $0.addedMessage?.text == "sentinel" }
                let problems = recorder.events.dropFirst(mark).filter { if case .error = $0.kind { return true } else { return false } }
                let stored = try await chat.storedMessages(before: nil, limit: 20).map(\.text)
                // What the agent's client gets: the server archived the user's correction and
                // retraction naming the message by the id the agent knows it by.
                let archive = try await server.archive(of: "customer", with: Self.agent)
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

extension Result where Failure == SwitchboardError {
    var failureCode: SwitchboardError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
