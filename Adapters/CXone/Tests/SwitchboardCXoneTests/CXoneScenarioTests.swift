import Foundation
import Logging
import Switchboard
@_spi(WireReaders) import SwitchboardCXone
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardTransport
import SwitchboardEmulation
import Testing
@_spi(TestKit) import CXoneEmulator

@Suite(.timeLimit(.minutes(3)))
struct CXoneScenarioTests {
    func harness(_ control: CXoneEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func threadCustomFieldsRideOnTheFirstMessageThenGoToTheContact() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let thread = try await probe.session.startConversation(ConversationDraft(kind: .thread))
                try await thread.setCustomFields(["order": "42"])
                try await thread.send(text: "About my order")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "About my order" && $0.updatedMessage?.serverID != nil }
                let first = control.server.received.first { $0.eventType == "SendMessage" }
                #expect(first?.data["contact"]?["customFields"]?[0]?["ident"] == "order", "a local thread's fields ride on its first message")
                try await thread.setCustomFields(["priority": "high"])
                try await waitUntil("SetContactCustomFields", timeout: .seconds(30), signal: control.server.changes) {
                    control.server.received.contains { $0.eventType == "SetContactCustomFields" }
                }
                let set = try #require(control.server.received.first { $0.eventType == "SetContactCustomFields" })
                #expect(set.data["contact"]?["id"]?.stringValue?.isEmpty == false && set.data["customFields"]?[0]?["value"] == "high")
                // What the app set reads back from the store, typed with the channel's definitions,
                // without a link.
                try await probe.session.pause()
                let requests = CXoneRequests(session: probe.session)
                let values = try await requests.customFields(ofThread: thread.id)
                #expect(values["order"] == "42" && values["priority"] == "high", "\(values)")
                let channel = try CXoneChannelConfiguration(json: control.server.channelConfiguration)
                let typed = channel.contactFields(values)
                #expect(typed.map(\.ident) == ["order", "priority"])
                #expect(typed.last?.valueLabel == "High", "a selector's value read as its option's label")
                if case .selector(let options)? = typed.last?.definition.kind { #expect(options == ["low": "Low", "high": "High"]) } else { Issue.record("priority is a selector") }
                #expect(channel.customerFields(["marital_status": "married"]).first?.valueLabel == "Married")
                print("cxone custom fields offline: \(typed.map { "\($0.label)=\($0.valueLabel ?? "-")" })")
            }
        }
    }

    @Test func theDeviceTokenRidesInTheFingerprintOfVisitorAndMessages() async throws {
        try await withCXoneEmulator(.init(mode: .single)) { control in
            let backend = try backend(control) { $0.deviceToken = "a1b2c3" }
            try await harness(control).withSession(backend: backend) { probe in
                let chat = try await probe.openConversation()
                _ = chat
                let sent = control.server.received.first { $0.eventType == "SendMessage" }
                #expect(sent?.data["deviceFingerprint"]?["deviceToken"] == "a1b2c3")
                #expect(control.server.visitors.values.contains { $0["browserFingerprint"]?["deviceToken"] == "a1b2c3" })
                // The platform the app runs on, not always "Linux" (#31), and its version.
                let fingerprint = try #require(sent?.data["deviceFingerprint"])
                let version = ProcessInfo.processInfo.operatingSystemVersion
                #if os(Linux)
                #expect(fingerprint["os"] == "Linux" && fingerprint["deviceType"] == "desktop")
                #elseif os(macOS)
                #expect(fingerprint["os"] == "macOS")
                #elseif os(iOS)
                #expect(fingerprint["os"] == "iOS" && fingerprint["deviceType"] == "mobile")
                #endif
                #expect(fingerprint["osVersion"]?.stringValue == "\(version.majorVersion).\(version.minorVersion)")
                #expect(fingerprint["applicationType"] == "native")
            }
        }
    }

    /// A backend on the emulator, as `adjust` configures it: the customer is the control's unless
    /// `adjust` clears it.
    func backend(_ control: CXoneEmulatorControl, _ adjust: (inout CXoneConfiguration) -> Void = { _ in }) throws -> CXoneBackend {
        var configuration = CXoneConfiguration(
            environment: control.environment,
            brandID: control.server.configuration.brandID, channelID: control.server.configuration.channelID, customerID: control.customerID
        )
        adjust(&configuration)
        return CXoneBackend(
            configuration: configuration, channel: try CXoneChannelConfiguration(json: control.server.channelConfiguration),
            transport: control.transport, webSockets: control.webSockets
        )
    }

    /// A backend whose heartbeat runs every 500 ms with a 5 s pong deadline, lengths the cases move
    /// the virtual clock by (``missPong(_:)``).
    func impatientBackend(_ control: CXoneEmulatorControl) throws -> CXoneBackend {
        try backend(control) {
            $0.heartbeatInterval = .milliseconds(500)
            $0.pongTimeout = .seconds(5)
        }
    }

    @Test func aMissingPongReconnectsAndRecoversWithoutDuplicates() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession(backend: try impatientBackend(control)) { probe in
                let chat = try await probe.openConversation()
                for index in 1...3 { control.agent.send("before \(index)", in: chat.id.rawValue) }
                try await probe.waitForMessages((1...3).map { "before \($0)" }, in: chat)
                try await missPong(control)
                try await probe.recorder.waitUntil("reconnected after the missing pong") { $0.filter(\.isConnected).count >= 2 }
                control.agent.send("after", in: chat.id.rawValue)
                try await probe.waitForMessages(["after"], in: chat)
                let stored = try await chat.storedMessages(before: nil, limit: .max).compactMap(\.serverID)
                let truth = try await control.serverMessages(in: chat.id).map(\.serverID)
                let added = probe.recorder.events.compactMap(\.addedMessage).compactMap(\.serverID)
                print("cxone pong: \(await probe.session.statistics.connects) connects, \(stored.count) stored of \(truth.count), announced twice \(added.count - Set(added).count)")
                #expect(stored == truth)
                #expect(Set(added).count == added.count)
            }
        }
    }

    /// The demo's CXone section showed "agent is now nobody", "left: agent-…" after a reconnect
    /// while the agent was still assigned: the recovery reply, carrying the customer too, was not
    /// taken as the thread's snapshot, and the thread list without agents replaced it.
    @Test func theAgentStaysAssignedAcrossAReconnect() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession(backend: try impatientBackend(control)) { probe in
                let chat = try await probe.openConversation()
                control.agent.send("hello", in: chat.id.rawValue)
                try await probe.waitForMessages(["hello"], in: chat)
                let assigned = try #require(try await chat.info().assignedAgent, "the agent is assigned")
                let before = probe.recorder.events.count
                try await missPong(control)
                try await probe.recorder.waitUntil("reconnected after the missing pong") { $0.filter(\.isConnected).count >= 2 }
                control.agent.send("after", in: chat.id.rawValue)
                try await probe.waitForMessages(["after"], in: chat)
                let spurious = probe.recorder.events.dropFirst(before).filter { event in
                    switch event.kind {
                    case .agentChanged(let agent): agent?.id != assigned.id
                    case .participantsRemoved: true
                    default: false
                    }
                }
                print("cxone reconnect: \(await probe.session.statistics.connects) connects, agent \(assigned.id), spurious agent or participant changes \(spurious.count)")
                #expect(spurious.isEmpty, "\(spurious.map(\.kind))")
                #expect(try await chat.info().assignedAgent?.id == assigned.id)
            }
        }
    }

    /// The server stops answering heartbeats; the clock moves to the impatient backend's next
    /// heartbeat, then past its pong deadline.
    func missPong(_ control: CXoneEmulatorControl) async throws {
        let clock = try #require(control.virtualClock)
        control.server.inject(.noPong)
        try await clock.advance(toSleeperDueIn: .milliseconds(500))
        try await clock.advance(toSleeperDueIn: .seconds(5))
    }

    @Test func anOperationErrorOnSendFailsTheMessageWithTheCode() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                control.server.inject(.operationError(code: "InconsistentData", eventType: "SendMessage"))
                let doomed = try await chat.send(text: "refused")
                let failed = try await probe.recorder.first("failed") { $0.updatedMessage.map { $0.clientID == doomed.clientID && $0.deliveryState.isFailed } ?? false }
                guard case .failed(let reason)? = failed.updatedMessage?.deliveryState else { return }
                #expect(reason == "injected")
                #expect(control.server.messages(inThread: chat.id.rawValue).allSatisfy { $0.text != "refused" })
            }
        }
    }

    @Test func loadMoreUntilTheScrollTokenIsEmpty() async throws {
        try await withCXoneEmulator(.init(mode: .single, pageSize: 7)) { control in
            let id = try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...30 { control.agent.send("old \(index)", in: chat.id.rawValue) }
                try await probe.waitForMessages(["old 30"], in: chat)
                return chat.id
            }
            try await harness(control).withSession { probe in
                try await probe.recorder.first("the recovered thread") { $0.conversationID == id }
                let chat = try await probe.session.conversation(id)
                var all: [Message] = []
                var before: MessageOrderKey?
                var pages = 0
                for _ in 0..<20 {
                    let page = try await chat.history(before: before, limit: 7)
                    guard let oldest = page.first else { break }
                    all = page + all
                    before = oldest.orderKey
                    pages += 1
                }
                let truth = try await control.serverMessages(in: id).map(\.serverID)
                let checks = control.server.oldestMessageChecks
                print("cxone paging: \(truth.count) messages in \(pages) pages of ≤7; oldestMessageDatetime named the oldest loaded message \(checks.filter { $0 }.count) of \(checks.count) times")
                #expect(all.compactMap(\.serverID) == truth)
                #expect(checks.count >= 3 && checks.allSatisfy { $0 }, "every LoadMoreMessages names the oldest message loaded, the second page on too")
            }
        }
    }

    @Test func aLiveChatClosedByTheAgentOpensANewThreadForTheNextMessage() async throws {
        try await withCXoneEmulator(.init(mode: .live)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                control.agent.close(chat.id.rawValue)
                try await probe.recorder.first("closed") {
                    if case .conversationStateChanged(.closed, _) = $0.kind { return $0.conversationID == chat.id } else { return false }
                }
                let next = try await probe.recorder.first("a new thread") {
                    if case .conversationAdded(let info) = $0.kind { return info.id != chat.id } else { return false }
                }
                let newThread = try #require(next.conversationID)
                try await probe.session.conversation(newThread).send(text: "one more question")
                try await probe.recorder.first("sent in the new thread") { $0.updatedMessage?.text == "one more question" && $0.updatedMessage?.serverID != nil }
                #expect(control.server.messages(inThread: newThread.rawValue).map(\.text) == ["one more question"])
                #expect(control.server.status(ofThread: chat.id.rawValue) == "closed")
            }
        }
    }

    @Test func aWelcomeMessageOpensTheThreadAndReachesTheServerBeforeTheFirstMessage() async throws {
        try await withCXoneEmulator(.init(mode: .single)) { control in
            try await harness(control).withSession { probe in
                let added = try await probe.recorder.first("the local thread") { if case .conversationAdded = $0.kind { return true } else { return false } }
                let thread = try #require(added.conversationID)
                control.server.fireWelcomeMessage(
                    toCustomer: control.customerID, bodyText: "Hello {{customer.firstName|there}}! {{customer.customFields.discount|5%}} off today.",
                    handoverFields: ["discount": "10%"]
                )
                let expected = "Hello there! 10% off today."
                let shown = try await probe.recorder.first("the welcome message") { $0.addedMessage?.conversationID == thread && $0.addedMessage?.senderRole == .agent }
                #expect(shown.addedMessage?.text == expected)
                let chat = try await probe.session.conversation(thread)
                try await chat.send(text: "Yes please")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "Yes please" && $0.updatedMessage?.serverID != nil }
                try await chat.send(text: "And another thing")
                try await probe.recorder.first("sent again") { $0.updatedMessage?.text == "And another thing" && $0.updatedMessage?.serverID != nil }
                let onServer = control.server.messages(inThread: thread.rawValue)
                let requests = control.server.received.map(\.eventType).filter { $0 == "SendOutbound" || $0 == "SendMessage" }
                let stored = try await chat.storedMessages(before: nil, limit: .max)
                let welcomes = stored.filter { $0.text == expected }
                print("cxone welcome: server thread \(onServer.map { $0.fromCustomer ? "customer" : "agent" }), requests \(requests), stored welcome \(welcomes.count)×")
                #expect(onServer.map(\.text) == [expected, "Yes please", "And another thing"], "the agent sees what the customer saw, in order")
                #expect(onServer.map(\.fromCustomer) == [false, true, true])
                #expect(requests == ["SendOutbound", "SendMessage", "SendMessage"], "one SendOutbound, before the first message only")
                #expect(welcomes.count == 1 && welcomes.first?.serverID?.rawValue == onServer.first?.id, "the server's echo is the same message")
            }
        }
    }

    @Test func theLocalThreadAndItsWelcomeSurviveAReconnectBeforeTheFirstMessage() async throws {
        try await withCXoneEmulator(.init(mode: .single)) { control in
            try await harness(control).withSession { probe in
                let added = try await probe.recorder.first("the local thread") { if case .conversationAdded = $0.kind { return true } else { return false } }
                let thread = try #require(added.conversationID)
                control.server.fireWelcomeMessage(toCustomer: control.customerID, bodyText: "Welcome back")
                try await probe.recorder.first("the welcome message") { $0.addedMessage?.text == "Welcome back" }
                control.server.inject(.closeSocket)
                try await probe.recorder.waitUntil("reconnected") { $0.filter(\.isConnected).count >= 2 }
                let threads = try await probe.session.conversations()
                let chat = try await probe.session.conversation(thread)
                try await chat.send(text: "Hi")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "Hi" && $0.updatedMessage?.serverID != nil }
                let welcomes = try await chat.storedMessages(before: nil, limit: .max).filter { $0.text == "Welcome back" }
                print("cxone local thread across a reconnect: \(threads.count) thread(s) known, welcome stored \(welcomes.count)×, server \(control.server.messages(inThread: thread.rawValue).map(\.text))")
                #expect(threads.map(\.id) == [thread], "the same local thread, not a second one")
                #expect(welcomes.count == 1)
                #expect(control.server.messages(inThread: thread.rawValue).map(\.text) == ["Welcome back", "Hi"])
            }
        }
    }

    @Test func anInactivityPopupIsRaisedAgainAfterAReconnectAndItsAnswersReachTheServer() async throws {
        try await withCXoneEmulator(.init(mode: .live)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let popupID = control.agent.sendInactivityPopup(in: chat.id.rawValue, seconds: 60)
                @Sendable func popups(_ events: [ChatEvent]) -> [ChatEvent] {
                    events.filter { if case .custom(CXoneInactivityPopup.eventName, _) = $0.kind { return true } else { return false } }
                }
                try await probe.recorder.waitUntil("the pop-up") { !popups($0).isEmpty }
                let first = popups(probe.recorder.events)[0]
                guard case .custom(_, let payload) = first.kind else { return }
                let popup = try CXoneInactivityPopup(message: payload)
                #expect(popup.messageID == popupID && popup.threadID == chat.id && first.conversationID == chat.id)
                #expect(popup.numberOfSeconds == 60 && popup.refreshButton.text == "Yes, keep chatting")
                let connects = probe.recorder.events.filter(\.isConnected).count
                control.server.inject(.closeSocket)
                try await probe.recorder.waitUntil("raised again by LivechatRecovered") { events in
                    events.filter(\.isConnected).count > connects && popups(events).count >= 2
                }
                let requests = CXoneRequests(session: probe.session)
                try await requests.answer(popup, refresh: true)
                #expect(control.server.status(ofThread: chat.id.rawValue) != "closed")
                try await requests.answer(popup, refresh: false)
                try await probe.recorder.first("the chat ends") {
                    if case .conversationStateChanged(.closed, _) = $0.kind { return $0.conversationID == chat.id } else { return false }
                }
                let stored = try await chat.storedMessages(before: nil, limit: .max)
                print("cxone inactivity pop-up: raised \(popups(probe.recorder.events).count)× (once live, once on recovery), answers \(control.server.popupAnswers.map(\.postback)), stored plugin messages \(stored.filter { $0.kind == .rich("PLUGIN") }.count)")
                #expect(control.server.popupAnswers.map(\.postback) == [#"{"isExpired":false}"#, #"{"isExpired":true}"#])
                #expect(stored.allSatisfy { $0.kind != .rich("PLUGIN") && !$0.text.contains("keep chatting") }, "neither the pop-up nor its answers are messages")
            }
        }
    }

    @Test func aMissingRequiredPreChatFieldIsATypedError() async throws {
        try await withCXoneEmulator(.init(mode: .multi, requiredPreChatField: "email")) { control in
            try await harness(control).withSession { probe in
                do {
                    _ = try await probe.session.startConversation(ConversationDraft(kind: .thread))
                    Issue.record("a thread without the required field was started")
                } catch let error as SwitchboardError {
                    #expect(error.code == .invalidArgument && error.vendorCode == "missingPreChatCustomFields")
                    #expect(error.message.contains("email"))
                }
                let chat = try await probe.session.startConversation(ConversationDraft(kind: .thread, customFields: ["email": "alice@example.com"]))
                try await chat.send(text: "with the survey answered")
                try await probe.recorder.first("sent") { $0.updatedMessage?.serverID != nil }
                let sent = control.server.received.first { $0.eventType == "SendMessage" }
                #expect(sent?.data["contact"]?["customFields"]?[0]?["ident"] == "email", "the answers travel with the first message")
            }
        }
    }

    @Test func aLargeEventArrivesThroughS3() async throws {
        try await withCXoneEmulator(.init(mode: .multi, s3Threshold: 2_000)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let long = String(repeating: "A very long answer. ", count: 200)
                control.agent.send(long, in: chat.id.rawValue)
                try await probe.waitForMessages([long], in: chat)
                #expect(try await chat.storedMessages(before: nil, limit: .max).contains { $0.text == long })
            }
        }
    }

    @Test func theAutoReplyRobotTakesTheThreadAndAnswers() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            control.server.autoReply(as: control.agent) { text in text == "quiet" ? nil : "echo: \(text)" }
            try await harness(control).withSession { probe in
                try await probe.recorder.first("connected") { $0.isConnected }
                let chat = try await probe.session.startConversation(ConversationDraft(kind: .thread))
                _ = try await chat.send(text: "quiet")
                _ = try await chat.send(text: "hello")
                try await probe.waitForMessages(["quiet", "hello", "echo: hello"], in: chat)
                let agent = try await probe.recorder.first("assigned") {
                    if case .agentChanged(let agent?) = $0.kind { return agent.displayName == "David Berry" } else { return false }
                }
                #expect(agent.conversationID == chat.id)
                #expect(control.server.messages(inThread: chat.id.rawValue).map(\.text) == ["quiet", "hello", "echo: hello"])
            }
        }
    }

    @Test func renamingAThreadKeepsItsAgentAndState() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try await probe.recorder.first("assigned") { if case .agentChanged(_?) = $0.kind { return $0.conversationID == chat.id } else { return false } }
                let before = try #require(try await probe.session.conversations().first { $0.id == chat.id })
                try await chat.update(ConversationChanges(title: "Invoices"))
                let after = try #require(try await probe.session.conversations().first { $0.id == chat.id })
                #expect(after.title == "Invoices")
                #expect(after.assignedAgent == before.assignedAgent && after.assignedAgent != nil)
                #expect(after.state == before.state)
                #expect(after.participants == before.participants)
                let server = control.server
                try await waitUntil("the server has the new name", timeout: .seconds(30), signal: server.changes) {
                    server.received.contains { $0.eventType == "UpdateThread" }
                }
                let sent = server.received.filter { $0.eventType == "UpdateThread" }
                #expect(sent.map { $0.data["thread"]?["threadName"]?.stringValue } == ["Invoices"])
            }
        }
    }

    @Test func anOfflineLiveChatOpensNoSocketUntilItIsOnline() async throws {
        try await withCXoneEmulator(.init(mode: .live)) { control in
            control.server.setLiveChatOnline(false)
            // A backoff of a second of the virtual clock: the offline connects do not spin.
            let clock = try #require(control.virtualClock)
            var configuration = SessionConfiguration.virtualTime
            configuration.reconnectBackoff = BackoffPolicy(initial: .seconds(1), multiplier: 1, maximum: .seconds(1))
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control, configuration: configuration))
            try await harness.withSession(resume: false) { probe in
                try await probe.session.resume()
                let offline = try await probe.recorder.first("offline") {
                    if case .connection(.waitingToReconnect, .connectionLost(let error)?) = $0.kind { return error.vendorCode == "offline" } else { return false }
                }
                #expect(offline.origin.session == probe.session.id)
                #expect(control.server.socketsAccepted == 0)
                control.server.setLiveChatOnline(true)
                #expect(await clock.waitForSleepers(1), "the reconnect waits on the clock")
                clock.advance(by: .seconds(1))
                try await probe.recorder.first("connected once online") { $0.isConnected }
                #expect(control.server.socketsAccepted == 1)
            }
        }
    }

    @Test func theVisitorIsRecordedAndATransferChangesTheAgent() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let visitors = control.server.visitors
                #expect(visitors.count == 1)
                #expect(visitors.values.first?["customerIdentity"]?["idOnExternalPlatform"]?.stringValue == control.customerID)
                #expect(visitors.values.first?["browserFingerprint"]?["applicationType"]?.stringValue == "native")
                let other = control.server.agent(id: 7, firstName: "Erin", surname: "Lane")
                control.agent.transfer(chat.id.rawValue, to: other)
                try await probe.recorder.first("transferred") {
                    if case .agentChanged(let agent?) = $0.kind { return agent.displayName == "Erin Lane" } else { return false }
                }
                let info = try #require(try await probe.session.conversations().first { $0.id == chat.id })
                #expect(info.assignedAgent?.displayName == "Erin Lane")
            }
        }
    }

    /// A `CustomPopupBox` reaches the app whole, as a vendor event (the SDK 3.3.1 ignores these;
    /// the app may show it), and its outcome goes back as analytics.
    @Test func aCustomPopupBoxReachesTheAppAsAVendorEvent() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                _ = try await probe.openConversation()
                let (customer, _) = try await CXoneRequests(session: probe.session).identity()
                let actionID = control.server.fireCustomPopup(toCustomer: try #require(customer), headline: "10% off", body: "Today only")
                let event = try await probe.recorder.first("the pop-up") {
                    if case .custom("cxone.FireProactiveAction", let payload) = $0.kind { return payload["proactiveAction"]?["action"]?["actionId"]?.stringValue == actionID }
                    return false
                }
                guard case .custom(_, let payload) = event.kind else { return }
                #expect(payload["proactiveAction"]?["action"]?["actionType"] == "CustomPopupBox")
                #expect(payload["proactiveAction"]?["action"]?["data"]?["content"]?["headlineText"] == "10% off")
                let analytics = CXoneRequests(session: probe.session)
                _ = try await analytics.viewPage(title: "Home", url: "/")
                let sent = try await analytics.proactiveAction(.displayed, actionID: actionID, name: "Offer", type: "CustomPopupBox")
                #expect(sent.first?["data"]?["actionId"]?.stringValue == actionID)
                #expect(try await probe.session.conversations().allSatisfy { $0.kind == .thread }, "not a message, not a thread")
            }
        }
    }

    /// Every outcome of both kinds of proactive action reaches the analytics endpoint as the SDK
    /// sends it.
    @Test func everyProactiveActionOutcomeOfEveryKindIsSent() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let analytics = CXoneRequests(session: probe.session)
                _ = try await analytics.viewPage(title: "Home", url: "/")
                var sent: [String] = []
                for kind in ["WelcomeMessage", "CustomPopupBox"] {
                    for outcome in CXoneRequests.ProactiveOutcome.allCases {
                        _ = try await analytics.proactiveAction(outcome, actionID: "\(kind)-1", name: kind, type: kind)
                        sent.append("\(outcome.rawValue)/\(kind)")
                    }
                }
                let received = control.server.analytics.filter { $0["type"]?.stringValue?.hasPrefix("ProactiveAction") == true }
                #expect(received.map { "\($0["type"]?.stringValue ?? "")/\($0["data"]?["actionType"]?.stringValue ?? "")" } == sent)
                #expect(received.allSatisfy { $0["data"]?["actionId"]?.stringValue?.hasSuffix("-1") == true && $0["destination"]?["id"] != nil })
                print("cxone proactive actions: \(received.count) outcome events (\(CXoneRequests.ProactiveOutcome.allCases.count) outcomes × 2 kinds)")
            }
        }
    }

    @Test func analyticsFollowTheVisitAndPageRules() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let analytics = CXoneRequests(session: probe.session)
                await #expect(throws: SwitchboardError.self) { try await analytics.chatWindowOpen() }
                func types(_ events: [JSONValue]) -> [String] { events.compactMap { $0["type"]?.stringValue } }
                try await #expect(types(analytics.viewPage(title: "Home", url: "/")) == ["VisitorVisit", "PageView"])
                try await #expect(types(analytics.viewPage(title: "Home", url: "/")) == ["PageView"])
                try await #expect(types(analytics.viewPage(title: "Cart", url: "/cart")) == ["TimeSpentOnPage", "PageView"])
                try await #expect(types(analytics.viewPageEnded(title: "Home", url: "/")) == [])
                try await #expect(types(analytics.viewPageEnded(title: "Cart", url: "/cart")) == ["TimeSpentOnPage"])
                try await #expect(types(analytics.chatWindowOpen()) == ["ChatWindowOpened"])
                try await #expect(types(analytics.conversion(type: "purchase", value: 42.5, at: Date(timeIntervalSince1970: 1_800_000_000))) == ["Conversion"])
                try await #expect(types(analytics.proactiveAction(.clicked, actionID: "a1", name: "Welcome", type: "WelcomeMessage")) == ["ProactiveActionClicked"])
                let received = control.server.analytics
                #expect(received.compactMap { $0["type"]?.stringValue } == [
                    "VisitorVisit", "PageView", "PageView", "TimeSpentOnPage", "PageView", "TimeSpentOnPage", "ChatWindowOpened", "Conversion", "ProactiveActionClicked",
                ])
                #expect(Set(received.compactMap { $0["visitId"]?.stringValue }).count == 1)
                #expect(received[3]["data"]?["url"]?.stringValue == "/")
                #expect(received[7]["data"]?["conversionTimeWithMilliseconds"]?.stringValue == "2027-01-15T08:00:00.000Z")
                #expect(received.allSatisfy { $0["createdAtWithMilliseconds"]?.stringValue?.contains(".") == true })
            }
        }
    }

    @Test func aTokenNearItsExpiryIsRefreshedBeforeTheNextSend() async throws {
        // Tokens live 20 s: within the 30 s margin at once, so every send refreshes first.
        try await withCXoneEmulator(.init(mode: .multi, tokenLifetime: 20)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let sent = try await chat.send(text: "with a fresh token")
                try await probe.recorder.first("sent") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let received = control.server.received.map(\.eventType)
                let send = try #require(received.lastIndex(of: "SendMessage"))
                #expect(received[..<send].contains("RefreshToken"))
                let refreshed = control.server.received.filter { $0.eventType == "RefreshToken" }.count
                let message = try #require(control.server.received.last { $0.eventType == "SendMessage" })
                print("cxone token: \(refreshed) refreshes for \(received.filter { $0 == "SendMessage" }.count) sends")
                #expect(message.data["accessToken"]?["token"]?.stringValue?.hasPrefix("legacy-") == true)
            }
        }
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "with a token that lasts an hour")
                try await probe.waitForMessages(["with a token that lasts an hour"], in: chat)
                #expect(!control.server.received.contains { $0.eventType == "RefreshToken" })
            }
        }
    }

    /// `signOut` is the SDK's: the session closes, nothing of the customer stays in the store, a
    /// send they queued never goes out, and the next session on the store is a new customer.
    @Test func signingOutForgetsTheCustomerAndTheNextSessionIsANewOne() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let backend = try backend(control) { $0.customerID = nil }
            let store = InMemoryChatStore()
            let (first, scope) = try await harness(control).withSession(backend: backend, store: store) { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "before signing out")
                try await probe.waitForMessages(["before signing out"], in: chat)
                let customer = try await CXoneRequests(session: probe.session).identity().customerID
                try await probe.session.pause()
                _ = try await chat.send(text: "queued, never sent")
                try await CXoneRequests(session: probe.session).signOut()
                #expect(await probe.session.isClosed)
                return (customer, probe.session.scope)
            }
            let left = try await store.fetchConversations(scope: scope).count + store.fetchOutbox(scope: scope).count
                + store.fetchCredentials(scope: scope).values.count + store.fetchPendingMessages(scope: scope).count
            let second = try await harness(control).withSession(backend: backend, store: store) { probe in
                try await probe.recorder.first("connected") { $0.isConnected }
                #expect(try await probe.session.conversations().isEmpty, "the new customer has no thread")
                return try await CXoneRequests(session: probe.session).identity().customerID
            }
            let neverSent = control.server.received.filter { $0.eventType == "SendMessage" && $0.data["messageContent"]?["payload"]?["text"]?.stringValue == "queued, never sent" }
            print("cxone signOut: \(left) rows left of the first customer, customers \(first ?? "-") then \(second ?? "-"), \(control.server.visitors.count) visitors, the queued send sent \(neverSent.count) times")
            #expect(left == 0, "no conversation, outbox entry, credential or pending message of the first customer is left")
            #expect(first != nil && second != nil && first != second, "a new customer after sign-out")
            #expect(control.server.visitors.count == 2, "a new visitor after sign-out")
            #expect(neverSent.isEmpty, "the signed-out customer's queued send never went out")
        }
    }

    /// A session for customer `bob` on a store that held `alice`'s sign-in signs in as `bob`: the
    /// server files Bob's message under Bob, and Bob's store holds none of Alice's thread.
    @Test func aConfiguredCustomerNeverSignsInAsTheStoresPreviousOne() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let store = InMemoryChatStore()
            try await harness(control).withSession(backend: try backend(control) { $0.customerID = "alice" }, store: store) { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "alice writes")
                try await probe.waitForMessages(["alice writes"], in: chat)
            }
            let bobStored = try await harness(control).withSession(backend: try backend(control) { $0.customerID = "bob" }, store: store) { probe in
                #expect(try await probe.session.conversations().isEmpty, "bob's store starts empty")
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "bob writes")
                try await probe.waitForMessages(["bob writes"], in: chat)
                #expect(try await CXoneRequests(session: probe.session).identity().customerID == "bob")
                var texts: [String] = []
                for info in try await probe.session.conversations() {
                    texts += try await probe.session.conversation(info.id).storedMessages(before: nil, limit: .max).map(\.text)
                }
                return texts
            }
            let texts: (String) -> [String] = { customer in control.server.threads(of: customer).flatMap { control.server.messages(inThread: $0).map(\.text) } }
            print("cxone customer switch: bob stored \(bobStored); server: alice \(texts("alice")), bob \(texts("bob"))")
            #expect(!bobStored.contains("alice writes"), "bob's store holds none of alice's thread")
            #expect(texts("bob").contains("bob writes") && !texts("alice").contains("bob writes"), "bob's message is filed under bob")
        }
    }

    @Test func aSlowReplyTimesOutAndTheResendIsNotDuplicated() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            // On virtual time: the reply deadline (2 s) passes while the emulator holds its frames
            // (2.5 s); the resend's deadline (at 4 s) does not, once the held frames go out.
            let clock = try #require(control.virtualClock)
            let backend = try backend(control) { $0.replyTimeout = .seconds(2) }
            try await harness(control).withSession(backend: backend) { probe in
                let chat = try await probe.openConversation()
                let patience: @Sendable () -> Int = {
                    control.server.received.filter { $0.eventType == "SendMessage" && $0.data["messageContent"]?["payload"]?["text"]?.stringValue == "patience" }.count
                }
                control.server.inject(.slowReplies(.milliseconds(2_500), eventType: "SendMessage"))
                let message = try await chat.send(text: "patience")
                // Both timers set: the emulator's pause before its reply, the adapter's deadline.
                try await clock.waitForSleeper(dueIn: .milliseconds(2_500))
                try await clock.advance(toSleeperDueIn: .seconds(2))
                try await waitUntil("the send sent again", timeout: .seconds(30), signal: control.server.changes) { patience() >= 2 }
                clock.advance(by: .milliseconds(500))
                try await probe.waitForMessages(["patience"], in: chat)
                try await probe.recorder.first("confirmed") { $0.updatedMessage.map { $0.clientID == message.clientID && $0.serverID != nil } ?? false }
                let sends = patience()
                let stored = control.server.messages(inThread: chat.id.rawValue).filter { $0.text == "patience" }.count
                let retries = await probe.session.statistics.sendRetries
                print("cxone slow reply: \(sends) SendMessage requests, \(retries) retries, \(stored) stored on the server")
                #expect(stored == 1)
                #expect(sends >= 2, "the timed-out send was sent again")
                let local = try await chat.storedMessages(before: nil, limit: .max).filter { $0.text == "patience" }
                #expect(local.count == 1)
            }
        }
    }

    @Test func theVendorReconnectScheduleIsAvailable() {
        let policy = CXoneBackend.vendorReconnectBackoff
        #expect(policy.ceiling(forAttempt: 0) == .seconds(1))
        #expect(policy.ceiling(forAttempt: 1) == .milliseconds(1300))
        #expect(policy.ceiling(forAttempt: 10) == .milliseconds(13_785))
        #expect(policy.ceiling(forAttempt: 15) == policy.ceiling(forAttempt: 10), "1.3^min(n, 10): flat after ten attempts")
        #expect(policy.maxAttempts == 20)
    }

    func securedBackend(_ control: CXoneEmulatorControl, code: String? = nil) throws -> CXoneBackend {
        try backend(control) {
            $0.authorizationCode = code
            $0.codeVerifier = code.map { _ in "verifier" }
        }
    }

    @Test func aThirdPartyOAuthSessionExchangesItsCodeOnceAndRefreshesWithH7() async throws {
        // Access tokens live 20 s: within the 30 s margin at once, so a send refreshes first.
        try await withCXoneEmulator(.init(mode: .multi, securedSessions: true, thirdPartyOAuth: true, tokenLifetime: 20)) { control in
            try await harness(control).withSession(backend: try securedBackend(control, code: "code-1")) { probe in
                let chat = try await probe.openConversation()
                let sent = try await chat.send(text: "signed in")
                try await probe.recorder.first("sent") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                control.server.inject(.closeSocket)
                try await probe.recorder.waitUntil("reconnected") { $0.filter(\.isConnected).count >= 2 }
                let grants = control.server.tokenRequests.map { $0["thirdParty"]?["grant_type"]?.stringValue ?? "none" }
                print("cxone oauth: token requests \(grants)")
                #expect(grants.filter { $0 == "authorization_code" }.count == 1, "the code is exchanged once; the reconnect reuses the transaction token")
                #expect(grants.contains("refresh_token"))
                let message = try #require(control.server.received.last { $0.eventType == "SendMessage" })
                #expect(message.data["accessToken"]?["token"]?.stringValue?.hasPrefix("oauth-") == true)
                #expect(!control.server.received.contains { $0.eventType == "AuthorizeCustomer" || $0.eventType == "RefreshToken" })
            }
        }
    }

    @Test func aThirdPartyOAuthSessionWithoutACodeIsRefused() async throws {
        try await withCXoneEmulator(.init(mode: .multi, securedSessions: true, thirdPartyOAuth: true)) { control in
            try await harness(control).withSession(backend: try securedBackend(control), resume: false) { probe in
                try await probe.session.resume()
                let fatal = try await probe.recorder.first("refused") {
                    // Refused twice in a row (the engine retries once with cleared credentials): fatal.
                    if case .fatal(let error) = $0.kind { return (error.underlying as? SwitchboardError)?.vendorCode == "authorizationCode" } else { return false }
                }
                #expect(fatal.origin.session == probe.session.id)
            }
        }
    }

    @Test func anAnonymousSecuredSessionUsesATransactionToken() async throws {
        try await withCXoneEmulator(.init(mode: .multi, securedSessions: true)) { control in
            try await harness(control).withSession(backend: try securedBackend(control)) { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "anonymous but secured")
                try await probe.waitForMessages(["anonymous but secured"], in: chat)
                let requests = control.server.tokenRequests
                #expect(requests.count == 1)
                #expect(requests.first?["type"]?.stringValue == "anonymous")
                #expect(requests.first?["customerIdentity"]?["idOnExternalPlatform"]?.stringValue == control.customerID)
                #expect(!control.server.received.contains { $0.eventType == "AuthorizeCustomer" })
            }
        }
    }

    @Test func theChannelConfigurationIsReadWithoutConnecting() async throws {
        try await withCXoneEmulator(.init(mode: .live, requiredPreChatField: "email")) { control in
            let environment = control.environment
            let channel = try await CXoneChannelConfiguration.fetch(environment: environment, brandID: 1386, channelID: "chat_emulator", transport: control.transport)
            #expect(channel.mode == .liveChat)
            #expect(channel.preChatFields.map(\.ident) == ["email"])
            let backend = try await CXoneBackend.make(configuration: CXoneConfiguration(environment: environment, brandID: 1386, channelID: "chat_emulator"), transport: control.transport)
            #expect(backend.descriptor.capabilities.contains(.conversationLifecycle))
            #expect(!backend.descriptor.capabilities.contains(.archive))
            #expect(control.server.socketsAccepted == 0, "read, and the backend made, without a socket")
        }
    }
}

