import Foundation
import Switchboard
import SwitchboardSQLite
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// What only a file store can show: the session's state outlives the process.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteDurabilityTests {
    @Test func theOutboxAndHistorySurviveARestartOfTheProcess() async throws {
        try await withDatabaseFile { path in
            let emulator = InMemoryEmulator()
            let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer), Participant(id: "bob", role: .agent)])
            let backend = InMemoryBackend(server: emulator.server, user: "customer")
            let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))

            // First process: learns the conversation and a message, goes offline, queues two sends.
            let scope = try await harness.withSession(backend: backend, store: try SQLiteChatStore(path: path)) { probe in
                try await probe.recorder.first("the conversation") { $0.conversationID == conversation.id }
                _ = try emulator.server.agent("bob", name: "Bob").send("before the crash", in: conversation.id)
                try await probe.recorder.first("the agent's message") { $0.addedMessage?.text == "before the crash" }
                try await probe.session.pause()
                let chat = try await probe.session.conversation(conversation.id)
                try await chat.send(text: "one")
                try await chat.send(text: "two")
                return probe.session.scope
            }
            #expect(emulator.server.messages(in: conversation.id).map(\.text) == ["before the crash"])

            // Second process: a new store object on the same file.
            let reopened = try SQLiteChatStore(path: path)
            let pending = try await reopened.fetchOutbox(scope: scope).map(\.message.content.text)
            let history = try await reopened.fetchMessages(in: conversation.id, before: nil, limit: .max, scope: scope).map(\.text)
            let announcedAgain = try await harness.withSession(backend: backend, store: reopened) { probe in
                try await probe.recorder.waitUntil("both sends confirmed") { events in
                    events.compactMap(\.updatedMessage).filter { $0.serverID != nil }.count >= 2
                }
                return probe.recorder.events.compactMap(\.addedMessage).filter { $0.text == "before the crash" }.count
            }
            let onServer = emulator.server.messages(in: conversation.id).map(\.text)
            let stored = try await reopened.fetchMessages(in: conversation.id, before: nil, limit: .max, scope: scope)
            print("sqlite restart: outbox after the crash \(pending), history \(history), server \(onServer), stored \(stored.map(\.text)), re-announced \(announcedAgain)")
            #expect(pending == ["one", "two"], "the sends were stored before anything went on the wire")
            #expect(history.first == "before the crash" && history.count == 3, "history and pending sends are on disk")
            #expect(onServer == ["before the crash", "one", "two"], "sent once each, in order, after the restart")
            #expect(stored.map(\.text) == onServer && stored.allSatisfy { $0.serverID != nil })
            #expect(try await reopened.fetchOutbox(scope: scope).isEmpty)
            #expect(announcedAgain == 0, "a message the store already had is not announced again")
        }
    }

    @Test func theFileIsOwnerOnly() async throws {
        try await withDatabaseFile { path in
            let store = try SQLiteChatStore(path: path)
            try await store.saveCredentials(Credentials(["token": "secret"]), scope: StoreScope(backend: "b", account: "a"))
            for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
                let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
                #expect(mode & 0o777 == 0o600, "\((file as NSString).lastPathComponent) is \(String(mode & 0o777, radix: 8))")
            }
        }
    }

    @Test func aPendingMessageWithoutItsOutboxEntryIsRepairedAtLoad() async throws {
        try await withDatabaseFile { path in
            let emulator = InMemoryEmulator()
            let conversation = emulator.server.createConversation(participants: [Participant(id: "customer", role: .customer)])
            let backend = InMemoryBackend(server: emulator.server, user: "customer")
            let scope = StoreScope(backend: backend.descriptor.name, account: "default", user: backend.storeUser)
            // What a crash between two writes of an older build left: a pending message with no
            // entry, and an entry with no message (written now, so the outbox expiry keeps them).
            let now = Date()
            let store = try SQLiteChatStore(path: path)
            try await store.saveConversation(ConversationInfo(id: conversation.id), scope: scope)
            try await store.saveMessages(
                [Message(clientID: "orphan-message", conversationID: conversation.id, text: "left pending", time: now, deliveryState: .pending)],
                scope: scope
            )
            try await store.saveOutboxEntry(
                OutboxEntry(message: OutgoingMessage(clientID: "orphan-entry", conversationID: conversation.id, content: MessageDraft(text: "left queued")), createdAt: now.addingTimeInterval(1)),
                scope: scope
            )
            let harness = ConformanceHarness(context: ConformanceContext(emulator: emulator))
            let repaired = try await harness.withSession(backend: backend, store: try SQLiteChatStore(path: path)) { probe in
                try await probe.recorder.waitUntil("both sent") { _ in emulator.server.messages(in: conversation.id).count == 2 }
                try await probe.recorder.waitUntil("the outbox is empty") { await probe.session.pendingSends.isEmpty }
                return await probe.session.statistics.repairedAtLoad
            }
            let stored = try await store.fetchMessages(in: conversation.id, before: nil, limit: 10, scope: scope)
            print("repair at load: \(repaired) repairs; server \(emulator.server.messages(in: conversation.id).map(\.text)); stored \(stored.map { "\($0.text)=\($0.deliveryState)" })")
            #expect(repaired == 2)
            #expect(emulator.server.messages(in: conversation.id).map(\.text) == ["left pending", "left queued"])
            #expect(stored.count == 2 && stored.allSatisfy { $0.serverID != nil && $0.deliveryState == .sent })
            #expect(try await store.fetchOutbox(scope: scope).isEmpty)
        }
    }

    @Test func aFileThatIsNotADatabaseIsATypedError() async throws {
        try await withDatabaseFile { path in
            try Data("not a database, just text".utf8).write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: SwitchboardError.self) { try SQLiteChatStore(path: path) }
            #expect(error?.code == .storageFailure)
        }
    }
}
