package import AsyncHTTPClient
package import CXoneEmulator
package import Foundation
package import Logging
package import NIOCore
package import NIOFoundationCompat
package import NIOHTTP1
package import NIOWebSocket
package import Switchboard
package import SwitchboardCXone
package import SwitchboardEmulation
package import SwitchboardSQLite
package import SwitchboardTestKit
package import SwitchboardVoximplant
package import SwitchboardWebim
package import VoximplantEmulator
package import WSClient
package import WebimEmulator

/// Loopback latency per adapter: a send until the server's confirmation is in the store, and an
/// agent's message until it is on the bus, each against a raw client (WSClient, or
/// AsyncHTTPClient for Webim) doing the same exchange with the same emulator.
///
/// Each round runs the session (SQLite file store) for its samples, pauses it, then runs the raw
/// client as the same customer for as many; the first exchange of each phase warms up and is not
/// counted (a resumed session first catches up on what the raw client did).
extension Bench {
    package func latencyRows() async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        for store in LatencyStore.allCases {
            if runs(.voximplant) {
                rows += try await Self.withVoximplantRig { try await latencyRows(adapter: "Voximplant-style", store: store, $0) }
            }
            if runs(.webim) {
                rows += try await Self.withWebimRig { try await latencyRows(adapter: "Webim", store: store, $0) }
            }
            if runs(.cxone) {
                rows += try await Self.withCXoneRig { try await latencyRows(adapter: "CXone", store: store, $0) }
            }
        }
        return rows
    }

    /// The session's store: in memory shows what the engine and the adapter add to the wire; the
    /// SQLite file adds the durable writes (the outbox before a send, the confirmation after).
    package enum LatencyStore: String, CaseIterable, Sendable {
        case memory = "in-memory store"
        case sqliteFile = "SQLite file"
    }

    /// One adapter's running emulator: the control the conformance suite drives it with, and a
    /// raw client for a prepared conversation. The latency, catch-up and soak runs use it.
    package struct EmulatorRig: Sendable {
        package var control: any EmulatorControl
        /// The raw client for `conversation` (known once the session has prepared it).
        package var raw: @Sendable (ConversationID) -> any RawChatClient
        /// A control of the same emulator for another customer, by number (the load run's).
        package var customer: @Sendable (Int) -> any EmulatorControl
    }

    private func latencyRows(adapter: String, store kind: LatencyStore, _ rig: EmulatorRig) async throws -> [BenchRow] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("switchboard-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any ChatStore =
            switch kind {
            case .memory: InMemoryChatStore()
            case .sqliteFile: try SQLiteChatStore(path: directory.appendingPathComponent("latency.sqlite").path)
            }
        let session = ChatSession(
            id: SessionID("bench-\(adapter)"), backend: try await rig.control.makeCustomerBackend(), store: store, bus: EventBus(), logger: Logger.quiet
        )
        let perRound = max(1, sizes.latencySamples / sizes.rounds)
        let samples = try await session.withRunning { session in
            var samples = LatencySamples()
            let events = session.events(filter: .all, buffering: .unbounded)
            var iterator = events.makeAsyncIterator()
            try await session.resume()
            try await Self.next(&iterator, "connected") { $0.isConnected }
            let conversation = try await rig.control.prepareConversation(using: session)
            // A conversation the agent made reaches the session as an event.
            while (try? await session.conversation(conversation)) == nil {
                try await Self.next(&iterator, "the conversation") { $0.conversationID == conversation }
            }
            let chat = try await session.conversation(conversation)
            let raw = rig.raw(conversation)
            for round in 1...sizes.rounds {
                progress.say("\(adapter) latency: round \(round) of \(sizes.rounds)")
                if round > 1 {
                    try await session.resume()
                    try await Self.next(&iterator, "reconnected") { $0.isConnected }
                }
                for index in 0...perRound {
                    let text = "sb \(round).\(index)"
                    let elapsed = try await Self.seconds {
                        let sent = try await chat.send(text: text)
                        try await Self.next(&iterator, "\(text) confirmed") { event in
                            event.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false
                        }
                    }
                    if index > 0 { samples.send.append(elapsed) }
                    let answer = "agent to sb \(round).\(index)"
                    let received = try await Self.seconds {
                        try await rig.control.agentSend(answer, in: conversation)
                        try await Self.next(&iterator, answer) { $0.addedMessage?.text == answer }
                    }
                    if index > 0 { samples.agent.append(received) }
                }
                try await session.pause()
                try await Self.next(&iterator, "paused") { $0.kind == .connection(.disconnected, reason: .userInitiated) }
                let measured = try await raw.measure(round: round, exchanges: perRound + 1) { text in
                    try await rig.control.agentSend(text, in: conversation)
                }
                samples.rawSend += measured.sends.dropFirst()
                samples.rawAgent += measured.agents.dropFirst()
            }
            return samples
        }
        return samples.rows(adapter: adapter, store: kind.rawValue)
    }

    /// Waits for the first event matching `predicate` (no watchdog: a hang is the test's time limit's).
    package static func next(_ iterator: inout EventStream.AsyncIterator, _ what: String, _ predicate: (ChatEvent) -> Bool) async throws {
        while let event = await iterator.next() {
            if predicate(event) { return }
        }
        throw SwitchboardError(.connectionLost, "bench: the event stream ended waiting for \(what)")
    }

    // MARK: Rigs

    package static func withVoximplantRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T {
        let server = VoximplantServer()
        return try await VoximplantEmulator(server: server, logger: Logger.quiet).withRunning { url in
            let makeBackend: @Sendable (String, String, String) -> any ChatBackend = { url, user, token in
                VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token), logger: Logger.quiet)
            }
            let control = VoximplantEmulatorControl(server: server, url: url, makeBackend: makeBackend)
            return try await body(
                EmulatorRig(
                    control: control,
                    raw: { conversation in
                        RawVoximplantClient(url: url, user: control.customer, token: control.customerToken, conversation: conversation.rawValue)
                    },
                    customer: { VoximplantEmulatorControl(server: server, url: url, customerName: "customer\($0)", makeBackend: makeBackend) }
                )
            )
        }
    }

    package static func withWebimRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T {
        let server = WebimServer()
        return try await WebimEmulator(server: server, logger: Logger.quiet).withRunning { baseURL in
            let makeBackend: @Sendable (String, String) -> any ChatBackend = { baseURL, visitorFields in
                try! WebimBackend(configuration: WebimConfiguration(accountName: baseURL, visitorFieldsJSON: visitorFields))
            }
            let control = WebimEmulatorControl(server: server, baseURL: baseURL, makeBackend: makeBackend)
            return try await body(
                EmulatorRig(
                    control: control,
                    raw: { _ in RawWebimClient(baseURL: baseURL, visitorFields: control.visitorFields) },
                    customer: { WebimEmulatorControl(server: server, baseURL: baseURL, customerID: "customer-\($0)", makeBackend: makeBackend) }
                )
            )
        }
    }

    package static func withCXoneRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T {
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: .multi))
        return try await CXoneEmulator(server: server, logger: Logger.quiet).withRunning { endpoints in
            let channel = try CXoneChannelConfiguration(json: server.channelConfiguration)
            let makeBackend: @Sendable (CXoneEmulator.Endpoints, String) -> any ChatBackend = { endpoints, customer in
                CXoneBackend(
                    configuration: CXoneConfiguration(
                        environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                        brandID: server.configuration.brandID,
                        channelID: server.configuration.channelID,
                        customerID: customer
                    ),
                    channel: channel
                )
            }
            let control = CXoneEmulatorControl(server: server, endpoints: endpoints, makeBackend: makeBackend)
            return try await body(
                EmulatorRig(
                    control: control,
                    raw: { conversation in
                        RawCXoneClient(
                            socketURL: endpoints.socketURL, brandID: server.configuration.brandID, channelID: server.configuration.channelID,
                            customerID: control.customerID, thread: conversation.rawValue
                        )
                    },
                    // A load run's thread waits as long as its run does (many first messages at once).
                    customer: {
                        CXoneEmulatorControl(
                            server: server, endpoints: endpoints, customerID: "customer-\($0)", patience: .seconds(300), makeBackend: makeBackend
                        )
                    }
                )
            )
        }
    }
}

