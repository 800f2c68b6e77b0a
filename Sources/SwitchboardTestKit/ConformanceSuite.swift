import Foundation
import Logging
@_spi(TestKit) public import Switchboard

/// One behaviour every adapter must show, checked against its emulator.
///
/// A case names the capabilities, sync model and emulator faults it needs; ``run(_:)`` skips it
/// when the backend or the emulator lacks them (gated on data, never on a backend's name).
public struct ConformanceCase: Sendable, CustomStringConvertible {
    public enum Outcome: Sendable, Hashable {
        case passed
        case skipped(String)
    }

    public let name: String
    public let capabilities: BackendCapabilities
    /// The case needs a backend whose events carry sequences (`SyncModel.sequenced(batchLimit:)`).
    public let needsSequences: Bool
    public let faults: Set<EmulatorFault.Kind>
    let body: @Sendable (ConformanceHarness) async throws -> Void

    public init(
        _ name: String,
        capabilities: BackendCapabilities = [],
        needsSequences: Bool = false,
        faults: Set<EmulatorFault.Kind> = [],
        body: @escaping @Sendable (ConformanceHarness) async throws -> Void
    ) {
        self.name = name
        self.capabilities = capabilities
        self.needsSequences = needsSequences
        self.faults = faults
        self.body = body
    }

    public var description: String { name }

    /// Runs the case, or skips it.
    ///
    /// - Throws: ``ConformanceFailure`` or the error that broke the case.
    public func run(_ context: ConformanceContext) async throws -> Outcome {
        let backend = try await context.emulator.makeCustomerBackend()
        let missing = capabilities.subtracting(backend.descriptor.capabilities)
        if !missing.isEmpty { return .skipped("\(backend.descriptor.name) lacks \(missing)") }
        if needsSequences, !backend.descriptor.sync.isSequenced { return .skipped("\(backend.descriptor.name) has no sequences") }
        let missingFaults = faults.subtracting(context.emulator.supportedFaults)
        if !missingFaults.isEmpty {
            return .skipped("the emulator cannot inject \(missingFaults.map(\.rawValue).sorted())")
        }
        do {
            try await body(ConformanceHarness(context: context))
        } catch let skip as ConformanceSkip {
            return .skipped(skip.description)
        }
        return .passed
    }

    /// Runs the case and holds its outcome to the cases the adapter is known to skip: a skip
    /// that is not listed fails (a case must not pass by skipping), and so does a listed case
    /// that ran (the list would go stale). Prints the skip with its reason.
    ///
    /// - Parameters:
    ///   - context: the adapter's emulator and how to make its sessions.
    ///   - expectedSkips: the names of the cases this adapter skips, by capability or fault it
    ///     lacks.
    ///   - label: names the run in the printed skips (the adapter and its mode).
    /// - Throws: ``ConformanceFailure`` or the error that broke the case.
    public func run(_ context: ConformanceContext, expectingSkips expectedSkips: Set<String>, label: String) async throws {
        let outcome = try await run(context)
        switch outcome {
        case .skipped(let why):
            print("\(label): skipped \(name): \(why)")
            try require(expectedSkips.contains(name), "\(label) skipped \(name) (\(why)), which is not among its expected skips")
        case .passed:
            try require(!expectedSkips.contains(name), "\(label) ran \(name), listed as an expected skip: update the list")
        }
    }
}

/// The cases every adapter runs, with one parameterized test:
///
/// ```swift
/// @Test(arguments: ConformanceSuite.cases)
/// func conformance(_ conformanceCase: ConformanceCase) async throws {
///     try await conformanceCase.run(
///         ConformanceContext(emulator: myEmulator),
///         expectingSkips: ["edit and delete"],   // what the backend cannot do
///         label: "mine"
///     )
/// }
/// ```
public enum ConformanceSuite {
    public static let cases: [ConformanceCase] = [
        connectAndClose, sendAndEcho, receiveAgentMessage, typingFromAgent, typingEndsWithTheChat, typingToAgent, readMarkers, readOnAnotherDevice, activityOrder,
        historyPaging, reconnectWithoutLoss, gapFill, duplicatesDropped, outOfOrderHeldBack,
        outboxAcrossDisconnect, rejectedSendFails, unsupportedCapabilityThrows, malformedInboundSurvives,
        fatalEndsSession, multipleSessionsOneBus, editAndDelete, loginRetried, conversationLifecycle, noSecretsInLogs,
        badInputSurvived,
        vendorBadInputSurvived, unreadAndActivity, markReadClears, agentKeptAcrossAReconnect,
    ]

    static let connectAndClose = ConformanceCase("connect and close") { harness in
        try await harness.withSession { probe in
            let isConnected = await probe.session.connectionState == .connected
            try require(isConnected, "the session is connected")
            await probe.session.close()
            do {
                _ = try await probe.session.conversations()
                throw ConformanceFailure("a call after close succeeded")
            } catch let error as SwitchboardError {
                try require(error.code == .sessionClosed, "a call after close fails with sessionClosed, not \(error)")
            }
            do {
                try await probe.session.resume()
                throw ConformanceFailure("resume after close succeeded")
            } catch let error as SwitchboardError {
                try require(error.code == .sessionClosed, "resume after close fails with sessionClosed, not \(error)")
            }
        }
    }

