import Foundation
import Switchboard
import SynapseHarness
import SwitchboardEmulation
import SwitchboardMatrix
import SwitchboardSQLite
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The adapter against a real Synapse: the app is a `ChatSession` on `MatrixBackend`; the other
/// side is a second Matrix user driven through the client-server API (``MatrixTestUser``).
/// Skipped, saying so, when Synapse is not installed.
@Suite(.serialized, Synapse.needed, .timeLimit(.minutes(3)))
struct MatrixLiveTests {
    func backend(_ server: SynapseServer, _ user: MatrixTestUser, timelineLimit: Int = 20, through proxy: String? = nil) throws -> MatrixBackend {
        try MatrixBackend(
            configuration: MatrixConfiguration(
                homeserver: proxy ?? server.baseURL, login: .password(user: user.localPart, password: user.password),
                deviceID: "SWITCHBOARDTEST", syncTimeout: .seconds(5), requestTimeout: .seconds(10),
                timelineLimit: timelineLimit, allowsPlainText: true
            )
        )
    }

    func session(_ backend: MatrixBackend, store: any ChatStore = InMemoryChatStore()) -> ChatSession {
        ChatSession(backend: backend, store: store, configuration: .fastForTests, logger: .quiet)
    }

    /// The agent's room with the customer invited; the customer's session joins it.
    func joinedRoom(_ session: ChatSession, _ recorder: EventRecorder, agent: MatrixTestUser, customer: MatrixTestUser) async throws -> ConversationID {
        let room = try await agent.createRoom(name: "Support", inviting: [customer.userID])
        try await recorder.first("the invitation") { event in
            if case .conversationAdded(let info) = event.kind { return info.id == room }
            return false
        }
        try await MatrixRequests(session: session).join(room.rawValue)
        try await recorder.waitUntil("the room joined, with both members", check: {
            let info = try await session.conversation(room).info()
            return info.state == .active && info.participants.count == 2
        })
        return room
    }

    @Test func aConversationBothWays() async throws {
        try await Synapse.withUsers { server, agent, customer in
            let session = session(try backend(server, customer))
            try await withConnectedRecording(session) { recorder in
                let room = try await joinedRoom(session, recorder, agent: agent, customer: customer)
                let chat = try await session.conversation(room)

                // Agent → app.
                let hello = try await agent.send("Hello, how can I help?", in: room)
                try await recorder.first("the agent's message") { $0.addedMessage?.serverID == hello }

                // App → agent: stored once, with the server's id; the server has it once.
                _ = try await chat.send(text: "Where is my order?")
                try await recorder.waitUntil("the send confirmed", check: {
                    try await chat.storedMessages(before: nil, limit: 10).contains { $0.text == "Where is my order?" && $0.serverID != nil }
                })
                let serverTexts = try await agent.texts(in: room)
                #expect(serverTexts.filter { $0 == "Where is my order?" }.count == 1)

                // Typing both ways.
                _ = try await chat.userTyping(draft: nil)
                try await agent.waitForSync("the customer typing") { sync in
                    sync["rooms"]?["join"]?[room.rawValue]?["ephemeral"]?["events"]?.arrayValue?.contains {
                        $0["type"]?.stringValue == "m.typing" && ($0["content"]?["user_ids"]?.arrayValue ?? []).contains(.string(customer.userID))
                    } ?? false
                }
                try await agent.typing(true, in: room)
                try await recorder.first("the agent typing") { event in
                    if case .typing(let who, true, _) = event.kind { return who.rawValue == agent.userID }
                    return false
                }

                // Read markers both ways.
                try await chat.markRead()
                try await agent.waitForSync("the customer's read receipt") { sync in
                    sync["rooms"]?["join"]?[room.rawValue]?["ephemeral"]?["events"]?.arrayValue?.contains {
                        $0["type"]?.stringValue == "m.receipt" && $0.jsonString.contains(customer.userID)
                    } ?? false
                }
                let mine = try #require(try await chat.storedMessages(before: nil, limit: 10).first { $0.text == "Where is my order?" }?.serverID)
                try await agent.markRead(mine, in: room)
                try await recorder.first("the agent's read marker") { event in
                    if case .readMarker(let who, .message(let id)) = event.kind { return who.rawValue == agent.userID && id == mine }
                    return false
                }

                // An edit and a redaction by the agent.
                try await agent.edit(hello, in: room, to: "Hello! How can I help?")
                try await recorder.first("the edit") { $0.updatedMessage.map { $0.serverID == hello && $0.text == "Hello! How can I help?" && $0.isEdited } ?? false }
                let typo = try await agent.send("typo", in: room)
                try await recorder.first("the typo") { $0.addedMessage?.serverID == typo }
                try await agent.redact(typo, in: room)
                try await recorder.first("the redaction") { event in
                    if case .messageRemoved(let id) = event.kind { return id == typo }
                    return false
                }

                // The app edits its own message; the server shows the replacement.
                try await chat.edit(mine, text: "Where is order 1234?")
                try await recorder.first("the app's edit echoed") { $0.updatedMessage.map { $0.serverID == mine && $0.text == "Where is order 1234?" } ?? false }

                let stored = try await chat.storedMessages(before: nil, limit: 100)
                #expect(stored.map(\.text) == ["Hello! How can I help?", "Where is order 1234?"])
                let added = recorder.events.compactMap(\.addedMessage).compactMap(\.serverID)
                print("matrix live: a conversation both ways on Synapse — \(stored.count) messages stored, \(added.count) added events, duplicates \(added.count - Set(added).count), typing and read markers both ways, 1 edit each way, 1 redaction")
            }
        }
    }