/// The samples of one adapter, in seconds.
package struct LatencySamples {
    package var send: [Double] = []
    package var agent: [Double] = []
    package var rawSend: [Double] = []
    package var rawAgent: [Double] = []

    /// The nearest-rank percentile.
    package static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((Double(sorted.count) * fraction).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    package func rows(adapter: String, store: String) -> [BenchRow] {
        func ms(_ values: [Double], _ fraction: Double) -> Double { Self.percentile(values, fraction) * 1000 }
        let sendRatio = ms(send, 0.5) / ms(rawSend, 0.5)
        let agentRatio = ms(agent, 0.5) / ms(rawAgent, 0.5)
        return [
            BenchRow(
                name: "send → confirmed, \(adapter), \(store), p50 of \(send.count)", unit: "ms", switchboard: ms(send, 0.5),
                baselineName: "raw client", baseline: ms(rawSend, 0.5), ratio: sendRatio, goal: "≤ 1.3× the time", met: sendRatio <= 1.3
            ),
            BenchRow(
                name: "send → confirmed, \(adapter), \(store), p99 of \(send.count)", unit: "ms", switchboard: ms(send, 0.99),
                baselineName: "raw client", baseline: ms(rawSend, 0.99), ratio: ms(send, 0.99) / ms(rawSend, 0.99), goal: "≤ 2 ms",
                met: ms(send, 0.99) <= 2
            ),
            BenchRow(
                name: "agent message → app, \(adapter), \(store), p50 of \(agent.count)", unit: "ms", switchboard: ms(agent, 0.5),
                baselineName: "raw client", baseline: ms(rawAgent, 0.5), ratio: agentRatio, goal: "≤ 1.5× the time", met: agentRatio <= 1.5
            ),
            BenchRow(
                name: "agent message → app, \(adapter), \(store), p99 of \(agent.count)", unit: "ms", switchboard: ms(agent, 0.99),
                baselineName: "raw client", baseline: ms(rawAgent, 0.99), ratio: ms(agent, 0.99) / ms(rawAgent, 0.99), goal: "reported",
                met: true
            ),
        ]
    }
}

// MARK: Raw clients

/// The baseline: the least a client of the vendor's protocol does for the same exchanges, with
/// no Switchboard code in between (its own JSON, parsed with `JSONSerialization`).
package protocol RawChatClient: Sendable {
    /// Connects as the customer, then `exchanges` times: sends a message and waits for the
    /// server's confirmation, and has the agent send one (`agentSend`) and waits for it to arrive.
    func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double])
}