/// Wire details the review against protocols/cxone.md found differing (issue 14).
@Suite(.timeLimit(.minutes(2)))
struct CXoneWireDetailTests {
    func harness(_ control: CXoneEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func executeTriggerNamesTheDestinationAndTheVisitor() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                _ = try await probe.openConversation()
                try await CXoneRequests(session: probe.session).executeTrigger("trigger-42")
                try await waitUntilReceived(control, "ExecuteTrigger")
                let trigger = try #require(control.server.triggers.last)
                #expect(trigger.trigger == "trigger-42")
                #expect(!trigger.destination.isEmpty, "§3.14's own envelope: destination.id")
                await #expect(throws: SwitchboardError.self) { try await CXoneRequests(session: probe.session).executeTrigger("") }
            }
        }
    }

    @Test func seenIsSentWithTheThreadNameAndNeverForAThreadTheServerDoesNotKnow() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let thread = try await probe.session.startConversation(ConversationDraft(title: "Billing"))
                try await thread.markRead(upTo: .time(Date()))
                try await thread.send(text: "now the server knows it")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "now the server knows it" && $0.updatedMessage?.serverID != nil }
                try await thread.markRead(upTo: .time(Date().addingTimeInterval(1)))
                try await waitUntilReceived(control, "MessageSeenByCustomer")
                let seen = control.server.received.filter { $0.eventType == "MessageSeenByCustomer" }
                #expect(seen.count == 1, "none for the local thread before its first message")
                #expect(seen.first?.data["thread"]?["threadName"] == "Billing")
                #expect(control.server.seenForUnknownThreads == 0)
            }
        }
    }

    func waitUntilReceived(_ control: CXoneEmulatorControl, _ eventType: String) async throws {
        try await waitUntil(eventType, timeout: .seconds(30), signal: control.server.changes) {
            control.server.received.contains { $0.eventType == eventType }
        }
    }
}

