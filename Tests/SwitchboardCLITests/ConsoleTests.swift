import ArgumentParser
import Foundation
import Switchboard
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardEmulation
import Testing
import VoximplantEmulator
import SwitchboardWebim
import WebimEmulator

@testable import switchboard
import SwitchboardCommandKit
import CXoneCommands
import MatrixCommands
import VoximplantCommands
import WebimCommands

/// `switchboard connect`'s console against the Voximplant-style emulator over a real socket.
@Suite(.timeLimit(.minutes(1)))
struct ConsoleTests {
    @Test func commandsDriveTheSessionAndUnsupportedOnesSayWhy() async throws {
        try await ConsoleEdgeTests.withVoximplantConsole { console, server, alice, conversation, recorder in
            let carol = server.addUser("carol", token: "c", displayName: "Carol")
            let listed = try #require(await console.handle("/conversations"))
            #expect(listed.count == 1 && listed[0].contains(conversation))
            #expect(try #require(await console.handle("hello there")).first?.hasPrefix("queued") == true)
            try await recorder.first("the robot's echo") { $0.addedMessage?.text == "echo: hello there" }
            #expect(try #require(await console.handle("/read")) == ["marked read"])
            #expect(try #require(await console.handle("/rate 5")) == ["/rate is not offered by voximplant; /help lists what is"])
            #expect(try #require(await console.handle("/create Team \(carol)")).first?.hasPrefix("created and opened") == true)
            #expect(try #require(await console.handle("/history 10")) == ["no older messages"])
            #expect(try #require(await console.handle("/bogus")).first == "unknown command /bogus; /help lists the commands")
            #expect(await console.handle("/quit") == nil)

            #expect(server.messages(in: conversation).map(\.text) == ["hello there", "echo: hello there"])
            #expect(server.readLog.contains { $0.user == alice })
        }
    }
}

/// `switchboard connect webim --offline`: the console's appeal commands against the emulator.
@Suite(.timeLimit(.minutes(1)))
struct AppealsConsoleTests {
    @Test func appealsAreWrittenListedAnsweredReadAndDeleted() async throws {
        let server = WebimServer()
        let olga = server.robot(id: 3, name: "Olga")
        try await WebimEmulator(server: server, logger: .quiet).withRunning { url in
            let session = ChatSession(
                backend: try WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: url, userToken: "cli-user")),
                configuration: .fastForTests,
                logger: .quiet
            )
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                let console = Console(session: session, commands: Console.Commands(start: .appeal))
                let wrote = try #require(await console.handle("/appeal My parcel never came"))
                #expect(wrote.first?.hasPrefix("wrote and opened appeal") == true)
                let visitor = try #require(server.visitor(ofUserToken: "cli-user"))
                let chatID = try #require(server.appeals(ofVisitor: visitor).first?.id)
                try olga.answerAppeal(chatID, of: visitor, text: "We are on it")
                #expect(try #require(await console.handle("/refresh")) == ["refreshed"])
                try await recorder.first("the answer") { $0.addedMessage?.text == "We are on it" }
                #expect(try #require(await console.handle("/conversations")).first?.contains("\(chatID)") == true)
                #expect(try #require(await console.handle("it is order 4711")).first?.hasPrefix("queued") == true)
                try await recorder.first("sent") { $0.updatedMessage?.text == "it is order 4711" && $0.updatedMessage?.serverID != nil }
                #expect(try #require(await console.handle("/read")) == ["marked read"])
                #expect(try #require(await console.handle("/delete")) == ["archived \(chatID)"])
                #expect(server.appeals(ofVisitor: visitor).isEmpty)
                #expect(try #require(await console.handle("/conversations")) == ["no conversations"])
                #expect(server.readLog.contains { $0.messageID == "\(chatID)" })
            }
        }
    }

    @Test func offlineNeedsAUserToken() {
        #expect(throws: (any Error).self) { try ConnectWebim.parse(["--url", "http://127.0.0.1:1", "--offline"]) }
        #expect(throws: (any Error).self) { try ConnectWebim.parse(["--url", "http://127.0.0.1:1", "--user-token", "t"]) }
        #expect(throws: Never.self) { try ConnectWebim.parse(["--url", "http://127.0.0.1:1", "--offline", "--user-token", "t"]) }
    }
}

@Suite struct StorageOptionsTests {
    @Test func storeChoosesSQLiteAndKeepsWhatWasSaved() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-cli-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let scope = StoreScope(backend: "webim", account: "demo")
        let options = try StorageOptions.parse(["--store", path])
        try await options.makeStore().saveCredentials(Credentials(["visitor-id": "v1"]), scope: scope)
        let reopened = try StorageOptions.parse(["--store", path]).makeStore()
        #expect(try await reopened.fetchCredentials(scope: scope)["visitor-id"] == "v1", "a second run sees the first run's credentials")
        #expect(try StorageOptions.parse([]).makeStore() is InMemoryChatStore)
    }
}

/// JSON lines a script can use: every message has its sequence at the top level and says
/// whether it is the user's own (Voximplant-style peers all have the role `user`).
@Suite struct JSONLinesTests {
    func line(_ kind: ChatEvent.Kind, sequence: Int64? = nil, me: ParticipantID? = "alice@app.acc") throws -> JSONValue {
        let event = ChatEvent(
            origin: ChatEvent.Origin(session: "s", backend: "voximplant"), conversationID: "c", time: Date(timeIntervalSince1970: 0),
            sequence: sequence, kind: kind
        )
        return try JSONValue(parsing: EventFormatter.jsonLine(for: event, me: me))
    }

    @Test func historyAndPendingMessagesCarryTheirSequenceAndOwnMessagesAreMarked() throws {
        let bobs = Message(serverID: "m5", conversationID: "c", sequence: 5, sender: "bob@app.acc", senderRole: .user, text: "old", time: .distantPast)
        let history = try line(.messageAdded(bobs, position: .history))
        #expect(history["sequence"]?.intValue == 5, "a history page's message has no event sequence; its own is used")
        #expect(history["message"]?["mine"]?.boolValue == false)
        var alices = bobs
        alices.sender = "alice@app.acc"
        alices.sequence = 6
        let live = try line(.messageAdded(alices, position: .newest), sequence: 6)
        #expect(live["sequence"]?.intValue == 6 && live["message"]?["mine"]?.boolValue == true, "the logged-in user's own, though its role is user")
        let pending = Message(clientID: "c-1", conversationID: "c", sender: "alice@app.acc", text: "new", time: .distantPast, deliveryState: .pending)
        let queued = try line(.messageAdded(pending, position: .newest))
        #expect(queued["sequence"] == .null, "present, and null: not sent yet")
        #expect(queued["message"]?["mine"]?.boolValue == true)
    }
}