/// Parses one JSON object the way a raw client would.
package func rawObject(_ text: some StringProtocol) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}

/// A WebSocket of WSClient's, read inline one text message at a time (no reader task). The
/// functions are `@concurrent`, as WSClient's iterator is: reading it is no isolation hop.
package enum RawSocket {
    package typealias Inbound = WebSocketInboundMessageStream.AsyncIterator

    /// Reads until a text message whose parsed object satisfies `predicate`.
    @concurrent package static func next(_ inbound: inout Inbound, where predicate: ([String: Any]) -> Bool) async throws {
        while let message = try await inbound.next() {
            if case .text(let text) = message, let object = rawObject(text), predicate(object) { return }
        }
        throw SwitchboardError(.connectionLost, "bench: the raw client's socket closed")
    }

    /// One measured exchange each way: `message` sent until a frame satisfies `confirmed`, then
    /// the agent's `answer` (`agentSend`) until a frame satisfies `arrived`; the two times.
    @concurrent package static func exchange(
        _ inbound: inout Inbound,
        send message: [String: Any],
        on outbound: WebSocketOutboundWriter,
        confirmed: ([String: Any]) -> Bool,
        answer: String,
        agentSend: @Sendable (String) async throws -> Void,
        arrived: ([String: Any]) -> Bool
    ) async throws -> (sent: Double, received: Double) {
        let started = ContinuousClock.now
        try await send(message, on: outbound)
        try await next(&inbound, where: confirmed)
        let sent = Bench.seconds(since: started)
        let asked = ContinuousClock.now
        try await agentSend(answer)
        try await next(&inbound, where: arrived)
        return (sent, Bench.seconds(since: asked))
    }

    package static func send(_ object: [String: Any], on outbound: WebSocketOutboundWriter) async throws {
        let data = try JSONSerialization.data(withJSONObject: object)
        try await outbound.write(.text(String(decoding: data, as: UTF8.self)))
    }

    package static func connect(_ url: String, _ body: @concurrent @Sendable (inout Inbound, WebSocketOutboundWriter) async throws -> Void) async throws {
        try await withoutActuallyEscaping(body) { body in
            // Frames as large as a client of the protocols accepts (a retransmit page is ~0.5 MB in
            // one frame; WSClient's default is 16 KiB).
            var configuration = WebSocketClientConfiguration()
            configuration.maxFrameSize = 1 << 24
            _ = try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger.quiet) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 24).makeAsyncIterator()
                try await body(&messages, outbound)
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
    }
}