/// Custom fields written and read (protocols/cxone.md §3.8, §3.17, §3.18, §3.5).
@Suite(.timeLimit(.minutes(2)))
struct CXoneCustomFieldTests {
    @Test func customerAndThreadFieldsAreSentWholeKeptByTheServerAndReadBackOnRecovery() async throws {
        try await withCXoneEmulator(.init(mode: .single)) { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            let threadID = try await harness.withSession { probe in
                let chat = try await probe.openConversation()
                try await probe.session.setCustomFields(["age": "24"])
                try await chat.setCustomFields(["department": "Sales"])
                try await chat.send(text: "hello")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "hello" && $0.updatedMessage?.serverID != nil }
                let message = try #require(control.server.received.last { $0.eventType == "SendMessage" })
                #expect(CXoneMapping.fieldValues(message.data["customer"]?["customFields"]) == ["age": "24"], "all of the customer's fields ride on the message")
                // The thread's fields go with the message while its contact is unknown, else by
                // SetContactCustomFields (§3.17).
                let contactSet = control.server.received.filter { $0.eventType == "SetContactCustomFields" }.map { CXoneMapping.fieldValues($0.data["customFields"]) }
                #expect(CXoneMapping.fieldValues(message.data["contact"]?["customFields"]) == ["department": "Sales"] || contactSet.contains(["department": "Sales"]))
                try await probe.session.setCustomFields(["city": "Prague"])
                try await waitUntil("the second set", timeout: .seconds(30), signal: control.server.changes) {
                    control.server.received.filter { $0.eventType == "SetCustomerCustomFields" }.count == 2
                }
                let second = try #require(control.server.received.last { $0.eventType == "SetCustomerCustomFields" })
                #expect(CXoneMapping.fieldValues(second.data["customFields"]) == ["age": "24", "city": "Prague"], "every current field, not only the new one")
                return chat.id
            }
            let customer = try #require(control.server.received.first?.customer)
            #expect(control.server.customerFields(of: customer) == ["age": "24", "city": "Prague"])
            #expect(control.server.contactFields(ofThread: threadID.rawValue) == ["department": "Sales"])
            // Another device: the recovery brings both back.
            try await harness.withSession { probe in
                try await probe.recorder.first("the recovered thread") { $0.conversationID == threadID && $0.kind.category == .conversation }
                let requests = CXoneRequests(session: probe.session)
                try await probe.recorder.first("the customer's fields") {
                    if case .custom(CXoneMapping.customerFieldsEvent, _) = $0.kind { return true } else { return false }
                }
                #expect(try await requests.customerCustomFields() == ["age": "24", "city": "Prague"])
                #expect(try await requests.customFields(ofThread: threadID) == ["department": "Sales"])
                print("cxone custom fields: customer [age, city] and thread [department] written whole, kept by the server, read back after a recovery")
            }
        }
    }
}