    @Test func roomsAsConversationsWithTheirLifecycle() async throws {
        try await Synapse.withUsers { server, agent, customer in
            let session = session(try backend(server, customer))
            try await withConnectedRecording(session) { recorder in
                // Start: a private room with a title, the agent invited.
                let chat = try await session.startConversation(
                    ConversationDraft(kind: .group, title: "Billing", participants: [Participant(id: ParticipantID(agent.userID), role: .user)])
                )
                try await agent.waitForSync("the invitation") { $0["rooms"]?["invite"]?[chat.id.rawValue] != nil }
                try await agent.join(chat.id)
                try await recorder.first("the agent joined") { event in
                    if case .participantsAdded(let added) = event.kind { return added.contains { $0.id.rawValue == agent.userID } }
                    return false
                }
                // Title and topic.
                try await chat.update(ConversationChanges(title: "Billing and refunds", customData: ["topic": "Order 1234"]))
                let state = try await agent.call("GET", "/_matrix/client/v3/rooms/\(MatrixTestUser.encode(chat.id.rawValue))/state")
                let events = state.arrayValue ?? []
                #expect(events.contains { $0["type"]?.stringValue == "m.room.name" && $0["content"]?["name"]?.stringValue == "Billing and refunds" })
                #expect(events.contains { $0["type"]?.stringValue == "m.room.topic" && $0["content"]?["topic"]?.stringValue == "Order 1234" })
                try await recorder.waitUntil("the new title stored", check: { try await chat.info().title == "Billing and refunds" })
                // The creator outranks everyone; a member may not manage participants.
                let info = try await chat.info()
                #expect(info.participants.first { $0.id.rawValue == customer.userID }?.permissions.isOwner == true)
                #expect(info.participants.first { $0.id.rawValue == agent.userID }?.permissions.canManageParticipants == false)
                // Remove (kick) the agent, then leave.
                try await chat.removeParticipants([ParticipantID(agent.userID)])
                try await recorder.first("the agent removed") { event in
                    if case .participantsRemoved(let removed) = event.kind { return removed.contains(ParticipantID(agent.userID)) }
                    return false
                }
                try await chat.close()
                try await recorder.first("the room left") { event in
                    if case .conversationRemoved = event.kind { return event.conversationID == chat.id }
                    return false
                }
                let remaining = try await session.conversations().map(\.id)
                #expect(!remaining.contains(chat.id))
                print("matrix live: a room's lifecycle — created with an invitation, joined, renamed, topic set, a member kicked, left; the store follows each step")
            }
        }
    }

