import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardWebim
import Testing
import WebimEmulator

@testable import switchboard
import SwitchboardCommandKit

/// `/offline` at `switchboard emulate webim`, as real Webim does it (protocols/webim.md §2.3): an
/// app without an open chat is told at once (visit session state `offline-message`); an app in a
/// chat is not told until it initialises again (the SDKs read no online-status delta), and the
/// console says which is which. Two real adapters against the emulator.
@Suite(.timeLimit(.minutes(1)))
struct EmulateOfflineTests {
    static func isOffline(_ event: ChatEvent) -> Bool {
        if case .availability(.offline) = event.kind { return true }
        return false
    }

    /// One app at a time where a fault is injected: a fault goes to the next long-poll the
    /// server answers, whichever page it belongs to.
    @Test func offlineReachesAnAppWithoutAChatNowAndAnAppInAChatOnItsNextInit() async throws {
        let server = WebimServer()
        let bob = server.robot(id: 7, name: "Bob")
        let console = AgentConsole(desk: WebimDesk(server: server, agent: bob, colleague: server.robot(id: 9, name: "Carol")))
        try await WebimEmulator(server: server, logger: .quiet).withRunning { url in
            func app() throws -> ChatSession {
                ChatSession(backend: try WebimBackend(configuration: WebimConfiguration(accountName: url)), configuration: .fastForTests, logger: .quiet)
            }
            // An app in a chat: not told, until it initialises again.
            let chatting = try app()
            let chattingVisitor = try await withRecording(chatting) { inChat in
                try await chatting.resume()
                try await inChat.waitUntil("the app in a chat connects") { $0.contains(where: \.isConnected) }
                _ = try await chatting.startConversation(ConversationDraft()).send(text: "where is my order?")
                try await inChat.first("sent") { $0.updatedMessage?.text == "where is my order?" && $0.updatedMessage?.serverID != nil }
                _ = console.handle("/say Looking")
                try await inChat.first("the operator's line") { $0.addedMessage?.text == "Looking" }
                let visitor = try #require(server.visitorIDs.first)

                let line = try #require(console.handle("/offline").lines.first)
                print("webim /offline, an app in a chat: \(line)")
                #expect(line == "operators offline: 1 visitor (\(visitor)) in a chat keep it and see the status on their next init (/reinit) or get-online-status poll (the Webim SDKs read no online-status delta)")
                #expect(!inChat.events.contains(where: Self.isOffline), "an app in a chat is not told until it initialises")
                let initsBefore = server.initLocations.count
                _ = console.handle("/reinit")
                try await inChat.waitUntil("a new page") { _ in server.initLocations.count > initsBefore }
                try await inChat.first("offline, seen at the next init") { Self.isOffline($0) }
                #expect(console.handle("/offline").lines.first?.hasPrefix("operators online: 1 visitor (\(visitor)) in a chat") == true)
                await chatting.close()
                return visitor
            }

            // An app without a chat: told at once.
            let browsing = try app()
            try await withRecording(browsing) { noChat in
                try await browsing.resume()
                try await noChat.waitUntil("the app without a chat connects") { $0.contains(where: \.isConnected) }
                let browsingVisitor = try #require(server.visitorIDs.first { $0 != chattingVisitor })
                let line = try #require(console.handle("/offline").lines.first)
                print("webim /offline, an app without a chat beside it: \(line)")
                #expect(line.hasPrefix("operators offline: 1 visitor (\(browsingVisitor)) without an open chat told now (they may only leave a message); 1 visitor (\(chattingVisitor)) in a chat"))
                try await noChat.first("offline, told at once") { Self.isOffline($0) }
                await browsing.close()
            }
        }
    }

    @Test func theLineSaysWhoIsToldWhen() {
        #expect(WebimDesk.availabilityLine(offline: true, told: [], chatting: []) == "operators offline: apps see it when they initialise")
        #expect(WebimDesk.availabilityLine(offline: false, told: ["v1", "v2"], chatting: []) == "operators online: 2 visitors (v1, v2) told now (they may chat again)")
    }
}