extension CXoneWireDetailTests {
    /// More than 20 open threads: the first 20 are recovered, the rest get `LoadThreadMetadata`
    /// (their last message and owner), so every thread shows with its newest message.
    @Test func openThreadsPastTwentyGetTheirMetadata() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            let ids = try await harness.withSession { probe in
                var ids: [ConversationID] = []
                for index in 1...23 {
                    let thread = try await probe.session.startConversation(ConversationDraft(title: "Thread \(index)"))
                    try await thread.send(text: "newest of \(index)")
                    ids.append(thread.id)
                }
                try await probe.recorder.waitUntil("all sent") { events in
                    Set(events.compactMap { $0.updatedMessage?.serverID != nil ? $0.updatedMessage?.text : nil }).count == 23
                }
                return ids
            }
            let before = control.server.received.count
            try await harness.withSession { probe in
                try await probe.recorder.waitUntil("every thread's newest message") { events in
                    Set(events.compactMap { $0.addedMessage?.text }.filter { $0.hasPrefix("newest of ") }).count == 23
                }
                let requests = control.server.received.dropFirst(before).map(\.eventType)
                let recovered = requests.filter { $0 == "RecoverThread" }.count
                let metadata = requests.filter { $0 == "LoadThreadMetadata" }.count
                #expect(recovered == 20 && metadata == 3, "recovered \(recovered), metadata \(metadata)")
                #expect(Set(try await probe.session.conversations().map(\.id)) == Set(ids))
                print("cxone: 23 open threads: \(recovered) recovered, \(metadata) by LoadThreadMetadata, every newest message shown")
            }
        }
    }
}