    /// What a session and its adapter log, at trace level, through a send, an agent's message, a
    /// failed request and a dropped link: never a message's text, what the customer's backend is
    /// configured with (``EmulatorControl/customerSecrets``), nor a stored credential (a token, a
    /// page or visitor id: every value of 12 characters or more).
    static let noSecretsInLogs = ConformanceCase("nothing secret in the logs at trace level", faults: [.disconnect, .failRequest]) {
        harness in
        let records = LogRecorder()
        let backend = try await harness.emulator.makeCustomerBackend()
        let store = InMemoryChatStore()
        let texts = ["the customer's s3cret 4711", "the agent's s3cret 0815", "after the drop s3cret 2342"]
        let scope = try await harness.withSession(backend: backend, store: store, logger: records.logger(level: .trace)) { probe in
            let conversation = try await probe.openConversation()
            let sent = try await conversation.send(text: texts[0])
            try await probe.recorder.first("the send is confirmed") { event in
                event.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false
            }
            try await probe.emulator.agentSend(texts[1], in: conversation.id)
            try await probe.waitForMessages([texts[1]], in: conversation)
            try await probe.emulator.inject(.failNextRequest(SwitchboardError(.serverError, "injected"), named: nil))
            try await probe.emulator.inject(.disconnect)
            let again = try await conversation.send(text: texts[2])
            try await probe.recorder.first("the send after the drop is confirmed") { event in
                event.updatedMessage.map { $0.clientID == again.clientID && $0.serverID != nil } ?? false
            }
            return probe.session.scope
        }
        let credentials = await store.fetchCredentials(scope: scope)
        let secrets = texts + harness.emulator.customerSecrets + credentials.values.values.filter { $0.count >= 12 }
        let lines = records.recorded
        for secret in secrets {
            let leaks = lines.filter { $0.contains(secret) }
            try require(leaks.isEmpty, "a log line holds a secret (\(secret.prefix(4))…): \(leaks.first ?? "")")
        }
        print("\(backend.descriptor.name): \(lines.count) log lines at trace level, \(secrets.count) secrets, none in the logs")
    }

