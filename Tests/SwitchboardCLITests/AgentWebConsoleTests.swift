import CXoneEmulator
import Foundation
import Logging
import NIOCore
import NIOWebSocket
import Switchboard
import SwitchboardCXone
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardVoximplant
import SwitchboardWebim
import Testing
import VoximplantEmulator
import WebimEmulator
import WSClient

/// The agent console in the browser (`switchboard emulate <vendor> --agent web`), driven over its
/// page's own WebSocket exactly as the page drives it: an app's message comes in, the agent
/// accepts and answers, drops the app's connection, and the app's reply and read marker come
/// back; the app's store is then compared with the emulator's own messages. The browser test
/// (`AgentConsoleBrowserTests`) does the same through Chromium.
@Suite(.timeLimit(.minutes(2)))
struct AgentWebConsoleTests {
    static let key = "0123456789abcdef0123456789abcdef"

    @Test func webimConsoleAcceptsAnswersAndDropsTheConnection() async throws { try await Self.webim(.socket) }
    @Test func cxoneConsoleAcceptsAnswersAndDropsTheConnection() async throws { try await Self.cxone(.socket) }
    @Test func voximplantConsoleAnswersAndDropsTheConnection() async throws { try await Self.voximplant(.socket) }

    /// Who plays the agent: a client of the page's socket, or the page itself in Chromium.
    enum Side: Sendable {
        case socket
        case browser(python: String)
    }

    static func webim(_ side: Side) async throws {
        let server = WebimServer()
        let desk = WebimDesk(server: server, agent: server.robot(id: 7, name: "Bob"), colleague: server.robot(id: 9, name: "Carol"))
        try await Self.drive(WebimEmulator(server: server, logger: .quiet), desk: desk, side: side) { url in
            try WebimBackend(configuration: WebimConfiguration(accountName: url))
        } start: { session, _ in
            try await session.startConversation(ConversationDraft())
        }
    }

    static func cxone(_ side: Side) async throws {
        let (server, desk) = Self.cxone()
        try await Self.drive(CXoneEmulator(server: server, logger: .quiet), desk: desk, side: side) { endpoints in
            try Self.cxoneBackend(server, endpoints)
        } start: { session, _ in
            try await session.startConversation(ConversationDraft(kind: .thread))
        }
    }