    @Test func filesBothWays() async throws {
        try await Synapse.withUsers { server, agent, customer in
            let session = session(try backend(server, customer))
            try await withConnectedRecording(session) { recorder in
                let room = try await joinedRoom(session, recorder, agent: agent, customer: customer)
                let chat = try await session.conversation(room)
                // The app sends a file: uploaded, then an `m.file` event naming it.
                let bytes = Data((0..<3000).map { UInt8($0 % 251) })
                let path = server.directory.appendingPathComponent("receipt.pdf")
                try bytes.write(to: path)
                let pending = try await chat.send(
                    MessageDraft(text: "my receipt", attachments: [Message.Attachment(name: "receipt.pdf", mimeType: "application/pdf", url: path)])
                )
                try await recorder.first("the file confirmed") { event in
                    event.updatedMessage.map { $0.clientID == pending.clientID && $0.serverID != nil } ?? false
                }
                let event = try #require(try await agent.messages(in: room).last)
                #expect(event["content"]?["msgtype"]?.stringValue == "m.file")
                #expect(event["content"]?["filename"]?.stringValue == "receipt.pdf")
                #expect(event["content"]?["body"]?.stringValue == "my receipt")
                let mxc = try #require(event["content"]?["url"]?.stringValue)
                let parts = mxc.dropFirst("mxc://".count).split(separator: "/")
                let download = try await Synapse.transport.get(
                    server.baseURL + "/_matrix/client/v1/media/download/\(parts[0])/\(parts[1])",
                    headers: [("Authorization", "Bearer \(agent.token)")], timeout: .seconds(10)
                )
                #expect(download.status == 200 && download.body == bytes, "the agent downloads the same bytes")
                let stored = try #require(try await chat.storedMessages(before: nil, limit: 10).first { $0.clientID == pending.clientID })
                #expect(stored.kind == .file && stored.attachments.first?.name == "receipt.pdf")
                #expect(stored.attachments.first?.url?.absoluteString.contains("/_matrix/client/v1/media/download/") == true)

                // The agent sends an image: the app gets a file message with its download URL.
                let upload = try await Synapse.transport.postData(
                    server.baseURL + "/_matrix/media/v3/upload?filename=photo.png", data: Data([0x89, 0x50, 0x4E, 0x47]), contentType: "image/png",
                    headers: [("Authorization", "Bearer \(agent.token)")], timeout: .seconds(10)
                )
                let photo = try #require(try JSONValue(parsing: upload.body)["content_uri"]?.stringValue)
                _ = try await agent.call(
                    "PUT", "/_matrix/client/v3/rooms/\(MatrixTestUser.encode(room.rawValue))/send/m.room.message/photo",
                    body: ["msgtype": "m.image", "body": "photo.png", "url": .string(photo), "info": ["mimetype": "image/png", "w": 640, "h": 480, "size": 4]]
                )
                let received = try await recorder.first("the agent's image") { $0.addedMessage?.kind == .file && $0.addedMessage?.sender?.rawValue == agent.userID }
                let image = try #require(received.addedMessage?.attachments.first)
                #expect(image.mimeType == "image/png" && image.imageSize == .init(width: 640, height: 480))
                #expect(image.url?.absoluteString.hasSuffix(photo.dropFirst("mxc://".count)) == true)
                print("matrix live: files both ways — 3,000 bytes uploaded and downloaded back equal, an image received with its size and download URL")
            }
        }
    }