/// Live chat's hidden first message, ending the contact, the transcript, a postback and an
/// attachment, each reaching the emulator (issue 14).
@Suite(.timeLimit(.minutes(2)))
struct CXoneLiveChatTests {
    func harness(_ control: CXoneEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func aLiveChatBeginsAtOnceEndsByEndContactAndMailsItsTranscript() async throws {
        try await withCXoneEmulator(.init(mode: .live)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                // The agent sees the contact before the customer writes: the hidden first message.
                try await waitUntil("Begin Conversation", timeout: .seconds(30), signal: control.server.changes) {
                    control.server.hiddenMessages(inThread: chat.id.rawValue) == ["Begin Conversation"]
                }
                let begin = try #require(control.server.received.first { $0.eventType == "SendMessage" })
                #expect(begin.data["messageContent"]?["parameters"]?["isInitialMessage"] == true)
                try await chat.send(text: "Hi, my card was charged twice")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "Hi, my card was charged twice" && $0.updatedMessage?.serverID != nil }
                let stored = try await chat.storedMessages(before: nil, limit: .max).map(\.text)
                #expect(!stored.contains("Begin Conversation") && stored.contains("Hi, my card was charged twice"), "the customer never sees it: \(stored)")
                let begins = control.server.received.filter { $0.eventType == "SendMessage" && $0.data["messageContent"]?["parameters"]?["isInitialMessage"] == true }
                #expect(begins.count == 1, "begun once")
                try await CXoneRequests(session: probe.session).sendTranscript(of: chat.id, to: "alice@example.com")
                #expect(control.server.received.contains { $0.eventType == "SendTranscript" && $0.data["consumerRecipients"]?[0]?["idOnExternalPlatform"] == "alice@example.com" })
                try await chat.close()
                try await waitUntil("EndContact", timeout: .seconds(30), signal: control.server.changes) {
                    control.server.received.contains { $0.eventType == "EndContact" }
                }
                #expect(control.server.status(ofThread: chat.id.rawValue) == "closed")
                print("cxone live chat: Begin Conversation before the customer wrote (hidden from them), transcript mailed, EndContact closed the contact")
            }
        }
    }

    @Test func aPostbackAndAnAttachmentReachTheServer() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                // The answer to a quick reply: its text, with the option's postback.
                try await chat.send(MessageDraft(text: "Tomorrow", payload: ["postback": "delivery-day-2"]))
                try await probe.recorder.first("the answer") { $0.updatedMessage?.text == "Tomorrow" && $0.updatedMessage?.serverID != nil }
                let answer = try #require(control.server.received.last { $0.eventType == "SendMessage" })
                #expect(answer.data["messageContent"]?["postback"] == "delivery-day-2")
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("invoice-\(UUID().uuidString).pdf")
                try Data("%PDF-1.4 invoice".utf8).write(to: file)
                defer { try? FileManager.default.removeItem(at: file) }
                try await chat.send(MessageDraft(text: "the invoice", kind: .file, attachments: [Message.Attachment(name: file.lastPathComponent, mimeType: "application/pdf", url: file)]))
                let sent = try await probe.recorder.first("the file") { $0.updatedMessage.map { !$0.attachments.isEmpty && $0.serverID != nil } ?? false }
                let withFile = try #require(control.server.received.last { $0.eventType == "SendMessage" })
                let attachment = try #require(withFile.data["attachments"]?[0])
                #expect(attachment["friendlyName"]?.stringValue == file.lastPathComponent && attachment["mimeType"] == "application/pdf")
                #expect(attachment["url"]?.stringValue?.isEmpty == false, "uploaded first, then sent by its URL")
                #expect(sent.updatedMessage?.attachments.first?.name == file.lastPathComponent)
            }
        }
    }
}

