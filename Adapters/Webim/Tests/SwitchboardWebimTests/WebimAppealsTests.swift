import Foundation
import Switchboard
import SwitchboardSQLite
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardWebim
import SwitchboardTransport
import Testing
@_spi(TestKit) import WebimEmulator
import SwitchboardEmulation

/// Offline appeals (Mobile SDK 2.3, protocols/webim.md §12a) end to end against the emulator in
/// the same process. The emulator and the sessions share one test clock: the operator robot's "later" answers and
/// the engine's poll interval move only when a test advances it.
@Suite(.timeLimit(.minutes(2)))
struct WebimAppealsTests {
    struct Rig: Sendable {
        let server: WebimServer
        let baseURL: String
        let network: InProcessNetwork
        let clock: TestClock
        let robot: WebimOperatorRobot

        func backend(userToken: String = "user-token-1") throws -> WebimAppealsBackend {
            try WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: baseURL, userToken: userToken), transport: network.http)
        }

        func session(_ backend: WebimAppealsBackend, store: any ChatStore = InMemoryChatStore()) -> ChatSession {
            var configuration = SessionConfiguration.fastForTests
            configuration.pollInterval = .seconds(30)
            return ChatSession(
                backend: backend, store: store, configuration: configuration, clock: SessionClock(clock),
                random: SeededRandomNumberGenerator(seed: 13), logger: .quiet
            )
        }

        func visitor(of token: String = "user-token-1") throws -> String {
            try #require(server.visitor(ofUserToken: token))
        }
    }

    func withRig<T: Sendable>(_ body: @Sendable (Rig) async throws -> T) async throws -> T {
        let clock = TestClock()
        let server = WebimServer(configuration: .init(deltaHold: .seconds(2)), clock: SessionClock(clock))
        let (baseURL, network) = WebimEmulator(server: server, logger: .quiet).inProcess()
        return try await body(Rig(server: server, baseURL: baseURL, network: network, clock: clock, robot: server.robot(id: 3, name: "Olga")))
    }

    /// The same user deletes the appeal from another device (a session of its own).
    func deleteOnAnotherDevice(_ appeal: ConversationID, _ rig: Rig) async throws {
        let other = rig.session(try rig.backend())
        try await withConnectedRecording(other) { _ in
            try await other.refresh()
            try await (try await other.conversation(appeal)).archive()
        }
    }

    /// Moves the test clock past each short timer (a resend, a reconnect's backoff: under a
    /// second) as it is set, until `done`. The timers follow real HTTP answers, so how many there
    /// are depends on where the dropped answer cut the link; the wait is bounded by 30 s of wall
    /// time, yielding, never sleeping.
    func advanceShortTimers(_ clock: TestClock, until what: String, _ done: () -> Bool) async throws {
        let started = ContinuousClock.now
        var advanced = 0
        while !done() {
            guard ContinuousClock.now - started < .seconds(30) else {
                throw SwitchboardError(.timedOut, "\(what): not done after \(advanced) timers; pending \(clock.pendingDeadlines)")
            }
            if let next = clock.pendingDeadlines.first, next < .seconds(1) {
                clock.advance(by: .seconds(1))
                advanced += 1
            }
            await Task.yield()
        }
    }

    @Test func aNewAppealIsAnsweredOnALaterPollAndMarkedRead() async throws {
        try await withRig { rig in
            rig.server.answerAppealsLater(as: rig.robot, after: .seconds(45)) { "We will look at: \($0)" }
            let session = rig.session(try rig.backend())
            try await withConnectedRecording(session) { recorder in
                let appeal = try await session.startConversation(
                    ConversationDraft(title: "Order 1234", customFields: ["department-key": "sales"], firstMessage: MessageDraft(text: "my order is late"))
                )
                #expect(try await appeal.storedMessages(before: nil, limit: .max).map(\.text) == ["my order is late"], "stored when the start returns")
                let sent = try #require(rig.server.lastParameters(of: "chat.offline_message"))
                #expect(sent["chat-id"] == nil && sent["department-key"] == "sales" && sent["subject"] == "Order 1234")
                // The timed polls: at 30 s nothing yet, at 60 s the answer (due at 45 s).
                #expect(await rig.clock.waitForSleepers())
                rig.clock.advance(by: .seconds(30))
                try await waitUntil("the first timed poll", timeout: .seconds(20), signal: rig.server.changes) { rig.server.historySinces.count >= 2 }
                #expect(recorder.events.compactMap(\.addedMessage).filter { $0.senderRole == .agent }.isEmpty)
                #expect(await rig.clock.waitForSleepers())
                rig.clock.advance(by: .seconds(30))
                let answer = try await recorder.first("the answer on a later poll") { $0.addedMessage?.senderRole == .agent }
                #expect(answer.conversationID == appeal.id)
                #expect(answer.addedMessage?.text == "We will look at: my order is late")
                #expect(try await appeal.info().unreadCount == 1)
                #expect(try await appeal.info().state == .active, "the operator took it")
                try await appeal.markRead()
                let visitor = try rig.visitor()
                try await waitUntil("read on the server", timeout: .seconds(20), signal: rig.server.changes) {
                    rig.server.appeals(ofVisitor: visitor).first?.unread == false
                }
                try await session.refresh()
                #expect(try await appeal.info().unreadCount == 0)
                let polls = await session.statistics.polls
                print("webim appeals: 1 appeal, answer after 45 s seen on poll \(polls) of the 30 s schedule, unread 1 → 0 after chat.read_by_visitor")
            }
        }
    }

    @Test func sendsTextAndFilesIntoAnAppealOnce() async throws {
        try await withRig { rig in
            let session = rig.session(try rig.backend())
            try await withConnectedRecording(session) { recorder in
                let appeal = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "first")))
                try await appeal.send(text: "more details")
                try await recorder.first("confirmed") { $0.updatedMessage?.text == "more details" && $0.updatedMessage?.serverID != nil }
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("photo-\(UUID().uuidString).png")
                try Data((0..<2048).map { UInt8($0 % 256) }).write(to: file)
                defer { try? FileManager.default.removeItem(at: file) }
                try await appeal.send(MessageDraft(text: "photo", kind: .file, attachments: [Message.Attachment(name: file.lastPathComponent, mimeType: "image/png", url: file)]))
                let uploaded = try await recorder.first("the file message") { $0.updatedMessage?.kind == .file && $0.updatedMessage?.serverID != nil }
                #expect(uploaded.updatedMessage?.attachments.first?.size == 2048)
                // A resend with the same client id (its answer lost) makes no second message.
                rig.server.inject(.dropConnection, on: .action, action: "chat.offline_message")
                try await appeal.send(text: "sent once")
                try await advanceShortTimers(rig.clock, until: "sent once confirmed") {
                    recorder.events.contains { $0.updatedMessage?.text == "sent once" && $0.updatedMessage?.serverID != nil }
                }
                try await session.refresh(forced: true)
                let server = rig.server.appeals(ofVisitor: try rig.visitor())
                #expect(server.count == 1)
                #expect(server[0].texts.filter { $0 == "sent once" }.count == 1)
                let stored = try await appeal.storedMessages(before: nil, limit: .max)
                #expect(stored.count == server[0].texts.count, "stored \(stored.map(\.text)) vs server \(server[0].texts)")
                print("webim appeals: \(server[0].texts.count) messages (text, file, a resend after a dropped answer), \(stored.count) stored, duplicates 0")
            }
        }
    }

    @Test func deletingAnAppealRemovesItAndAMissingOneCountsAsDeleted() async throws {
        try await withRig { rig in
            let session = rig.session(try rig.backend())
            try await withConnectedRecording(session) { recorder in
                let kept = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "keep me")))
                let gone = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "delete me")))
                try await gone.archive()
                #expect(try await session.conversations().map(\.id) == [kept.id])
                #expect(rig.server.appeals(ofVisitor: try rig.visitor()).count == 1)
                // Deleted elsewhere first: chat-not-found counts as done.
                try await deleteOnAnotherDevice(kept.id, rig)
                try await kept.archive()
                #expect(try await session.conversations().isEmpty)
                #expect(rig.server.actions.filter { $0.action == "chat.delete" }.count == 3)
            }
        }
    }

    @Test func aForcedReReadAddsNothingTwiceAndDropsWhatTheServerNoLongerHas() async throws {
        try await withRig { rig in
            let session = rig.session(try rig.backend())
            try await withConnectedRecording(session) { recorder in
                var ids: [ConversationID] = []
                for index in 1...3 {
                    ids.append(try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "appeal \(index)"))).id)
                }
                let visitor = try rig.visitor()
                for (index, id) in ids.enumerated() { try rig.robot.answerAppeal(Int(id.rawValue)!, of: visitor, text: "answer \(index + 1)") }
                try await session.refresh()
                try await session.refresh(forced: true)
                try await session.refresh(forced: true)
                // Deleted on the server by another device of the same user.
                try await deleteOnAnotherDevice(ids[1], rig)
                try await session.refresh(forced: true)
                let added = recorder.events.compactMap(\.addedMessage).compactMap(\.serverID)
                let stored = try await session.conversations().map(\.id)
                #expect(stored == [ids[0], ids[2]], "the deleted appeal is dropped")
                #expect(Set(added).count == added.count, "nothing announced twice")
                var storedMessages = 0
                for id in stored { storedMessages += try await session.conversation(id).storedMessages(before: nil, limit: .max).count }
                print("webim appeals forced re-read: 3 appeals, 6 messages, 3 forced reads, \(added.count) announced, duplicates \(added.count - Set(added).count), \(stored.count) appeals and \(storedMessages) messages kept after one was deleted elsewhere")
                #expect(storedMessages == 4)
            }
        }
    }

    @Test func aRestartWithTheSQLiteStoreResumesFromTheStoredChangeTime() async throws {
        try await withRig { rig in
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("appeals-\(UUID().uuidString).sqlite").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            let firstStore = try SQLiteChatStore(path: path)
            let first = rig.session(try rig.backend(), store: firstStore)
            let appealID = try await withConnectedRecording(first) { _ in
                let id = try await first.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "before the restart"))).id
                try await first.refresh()
                return id
            }
            try rig.robot.answerAppeal(Int(appealID.rawValue)!, of: try rig.visitor(), text: "answered while the app was closed")
            let secondStore = try SQLiteChatStore(path: path)
            let second = rig.session(try rig.backend(), store: secondStore)
            try await withConnectedRecording(second) { recorder in
                try await recorder.first("the answer") { $0.addedMessage?.text == "answered while the app was closed" }
                                let history = rig.server.lastHistorySince
                #expect(history != nil && history != "0", "the poll asked from the stored change time, not from 0")
                let stored = try await second.conversation(appealID).storedMessages(before: nil, limit: .max).map(\.text)
                #expect(stored == ["before the restart", "answered while the app was closed"])
                print("webim appeals restart: resumed with since=\(history ?? "-"), \(stored.count) messages stored, 0 lost, 0 doubled")
            }
        }
    }

    /// Users of one store keep their own appeals (the store scope's user is the user token):
    /// another user sees none of the previous one's, and the previous one finds theirs again.
    @Test func anotherUserOnTheStoreSeesNoneOfThePreviousOnesAppeals() async throws {
        try await withRig { rig in
            let store = InMemoryChatStore()
            let alice = rig.session(try rig.backend(userToken: "alice"), store: store)
            try await withConnectedRecording(alice) { _ in
                _ = try await alice.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "alice's appeal")))
            }
            let bob = rig.session(try rig.backend(userToken: "bob"), store: store)
            #expect(try await bob.conversations().isEmpty, "bob's store shows none of alice's appeals")
            try await withConnectedRecording(bob) { _ async throws in
                #expect(try await bob.conversations().isEmpty, "bob sees none of alice's appeals")
                #expect(try rig.visitor(of: "alice") != rig.visitor(of: "bob"))
            }
            let aliceAgain = rig.session(try rig.backend(userToken: "alice"), store: store)
            try await withConnectedRecording(aliceAgain) { _ async throws in
                #expect(try await aliceAgain.conversations().count == 1, "alice's appeal stays hers")
            }
        }
    }

    @Test func serverNotReadyIsRetriedAndAnExpiredPageIsRenewed() async throws {
        try await withRig { rig in
            rig.server.inject(.error("server-not-ready"), on: .initialize)
            rig.server.inject(.error("server-not-ready"), on: .initialize)
            let session = rig.session(try rig.backend())
            try await withRecording(session) { recorder in
                try await session.resume()
                #expect(await rig.clock.waitForSleepers())
                rig.clock.advance(by: .seconds(1))
                #expect(await rig.clock.waitForSleepers())
                rig.clock.advance(by: .seconds(2))
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                #expect(rig.server.initLocations.count == 1, "two refusals, then the init")
                let appeal = try await session.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "hello")))
                // Past the page's 30 minutes: the next request re-initialises first.
                rig.clock.advance(by: .seconds(31 * 60))
                try await appeal.send(text: "after half an hour")
                try await recorder.first("sent") { $0.updatedMessage?.text == "after half an hour" && $0.updatedMessage?.serverID != nil }
                #expect(rig.server.initLocations.count >= 2)
                // reinit-required on an action: re-initialise and try once more.
                rig.server.inject(.reinitRequired, on: .action, action: "chat.offline_message")
                try await appeal.send(text: "after reinit")
                try await recorder.first("sent after reinit") { $0.updatedMessage?.text == "after reinit" && $0.updatedMessage?.serverID != nil }
                print("webim appeals: server-not-ready twice then init; \(rig.server.initLocations.count) inits in all (expired page, reinit-required)")
                await session.close()
            }
        }
    }
}