    static func voximplant(_ side: Side) async throws {
        let (server, desk) = try Self.voximplant()
        try await Self.drive(VoximplantEmulator(server: server, logger: .quiet), desk: desk, side: side) { url in
            VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: desk.customer, token: "a"), logger: .quiet)
        } start: { session, recorder in
            try await Self.voximplantConversation(desk, session, recorder)
        }
    }

    /// Wrong keys, bad frames and commands the vendor lacks: each refused with its reason, and
    /// the socket serves on.
    @Test func theConsoleRefusesWhatItCannotDoAndServesOn() async throws {
        let (server, desk) = try Self.voximplant()
        let console = AgentWebConsole(VoximplantEmulator(server: server, logger: .quiet), desk: desk, key: Self.key)
        try await console.withRunning { endpoints in
            let origin = try #require(endpoints.console.components(separatedBy: "/agent?").first)
            #expect(try await Self.get("\(origin)/agent").status == 403, "the page needs its key")
            #expect(try await Self.get("\(origin)/agent?key=wrong").status == 403)
            #expect(try await Self.get("\(origin)/agent/state").status == 403)
            await #expect(throws: (any Error).self, "the socket needs its key") {
                try await ConsoleClient.connect("\(origin.replacingOccurrences(of: "http:", with: "ws:"))/agent/ws?key=wrong") { _ in }
            }
            try await ConsoleClient.connect(Self.socketURL(endpoints.console)) { page in
                _ = try await page.state("the first state") { $0.vendor == "Voximplant-style" }
                let refusals: [(String, String)] = [
                    ("{not json", "not a command"),
                    (#"{"id": 1, "do": "fly"}"#, "unknown command"),
                    (#"{"id": 2, "do": "say"}"#, "say needs \"text\""),
                    (#"{"id": 3, "do": "drop", "count": 0}"#, "from 1 to 1000, not 0"),
                    (#"{"id": 4, "do": "close"}"#, "not offered by the Voximplant-style emulator"),
                    (#"{"id": 5, "do": "say", "text": "hi", "conversation": "nowhere"}"#, "no conversation nowhere"),
                    (#"{"id": 6, "do": "drop", "count": "3"}"#, "not a command"),
                    // 2 MiB, over the host's 1 MiB frames: read, and refused by the vendor.
                    (#"{"id": 7, "do": "file", "name": "big.bin", "data": "\#(Data(count: 2 << 20).base64EncodedString())"}"#, "not offered"),
                ]
                for (frame, reason) in refusals {
                    let result = try await page.send(raw: frame)
                    #expect(!result.ok && result.line.contains(reason), "\(frame.prefix(100)) → \(result.line)")
                }
                let said = try await page.command(["do": "say", "text": "still here"])
                #expect(said.ok, "\(said.line)")
                let state = try await page.state("the line in the state") { $0.conversations.contains { $0.messages.contains { $0.text == "still here" } } }
                #expect(state.notOffered["close"] != nil, "what the vendor lacks is listed with its reason")
                print("agent console refusals: \(refusals.count) bad commands refused with their reason; the socket served on")
            }
            let state = try await Self.get("\(endpoints.console.replacingOccurrences(of: "/agent?", with: "/agent/state?"))")
            #expect(state.status == 200 && state.body.contains("still here"))
        }
    }

    /// The vendor's own moves, a file and duplicated events, from the console to an app.
    @Test func webimMovesAFileAndDuplicatesReachTheApp() async throws {
        let server = WebimServer()
        let desk = WebimDesk(server: server, agent: server.robot(id: 7, name: "Bob"), colleague: server.robot(id: 9, name: "Carol"))
        try await Self.withConsoleAndApp(WebimEmulator(server: server, logger: .quiet), desk: desk) { url in
            try WebimBackend(configuration: WebimConfiguration(accountName: url))
        } start: { session, _ in
            try await session.startConversation(ConversationDraft())
        } _: { page, recorder in
            #expect(try await page.command(["do": "accept"]).ok)
            let file = try await page.command(["do": "file", "name": "invoice.pdf", "type": "application/pdf", "data": Data("%PDF-1.4 a test".utf8).base64EncodedString()])
            #expect(file.ok, "\(file.line)")
            try await recorder.first("the file") { $0.addedMessage?.kind == .file && $0.addedMessage?.attachments.first?.name == "invoice.pdf" }
            let rate = try await page.command(["do": "move", "move": "rate"])
            #expect(rate.ok, "\(rate.line)")
            try await recorder.first("the rate form") { if case .custom("webim.SURVEY", let payload) = $0.kind { payload["data"]?.nonNull != nil } else { false } }
            let busy = try await page.command(["do": "move", "move": "operator-busy"])
            #expect(busy.ok, "\(busy.line)")
            try await recorder.first("the busy notice") { $0.addedMessage?.kind == .agentBusy }
            return ["the file", "the rate form", "the busy notice"]
        }
    }

    @Test func cxoneMovesAFileAndDuplicatesReachTheApp() async throws {
        let (server, desk) = Self.cxone()
        try await Self.withConsoleAndApp(CXoneEmulator(server: server, logger: .quiet), desk: desk) { endpoints in
            try Self.cxoneBackend(server, endpoints)
        } start: { session, _ in
            try await session.startConversation(ConversationDraft(kind: .thread))
        } _: { page, recorder in
            #expect(try await page.command(["do": "accept"]).ok)
            let file = try await page.command(["do": "file", "name": "label.png", "type": "image/png", "data": Data([0x89, 0x50, 0x4E, 0x47]).base64EncodedString()])
            #expect(file.ok, "\(file.line)")
            try await recorder.first("the file") { $0.addedMessage?.attachments.first?.name == "label.png" }
            let replies = try await page.command(["do": "move", "move": "quick-replies"])
            #expect(replies.ok, "\(replies.line)")
            try await recorder.first("the quick replies") { $0.addedMessage?.kind == .rich("QUICK_REPLIES") }
            let popup = try await page.command(["do": "move", "move": "inactivity-popup"])
            #expect(popup.ok, "\(popup.line)")
            try await recorder.first("the pop-up") { if case .custom(CXoneInactivityPopup.eventName, _) = $0.kind { true } else { false } }
            return ["the file", "the quick replies", "the inactivity pop-up"]
        }
    }

    @Test func voximplantMovesAndDuplicatesReachTheApp() async throws {
        let (server, desk) = try Self.voximplant()
        let carol = try #require(desk.colleague)
        try await Self.withConsoleAndApp(VoximplantEmulator(server: server, logger: .quiet), desk: desk) { url in
            VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: desk.customer, token: "a"), logger: .quiet)
        } start: { session, recorder in
            try await Self.voximplantConversation(desk, session, recorder)
        } _: { page, recorder in
            let file = try await page.command(["do": "file", "name": "a.txt", "data": Data("a".utf8).base64EncodedString()])
            #expect(!file.ok && file.line.contains("not offered"), "\(file.line)")
            let added = try await page.command(["do": "move", "move": "add-participant"])
            #expect(added.ok, "\(added.line)")
            try await recorder.first("Carol added") { if case .participantsAdded(let added) = $0.kind { added.contains { $0.id.rawValue == carol } } else { false } }
            _ = try await page.command(["do": "say", "text": "a line to edit"])
            let edited = try await page.command(["do": "move", "move": "edit-last"])
            #expect(edited.ok, "\(edited.line)")
            try await recorder.first("the edit") { $0.updatedMessage?.isEdited == true }
            return ["Carol added", "the edit"]
        }
    }

    /// Runs an emulator with its console and an app that wrote first; `moves` plays the agent
    /// on the page's socket and names what reached the app. Then the next two events go out
    /// twice, and the app stores each of two lines once.
    static func withConsoleAndApp<Emulator: HostedEmulator>(
        _ emulator: Emulator,
        desk: any AgentDesk,
        backend: @Sendable (Emulator.Endpoints) throws -> any ChatBackend,
        start: @Sendable (ChatSession, EventRecorder) async throws -> any Conversation,
        _ moves: @concurrent @Sendable (inout ConsoleClient, EventRecorder) async throws -> [String]
    ) async throws {
        try await withApp(AgentWebConsole(emulator, desk: desk, key: key), backend: backend, start: start) { endpoints, session, chat, recorder in
            try await ConsoleClient.connect(socketURL(endpoints.console)) { page in
                _ = try await page.state("the app's message") { $0.conversations.contains { $0.messages.contains { $0.text == "hello from the app" } } }
                let reached = try await moves(&page, recorder)
                let duplicated = try await page.command(["do": "duplicate", "count": 2])
                #expect(duplicated.ok, "\(duplicated.line)")
                for text in ["twice one", "twice two"] { _ = try await page.command(["do": "say", "text": text]) }
                try await recorder.first("the second line") { $0.addedMessage?.text == "twice two" }
                let stored = try await session.conversation(chat.id).storedMessages(before: nil, limit: .max).map(\.text)
                let copies = ["twice one", "twice two"].map { text in stored.filter { $0 == text }.count }
                let faults = desk.snapshot().faults
                print("agent console moves (\(desk.vendor)): reached the app: \(reached.joined(separator: ", ")); duplicate 2: the app stored \(copies) copies; faults that took effect: \(faults)")
                #expect(copies == [1, 1])
                #expect(faults.contains { $0.contains("twice") }, "the duplicates went out")
            }
        }
    }

    /// Runs `console`'s emulator and an app on it that has written "hello from the app" (sent and
    /// confirmed) around `body`.
    static func withApp<Emulator: HostedEmulator>(
        _ console: AgentWebConsole<Emulator>,
        backend: @Sendable (Emulator.Endpoints) throws -> any ChatBackend,
        start: @Sendable (ChatSession, EventRecorder) async throws -> any Conversation,
        _ body: @Sendable (AgentWebConsole<Emulator>.Endpoints, ChatSession, any Conversation, EventRecorder) async throws -> Void
    ) async throws {
        try await console.withRunning { endpoints in
            let session = ChatSession(backend: try backend(endpoints.emulator), configuration: .fastForTests, logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                let chat = try await start(session, recorder)
                _ = try await chat.send(text: "hello from the app")
                try await recorder.first("sent") { $0.updatedMessage?.text == "hello from the app" && $0.updatedMessage?.serverID != nil }
                try await body(endpoints, session, chat, recorder)
            }
            await session.close()
        }
    }

    /// `switchboard emulate <vendor> --agent web` prints the console's URL, which serves the page
    /// and the state; standard input takes the same commands.
    @Test(arguments: ["webim", "cxone", "voximplant"])
    func emulateWithTheWebAgentPrintsTheConsole(_ vendor: String) async throws {
        let child = try Child.start(["emulate", vendor, "--agent", "web", "--port", "0"], mergingOutput: true)
        defer { child.kill() }
        var banner: [String] = []
        while !(banner.last?.hasPrefix("agent console: ") ?? false) { banner.append(try await child.nextLine()) }
        let url = String(try #require(banner.last).dropFirst("agent console: ".count))
        #expect(banner.contains { $0.contains("you are the agent (--agent web)") }, "\(banner)")
        let page = try await Self.get(url)
        #expect(page.status == 200 && page.body.contains("Agent console"), "\(url)")
        try child.send("/where")
        let answer = try await child.nextLine()
        print("emulate \(vendor) --agent web: \(url); /where → \(answer)")
        #expect(answer.hasPrefix(vendor == "voximplant" ? "conversation conv-1" : "no "), "standard input takes commands beside the page")
        let state = try await Self.get(url.replacingOccurrences(of: "/agent?", with: "/agent/state?"))
        #expect(state.status == 200 && state.body.contains("\"type\":\"state\""))
        child.signal(SIGTERM)
        await child.waitForExit()
        #expect(child.ending == "exit 0")
    }

    static func voximplant() throws -> (VoximplantServer, VoximplantDesk) {
        let server = VoximplantServer()
        let alice = server.addUser("alice", token: "a", displayName: "Alice")
        let bob = server.addUser("bob", token: "b", displayName: "Bob")
        let carol = server.addUser("carol", token: "c", displayName: "Carol")
        let conversation = try server.robot(bob).createConversation(title: "Support", with: [alice])
        return (server, VoximplantDesk(server: server, agent: bob, customer: alice, conversation: conversation, colleague: carol))
    }

    /// The desk's conversation, once the app has it.
    static func voximplantConversation(_ desk: VoximplantDesk, _ session: ChatSession, _ recorder: EventRecorder) async throws -> any Conversation {
        try await recorder.first("the conversation") { $0.conversationID == ConversationID(desk.conversation) }
        return try await session.conversation(ConversationID(desk.conversation))
    }

    static func cxone() -> (CXoneServer, CXoneDesk) {
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: .multi))
        return (server, CXoneDesk(server: server, agent: server.agent(), colleague: server.agent(id: 5, firstName: "Carol", surname: "Lane")))
    }

    static func cxoneBackend(_ server: CXoneServer, _ endpoints: CXoneEmulator.Endpoints) throws -> any ChatBackend {
        CXoneBackend(
            configuration: CXoneConfiguration(
                environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                brandID: server.configuration.brandID, channelID: server.configuration.channelID, customerID: "customer-1"
            ),
            channel: try CXoneChannelConfiguration(json: server.channelConfiguration)
        )
    }

    /// The exchange every vendor's console must carry, against a real socket: the app writes,
    /// the agent (`side`) accepts, answers and drops the app's connection; the app replies and
    /// reads; the agent sees both. Then the emulator's messages are compared with every row the
    /// app stored.
    static func drive<Emulator: HostedEmulator>(
        _ emulator: Emulator,
        desk: any AgentDesk,
        side: Side,
        backend: @Sendable (Emulator.Endpoints) throws -> any ChatBackend,
        start: @Sendable (ChatSession, EventRecorder) async throws -> any Conversation
    ) async throws {
        let console = AgentWebConsole(emulator, desk: desk, key: key)
        try await withApp(console, backend: backend, start: start) { endpoints, session, chat, recorder in
            let page = try await get(endpoints.console)
            #expect(page.status == 200 && page.body.contains("<title>Agent console · \(desk.vendor) emulator</title>"))
            switch side {
            case .socket:
                try await agentOnTheSocket(endpoints.console, desk: desk, chat: chat, recorder: recorder, log: console.logLines)
            case .browser(let python):
                try await agentInTheBrowser(endpoints.console, python: python, desk: desk, chat: chat, recorder: recorder)
            }

            // The emulator's own messages against every row the app stored.
            let shown = try desk.conversation(nil, in: desk.snapshot()).messages.filter { $0.author != .system }.map(\.text)
            let stored = try await session.conversation(chat.id).storedMessages(before: nil, limit: .max).map(\.text)
            let missing = shown.filter { !stored.contains($0) }
            let phantom = stored.filter { !shown.contains($0) }
            let duplicated = stored.count - Set(stored).count
            print(
                "agent console (\(desk.vendor), \(side.name)): the emulator holds \(shown.count) messages, the app stored \(stored.count); "
                    + "missing \(missing.count), phantom \(phantom.count), duplicated \(duplicated); faults that took effect: \(desk.snapshot().faults)"
            )
            #expect(missing.isEmpty && phantom.isEmpty && duplicated == 0, "missing \(missing), phantom \(phantom)")
        }
    }

    static func agentOnTheSocket(_ url: String, desk: any AgentDesk, chat: any Conversation, recorder: EventRecorder, log: @autoclosure @Sendable () -> [String]) async throws {
        try await ConsoleClient.connect(socketURL(url)) { page in
            let arrived = try await page.state("the app's message") { $0.conversations.contains { $0.messages.contains { $0.text == "hello from the app" } } }
            let conversation = try #require(arrived.conversations.first { $0.messages.contains { $0.text == "hello from the app" } }).id
            if arrived.notOffered["accept"] == nil {
                #expect(arrived.conversations.first { $0.id == conversation }?.phase == .waiting, "no robot took it")
                let accepted = try await page.command(["do": "accept", "conversation": conversation])
                #expect(accepted.ok, "\(accepted.line)")
                _ = try await page.state("accepted") { $0.conversations.first { $0.id == conversation }?.phase == .active }
            }
            let said = try await page.command(["do": "say", "conversation": conversation, "text": "Hi, the agent here"])
            #expect(said.ok, "\(said.line)")
            try await recorder.first("the agent's line") { $0.addedMessage?.text == "Hi, the agent here" }

            let connects = recorder.events(where: \.isConnected).count
            let dropped = try await page.command(["do": "disconnect"])
            #expect(dropped.ok, "\(dropped.line)")
            _ = try await page.command(["do": "say", "conversation": conversation, "text": "after the drop"])
            try await recorder.first("the line after the drop") { $0.addedMessage?.text == "after the drop" }
            try await recorder.waitUntil("the reconnect") { $0.filter(\.isConnected).count > connects }
            _ = try await chat.send(text: "thanks, that helps")
            try await chat.markRead(upTo: nil)
            _ = try await page.state("the app's reply and read marker") { state in
                guard let shown = state.conversations.first(where: { $0.id == conversation }) else { return false }
                return shown.messages.contains { $0.author == .customer && $0.text == "thanks, that helps" }
                    && shown.messages.filter { $0.author == .agent }.allSatisfy(\.read)
            }
            _ = try await page.state("the drop in the faults that took effect") { !$0.faults.isEmpty }
            #expect(log().contains(dropped.line), "the log shows what the emulator did")
        }
    }

    /// The page in headless Chromium (`Tests/Python/agent_console_browser.py`) plays the agent;
    /// the app answers once the drop took effect.
    static func agentInTheBrowser(_ url: String, python: String, desk: any AgentDesk, chat: any Conversation, recorder: EventRecorder) async throws {
        let shots = repositoryRoot.appendingPathComponent(".build/agent-console")
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
        let name = desk.vendor.lowercased().replacingOccurrences(of: "-style", with: "")
        let browser = try Child.start(
            [repositoryRoot.appendingPathComponent("Tests/Python/agent_console_browser.py").path, url, shots.path, name],
            mergingOutput: true,
            executable: python
        )
        defer { browser.kill() }
        @Sendable func losses(_ events: [ChatEvent]) -> Int {
            events.filter { if case .connection(let state, _) = $0.kind { state != .connected } else { false } }.count
        }
        let lossesBefore = losses(recorder.events)
        // The app's side runs while the browser does; a browser that fails ends it.
        var lines: [String] = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Chromium starts first: a minute and more on a loaded machine.
                try await recorder.first("the browser's answer", timeout: .seconds(150)) { $0.addedMessage?.text == "Hi from the browser" }
                // The drop took effect at the emulator, and the app is back: it replies and reads.
                var revision = desk.revision
                while desk.snapshot().faults.isEmpty {
                    try Task.checkCancellation()
                    await desk.waitForChange(after: revision)
                    revision = desk.revision
                }
                try await recorder.waitUntil("the reconnect after the drop") { events in
                    losses(events) > lossesBefore && events.last { $0.kind.category == .connection }?.isConnected == true
                }
                _ = try await chat.send(text: "thanks, that helps")
                try await chat.markRead(upTo: nil)
            }
            while let line = try? await browser.nextLine() {
                print("browser (\(desk.vendor)): \(line)")
                lines.append(line)
            }
            await browser.waitForExit()
            if browser.ending == "exit 0" { try await group.waitForAll() } else { group.cancelAll() }
        }
        #expect(browser.ending == "exit 0", "the browser: \(lines.suffix(3))")
        let result = try #require(lines.last { $0.hasPrefix("RESULT ") }, "the browser's result")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(result.dropFirst(7).utf8)) as? [String: Any])
        #expect((figures["messages"] as? [String])?.contains("thanks, that helps") == true)
        #expect((figures["overflow390"] as? Int).map { $0 <= 0 } == true, "nothing wider than a phone's window: \(figures["overflow390"] ?? "?")")
        #expect((figures["unlabelled"] as? [String]) == [], "every field has its label")
    }

    static func socketURL(_ console: String) -> String {
        console.replacingOccurrences(of: "http:", with: "ws:").replacingOccurrences(of: "/agent?", with: "/agent/ws?")
    }

    static func get(_ url: String) async throws -> (status: UInt, body: String) { try await CrashTests.get(url) }
}