    @Test func aResentTransactionIsDeliveredOnce() async throws {
        try await Synapse.withUsers { server, agent, customer in
            let backend = try backend(server, customer)
            let session = session(backend)
            let room = try await withConnectedRecording(session) { recorder in try await joinedRoom(session, recorder, agent: agent, customer: customer) }
            // The same send three times on one link, as the outbox resends after a lost answer:
            // the client id is the transaction id, so the server keeps one event.
            let clientID = ClientMessageID("resend-\(UUID().uuidString)")
            let outgoing = OutgoingMessage(clientID: clientID, conversationID: room, content: MessageDraft(text: "sent three times"))
            let eventIDs = try await backend.withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { link in
                var ids: Set<MessageID> = []
                for _ in 0..<3 {
                    if case .message(let message) = try await link.perform(.send(outgoing)), let id = message.serverID { ids.insert(id) }
                }
                return ids
            }
            let texts = try await agent.texts(in: room).filter { $0 == "sent three times" }
            print("matrix live: one transaction sent 3 times — \(eventIDs.count) event id, \(texts.count) on the server, duplicated \(texts.count - 1)")
            #expect(eventIDs.count == 1)
            #expect(texts.count == 1)
        }
    }

    @Test func aSendWhoseAnswerIsLostIsDeliveredOnce() async throws {
        try await Synapse.withUsers { server, agent, customer in
            try await FaultProxy.withRunning(upstream: server.baseURL, logger: .quiet) { proxy, url in
                let session = session(try backend(server, customer, through: url))
                try await withConnectedRecording(session) { recorder in
                    let room = try await joinedRoom(session, recorder, agent: agent, customer: customer)
                    let chat = try await session.conversation(room)
                    // Synapse stores the event; the answer never reaches the app, whose outbox
                    // sends again with the same transaction id.
                    proxy.inject(.loseAnswer, where: { $0.path.contains("/send/m.room.message/") })
                    let pending = try await chat.send(text: "the answer was lost")
                    try await recorder.first("the send confirmed") { event in
                        event.updatedMessage.map { $0.clientID == pending.clientID && $0.serverID != nil } ?? false
                    }
                    let onServer = try await agent.texts(in: room).filter { $0 == "the answer was lost" }.count
                    let stored = try await chat.storedMessages(before: nil, limit: 100).filter { $0.clientID == pending.clientID }.count
                    let attempts = await session.statistics.sendAttemptsFailed
                    print("matrix live: a send whose answer was lost — \(attempts) failed attempt, \(onServer) on the server, \(stored) stored, duplicated \(onServer - 1)")
                    #expect(onServer == 1)
                    #expect(stored == 1)
                }
            }
        }
    }