extension CXoneWireDetailTests {
    @Test func theAccessorsAnAppExpectsAnswer() async throws {
        try await withCXoneEmulator(.init(mode: .single, pageSize: 3)) { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            let id = try await harness.withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...8 { control.agent.send("m\(index)", in: chat.id.rawValue) }
                try await probe.waitForMessages(["m8"], in: chat)
                return chat.id
            }
            try await harness.withSession { probe in
                try await probe.recorder.first("recovered") { $0.conversationID == id && $0.kind.category == .conversation }
                let requests = CXoneRequests(session: probe.session)
                let (customer, visitor) = try await requests.identity()
                #expect(customer != nil && customer == control.server.received.last?.customer)
                #expect(visitor?.isEmpty == false)
                #expect(try await requests.hasMoreMessages(in: id) == true, "3 of 9 recovered")
                let chat = try await probe.session.conversation(id)
                var before: MessageOrderKey?
                while let oldest = try await chat.history(before: before, limit: 3).first { before = oldest.orderKey }
                #expect(try await requests.hasMoreMessages(in: id) == false, "paged to the start")
                #expect(CXoneRequests.sdkVersion == "3.3.1")
                #expect(CXoneRequests.switchboardVersion == SwitchboardVersion.string && CXoneRequests.switchboardVersion != CXoneRequests.sdkVersion, "the library's own version, apart from the wire's")
            }
        }
    }
}