    /// Bad input the server sends the customer: each must leave the session up (the agent's next
    /// message arrives and is stored) and lose nothing stored; each that is not a JSON object is
    /// reported as an `.error` event before that next message.
    static let badInput: [(name: String, text: String, isProblem: Bool)] = [
        ("truncated JSON", #"{"type":"event","eventType":"sendMessage","conversation":"#, true),
        ("not JSON", "<html><body>502 Bad Gateway</body></html>", true),
        ("a JSON array", "[1, 2, 3]", true),
        ("a JSON string", #""hello""#, true),
        ("an empty frame", "", true),
        ("nesting 100,000 deep", String(repeating: "[", count: 100_000), true),
        ("a number out of range", #"{"n": 1e999}"#, true),
        ("a lone surrogate escape", #"{"text": "\ud800"}"#, true),
        ("a JSON object of no known shape", #"{"surprise": {"deeply": [1, 2, {"nested": null}]}}"#, false),
        ("a 512 KB string", #"{"text": ""# + String(repeating: "a", count: 512 * 1024) + #""}"#, false),
    ]

    /// Sends `text` to the customer as it is, then has the agent write `after`; the events in
    /// between, once `after` is stored.
    private static func eventsAfter(
        rawFrame text: String, until after: String, in conversation: any Conversation, _ probe: SessionProbe
    ) async throws -> ArraySlice<ChatEvent> {
        let from = probe.recorder.events.count
        try await probe.emulator.inject(.rawFrame(text))
        try await probe.emulator.agentSend(after, in: conversation.id)
        try await probe.waitForMessages([after], in: conversation)
        return probe.recorder.events.dropFirst(from).prefix { $0.addedMessage?.text != after }
    }

    static let badInputSurvived = ConformanceCase("bad input is reported, never a crash or a loss", faults: [.rawFrame]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.agentSend("before the bad input", in: conversation.id)
            try await probe.waitForMessages(["before the bad input"], in: conversation)
            var reported = 0
            for (index, input) in badInput.enumerated() {
                let between = try await eventsAfter(rawFrame: input.text, until: "after bad input \(index + 1)", in: conversation, probe)
                let problem = between.contains { if case .error = $0.kind { return true } else { return false } }
                if problem { reported += 1 }
                try require(problem || !input.isProblem, "\(input.name) is reported as a problem")
            }
            let stored = try await conversation.storedMessages(before: nil, limit: .max).map(\.text)
            let expected = ["before the bad input"] + badInput.indices.map { "after bad input \($0 + 1)" }
            for text in expected {
                try require(stored.filter { $0 == text }.count == 1, "\(text) is stored once after the bad input")
            }
            let connected = await probe.session.connectionState == .connected
            try require(connected, "the session is still connected")
            print("\(probe.session.descriptor.name): \(badInput.count) bad inputs, \(reported) reported as problems, session up, \(expected.count) messages stored once each")
        }
    }

    static let vendorBadInputSurvived = ConformanceCase("the vendor's own shapes, broken, are reported and lose nothing", faults: [.rawFrame]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.agentSend("before the vendor's bad input", in: conversation.id)
            try await probe.waitForMessages(["before the vendor's bad input"], in: conversation)
            let before = try await conversation.storedMessages(before: nil, limit: .max).map(\.text)
            let inputs = try await probe.emulator.vendorBadInput(in: conversation.id)
            try require(!inputs.isEmpty, "the emulator has a table of its vendor's bad input")
            var reported = 0
            var surfaced = 0
            var dropped = 0
            for (index, input) in inputs.enumerated() {
                let between = try await eventsAfter(rawFrame: input.text, until: "after vendor input \(index + 1)", in: conversation, probe)
                let problem = between.contains { if case .error = $0.kind { return true } else { return false } }
                let custom = between.contains { if case .custom = $0.kind { return true } else { return false } }
                let refused = between.contains { event in
                    if case .connection(_, reason: .connectionLost(let error)?) = event.kind { return error.code == .payloadTooLarge }
                    return false
                }
                if problem { reported += 1 } else if custom { surfaced += 1 }
                if refused { dropped += 1 }
                switch input.expectation {
                case .reported: try require(problem, "\(input.name) is reported as a problem")
                case .surfaced: try require(problem || custom, "\(input.name) is reported or passed on as a vendor event")
                case .dropsTheLink: try require(refused, "\(input.name) is refused as too large and the link comes back")
                case .tolerated: break
                }
            }
            let stored = try await conversation.storedMessages(before: nil, limit: .max).map(\.text)
            let expected = before + inputs.indices.map { "after vendor input \($0 + 1)" }
            try require(stored == expected, "the conversation holds exactly its messages, once each, in order: \(stored)")
            let connected = await probe.session.connectionState == .connected
            try require(connected, "the session is still connected")
            print(
                "\(probe.session.descriptor.name): \(inputs.count) vendor-shaped bad inputs (\(inputs.map(\.name).joined(separator: "; "))), "
                    + "\(reported) reported, \(surfaced) passed on as vendor events, \(dropped) refused as too large, session up, nothing lost"
            )
        }
    }

    static let sendAndEcho = ConformanceCase("send and echo") { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            let pending = try await conversation.send(text: "hello from the customer")
            try require(pending.deliveryState == .pending && pending.serverID == nil, "a send is pending at once")
            let confirmed = try await probe.recorder.first("the send is confirmed") { event in
                event.updatedMessage.map { $0.clientID == pending.clientID && $0.serverID != nil } ?? false
            }
            try require(confirmed.updatedMessage?.deliveryState != .pending, "a confirmed message is not pending")
            let onServer = try await probe.emulator.serverMessages(in: conversation.id)
                .filter { $0.text == "hello from the customer" }
            try require(onServer.count == 1, "the server has the message once, not \(onServer.count) times")
            let stored = try await conversation.storedMessages(before: nil, limit: 100)
                .filter { $0.clientID == pending.clientID }
            try require(stored.count == 1, "the store has the message once, not \(stored.count) times")
            try require(stored[0].serverID == onServer[0].serverID, "the stored message has the server's id")
        }
    }

    static let receiveAgentMessage = ConformanceCase("receive an agent message") { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.agentSend("hello from the agent", in: conversation.id)
            let event = try await probe.recorder.first("the agent's message") { $0.addedMessage?.text == "hello from the agent" }
            let message = try event.addedMessage.unwrap("message")
            try require(message.serverID != nil, "an agent message has a server id")
            try require(message.senderRole != .customer, "an agent message is not from the customer")
            try require(event.conversationID == conversation.id, "the event names its conversation")
        }
    }

    static let typingFromAgent = ConformanceCase("typing from the agent", capabilities: .typing) { harness in
        try await harness.withSession { probe in
            _ = try await agentTypes(probe)
        }
    }

    /// Opens a conversation whose agent types, and waits until the session says so.
    private static func agentTypes(_ probe: SessionProbe) async throws -> any Conversation {
        let conversation = try await probe.openConversation()
        try await probe.emulator.agentTyping(true, in: conversation.id)
        try await probe.recorder.first("the agent is typing") { event in
            if case .typing(_, true, _) = event.kind { return event.conversationID == conversation.id }
            return false
        }
        return conversation
    }

    static let typingEndsWithTheChat = ConformanceCase("typing ends when the agent ends the chat", capabilities: .typing) { harness in
        try await harness.withSession { probe in
            let conversation = try await agentTypes(probe)
            let mark = probe.recorder.events.count
            try await probe.emulator.agentEnd(conversation.id)
            // Nothing says "stopped typing" but the end itself (no backend's agent sends it here).
            do {
                try await probe.recorder.waitUntil("the agent's typing ends with the chat") { events in
                    events.dropFirst(mark).contains { event in
                        if case .typing(_, false, _) = event.kind { return event.conversationID == conversation.id }
                        return false
                    }
                }
            } catch {
                throw ConformanceFailure("\(error); after the end came \(probe.recorder.events.dropFirst(mark).map(\.kind))")
            }
            let info = try await conversation.info()
            print("\(probe.session.descriptor.name): typing ended with the chat (state \(info.state), agent \(info.assignedAgent?.id.rawValue ?? "none"))")
        }
    }

    static let typingToAgent = ConformanceCase("typing to the agent", capabilities: .typing) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await conversation.userTyping(draft: "hel")
            _ = try await probe.emulator.waitForCustomerActivity(in: conversation.id, timeout: probe.recorder.patience) {
                $0.typing.contains(true)
            }
        }
    }