package struct RawVoximplantClient: RawChatClient {
    package let url: String
    package let user: String
    package let token: String
    package let conversation: String

    /// The `login` request and its response.
    @concurrent func login(_ inbound: inout RawSocket.Inbound, _ outbound: WebSocketOutboundWriter) async throws {
        try await RawSocket.send(["type": "request", "id": "login", "name": "login", "params": ["user": user, "token": token]], on: outbound)
        try await RawSocket.next(&inbound) { $0["id"] as? String == "login" }
    }

    package func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double]) {
        let result = Locked<(sends: [Double], agents: [Double])>(([], []))
        try await RawSocket.connect(url) { @concurrent inbound, outbound in
            try await login(&inbound, outbound)
            for index in 0..<exchanges {
                let id = "raw-\(round)-\(index)"
                let answer = "agent to raw \(round).\(index)"
                let times = try await RawSocket.exchange(
                    &inbound,
                    send: [
                        "type": "request", "id": id, "name": "sendMessage",
                        "params": ["conversation": conversation, "text": "raw \(round).\(index)", "payload": [Any](), "clientMessageId": id],
                    ],
                    on: outbound,
                    confirmed: { $0["id"] as? String == id },
                    answer: answer,
                    agentSend: agentSend,
                    arrived: { ($0["message"] as? [String: Any])?["text"] as? String == answer }
                )
                result.withLock { $0.sends.append(times.sent); $0.agents.append(times.received) }
            }
        }
        return result.withLock { $0 }
    }
}

package struct RawCXoneClient: RawChatClient {
    package let socketURL: String
    package let brandID: Int
    package let channelID: String
    package let customerID: String
    package let thread: String
    /// The SDK version the raw client announces (the one the emulator accepts).
    private let sdkVersion = "3.3.1"

    private func event(_ type: String, _ id: String, data: [String: Any]) -> [String: Any] {
        [
            "action": type == "AuthorizeCustomer" ? "register" : "chatWindowEvent", "eventId": id,
            "payload": [
                "brand": ["id": brandID], "channel": ["id": channelID], "customerIdentity": ["idOnExternalPlatform": customerID],
                "eventType": type, "data": data,
            ],
        ]
    }

    package func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double]) {
        let visitor = UUID().uuidString.lowercased()
        let url = "\(socketURL)?brandId=\(brandID)&channelId=\(channelID)&visitorId=\(visitor)&sdkPlatform=ios&sdkVersion=\(sdkVersion)"
        let result = Locked<(sends: [Double], agents: [Double])>(([], []))
        try await RawSocket.connect(url) { @concurrent inbound, outbound in
            let authorize = UUID().uuidString.lowercased()
            try await RawSocket.send(
                event("AuthorizeCustomer", authorize, data: ["disableChannelInfo": true, "sdkPlatform": "ios", "sdkVersion": sdkVersion]), on: outbound
            )
            try await RawSocket.next(&inbound) { $0["eventId"] as? String == authorize }
            for index in 0..<exchanges {
                let id = UUID().uuidString.lowercased()
                let answer = "agent to raw \(round).\(index)"
                let times = try await RawSocket.exchange(
                    &inbound,
                    send: event(
                        "SendMessage", id,
                        data: [
                            "thread": ["idOnExternalPlatform": thread], "idOnExternalPlatform": id,
                            "messageContent": ["type": "TEXT", "payload": ["text": "raw \(round).\(index)"]],
                        ]
                    ),
                    on: outbound,
                    confirmed: { $0["eventId"] as? String == id },
                    answer: answer,
                    agentSend: agentSend,
                    arrived: { object in
                        let message = (object["data"] as? [String: Any])?["message"] as? [String: Any]
                        return ((message?["messageContent"] as? [String: Any])?["payload"] as? [String: Any])?["text"] as? String == answer
                    }
                )
                result.withLock { $0.sends.append(times.sent); $0.agents.append(times.received) }
            }
        }
        return result.withLock { $0 }
    }
}