/// The console's socket as its page uses it: state frames in, commands out.
struct ConsoleClient {
    var inbound: WebSocketInboundMessageStream.AsyncIterator
    let outbound: WebSocketOutboundWriter
    var latest: DeskSnapshot?
    var nextID = 100

    struct Frame: Decodable {
        var type: String
        var desk: DeskSnapshot?
        var id: Int?
        var ok: Bool?
        var line: String?
    }

    /// The functions are `@concurrent`, as WSClient's iterator is (``RawSocket``).
    static func connect(_ url: String, _ body: @concurrent @Sendable (inout ConsoleClient) async throws -> Void) async throws {
        try await withoutActuallyEscaping(body) { body in
            var configuration = WebSocketClientConfiguration()
            configuration.maxFrameSize = 1 << 24
            _ = try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger.quiet) { inbound, outbound, _ in
                var client = ConsoleClient(inbound: inbound.messages(maxSize: 1 << 24).makeAsyncIterator(), outbound: outbound)
                try await body(&client)
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
    }

    /// The state, once it satisfies `predicate`.
    @concurrent mutating func state(_ what: String, where predicate: (DeskSnapshot) -> Bool) async throws -> DeskSnapshot {
        if let latest, predicate(latest) { return latest }
        while let frame = try await next() {
            if let desk = frame.desk, predicate(desk) { return desk }
        }
        throw SwitchboardError(.connectionLost, "the console's socket closed before \(what)")
    }

    @concurrent mutating func command(_ fields: [String: Any]) async throws -> (ok: Bool, line: String) {
        var fields = fields
        fields["id"] = nextID
        nextID += 1
        return try await send(raw: String(decoding: JSONSerialization.data(withJSONObject: fields), as: UTF8.self))
    }

    /// Sends `frame` and reads until its result (the first result without an id, for a frame
    /// that has none the console could read).
    @concurrent mutating func send(raw frame: String) async throws -> (ok: Bool, line: String) {
        let id = (rawObject(frame)?["id"] as? Int)
        try await outbound.write(.text(frame))
        while let answer = try await next() {
            if answer.type == "result", answer.id == id { return (answer.ok ?? false, answer.line ?? "") }
        }
        throw SwitchboardError(.connectionLost, "the console's socket closed before answering \(frame.prefix(100))")
    }

    @concurrent private mutating func next() async throws -> Frame? {
        while let message = try await inbound.next() {
            guard case .text(let text) = message else { continue }
            let frame = try JSONDecoder().decode(Frame.self, from: Data(text.utf8))
            if let desk = frame.desk { latest = desk }
            return frame
        }
        return nil
    }

    private func rawObject(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }
}

extension AgentWebConsoleTests.Side {
    var name: String {
        switch self {
        case .socket: "the page's socket"
        case .browser: "Chromium"
        }
    }
}

/// Headless Chromium and its driver (Debian's `chromium`, `chromium-driver`) with Selenium in
/// the Python tools' venv: a local run without them skips the browser tests, a CI run fails them.
let agentBrowser = LiveServer(
    name: "headless Chromium with Selenium",
    address: {
        let python = repositoryRoot.appendingPathComponent(".build-python/venv/bin/python").path
        let selenium = (try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent(".build-python/venv/lib").path))?
            .contains { FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent(".build-python/venv/lib/\($0)/site-packages/selenium").path) } ?? false
        let found = ["/usr/bin/chromium", "/usr/bin/chromedriver", python].allSatisfy(FileManager.default.isExecutableFile(atPath:))
        return found && selenium ? python : nil
    }(),
    howToStart: "Install Debian's chromium and chromium-driver, run scripts/python-tools.sh install (Selenium from PyPI; CI does both), then swift test."
)

/// The console in a real browser: each vendor's page, in headless Chromium, plays the agent.
@Suite(.timeLimit(.minutes(3)), .serialized, .enabled(if: agentBrowser.runsTests, Comment(rawValue: agentBrowser.skipNote)))
struct AgentConsoleBrowserTests {
    @Test func webimInChromium() async throws { try await AgentWebConsoleTests.webim(.browser(python: try agentBrowser.require())) }
    @Test func cxoneInChromium() async throws { try await AgentWebConsoleTests.cxone(.browser(python: try agentBrowser.require())) }
    @Test func voximplantInChromium() async throws { try await AgentWebConsoleTests.voximplant(.browser(python: try agentBrowser.require())) }
}