/// Analytics before the socket opens, as the SDK sends them after `prepare` (issue 14).
@Suite(.timeLimit(.minutes(2)))
struct CXoneAnalyticsTests {
    func backend(_ control: CXoneEmulatorControl) async throws -> CXoneBackend {
        try await CXoneBackend.make(configuration: CXoneConfiguration(
            environment: control.environment,
            brandID: control.server.configuration.brandID, channelID: control.server.configuration.channelID
        ), transport: control.transport, webSockets: control.webSockets)
    }

    @Test func pagesAreViewedBeforeConnectingAndTheSocketIsTheSameVisitor() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let store = InMemoryChatStore()
            let app = try await backend(control)
            // No session yet: only the channel configuration is loaded.
            let early = try await app.analytics.viewPage(title: "Home", url: "/")
            #expect(early.compactMap { $0["type"]?.stringValue } == ["VisitorVisit", "PageView"])
            #expect(control.server.socketsAccepted == 0, "no socket for analytics")
            let visitor = app.analytics.visitorID
            let visit = try #require(early.first?["visitId"]?.stringValue)
            let context = ConformanceContext(emulator: control)
            let session = ChatSession(backend: app, store: store, configuration: context.configuration, clock: context.makeClock(), logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                #expect(try await CXoneRequests(session: session).identity().visitorID == visitor, "the socket connects as the analytics' visitor")
                let opened = try await CXoneRequests(session: session).chatWindowOpen()
                #expect(opened.first?["visitId"]?.stringValue == visit, "the same visit")
                await session.close()
            }
            // A restarted app restores the visitor and the visit from the session's store.
            let restarted = try await backend(control)
            try await restarted.analytics.restore(from: store)
            #expect(restarted.analytics.visitorID == visitor)
            let again = try await restarted.analytics.viewPage(title: "Cart", url: "/cart")
            #expect(again.compactMap { $0["type"]?.stringValue } == ["TimeSpentOnPage", "PageView"], "no new visit; the last page ended")
            #expect(again.allSatisfy { $0["visitId"]?.stringValue == visit })
            print("cxone analytics before connecting: \(control.server.analytics.count) events in one visit of one visitor, before the socket, through it, and after a restart")
        }
    }
}