/// Webim over AsyncHTTPClient: `init`, then `chat.message` actions and the `delta` long-poll,
/// sequentially (the next poll is asked after the action or the agent's send).
package struct RawWebimClient: RawChatClient {
    package let baseURL: String
    package let visitorFields: String

    private func get(_ path: String, _ query: [(String, String)]) async throws -> [String: Any] {
        var components = URLComponents(string: baseURL + path)!
        components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: components.string!), timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 24)
        guard let object = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] else {
            throw SwitchboardError(.protocolViolation, "bench: \(path) answered no JSON object")
        }
        return object
    }

    private func post(_ path: String, _ form: [(String, String)]) async throws {
        var components = URLComponents()
        components.queryItems = form.map { URLQueryItem(name: $0.0, value: $0.1) }
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: components.percentEncodedQuery ?? ""))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 24)
        guard response.status == .ok else { throw SwitchboardError(.serverError, "bench: \(path) answered \(response.status)") }
    }

    package func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double]) {
        let initial = try await get(
            "/l/v/m/init",
            [
                ("device-id", "raw-bench"), ("event", "init"), ("location", "mobile"), ("platform", "ios"), ("respond-immediately", "1"),
                ("since", "0"), ("title", "bench"), ("visitor-ext", visitorFields),
            ]
        )
        let full = initial["fullUpdate"] as? [String: Any]
        guard let page = full?["pageId"] as? String, let token = full?["authToken"] as? String else {
            throw SwitchboardError(.protocolViolation, "bench: init answered no page")
        }
        var revision = "\(initial["revision"] ?? 0)"
        /// Polls `delta` until an added message satisfies `predicate`.
        func poll(until predicate: ([String: Any]) -> Bool) async throws {
            while true {
                let answer = try await get("/l/v/m/delta", [("since", revision), ("page-id", page), ("auth-token", token), ("ts", "0")])
                if let next = answer["revision"] { revision = "\(next)" }
                for case let item as [String: Any] in answer["deltaList"] as? [Any] ?? [] {
                    if item["objectType"] as? String == "CHAT_MESSAGE", let data = item["data"] as? [String: Any], predicate(data) { return }
                }
            }
        }
        var sends: [Double] = []
        var agents: [Double] = []
        for index in 0..<exchanges {
            let clientSideID = UUID().uuidString.lowercased()
            let started = ContinuousClock.now
            try await post(
                "/l/v/m/action",
                [("action", "chat.message"), ("message", "raw \(round).\(index)"), ("client-side-id", clientSideID), ("page-id", page), ("auth-token", token)]
            )
            try await poll { $0["clientSideId"] as? String == clientSideID }
            sends.append(Bench.seconds(since: started))
            let answer = "agent to raw \(round).\(index)"
            let asked = ContinuousClock.now
            try await agentSend(answer)
            try await poll { $0["text"] as? String == answer }
            agents.append(Bench.seconds(since: asked))
        }
        return (sends, agents)
    }
}