    @Test func aRateLimitedSendWaitsAndGoesThroughOnce() async throws {
        try await Synapse.withUsers { server, agent, customer in
            try await FaultProxy.withRunning(upstream: server.baseURL, logger: .quiet) { proxy, url in
                let session = session(try backend(server, customer, through: url))
                try await withConnectedRecording(session) { recorder in
                    let room = try await joinedRoom(session, recorder, agent: agent, customer: customer)
                    let chat = try await session.conversation(room)
                    // Synapse's own answer to a client over its rate: 429 with how long to wait.
                    proxy.inject(
                        .answer(status: 429, body: #"{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":300}"#),
                        where: { $0.path.contains("/send/m.room.message/") }
                    )
                    let pending = try await chat.send(text: "slowly")
                    try await recorder.first("the send confirmed") { event in
                        event.updatedMessage.map { $0.clientID == pending.clientID && $0.serverID != nil } ?? false
                    }
                    let onServer = try await agent.texts(in: room).filter { $0 == "slowly" }.count
                    let retries = await session.statistics.sendRetries
                    print("matrix live: a rate-limited send (429, retry_after_ms 300) — \(retries) retry, \(onServer) on the server")
                    #expect(onServer == 1)
                    #expect(retries >= 1)
                }
            }
        }
    }

    /// Messages both ways while the proxy drops the link, loses `/sync` and send answers, cuts
    /// sends, delays requests and repeats `/sync` answers, chosen by a seed: nothing lost, nothing
    /// twice, each side's messages in the server's order.
    @Test(arguments: [16, 23, 42] as [UInt64])
    func messagesBothWaysSurviveFaults(seed: UInt64) async throws {
        try await Synapse.withUsers { server, agent, customer in
            try await FaultProxy.withRunning(upstream: server.baseURL, logger: .quiet) { proxy, url in
                let session = session(try backend(server, customer, timelineLimit: 5, through: url))
                try await withConnectedRecording(session) { recorder in
                    let room = try await joinedRoom(session, recorder, agent: agent, customer: customer)
                    let chat = try await session.conversation(room)
                    var random = SeededRandomNumberGenerator(seed: seed)
                    let rounds = 12
                    var faults: [String: Int] = [:]
                    let faultedSends = Locked(Set<String>())
                    for round in 0..<rounds {
                        let fault = Self.injectFault(Int.random(in: 0..<6, using: &random), into: proxy, faultedSends: faultedSends)
                        faults[fault, default: 0] += 1
                        for index in 0..<5 {
                            try await agent.send("agent \(round).\(index)", in: room)
                            _ = try await chat.send(text: "app \(round).\(index)")
                        }
                    }
                    let total = rounds * 10
                    var allStored = true
                    do {
                        try await recorder.waitUntil("every message stored", timeout: .seconds(60), check: {
                            try await chat.storedMessages(before: nil, limit: 1000).filter { $0.serverID != nil }.count >= total
                        })
                    } catch {
                        // What a reader of a failed run needs: how far it got and what is stuck.
                        let stored = try await chat.storedMessages(before: nil, limit: 1000)
                        let unconfirmed = stored.filter { $0.serverID == nil }.map { "\($0.text): \($0.deliveryState)" }
                        print("matrix live: seed \(seed) stuck — faults \(faults), stored \(stored.count - unconfirmed.count) of \(total) confirmed, unconfirmed \(unconfirmed), pending sends \(await session.pendingSends.count), statistics \(await session.statistics)")
                        allStored = false
                    }
                    try await recorder.waitUntil("the outbox empty", timeout: .seconds(60), check: { await session.pendingSends.isEmpty })
                    let log = try await agent.messages(in: room)
                    let truth = log.compactMap { $0["event_id"]?.stringValue }
                    let stored = try await chat.storedMessages(before: nil, limit: 1000)
                    let serverTexts = try await agent.texts(in: room)
                    // Every stored message row (room notices aside) against the room's messages:
                    // phantom rows and leftover pending copies count too. Order is checked per
                    // side below, where time can order it.
                    let audit = StoreAudit.compare(
                        server: log.compactMap { event in
                            guard let id = event["event_id"]?.stringValue, let body = event["content"]?["body"]?.stringValue else { return nil }
                            return ServerMessage(
                                serverID: MessageID(id), clientID: nil, text: body, fromCustomer: event["sender"]?.stringValue == customer.userID, sequence: nil
                            )
                        },
                        stored: stored.filter { $0.kind != .system },
                        sent: (0..<rounds).flatMap { round in (0..<5).map { "app \(round).\($0)" } }
                    )
                    let lost = audit.lost
                    let duplicated = audit.duplicated
                    // Each side's messages in the server's order (the two sides interleave within a
                    // millisecond, where time cannot order them).
                    var outOfOrder = 0
                    for prefix in ["agent ", "app "] {
                        let side: [String] = stored.filter { $0.text.hasPrefix(prefix) }.compactMap { $0.serverID?.rawValue }
                        let wanted = Set(side)
                        let expected: [String] = truth.filter { wanted.contains($0) }
                        if side != expected { outOfOrder += 1 }
                    }
                    let injected = faults.values.reduce(0, +)
                    let kinds = faults.keys.sorted().map { key in "\(key) \(faults[key] ?? 0)" }.joined(separator: ", ")
                    print("matrix live: seed \(seed): \(total) messages both ways through \(injected) faults (\(kinds)) — on the server \(serverTexts.count), \(audit); out of order per side \(outOfOrder)")
                    #expect(serverTexts.count == total)
                    #expect(duplicated == 0 && outOfOrder == 0)
                    #expect(audit.phantoms == 0 && audit.leftovers == 0, "no phantom row, no pending copy left beside its send")
                    // Under CI load seed 42 once ended with 6 agent messages never stored: a second
                    // `limited` sync came while the first gap was paged, and its own gap was never
                    // asked for (fixed in the engine; WindowBackfillTests reproduce it).
                    #expect(allStored && lost == 0, "seed \(seed): \(lost) lost")
                }
            }
        }
    }

    /// One of six faults, by number; returns its name.
    /// One fault. A send fault takes a message no earlier fault took: faults injected faster
    /// than the sends consume them (a loaded machine) would otherwise pile onto one message, and a
    /// send whose link died five times fails by design (`maxLinkLossesPerSend`) — CI saw seed 23
    /// time out that way.
    static func injectFault(_ number: Int, into proxy: FaultProxy, faultedSends: Locked<Set<String>>) -> String {
        let isSync: @Sendable (FaultProxy.Request) -> Bool = { $0.path.hasSuffix("/sync") }
        let isSend: @Sendable (FaultProxy.Request) -> Bool = { request in
            guard request.path.contains("/send/m.room.message/") else { return false }
            let transaction = String(request.path.split(separator: "/").last ?? "")
            return faultedSends.withLock { $0.insert(transaction).inserted }
        }
        switch number {
        case 0:
            proxy.disconnectAll()
            return "disconnect"
        case 1:
            proxy.inject(.loseAnswer, where: isSync)
            return "lost sync answer"
        case 2:
            proxy.inject(.loseAnswer, where: isSend)
            return "lost send answer"
        case 3:
            proxy.inject(.cut, where: isSend)
            return "cut send"
        case 4:
            proxy.inject(.delay(.milliseconds(300)))
            return "delayed request"
        default:
            proxy.inject(.repeatAnswer, answerMatches: { String(decoding: $0, as: UTF8.self).contains("m.room.message") }, where: isSync)
            return "repeated sync answer"
        }
    }

    @Test func aGapIsFilledFromHistoryWithNoDuplicate() async throws {
        try await Synapse.withUsers { server, agent, customer in
            // A timeline of 5 per sync: 40 messages sent while the app is away make a gap.
            let session = session(try backend(server, customer, timelineLimit: 5))
            try await withConnectedRecording(session) { recorder in
                let room = try await joinedRoom(session, recorder, agent: agent, customer: customer)
                for index in 0..<3 { try await agent.send("before \(index)", in: room) }
                try await recorder.waitUntil("the first three") { events in events.compactMap(\.addedMessage).filter { $0.text.hasPrefix("before") }.count == 3 }
                try await session.pause()
                for index in 0..<40 { try await agent.send("away \(index)", in: room) }
                try await session.resume()
                let chat = try await session.conversation(room)
                try await recorder.waitUntil("all 43 stored", check: { try await chat.storedMessages(before: nil, limit: 1000).count == 43 })
                let stored = try await chat.storedMessages(before: nil, limit: 1000).map(\.text)
                let expected = (0..<3).map { "before \($0)" } + (0..<40).map { "away \($0)" }
                let statistics = await session.statistics
                let ids = try await chat.storedMessages(before: nil, limit: 1000).compactMap(\.serverID)
                print("matrix live: a gap of 40 behind a timeline of 5 — stored \(stored.count) of 43, lost \(43 - Set(stored).count), duplicated \(ids.count - Set(ids).count), out of order \(stored == expected ? 0 : 1), gaps detected \(statistics.gapsDetected), backfill requests \(statistics.backfillRequests)")
                #expect(stored == expected)
                #expect(statistics.gapsDetected >= 1)
            }
        }
    }

    @Test func aRestartWithTheSQLiteStoreResumesFromTheStoredSince() async throws {
        try await Synapse.withUsers { server, agent, customer in
            let path = server.directory.appendingPathComponent("app.sqlite").path
            let first = session(try backend(server, customer), store: try SQLiteChatStore(path: path))
            let room = try await withConnectedRecording(first) { recorder in
                let room = try await joinedRoom(first, recorder, agent: agent, customer: customer)
                try await agent.send("before the restart", in: room)
                try await recorder.first("the first message") { $0.addedMessage?.text == "before the restart" }
                return room
            }
            for index in 0..<10 { try await agent.send("while closed \(index)", in: room) }
            let second = session(try backend(server, customer), store: try SQLiteChatStore(path: path))
            try await withConnectedRecording(second) { recorder in
                let chat = try await second.conversation(room)
                // The store has them before the bus delivers them to the recorder: wait for both.
                try await recorder.waitUntil("the ten sent while closed announced") { events in
                    events.compactMap(\.addedMessage).filter { $0.text.hasPrefix("while closed") }.count >= 10
                }
                try await recorder.waitUntil("the ten sent while closed stored", check: { try await chat.storedMessages(before: nil, limit: 100).count == 11 })
                let added = recorder.events.compactMap(\.addedMessage).map(\.text)
                let stored = try await chat.storedMessages(before: nil, limit: 100).map(\.text)
                print("matrix live: a restart on SQLite — \(added.count) messages announced after it (10 new), \(stored.count) stored, lost \(11 - stored.count), duplicated \(added.count - Set(added).count)")
                #expect(stored == ["before the restart"] + (0..<10).map { "while closed \($0)" })
                #expect(added == (0..<10).map { "while closed \($0)" }, "only what came while closed is new")
            }
        }
    }

    @Test func historyPagesBackToTheFirstMessage() async throws {
        try await Synapse.withUsers { server, agent, customer in
            let room = try await agent.createRoom(name: "Archive", inviting: [customer.userID])
            try await customer.join(room)
            for index in 0..<120 { try await agent.send("old \(index)", in: room) }
            let session = session(try backend(server, customer, timelineLimit: 10))
            try await withConnectedRecording(session) { recorder in
                try await recorder.first("the room") { event in
                    if case .conversationAdded(let info) = event.kind { return info.id == room }
                    return false
                }
                let chat = try await session.conversation(room)
                try await recorder.waitUntil("the recent window", check: { try await chat.storedMessages(before: nil, limit: 200).count >= 10 })
                var oldest = try await chat.storedMessages(before: nil, limit: 200).first?.orderKey
                var pages = 0
                while true {
                    let page = try await chat.history(before: oldest, limit: 50)
                    guard let first = page.first, first.orderKey != oldest else { break }
                    oldest = first.orderKey
                    pages += 1
                }
                let stored = try await chat.storedMessages(before: nil, limit: 200).map(\.text)
                print("matrix live: history paging — \(pages) pages, \(stored.count) of 120 stored, in order \(stored == (0..<120).map { "old \($0)" })")
                #expect(stored == (0..<120).map { "old \($0)" })
            }
        }
    }

    @Test func aWrongPasswordEndsWithAuthenticationFailed() async throws {
        try await Synapse.withServer { server in
            let customer = try await server.register("alice")
            let backend = try MatrixBackend(
                configuration: MatrixConfiguration(homeserver: server.baseURL, login: .password(user: customer.localPart, password: "wrong"), allowsPlainText: true)
            )
            do {
                try await backend.withConnection(ConnectionContext(session: "direct", clock: .continuous, logger: .quiet)) { _ in }
                Issue.record("a wrong password connected")
            } catch let error as SwitchboardError {
                #expect(error.code == .authenticationFailed)
                #expect(error.vendorCode == "M_FORBIDDEN")
            }
        }
    }
}