    static let readMarkers = ConformanceCase("read markers both ways", capabilities: .readMarkers) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await conversation.send(text: "please read this")
            try await probe.recorder.first("the send is confirmed") { $0.updatedMessage?.serverID != nil }
            try await probe.emulator.agentMarkRead(in: conversation.id)
            try await probe.recorder.first("the agent's read marker") { event in
                if case .readMarker = event.kind { return event.conversationID == conversation.id }
                return false
            }
            try await probe.emulator.agentSend("read mine", in: conversation.id)
            try await probe.waitForMessages(["read mine"], in: conversation)
            try await conversation.markRead()
            _ = try await probe.emulator.waitForCustomerActivity(in: conversation.id, timeout: probe.recorder.patience) {
                $0.readMarkers >= 1
            }
        }
    }

    static let historyPaging = ConformanceCase("history paging", capabilities: .historyPaging) { harness in
        let conversationID = try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.seedHistory(25, in: conversation.id)
            return conversation.id
        }
        let truth = try await harness.emulator.serverMessages(in: conversationID)
        try await harness.withSession { probe in
            try await probe.recorder.first("the session learns the conversation") {
                $0.conversationID == conversationID && $0.kind.category == .conversation
            }
            let conversation = try await probe.session.conversation(conversationID)
            var collected: [Message] = []
            var before: MessageOrderKey?
            for _ in 0..<20 {
                let page = try await conversation.history(before: before, limit: 10)
                guard let oldest = page.first else { break }
                collected = page + collected
                before = oldest.orderKey
            }
            let ids = collected.compactMap(\.serverID)
            try require(Set(ids).count == ids.count, "history pages hold no duplicates")
            try require(
                ids == truth.map(\.serverID),
                "paging gives the server's \(truth.count) messages in order, got \(ids.count)"
            )
        }
    }

    static let reconnectWithoutLoss = ConformanceCase("reconnect without loss", faults: [.disconnect]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.session.pause()
            try await probe.recorder.first("paused") {
                if case .connection(.disconnected, _) = $0.kind { return true }
                return false
            }
            let offline = (1...5).map { "while paused \($0)" }
            for text in offline { try await probe.emulator.agentSend(text, in: conversation.id) }
            let resumedAt = probe.recorder.events.count
            try await probe.session.resume()
            try await probe.waitForConnection(after: resumedAt)
            try await probe.waitForMessages(offline, in: conversation)
            let before = try await probe.emulator.appliedFaults
            let connects = await probe.session.statistics.connects
            try await probe.emulator.inject(.disconnect)
            let dropped = (1...5).map { "around a dropped link \($0)" }
            for text in dropped { try await probe.emulator.agentSend(text, in: conversation.id) }
            try await probe.waitForMessages(dropped, in: conversation)
            // The store is checked once the cut took effect (it may come after the messages: a
            // long-poll in flight brings them before the next one is cut).
            let cut = try await expectFault(.disconnect, since: before, "the disconnect", probe: probe)
            try await expectServerOrder(of: offline + dropped, probe: probe, conversation: conversation)
            let reconnected = await probe.session.statistics.connects - connects
            print(
                "\(probe.session.descriptor.name): reconnect without loss: the disconnect cut \(cut) live link(s), the session connected \(reconnected) more time(s); "
                    + "\(offline.count) messages sent while paused and \(dropped.count) around the cut stored once each, in order"
            )
        }
    }

    static let gapFill = ConformanceCase("gap fill after dropped events", needsSequences: true, faults: [.dropEvents]) {
        harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            let before = try await probe.emulator.appliedFaults
            try await probe.emulator.inject(.dropNext(5))
            let texts = (1...8).map { "gap \($0)" }
            for text in texts { try await probe.emulator.agentSend(text, in: conversation.id) }
            try await probe.waitForMessages(texts, in: conversation)
            try await expectServerOrder(of: texts, probe: probe, conversation: conversation)
            let retransmits = await probe.session.statistics.retransmitRequests
            try require(retransmits > 0, "the gap was filled by retransmit")
            let dropped = try await expectFault(.dropEvents, since: before, "dropping events", probe: probe)
            print("\(probe.session.descriptor.name): gap fill: \(dropped) events dropped on the way, \(retransmits) retransmit requests, \(texts.count) messages stored once each, in order")
        }
    }

    static let duplicatesDropped = ConformanceCase("duplicates dropped", faults: [.duplicateEvents]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            // The agent writes once first, so the duplicated messages are plain news and not part
            // of the conversation's first change (Webim sends an appeal's first answer with the
            // whole appeal, and duplicates only messages that come on their own).
            try await probe.emulator.agentSend("before the duplicates", in: conversation.id)
            try await probe.waitForMessages(["before the duplicates"], in: conversation)
            let before = try await probe.emulator.appliedFaults
            let dropsBefore = await probe.session.statistics.duplicatesDropped
            try await probe.emulator.inject(.duplicateNext(4))
            let texts = (1...4).map { "twice \($0)" }
            for text in texts { try await probe.emulator.agentSend(text, in: conversation.id) }
            try await probe.emulator.agentSend("sentinel", in: conversation.id)
            try await probe.waitForMessages(texts + ["sentinel"], in: conversation)
            let duplicated = try await expectFault(.duplicateEvents, since: before, "duplicating events", probe: probe)
            try await expectServerOrder(of: texts, probe: probe, conversation: conversation)
            let dropped = await probe.session.statistics.duplicatesDropped - dropsBefore
            print(
                "\(probe.session.descriptor.name): duplicates dropped: \(duplicated) events delivered twice, the engine dropped \(dropped) duplicates, "
                    + "\(texts.count) messages stored and announced once each, in order"
            )
        }
    }

    static let outOfOrderHeldBack = ConformanceCase(
        "out-of-order events held back",
        needsSequences: true,
        faults: [.reorderEvents]
    ) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            let before = try await probe.emulator.appliedFaults
            let heldBefore = await probe.session.statistics.heldBack
            try await probe.emulator.inject(.reorderNext(4))
            let texts = (1...4).map { "ordered \($0)" }
            for text in texts { try await probe.emulator.agentSend(text, in: conversation.id) }
            try await probe.waitForMessages(texts, in: conversation)
            try await expectServerOrder(of: texts, probe: probe, conversation: conversation)
            let reordered = try await expectFault(.reorderEvents, since: before, "reordering events", probe: probe)
            let held = await probe.session.statistics.heldBack - heldBefore
            print(
                "\(probe.session.descriptor.name): out-of-order events held back: \(reordered) events delivered after a later one, "
                    + "the engine held back \(held), \(texts.count) messages stored and announced in the server's order"
            )
        }
    }

    static let outboxAcrossDisconnect = ConformanceCase("outbox across a disconnect", faults: [.failRequest]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.session.pause()
            var pending: [Message] = []
            for index in 1...3 { pending.append(try await conversation.send(text: "queued \(index)")) }
            let threeQueued = await probe.session.pendingSends.count == 3
            try require(threeQueued, "three sends wait in the outbox")
            let before = try await probe.emulator.appliedFaults
            let failedBefore = await probe.session.statistics.sendAttemptsFailed
            try await probe.emulator.inject(.failNextRequest(SwitchboardError(.connectionLost, "link dropped"), named: "send"))
            try await probe.session.resume()
            let ids = Set(pending.compactMap(\.clientID))
            try await probe.recorder.waitUntil("every queued send is confirmed") { events in
                let confirmed = Set(events.compactMap { $0.updatedMessage }.filter { $0.serverID != nil }.compactMap(\.clientID))
                return ids.isSubset(of: confirmed)
            }
            let onServer = try await probe.emulator.serverMessages(in: conversation.id).filter { $0.text.hasPrefix("queued ") }
            try require(onServer.map(\.text) == ["queued 1", "queued 2", "queued 3"], "sent once each, in order: \(onServer.map(\.text))")
            let outboxEmpty = await probe.session.pendingSends.isEmpty
            try require(outboxEmpty, "the outbox is empty")
            let failed = try await expectFault(.failRequest, since: before, "failing the first send", probe: probe)
            let attemptsFailed = await probe.session.statistics.sendAttemptsFailed - failedBefore
            print(
                "\(probe.session.descriptor.name): outbox across a disconnect: \(failed) send(s) met the injected failure, \(attemptsFailed) failed attempt(s) seen by the engine, "
                    + "3 queued sends on the server once each, in order, outbox empty"
            )
        }
    }

    static let rejectedSendFails = ConformanceCase("a rejected send becomes failed", faults: [.failRequest]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.inject(.failNextRequest(SwitchboardError(.messageRejected, "not allowed"), named: "send"))
            let doomed = try await conversation.send(text: "refused")
            let failed = try await probe.recorder.first("the send fails") { event in
                event.updatedMessage.map { $0.clientID == doomed.clientID && $0.deliveryState.isFailed } ?? false
            }
            try require(failed.updatedMessage?.serverID == nil, "a failed message has no server id")
            let next = try await conversation.send(text: "accepted")
            try await probe.recorder.first("the next send goes through") { event in
                event.updatedMessage.map { $0.clientID == next.clientID && $0.serverID != nil } ?? false
            }
            let texts = try await probe.emulator.serverMessages(in: conversation.id).map(\.text)
            try require(!texts.contains("refused") && texts.contains("accepted"), "the server has only the accepted send")
        }
    }

    static let unreadAndActivity = ConformanceCase("unread count and activity follow what arrives") { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            let before = try await conversation.info().unreadCount
            try await probe.emulator.agentSend("unread one", in: conversation.id)
            try await probe.emulator.agentSend("unread two", in: conversation.id)
            try await probe.waitForMessages(["unread one", "unread two"], in: conversation)
            let arrived = try await conversation.info()
            try require(arrived.unreadCount == before + 2, "two messages from the other side count: \(before) became \(arrived.unreadCount)")
            let mine = try await conversation.send(text: "my own")
            try await probe.recorder.first("the send is confirmed") { $0.updatedMessage.map { $0.clientID == mine.clientID && $0.serverID != nil } ?? false }
            let after = try await conversation.info()
            try require(after.unreadCount == before + 2, "the user's own message does not count: \(after.unreadCount)")
            let stored = try await conversation.storedMessages(before: nil, limit: 200).filter { $0.serverID != nil }
            // Times tie at the backend's resolution (a second on some): then the later in the
            // store's order is the newer.
            let newest = try stored.enumerated().max { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.unwrap("a stored message").element
            try require(after.updatedAt == newest.time, "activity is the newest message's time: \(String(describing: after.updatedAt)), not \(newest.time)")
            try require(after.lastMessage?.serverID == newest.serverID, "the last message is the newest: \(String(describing: after.lastMessage?.text))")
            if probe.session.descriptor.sync.isSequenced {
                let sequence = stored.compactMap(\.sequence).max()
                try require(after.lastSequence == sequence, "the last sequence is the newest message's: \(String(describing: after.lastSequence)), not \(String(describing: sequence))")
            }
        }
    }

    static let readOnAnotherDevice = ConformanceCase("reading on another device lowers the unread count", capabilities: .readMarkers) { harness in
        try await harness.withSession { first in
            let conversation = try await first.openConversation()
            try await first.emulator.agentSend("read me elsewhere", in: conversation.id)
            try await first.waitForMessages(["read me elsewhere"], in: conversation)
            let before = try await conversation.info().unreadCount
            try require(before > 0, "the agent's message is unread here")
            // Another device of the same customer, with a store of its own, reads it.
            try await harness.withSession { second in
                try await second.recorder.first("the other device learns the conversation") { event in
                    event.conversationID == conversation.id && event.kind.category == .conversation
                }
                let there = try await second.session.conversation(conversation.id)
                // A device that comes later may start at the conversation's head: it pages back
                // to what it was sent before.
                if second.session.descriptor.capabilities.contains(.historyPaging) { _ = try await there.history(before: nil, limit: 20) }
                try await second.recorder.waitUntil("the other device has the message") {
                    try await there.storedMessages(before: nil, limit: 50).contains { $0.text == "read me elsewhere" }
                }
                try await there.markRead()
                _ = try await second.emulator.waitForCustomerActivity(in: conversation.id, timeout: second.recorder.patience) { $0.readMarkers >= 1 }
            }
            try await first.recorder.waitUntil("the count here drops to 0") { try await conversation.info().unreadCount == 0 }
            print("\(first.session.descriptor.name): unread \(before) here, 0 after reading on another device")
        }
    }

    static let activityOrder = ConformanceCase("conversations follow their last activity") { harness in
        try await harness.withSession { probe in
            let first = try await probe.openConversation()
            let second = try await probe.openConversation()
            guard first.id != second.id else { throw ConformanceSkip("one conversation per customer: nothing to order") }
            /// Each conversation's activity, checked against its newest stored message.
            func activity(_ conversation: any Conversation) async throws -> Date {
                let info = try await conversation.info()
                let stored = try await conversation.storedMessages(before: nil, limit: 200).filter { $0.serverID != nil }
                let newest = try stored.map(\.time).max().unwrap("a stored message in \(conversation.id)")
                let updated = try info.updatedAt.unwrap("the activity of \(conversation.id)")
                try require(updated == newest, "\(conversation.id)'s activity is its newest message's time: \(updated), not \(newest)")
                return updated
            }
            try await probe.emulator.agentSend("in the first", in: first.id)
            try await probe.waitForMessages(["in the first"], in: first)
            try await probe.emulator.agentSend("in the second", in: second.id)
            try await probe.waitForMessages(["in the second"], in: second)
            try require(try await activity(second) >= activity(first), "the second conversation's message is the newer activity")
            try await probe.emulator.agentSend("the first again", in: first.id)
            try await probe.waitForMessages(["the first again"], in: first)
            let (one, two) = (try await activity(first), try await activity(second))
            try require(one >= two, "the first conversation's new message puts it first: \(one) against \(two)")
            let sorted = try await probe.session.conversations().filter { [first.id, second.id].contains($0.id) }
                .sorted { ($0.updatedAt ?? .distantPast) > ($1.updatedAt ?? .distantPast) }.map(\.id)
            print("\(probe.session.descriptor.name): conversations by activity \(sorted.map(\.rawValue)) (\(one == two ? "a tie at the backend's time resolution" : "apart"))")
            if one != two { try require(sorted == [first.id, second.id], "sorted by activity: \(sorted)") }
        }
    }

    static let agentKeptAcrossAReconnect = ConformanceCase("the agent and participants stay across a reconnect", faults: [.disconnect]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.agentSend("before the cut", in: conversation.id)
            try await probe.waitForMessages(["before the cut"], in: conversation)
            let before = try await conversation.info()
            let mark = probe.recorder.events.count
            let faults = try await probe.emulator.appliedFaults
            try await probe.emulator.inject(.disconnect)
            try await probe.emulator.agentSend("after the cut", in: conversation.id)
            try await probe.waitForMessages(["after the cut"], in: conversation)
            _ = try await expectFault(.disconnect, since: faults, "the disconnect", probe: probe)
            try await probe.waitForConnection(after: mark)
            let spurious = probe.recorder.events.dropFirst(mark).filter { event in
                guard event.conversationID == conversation.id else { return false }
                switch event.kind {
                case .agentChanged(let agent): return agent?.id != before.assignedAgent?.id
                case .participantsRemoved: return true
                default: return false
                }
            }
            try require(spurious.isEmpty, "nobody left and the agent did not change, yet the session said \(spurious.map(\.kind))")
            let after = try await conversation.info()
            try require(after.assignedAgent?.id == before.assignedAgent?.id, "the agent stays: \(String(describing: after.assignedAgent?.id))")
            try require(
                Set(after.participants.map(\.id)).isSuperset(of: before.participants.map(\.id)),
                "the participants stay: \(before.participants.map(\.id)) became \(after.participants.map(\.id))"
            )
            print("\(probe.session.descriptor.name): agent \(before.assignedAgent?.id.rawValue ?? "none") and \(before.participants.count) participants kept across a cut link")
        }
    }

    static let markReadClears = ConformanceCase(
        "marking read clears the unread count, also after a failed send", capabilities: .readMarkers, faults: [.failRequest]
    ) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.agentSend("read me", in: conversation.id)
            try await probe.waitForMessages(["read me"], in: conversation)
            try await probe.emulator.inject(.failNextRequest(SwitchboardError(.messageRejected, "not allowed"), named: "send"))
            let doomed = try await conversation.send(text: "refused")
            try await probe.recorder.first("the send fails") { $0.updatedMessage.map { $0.clientID == doomed.clientID && $0.deliveryState.isFailed } ?? false }
            try await probe.emulator.agentSend("and me", in: conversation.id)
            try await probe.waitForMessages(["and me"], in: conversation)
            try require(try await conversation.info().unreadCount > 0, "the agent's messages are unread")
            let marked = probe.recorder.events.count
            try await conversation.markRead()
            try require(try await conversation.info().unreadCount == 0, "marking read clears the count")
            _ = try await probe.emulator.waitForCustomerActivity(in: conversation.id, timeout: probe.recorder.patience) { $0.readMarkers >= 1 }
            let problems = probe.recorder.events.dropFirst(marked).compactMap { event -> SwitchboardError? in
                if case .error(let error) = event.kind { return error }
                return nil
            }
            try require(problems.isEmpty, "the marker names a message the server has, not the failed one: \(problems)")
        }
    }

    static let unsupportedCapabilityThrows = ConformanceCase("unsupported capability throws unsupported") { harness in
        let masked: BackendCapabilities = [.typing, .readMarkers, .edit, .delete, .agentRating, .archive, .conversationUpdate]
        let backend = CapabilityMaskedBackend(try await harness.emulator.makeCustomerBackend(), removing: masked)
        try await harness.withSession(backend: backend) { probe in
            let conversation = try await probe.openConversation()
            let calls: [(String, @Sendable () async throws -> Void)] = [
                ("typing", { try await conversation.userTyping(draft: "x") }),
                ("markRead", { try await conversation.markRead(upTo: .sequence(1)) }),
                ("edit", { try await conversation.edit("m", text: "x") }),
                ("delete", { try await conversation.delete("m") }),
                ("rateAgent", { try await conversation.rateAgent(nil, rating: 5, comment: nil) }),
                ("archive", { try await conversation.archive() }),
                ("update", { try await conversation.update(ConversationChanges(title: "x")) }),
            ]
            for (name, call) in calls {
                do {
                    try await call()
                    throw ConformanceFailure("\(name) succeeded without its capability")
                } catch let error as SwitchboardError {
                    try require(error.code == .unsupported, "\(name) throws unsupported, not \(error)")
                }
            }
        }
    }

    static let malformedInboundSurvives = ConformanceCase("malformed inbound data does not kill the session", faults: [.malformedFrame]) {
        harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.inject(.malformedFrame)
            try await probe.recorder.first("a non-fatal error") {
                if case .error = $0.kind { return true }
                return false
            }
            try await probe.emulator.agentSend("still here", in: conversation.id)
            try await probe.waitForMessages(["still here"], in: conversation)
            let stillOpen = await !probe.session.isClosed
            try require(stillOpen, "the session is still open")
        }
    }

    static let fatalEndsSession = ConformanceCase("a fatal error ends the session", faults: [.fatal]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            try await probe.emulator.inject(.fatal(SwitchboardError(.fatal, "account blocked")))
            let event = try await probe.recorder.first("a fatal event") {
                if case .fatal = $0.kind { return true }
                return false
            }
            if case .fatal(let error) = event.kind {
                try require(error.code == .fatal, "the fatal event carries a fatal error, not \(error)")
            }
            try await probe.recorder.waitUntil("the session closes") { events in
                events.contains { if case .connection(.disconnected, .fatal?) = $0.kind { return true } else { return false } }
            }
            let check6 = await probe.session.isClosed
            try require(check6, "the session is closed")
            do {
                try await conversation.send(text: "too late")
                throw ConformanceFailure("a send after a fatal error succeeded")
            } catch let error as SwitchboardError {
                try require(error.code == .sessionClosed, "a send after the end throws sessionClosed, not \(error)")
            }
        }
    }

    static let multipleSessionsOneBus = ConformanceCase("several sessions on one bus") { harness in
        let everything = EventRecorder(harness.bus.subscribe(filter: .all, buffering: .unbounded))
        async let recording: Void = everything.run()
        try await harness.withSession { first in
            try await harness.withSession { second in
                let one = try await first.openConversation()
                let two = try await second.openConversation()
                try await first.emulator.agentSend("to the first", in: one.id)
                try await second.emulator.agentSend("to the second", in: two.id)
                try await first.waitForMessages(["to the first"], in: one)
                try await second.waitForMessages(["to the second"], in: two)
                try await everything.waitUntil("both messages on the shared bus") { events in
                    // Both sessions may see both messages (one customer); each must publish its own.
                    let seen = Set(events.compactMap { event in event.addedMessage.map { "\($0.text) from \(event.origin.session)" } })
                    return seen.contains("to the first from \(first.session.id)") && seen.contains("to the second from \(second.session.id)")
                }
            }
        }
        everything.finish()
        await recording
    }

    static let editAndDelete = ConformanceCase("edit and delete", capabilities: [.edit, .delete]) { harness in
        try await harness.withSession { probe in
            let conversation = try await probe.openConversation()
            let pending = try await conversation.send(text: "first draft")
            let sent = try await probe.recorder.first("sent") { event in
                event.updatedMessage.map { $0.clientID == pending.clientID && $0.serverID != nil } ?? false
            }
            let id = try (sent.updatedMessage?.serverID).unwrap("server id")
            try await conversation.edit(id, text: "second draft")
            try await probe.recorder.first("the edit") { event in
                event.updatedMessage.map { $0.serverID == id && $0.text == "second draft" && $0.isEdited } ?? false
            }
            try await conversation.delete(id)
            try await probe.recorder.first("the removal") { event in
                if case .messageRemoved(id) = event.kind { return true }
                return false
            }
            let stored = try await conversation.storedMessages(before: nil, limit: 100)
            try require(!stored.contains { $0.serverID == id }, "a deleted message leaves the store")
        }
    }

    static let loginRetried = ConformanceCase("failed logins are retried once credentials allow", faults: [.rejectLogin]) { harness in
        try await harness.withSession(resume: false) { probe in
            let before = try await probe.emulator.appliedFaults
            try await probe.emulator.inject(.rejectNextLogin(SwitchboardError(.connectionLost, "handshake failed")))
            try await probe.emulator.inject(.rejectNextLogin(SwitchboardError(.authenticationFailed, "token expired")))
            try await probe.session.resume()
            try await probe.waitForConnection()
            // The server's count is exact; the session's may include a link a loaded machine's
            // real-time timers gave up on, so it is only a floor.
            let refused = try await probe.emulator.appliedFaults.since(before)[.rejectLogin]
            let failures = await probe.session.statistics.connectionFailures
            try require(refused == 2, "the server refused two logins before the link, not \(refused)")
            try require(failures >= 2, "the session counted the two failed attempts, not \(failures)")
        }
        try await harness.withSession(resume: false) { probe in
            try await probe.emulator.inject(.rejectNextLogin(SwitchboardError(.authenticationFailed, "bad token")))
            try await probe.emulator.inject(.rejectNextLogin(SwitchboardError(.authenticationFailed, "bad token")))
            try await probe.session.resume()
            try await probe.recorder.first("authentication failing twice is fatal") {
                if case .fatal = $0.kind { return true }
                return false
            }
        }
    }

    static let conversationLifecycle = ConformanceCase("start and close (or leave) a conversation", capabilities: .conversationLifecycle) {
        harness in
        try await harness.withSession { probe in
            // A first message, for backends where it makes the conversation (the others ignore it).
            let draft = ConversationDraft(title: "New question", firstMessage: MessageDraft(text: "My question"))
            let conversation: any Conversation
            do {
                conversation = try await probe.session.startConversation(draft)
            } catch let error as SwitchboardError where error.code == .unsupported {
                // A backend with one conversation at a time (a CXone live chat) refuses a second
                // while one is open, and starts it once that one is closed.
                for open in try await probe.session.conversations() where !open.state.isClosed {
                    try await probe.session.conversation(open.id).close()
                }
                conversation = try await probe.session.startConversation(draft)
            }
            try await probe.recorder.first("the new conversation") {
                if case .conversationAdded(let info) = $0.kind { return info.id == conversation.id }
                return false
            }
            try await conversation.close()
            // A support chat closes; a messenger conversation is left, and so removed.
            let ended = try await probe.recorder.first("the conversation is closed or left") { event in
                guard event.conversationID == conversation.id else { return false }
                switch event.kind {
                case .conversationStateChanged(let state, _): return state.isClosed
                case .conversationRemoved: return true
                default: return false
                }
            }
            if case .conversationRemoved = ended.kind {
                let remaining = try await probe.session.conversations().map(\.id)
                try require(!remaining.contains(conversation.id), "a left conversation leaves the store")
            } else {
                let closed = try await conversation.info().state.isClosed
                try require(closed, "the stored state is closed")
            }
        }
    }

    /// Requires that a fault of `kind` took effect (the client met it) since `before`, an
    /// earlier reading of the emulator's ``EmulatorControl/appliedFaults``; returns how often.
    static func expectFault(
        _ kind: EmulatorFault.Kind,
        since before: AppliedFaults,
        _ what: String,
        probe: SessionProbe,
        file: String = #fileID,
        line: Int = #line
    ) async throws -> Int {
        var applied = try await probe.emulator.appliedFaults.since(before)
        if applied[kind] == 0 {
            // A fault armed for the next request takes effect when that request comes: over a
            // long-poll, the one in flight may have brought the messages first. Wait for it (the
            // session's reconnect after it is an event), at most the recorder's patience.
            try? await probe.recorder.waitUntil("\(what) takes effect", check: {
                try await probe.emulator.appliedFaults.since(before)[kind] > 0
            })
            applied = try await probe.emulator.appliedFaults.since(before)
        }
        try require(
            applied[kind] > 0,
            "\(what) took effect: the emulator counted no \(kind.rawValue) on live traffic (it counted \(applied))",
            file: file,
            line: line
        )
        return applied[kind]
    }

    /// The client's store holds each of `texts` once, in the server's order.
    static func expectServerOrder(of texts: [String], probe: SessionProbe, conversation: any Conversation) async throws {
        let wanted = Set(texts)
        let truth = try await probe.emulator.serverMessages(in: conversation.id).filter { wanted.contains($0.text) }
        let stored = try await conversation.storedMessages(before: nil, limit: .max).filter { wanted.contains($0.text) }
        try require(stored.count == texts.count, "each message is stored once: \(stored.count) for \(texts.count)")
        try require(stored.map(\.serverID) == truth.map(\.serverID), "the store keeps the server's order")
        let added = probe.recorder.events.compactMap(\.addedMessage).filter { wanted.contains($0.text) }
        try require(added.count == texts.count, "each message is announced once: \(added.count) for \(texts.count)")
        try require(added.map(\.serverID) == truth.map(\.serverID), "messages are announced in the server's order")
    }
}

extension Optional {
    func unwrap(_ what: String) throws -> Wrapped {
        guard let value = self else { throw ConformanceFailure("missing \(what)") }
        return value
    }
}
