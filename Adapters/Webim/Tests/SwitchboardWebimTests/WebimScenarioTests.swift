import Foundation
import Logging
import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardTransport
import SwitchboardSQLite
import SwitchboardWebim
import Testing
@_spi(TestKit) import WebimEmulator

@Suite(.timeLimit(.minutes(3)))
struct WebimScenarioTests {
    func harness(_ control: WebimEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func reinitRequiredIsTransparent() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...3 { try control.agent.send("before \(index)", to: control.visitorID) }
                try await probe.waitForMessages((1...3).map { "before \($0)" }, in: chat)
                let connects = await probe.session.statistics.connects
                control.server.inject(.reinitRequired, on: .delta)
                try await probe.recorder.waitUntil("re-initialised") { $0.filter(\.isConnected).count >= 2 }
                for index in 1...3 { try control.agent.send("after \(index)", to: control.visitorID) }
                try await chat.send(text: "mine after")
                try await probe.waitForMessages((1...3).map { "after \($0)" }, in: chat)
                try await probe.recorder.first("mine confirmed") { $0.updatedMessage?.text == "mine after" && $0.updatedMessage?.serverID != nil }
                let added = probe.recorder.events.compactMap(\.addedMessage).filter { $0.serverID != nil }.compactMap(\.serverID)
                let stored = try await chat.storedMessages(before: nil, limit: .max).compactMap(\.serverID)
                let truth = try await control.serverMessages(in: chat.id).map(\.serverID)
                let reconnects = await probe.session.statistics.connects - connects
                print("webim re-init: \(reconnects) re-init, \(truth.count) messages on the server, \(stored.count) stored, duplicates announced \(added.count - Set(added).count)")
                #expect(stored == truth, "nothing lost, nothing doubled, in the server's order")
                #expect(Set(added).count == added.count, "no message announced twice across the re-init")
            }
        }
    }

    @Test(arguments: ["account-blocked", "visitor_banned", "provided-visitor-expired", "wrong-provided-visitor-hash-value"])
    func fatalStringsEndTheSession(_ code: String) async throws {
        try await withWebimEmulator { control in
            control.server.inject(.error(code), on: .initialize)
            try await harness(control).withSession(resume: false) { probe in
                try await probe.session.resume()
                let event = try await probe.recorder.first("the fatal event") {
                    if case .fatal = $0.kind { return true }
                    return false
                }
                guard case .fatal(let error) = event.kind else { return }
                #expect(error.code == .fatal)
                #expect(error.vendorCode == code)
                try await probe.recorder.waitUntil("closed") { _ in true }
                #expect(await probe.session.isClosed)
            }
        }
    }

    @Test func aNonJSONInitIsAFatalWrongInit() async throws {
        try await withWebimEmulator { control in
            control.server.inject(.malformed, on: .initialize)
            try await harness(control).withSession(resume: false) { probe in
                try await probe.session.resume()
                let event = try await probe.recorder.first("fatal") {
                    if case .fatal = $0.kind { return true }
                    return false
                }
                if case .fatal(let error) = event.kind { #expect(error.vendorCode == "wrong-init") }
            }
        }
    }

    /// A draft with text and two files (one from a file, one from memory) goes as three
    /// messages, each with its own client id; each file is uploaded once; its link is signed
    /// when asked, an hour later too, and a re-init changes no stored file message.
    @Test func aDraftWithTwoFilesIsThreeMessagesAndItsLinksAreSignedOnDemand() async throws {
        try await withWebimEmulator { control in
            let clock = try #require(control.virtualClock)
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("receipt-\(UUID().uuidString).pdf")
                let bytes = Data((0..<4096).map { UInt8($0 % 251) })
                try bytes.write(to: file)
                defer { try? FileManager.default.removeItem(at: file) }
                let photo = Data((0..<1500).map { UInt8($0 % 7) })
                let first = try await chat.send(
                    MessageDraft(
                        text: "my receipt and a photo",
                        attachments: [
                            Message.Attachment(name: file.lastPathComponent, mimeType: "application/pdf", url: file),
                            Message.Attachment(name: "photo.png", mimeType: "image/png", data: photo),
                        ]
                    )
                )
                #expect(first.text == "my receipt and a photo" && first.attachments.isEmpty, "the text goes first, on its own")
                let fromCustomer: @Sendable () -> [(id: String, clientSideId: String, kind: String, text: String)] = {
                    control.server.messages(ofVisitor: control.visitorID).filter { $0.kind == "visitor" || $0.kind == "file_visitor" }
                }
                try await waitUntil("three messages on the server", timeout: .seconds(20), signal: control.server.changes) { fromCustomer().count == 3 }
                try await probe.recorder.waitUntil("all three confirmed") { events in
                    Set(events.compactMap { $0.updatedMessage?.serverID != nil ? $0.updatedMessage?.clientID : nil }).count >= 3
                }
                let onServer = fromCustomer()
                #expect(onServer.map(\.kind) == ["visitor", "file_visitor", "file_visitor"])
                #expect(Set(onServer.map(\.clientSideId)).count == 3, "each part has its own client id")
                let stored = try await chat.storedMessages(before: nil, limit: .max).filter { $0.senderRole == .customer }
                #expect(stored.count == 3 && stored.allSatisfy { $0.serverID != nil && $0.deliveryState != .pending }, "each stored once, confirmed: \(stored.map(\.deliveryState))")
                let files = stored.filter { $0.kind == .file }
                #expect(files.flatMap(\.attachments).map(\.name) == [file.lastPathComponent, "photo.png"])
                #expect(files.flatMap(\.attachments).allSatisfy { $0.data == nil }, "no bytes kept in the messages")
                let pdf = try #require(files.first?.attachments.first)
                #expect(pdf.url?.query == nil, "the store keeps the stable address, not a signature")

                // Opened now, and an hour (of the test clock) later: signed each time.
                let requests = WebimRequests(session: probe.session)
                let signed = try await requests.downloadURL(for: pdf)
                #expect(try await control.transport.get(signed.absoluteString, timeout: .seconds(10)).body == bytes)
                let forged = signed.absoluteString.replacingOccurrences(of: "hash=", with: "hash=0")
                #expect(try await control.transport.get(forged, timeout: .seconds(10)).status == 403)
                clock.advance(by: .seconds(3600))
                #expect(try await control.transport.get(signed.absoluteString, timeout: .seconds(10)).status == 403, "a signature lives 300 s")
                let later = try await requests.downloadURL(for: try #require(files.last?.attachments.first))
                let laterAnswer = try await control.transport.get(later.absoluteString, timeout: .seconds(10))
                #expect(laterAnswer.status == 200 && laterAnswer.body == photo, "an hour later the link is signed again and serves the bytes")

                // A re-init re-reads the chat: no file message changes.
                let seen = probe.recorder.events.count
                control.server.inject(.reinitRequired, on: .delta)
                try await probe.recorder.waitUntil("re-initialised") { $0.dropFirst(seen).contains(where: \.isConnected) }
                try control.agent.send("after the re-init", to: control.visitorID)
                try await probe.waitForMessages(["after the re-init"], in: chat)
                let changed = probe.recorder.events.dropFirst(seen).compactMap(\.updatedMessage).filter { $0.kind == .file }
                #expect(changed.isEmpty, "a re-init re-signs nothing: \(changed.map(\.text))")
                print("webim files: 1 draft → \(onServer.count) messages (\(onServer.map(\.kind))), \(Set(onServer.map(\.clientSideId)).count) client ids, link signed at +0 s and +3600 s, \(changed.count) file messages changed by a re-init")
            }
        }
    }

    /// An upload the server made a message of, whose answer was lost on the way back: the file is
    /// on the server once and stored once (its echo confirms the send; a resend of a file whose
    /// echo arrived uploads nothing).
    @Test func anUploadWhoseAnswerIsLostIsNotUploadedTwice() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                control.server.inject(.loseAnswer, on: .upload)
                let sent = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "scan.pdf", mimeType: "application/pdf", data: Data(repeating: 7, count: 512))]))
                try await probe.recorder.waitUntil("the file confirmed") { events in
                    events.contains { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
                }
                #expect(control.server.takenFaults.contains { $0.endpoint == .upload && $0.fault == .loseAnswer }, "the fault took effect")
                let onServer = control.server.messages(ofVisitor: control.visitorID).filter { $0.kind == "file_visitor" }
                let stored = try await chat.storedMessages(before: nil, limit: .max).filter { $0.kind == .file }
                #expect(onServer.count == 1, "uploaded once")
                #expect(stored.count == 1 && stored.first?.serverID != nil && stored.first?.deliveryState != .pending)
                print("webim lost upload answer: 1 fault took effect, \(onServer.count) file on the server, \(stored.count) stored, pending \(await probe.session.pendingSends.count)")
            }
        }
    }

    /// A first message with text and two files goes part by part (a file is a message of its own),
    /// the parts under the draft's client id and `-2`, `-3`; when an upload's answer is lost, the
    /// retried start sends only what the server did not send back.
    @Test func aFirstMessageWithFilesGoesPartByPartAndARetrySkipsWhatTheServerHas() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                try await probe.waitForConnection()
                let draft = ConversationDraft(
                    firstMessage: MessageDraft(
                        text: "my documents",
                        attachments: [
                            Message.Attachment(name: "passport.pdf", mimeType: "application/pdf", data: Data(repeating: 1, count: 300)),
                            Message.Attachment(name: "visa.pdf", mimeType: "application/pdf", data: Data(repeating: 2, count: 300)),
                        ]
                    ),
                    clientID: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
                )
                control.server.inject(.loseAnswer, on: .upload)
                await #expect(throws: SwitchboardError.self, "the first upload's answer is lost") { _ = try await probe.session.startConversation(draft) }
                let fromVisitor: @Sendable () -> [(id: String, clientSideId: String, kind: String, text: String)] = {
                    control.server.messages(ofVisitor: control.visitorID).filter { $0.kind == "visitor" || $0.kind == "file_visitor" }
                }
                #expect(fromVisitor().count == 2, "the text and the first file reached the server")
                let chat = try await probe.session.conversation(WebimBackend.conversationID)
                try await probe.recorder.waitUntil("both echoes stored") { events in
                    Set(events.compactMap(\.addedMessage).compactMap { $0.serverID == nil ? nil : $0.clientID }).count >= 2
                }
                _ = try await probe.session.startConversation(draft)
                try await waitUntil("the second file", timeout: .seconds(20), signal: control.server.changes) { fromVisitor().count >= 3 }
                let onServer = fromVisitor()
                #expect(onServer.map(\.clientSideId) == ["0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d", "0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d-2", "0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d-3"])
                #expect(onServer.map(\.kind) == ["visitor", "file_visitor", "file_visitor"], "each part once, the text first")
                try await probe.waitForMessages(["my documents"], in: chat)
                print("webim first message with files: \(onServer.count) messages on the server after a lost answer and a retry (\(onServer.map(\.clientSideId)))")
            }
        }
    }

    /// Limits the account's config states are checked before uploading; refusals arrive typed.
    @Test func uploadLimitsAreCheckedBeforeSending() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), maxUploadMegabytes: 1, allowedFileTypes: ["png"])) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let big = FileManager.default.temporaryDirectory.appendingPathComponent("big-\(UUID().uuidString).png")
                try Data(count: 2 * 1024 * 1024).write(to: big)
                defer { try? FileManager.default.removeItem(at: big) }
                let tooBig = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: big.lastPathComponent, url: big)]))
                let banned = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "notes.exe", mimeType: "application/octet-stream", data: Data("x".utf8))]))
                let empty = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "empty.png", mimeType: "image/png", data: Data())]))
                for (pending, reason) in [(tooBig, WebimSendFileError.fileSizeExceeded), (banned, .fileTypeNotAllowed), (empty, .fileSizeTooSmall)] {
                    let failed = try await probe.recorder.first("\(reason)") {
                        $0.updatedMessage.map { $0.clientID == pending.clientID && $0.deliveryState.isFailed } ?? false
                    }
                    #expect(failed.updatedMessage.flatMap(WebimSendFileError.init) == reason, "\(String(describing: failed.updatedMessage?.deliveryState))")
                }
                #expect(control.server.actions.allSatisfy { $0.action != "upload" })
                #expect(try await control.serverMessages(in: chat.id).allSatisfy { !$0.fromCustomer }, "nothing was uploaded")
            }
        }
    }

    /// The server's refusal of an upload arrives as the SDK's reason, and the session goes on.
    @Test func anUploadTheServerRefusesFailsWithItsTypedReason() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                control.server.inject(.error("malicious_file_detected"), on: .upload)
                control.server.inject(.error("max_files_count_per_chat_exceeded"), on: .upload)
                let png = Data([0x89, 0x50, 0x4E, 0x47])
                var reasons: [WebimSendFileError?] = []
                for name in ["virus.png", "eleventh.png"] {
                    let pending = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: name, mimeType: "image/png", data: png)]))
                    let failed = try await probe.recorder.first(name) {
                        $0.updatedMessage.map { $0.clientID == pending.clientID && $0.deliveryState.isFailed } ?? false
                    }
                    reasons.append(failed.updatedMessage.flatMap(WebimSendFileError.init))
                }
                #expect(reasons == [.maliciousFileDetected, .maxFilesCountPerChatExceeded])
                // Read from a failed message's reason: a string this version does not know is
                // `unknown`; a reason that is no refusal of the file is none.
                var failed = Message(conversationID: chat.id, text: "", time: Date(timeIntervalSince1970: 0))
                failed.deliveryState = .failed("upload: surprise_error")
                #expect(WebimSendFileError(failed) == .unknown, "a reason this version does not know")
                for other in ["upload: reinit-required", "upload: HTTP 502", "chat.message: not_allowed", "expired"] {
                    failed.deliveryState = .failed(other)
                    #expect(WebimSendFileError(failed) == nil, "\(other) is no refusal of the file")
                }
                #expect(WebimSendFileError(SwitchboardError(.messageRejected, "upload: not_allowed_file_type")) == nil, "an error is read by its underlying reason, not its text")
                _ = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "fine.png", mimeType: "image/png", data: png)]))
                try await waitUntil("the next file uploads", timeout: .seconds(20), signal: control.server.changes) {
                    control.server.messages(ofVisitor: control.visitorID).contains { $0.kind == "file_visitor" }
                }
                print("webim upload refusals: \(reasons.map { $0.map(\.rawValue) ?? "-" }), then a file uploads")
            }
        }
    }

    @Test func ratingsGoOnTheWireAsMinusTwoToTwo() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try await probe.recorder.first("the operator") { if case .agentChanged(.some) = $0.kind { return true } else { return false } }
                try await chat.rateAgent(nil, rating: 5, comment: "great")
                try await chat.rateAgent(ParticipantID("operator-\(control.agent.id)"), rating: 1, comment: nil)
                #expect(control.server.ratings.map(\.rate) == [2, -2])
                await #expect { try await chat.rateAgent(nil, rating: 6, comment: nil) } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
            }
        }
    }

    @Test func theOperatorAsksForARatingWithTheRateForm() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                _ = try await probe.openConversation()
                try await probe.recorder.first("the operator") { if case .agentChanged(.some) = $0.kind { return true } else { return false } }
                let surveyID = try control.agent.requestRating(visitor: control.visitorID, comment: "Anything to add?")
                let shown = try await probe.recorder.first("the rate form") { event in
                    if case .custom("webim.SURVEY", let payload) = event.kind { return payload["data"]?.nonNull != nil }
                    return false
                }
                guard case .custom(_, let payload) = shown.kind, let survey = try WebimSurvey.fromEvent(payload: payload) else {
                    Issue.record("no survey in \(shown)")
                    return
                }
                #expect(survey.id == surveyID)
                #expect(survey.currentQuestion?.type == "stars")
                let webim = WebimRequests(session: probe.session)
                let wrong = await #expect(throws: SwitchboardError.self) { try await webim.answer(survey, with: "6") }
                #expect(wrong?.vendorCode == "incorrect-stars-value")
                try await webim.answer(survey, with: "4")
                let comment = try #require(survey.nextQuestion())
                #expect(comment.currentQuestion?.type == "comment")
                try await webim.answer(comment, with: "quick and kind")
                #expect(comment.nextQuestion() == nil)
                try await probe.recorder.first("the survey ended") { event in
                    if case .custom("webim.SURVEY", let payload) = event.kind { return payload["data"]?.nonNull == nil }
                    return false
                }
                try await probe.recorder.first("the rating") { event in
                    if case .custom("webim.OPERATOR_RATE", let payload) = event.kind { return payload["data"]?["rating"]?.intValue == 1 }
                    return false
                }
                #expect(control.server.ratings.map(\.rate) == [1], "4 stars is +1 on the wire scale")
                #expect(control.server.surveyAnswers.map(\.answer) == ["4", "quick and kind"])
                let closedID = try control.agent.requestRating(visitor: control.visitorID)
                try await webim.closeSurvey(closedID)
                #expect(control.server.surveyAnswers.count == 2, "a closed survey records no answer")
            }
        }
    }

    @Test func aConnectionDroppedMidPollReconnectsAndLosesNothing() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try control.agent.send("before", to: control.visitorID)
                try await probe.waitForMessages(["before"], in: chat)
                let drops = 3
                for round in 1...drops {
                    control.server.inject(.dropConnection, on: .delta)
                    try await probe.recorder.waitUntil("reconnected after drop \(round)") { $0.filter(\.isConnected).count >= round + 1 }
                    try control.agent.send("after drop \(round)", to: control.visitorID)
                }
                try await probe.waitForMessages((1...drops).map { "after drop \($0)" }, in: chat)
                let reasons = probe.recorder.events.compactMap { event -> SwitchboardError? in
                    if case .connection(_, reason: .connectionLost(let error)?) = event.kind { return error }
                    return nil
                }
                let stored = try await chat.storedMessages(before: nil, limit: .max).compactMap(\.serverID)
                let truth = try await control.serverMessages(in: chat.id).map(\.serverID)
                let added = probe.recorder.events.compactMap(\.addedMessage).compactMap(\.serverID)
                print("webim mid-poll drops (\(reasons.first.map { String(describing: $0) } ?? "-")): \(drops) faults, \(reasons.count) connection-lost events, \(truth.count) messages on the server, lost \(Set(truth).subtracting(stored).count), duplicated \(added.count - Set(added).count)")
                #expect(reasons.count >= drops && reasons.allSatisfy { $0.code == .connectionLost })
                #expect(stored == truth)
                #expect(Set(added).count == added.count)
            }
        }
    }

    /// `clearVisitorData` starts a new visitor when the session is built, not on every link: a
    /// network drop keeps the visitor (it made a new anonymous visitor per drop).
    @Test func clearVisitorDataClearsOncePerSessionNotPerLink() async throws {
        try await withWebimEmulator { control in
            let backend = try WebimBackend(configuration: WebimConfiguration(accountName: control.baseURL, clearVisitorData: true), transport: control.transport)
            let context = ConformanceContext(emulator: control)
            let session = ChatSession(backend: backend, configuration: context.configuration, clock: context.makeClock(), logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.first("connected") { $0.isConnected }
                let first = control.server.visitorIDs
                control.server.inject(.dropConnection, on: .delta)
                try await recorder.waitUntil("reconnected") { $0.filter(\.isConnected).count >= 2 }
                let after = control.server.visitorIDs
                print("clearVisitorData across a drop: visitors \(first.count) before, \(after.count) after")
                #expect(first.count == 1)
                #expect(after == first, "the same visitor after the drop")
            }
        }
    }

    /// Two identified visitors on one device's store: the second sees none of the first's
    /// messages, sends none of their queued ones and none of their session (`visit-session-id`,
    /// `visitor`) on init; the first's queued send goes out when they come back, and
    /// `destroyWithClearVisitorData` leaves no row of theirs.
    @Test func aSecondVisitorOnOneStoreGetsNothingOfTheFirst() async throws {
        try await withWebimEmulator { control in
            let store = try SQLiteChatStore.inMemory()
            func visitor(_ id: String) throws -> WebimBackend {
                try WebimBackend(configuration: WebimConfiguration(accountName: control.baseURL, visitorFieldsJSON: #"{"fields":{"id":"\#(id)"}}"#), transport: control.transport)
            }
            /// Sends as the visitor, and waits for the server's confirmation.
            @Sendable func send(_ text: String, _ probe: SessionProbe) async throws -> any Conversation {
                try await probe.recorder.first("the visitor's conversation") { $0.conversationID == WebimBackend.conversationID }
                let chat = try await probe.session.conversation(WebimBackend.conversationID)
                let sent = try await chat.send(text: text)
                try await probe.recorder.first("\(text) confirmed") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
                return chat
            }
            let alicesSession = try await harness(control).withSession(backend: visitor("alice"), store: store) { probe in
                let chat = try await send("alice writes", probe)
                try await probe.session.pause()
                _ = try await chat.send(text: "alice's queued send")
                return try await store.fetchCredentials(scope: probe.session.scope)["visit-session-id"]
            }
            let bobStored = try await harness(control).withSession(backend: visitor("bob"), store: store) { probe in
                let chat = try await send("bob writes", probe)
                return try await chat.storedMessages(before: nil, limit: .max).map(\.text)
            }
            let bobsInit = control.server.lastParameters(of: "init") ?? [:]
            let onServer = { (id: String) in control.server.messages(ofVisitor: "provided-\(id)").map(\.text) }
            print("webim visitor switch: bob stored \(bobStored); server: alice \(onServer("alice")), bob \(onServer("bob")); bob's init carried visit-session-id \(bobsInit["visit-session-id"] ?? "none")")
            #expect(alicesSession != nil)
            #expect(!bobStored.contains { $0.hasPrefix("alice") }, "bob's store holds none of alice's messages")
            #expect(bobsInit["visit-session-id"] == nil && bobsInit["visitor"] == nil, "bob's init carries nothing of alice's visit")
            #expect(onServer("bob") == ["bob writes"] && onServer("alice") == ["alice writes"], "alice's queued send did not go out as bob")

            // Alice comes back: her queued send goes out as hers; then she signs out.
            let rows = try await harness(control).withSession(backend: visitor("alice"), store: store) { probe in
                try await probe.recorder.waitUntil("alice's queued send confirmed") { events in
                    events.compactMap(\.updatedMessage).contains { $0.text == "alice's queued send" && $0.serverID != nil }
                }
                try await WebimRequests(session: probe.session).destroyWithClearVisitorData()
                let alice = probe.session.scope
                return try await store.fetchConversations(scope: alice).count + store.fetchCredentials(scope: alice).values.count
                    + store.fetchOutbox(scope: alice).count + store.countMessages(in: WebimBackend.conversationID, scope: alice)
            }
            let bobKept = try await store.countMessages(in: WebimBackend.conversationID, scope: StoreScope(backend: "webim", account: "default", user: "visitor:bob"))
            #expect(onServer("alice") == ["alice writes", "alice's queued send"], "sent once, as alice")
            #expect(rows == 0, "destroyWithClearVisitorData leaves no row of alice's")
            #expect(bobKept == 1, "bob's rows stay")
        }
    }

    /// A `CHAT` update without a chat ends it as the SDK does (`changingChatStateOf(chat: nil)`):
    /// closed, no operator, and the operator no longer typing. The delta comes from the
    /// emulator's HTTP answer (an injected body), through the whole session.
    @Test func aChatUpdateWithoutAChatEndsItWithNoOperatorAndNoTyping() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try control.agent.typing(true, visitor: control.visitorID)
                try await probe.recorder.first("the operator typing") { if case .typing(_, true, _) = $0.kind { return true } else { return false } }
                let before = try await chat.info()
                let mark = probe.recorder.events.count
                let revision = control.server.revision(ofVisitor: control.visitorID) + 1_000
                control.server.inject(
                    .body(#"{"revision":\#(revision),"deltaList":[{"objectType":"CHAT","event":"upd","id":"1","data":null}]}"#), on: .delta
                )
                // A change answers the poll in flight; the next one meets the injected answer.
                try control.agent.typing(true, visitor: control.visitorID)
                try await probe.recorder.first("no operator") { if case .agentChanged(nil) = $0.kind { return true } else { return false } }
                let after = try await chat.info()
                let typingAfter = probe.recorder.events.dropFirst(mark).compactMap { event -> Bool? in
                    if case .typing(_, let isTyping, _) = event.kind { return isTyping } else { return nil }
                }
                print("webim CHAT null: agent \(before.assignedAgent?.id.rawValue ?? "none") → \(after.assignedAgent?.id.rawValue ?? "none"), state \(before.state) → \(after.state), typing after \(typingAfter)")
                #expect(before.assignedAgent != nil)
                #expect(after.assignedAgent == nil && after.state == .closed)
                #expect(typingAfter.last == false, "the operator's typing ends with the chat")
            }
        }
    }

    @Test func theOperatorReadingTurnsTheVisitorsMessagesRead() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let sent = try await chat.send(text: "are you there?")
                try await probe.recorder.first("confirmed") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
                try control.agent.markRead(visitor: control.visitorID)
                let read = try await probe.recorder.first("read") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.deliveryState == .read }
                #expect(read.updatedMessage?.text == "are you there?", "MESSAGE_READ from the operator → .read")
            }
        }
    }

    @Test func historyPagesAcrossClosedChats() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), historyPageSize: 4)) { control in
            let conversation = try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...5 { try control.agent.send("first chat \(index)", to: control.visitorID) }
                try control.agent.close(visitor: control.visitorID)
                try await probe.recorder.first("closed") {
                    if case .conversationStateChanged(.closedByAgent, _) = $0.kind { return true } else { return false }
                }
                try await chat.send(text: "a new question")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "a new question" && $0.updatedMessage?.serverID != nil }
                return chat.id
            }
            let truth = try await control.serverMessages(in: conversation)
            try await harness(control).withSession { probe in
                try await probe.recorder.first("the chat") { $0.conversationID == conversation && $0.kind.category == .conversation }
                let chat = try await probe.session.conversation(conversation)
                var all: [Message] = []
                var before: MessageOrderKey?
                for _ in 0..<10 {
                    let page = try await chat.history(before: before, limit: 4)
                    guard let oldest = page.first else { break }
                    all = page + all
                    before = oldest.orderKey
                }
                print("webim history: \(truth.count) messages over two chats, \(all.count) paged")
                #expect(all.compactMap(\.serverID) == truth.map(\.serverID))
            }
        }
    }

    @Test func typingIsCoalescedToOnePerSecondAndStopsAfterFive() async throws {
        try await withWebimEmulator { control in
            let clock = try #require(control.virtualClock)
            let backend = try await control.makeCustomerBackend()
            let session = ChatSession(backend: backend, configuration: .virtualTime, clock: SessionClock(clock), logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.first("the chat") { $0.conversationID == WebimBackend.conversationID }
                let chat = try await session.conversation(WebimBackend.conversationID)
                try await chat.userTyping(draft: "H")
                try await chat.userTyping(draft: "He")
                try await chat.userTyping(draft: "Hel")
                _ = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(10)) { $0.typing.count == 1 }
                clock.advance(by: .seconds(1))
                _ = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(10)) { $0.typing.count == 2 }
                clock.advance(by: .seconds(5))
                let activity = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(10)) { $0.typing.count == 3 }
                #expect(activity.typing == [true, true, false])
                #expect(control.server.typingLog.map(\.draft) == ["H", "Hel", nil], "the latest draft after 1 s, then a stop")
                #expect(control.server.typingLog.map(\.deletesDraft) == [false, false, false], "the automatic stop keeps the draft (SDK: del-message-draft=0)")
                // An emptied draft and an explicit stop both delete the draft (protocols/webim.md §8.1).
                clock.advance(by: .seconds(1))
                try await chat.userTyping(draft: "")
                _ = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(10)) { $0.typing.count == 4 }
                try await chat.userStoppedTyping()
                _ = try await control.waitForCustomerActivity(in: chat.id, timeout: .seconds(10)) { $0.typing.count == 5 }
                let last = control.server.typingLog.suffix(2)
                #expect(last.map(\.typing) == [false, false])
                #expect(last.map(\.draft) == ["", nil])
                #expect(last.map(\.deletesDraft) == [true, true])
                print("webim typing: \(control.server.typingLog.map { "typing=\($0.typing ? 1 : 0) del=\($0.deletesDraft ? 1 : 0) draft=\($0.draft.map { "\"\($0)\"" } ?? "-")" })")
            }
        }
    }

    @Test func aReplyCarriesItsQuote() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let quoted = try control.agent.send("Which order?", to: control.visitorID)
                try await probe.waitForMessages(["Which order?"], in: chat)
                try await chat.send(MessageDraft(text: "#4711", quote: Message.Quote(messageID: MessageID(quoted))))
                let reply = try await probe.recorder.first("the reply") { $0.updatedMessage?.text == "#4711" && $0.updatedMessage?.serverID != nil }
                #expect(reply.updatedMessage?.quote?.messageID == MessageID(quoted))
                #expect(reply.updatedMessage?.quote?.text == "Which order?")
            }
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct WebimVendorRequestTests {
    @Test func typedRequestsReachTheServerAndLocationChangesWithoutANewSession() async throws {
        try await withWebimEmulator { control in
            let store = InMemoryChatStore()
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession(store: store) { probe in
                let chat = try await probe.openConversation()
                let webim = WebimRequests(session: probe.session)
                try await webim.setPushToken("apns-token")
                try await webim.sendChatHistory(to: "alice@example.com")
                await #expect(throws: SwitchboardError.self, "no survey is open") {
                    try await webim.answerSurvey(surveyID: "s1", formID: 1, questionID: 2, answer: "5")
                }
                let actions = control.server.actions.map(\.action)
                #expect(actions.contains("set_push_token") && actions.contains("chat.send_chat_history") && actions.contains("survey.answer"))
                try await webim.changeLocation("support-desk")
                try await probe.recorder.waitUntil("re-initialised at the new location") { $0.filter(\.isConnected).count >= 2 }
                #expect(control.server.initLocations.last == "support-desk")
                try await chat.send(text: "still the same conversation")
                try await probe.recorder.first("sent there") { $0.updatedMessage?.text == "still the same conversation" && $0.updatedMessage?.serverID != nil }
                #expect(await probe.session.isClosed == false)
            }
            // The app's next launch, on the same store: the configured location wins (#30: a
            // change used to be stored and win for good).
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession(store: store) { _ in
                print("webim locations initialised: \(control.server.initLocations)")
                #expect(control.server.initLocations.last == "mobile", "the configured location, not the one changed to")
            }
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct WebimHistorySinceTests {
    @Test func aFreshInstallGetsEarlierChatsFromHistorySince() async throws {
        try await withWebimEmulator { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            try await harness.withSession { probe in
                let chat = try await probe.openConversation()
                try control.agent.send("from the first chat", to: control.visitorID)
                try await probe.waitForMessages(["from the first chat"], in: chat)
                try control.agent.close(visitor: control.visitorID)
                try await chat.send(text: "second chat starts")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "second chat starts" && $0.updatedMessage?.serverID != nil }
            }
            // A new device: a fresh store; the full update holds only the current chat.
            control.server.inject(.delay(.milliseconds(200)), on: .delta)
            try await harness.withSession { probe in
                try await probe.recorder.first("history since brings the first chat") {
                    $0.addedMessage?.text == "from the first chat" && $0.origin.session == probe.session.id
                }
                let event = try await probe.recorder.first("as history") { $0.addedMessage?.text == "from the first chat" }
                if case .messageAdded(_, let position) = event.kind { #expect(position == .history) }
                let stored = try await probe.session.conversation(WebimBackend.conversationID).storedMessages(before: nil, limit: .max)
                let truth = try await control.serverMessages(in: WebimBackend.conversationID)
                #expect(stored.compactMap(\.serverID) == truth.map(\.serverID), "both chats, once each, in order")
            }
        }
    }
}

extension WebimHistorySinceTests {
    /// A message of a past chat the store holds, edited by the operator or read since, comes back
    /// in a history-since change list: the edit and the read flag are applied (they used to be
    /// dropped as a history copy of a stored message), each announced once.
    @Test func editsAndReadFlagsOfStoredMessagesAreApplied() async throws {
        try await withWebimEmulator { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            try await harness.withSession { probe in
                let chat = try await probe.openConversation()
                let onServer: @Sendable (String) -> Bool = { text in control.server.messages(ofVisitor: control.visitorID).contains { $0.text == text } }
                _ = try await chat.send(text: "mine")
                try await waitUntil("mine on the server", timeout: .seconds(20), signal: control.server.changes) { onServer("mine") }
                try control.agent.send("theirs", to: control.visitorID)
                try await probe.waitForMessages(["mine", "theirs"], in: chat)
                try control.agent.close(visitor: control.visitorID)
                // A new chat moves the first one's messages to history.
                _ = try await chat.send(text: "next")
                try await waitUntil("next on the server", timeout: .seconds(20), signal: control.server.changes) { onServer("next") }
                let ids = Dictionary(control.server.messages(ofVisitor: control.visitorID).map { ($0.text, $0.id) }) { first, _ in first }
                let mine = try #require(ids["mine"]), theirs = try #require(ids["theirs"])
                let before = try await chat.storedMessages(before: nil, limit: .max)
                #expect(before.first { $0.serverID?.rawValue == mine }?.deliveryState != .read)
                let seen = probe.recorder.events.count
                #expect(control.server.changePastMessage(ofVisitor: control.visitorID, id: theirs, text: "theirs, corrected"))
                #expect(control.server.changePastMessage(ofVisitor: control.visitorID, id: mine, read: true))
                try await probe.recorder.waitUntil("both changes applied") { events in
                    let updated = events.compactMap { event -> Message? in
                        if case .messageUpdated(let message) = event.kind { return message }
                        return nil
                    }
                    return updated.contains { $0.text == "theirs, corrected" && $0.isEdited } && updated.contains { $0.serverID?.rawValue == mine && $0.deliveryState == .read }
                }
                let stored = try await chat.storedMessages(before: nil, limit: .max)
                let updates = probe.recorder.events.dropFirst(seen).filter { event in
                    guard case .messageUpdated(let message) = event.kind, let id = message.serverID?.rawValue else { return false }
                    return id == mine || id == theirs
                }
                let corrected = try #require(stored.first { $0.serverID?.rawValue == theirs })
                #expect(corrected.text == "theirs, corrected" && corrected.isEdited)
                #expect(stored.first { $0.serverID?.rawValue == mine }?.deliveryState == .read)
                #expect(stored.filter { $0.text.hasPrefix("theirs") }.count == 1, "edited in place, not added")
                #expect(updates.count == 2, "each change announced once, nothing for the unchanged copies: \(updates.map(\.kind))")
                print("webim history-since changes: 1 edit and 1 read flag applied, \(updates.count) updates announced, \(stored.count) stored")
            }
        }
    }

    /// More changes than one answer holds (`hasMore`) are asked for again at once, from each
    /// page's revision, not on the next announcement.
    @Test func moreChangesThanOneAnswerHoldsAreFetchedAtOnce() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), historySincePageSize: 3)) { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            let store = InMemoryChatStore()
            try await harness.withSession(store: store) { probe in
                let chat = try await probe.openConversation()
                try control.agent.send("first", to: control.visitorID)
                try await probe.waitForMessages(["first"], in: chat)
            }
            let elsewhere = (1...7).map { "on another device \($0)" }
            control.server.addPastChat(ofVisitor: control.visitorID, operator: control.agent, texts: elsewhere)
            try await harness.withSession(store: store) { probe in
                try await probe.waitForMessages(elsewhere, in: try await probe.session.conversation(WebimBackend.conversationID))
                let sinces = control.server.historySinces
                let stored = try await probe.session.conversation(WebimBackend.conversationID).storedMessages(before: nil, limit: .max)
                let truth = try await control.serverMessages(in: WebimBackend.conversationID)
                #expect(Set(stored.compactMap(\.serverID)) == Set(truth.map(\.serverID)))
                #expect(stored.count == truth.count, "nothing twice")
                #expect(sinces.count == 3, "8 changes in pages of 3: three requests in a row, \(sinces)")
                print("webim history-since: 8 changed messages, pages of 3, \(sinces.count) requests (since \(sinces)), \(stored.count) stored of \(truth.count)")
            }
        }
    }

    /// A server that announces no history revisions is asked when the link opens and every 60 s
    /// after (protocols/webim.md §6.1), so chats from another device arrive.
    @Test func aServerWithoutRevisionsIsPolledEverySixtySeconds() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), announcesHistoryRevisions: false)) { control in
            let clock = try #require(control.virtualClock)
            let session = ChatSession(backend: try await control.makeCustomerBackend(), configuration: .virtualTime, clock: SessionClock(clock), logger: .quiet)
            try await withRecording(session) { recorder in
                try await session.resume()
                try await recorder.waitUntil("connected") { $0.contains(where: \.isConnected) }
                try await waitUntil("the sync when the link opens", timeout: .seconds(20), signal: control.server.changes) {
                    control.server.historyRequests == 1
                }
                #expect(await clock.waitForSleepers(2), "the engine's timer and the 60 s history poll")
                control.server.addPastChat(ofVisitor: control.visitorID, operator: control.agent, texts: ["from another device"])
                clock.advance(by: .seconds(59))
                #expect(control.server.historySinces.isEmpty, "not before 60 s")
                clock.advance(by: .seconds(1))
                let event = try await recorder.first("the 60 s poll") { $0.addedMessage?.text == "from another device" }
                if case .messageAdded(_, let position) = event.kind { #expect(position == .history) }
                #expect(control.server.historySinces.count == 1)
                print("webim history without revisions: polled at link open and after 60 s, since \(control.server.historySinces)")
                await session.close()
            }
        }
    }
}

/// Wire details the review against protocols/webim.md found differing from the SDK (issue 13 §3).
@Suite(.timeLimit(.minutes(2)))
struct WebimWireDetailTests {
    /// SDK 4.0's `startChat` sends no `force-start` and starts only while no chat is open; only
    /// `forceStartChat` forces a start. A draft's first message reaches the chat once.
    @Test func startChatFollowsTheSDKAndTheForcedStartIsItsOwnCall() async throws {
        try await withWebimEmulator { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let starts = { control.server.actions.filter { $0.action == "chat.start" }.count }
                let chat = try await probe.session.startConversation(
                    ConversationDraft(
                        customFields: ["department-key": "sales", "name": "Alice"], firstMessage: MessageDraft(text: "Where is my parcel?"),
                        clientID: "6f1c2d3e-4a5b-4c6d-8e7f-90a1b2c3d4e5"
                    )
                )
                let start = try #require(control.server.lastParameters(of: "chat.start"))
                #expect(start["force-start"] == nil, "SDK 4.0's startChat sends no force-start")
                #expect(start["department-key"] == "sales")
                #expect(start["visitor-fields"].map { $0.contains("Alice") } == true, "4.0 names the fields visitor-fields")
                #expect(start["client-side-id"].map { $0.count == 32 && $0.allSatisfy(\.isHexDigit) } == true, "a new id, as the SDK's 32 hex digits")
                try await probe.waitForMessages(["Where is my parcel?"], in: chat)
                let first = control.server.messages(ofVisitor: control.visitorID).filter { $0.text == "Where is my parcel?" }
                #expect(first.map(\.clientSideId) == ["6f1c2d3e4a5b4c6d8e7f90a1b2c3d4e5"], "the first message once, under the draft's client id as the SDK writes ids")
                // A chat is open: neither a second start nor a send starts another.
                _ = try await probe.session.startConversation(ConversationDraft())
                let invoice = try await chat.send(text: "And the invoice?")
                try await probe.waitForMessages(["And the invoice?"], in: chat)
                // chat.message carries the SDK's 32 hex digits too, and the echo still confirms the send.
                try await probe.recorder.waitUntil("the send confirmed") { events in
                    events.contains { event in
                        if case .messageUpdated(let message) = event.kind { return message.clientID == invoice.clientID && message.serverID != nil }
                        return false
                    }
                }
                let sent = control.server.messages(ofVisitor: control.visitorID).filter { $0.text == "And the invoice?" }.map(\.clientSideId)
                #expect(sent == [try #require(invoice.clientID).rawValue.replacingOccurrences(of: "-", with: "")])
                let firstStored = try await chat.storedMessages(before: nil, limit: .max).first { $0.text == "Where is my parcel?" }
                #expect(firstStored?.clientID?.rawValue == "6f1c2d3e-4a5b-4c6d-8e7f-90a1b2c3d4e5", "read back as the id it was sent for")
                #expect(starts() == 1, "no chat.start while a chat is open")
                try await WebimRequests(session: probe.session).forceStartChat(departmentKey: "billing")
                let forced = try #require(control.server.lastParameters(of: "chat.start"))
                #expect(starts() == 2)
                #expect(forced["force-start"] == "1" && forced["department-key"] == "billing", "forceStartChat forces it")
                let stored = try await chat.storedMessages(before: nil, limit: .max).filter { $0.text == "Where is my parcel?" }
                #expect(stored.count == 1, "stored once")
                let actionsBefore = control.server.actions.count
                let error = await #expect(throws: SwitchboardError.self) { try await chat.close() }
                #expect(error?.code == .unsupported)
                #expect(control.server.actions.count == actionsBefore, "nothing is sent")
                print("webim 4.0: chat.start \(start.keys.sorted()), forced \(forced.keys.sorted()); \(starts()) starts for two starts and a send; close refused: \(error?.message ?? "-")")
            }
        }
    }

    @Test func threePointFourThreeClosesWithChatClose() async throws {
        try await withWebimEmulator(sdkVersion: .v3_43) { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                let chat = try await probe.session.startConversation(ConversationDraft(customFields: ["name": "Alice"]))
                #expect(control.server.lastParameters(of: "chat.start")?["custom_fields"]?.contains("Alice") == true, "3.x names them custom_fields")
                try await chat.close()
                #expect(control.server.actions.last?.action == "chat.close")
                #expect(control.server.chatState(ofVisitor: control.visitorID) == "closed_by_visitor")
            }
        }
    }
}

/// Online status (issue 13 §2): the four statuses, the `offline-message` visit session state,
/// the `get-online-status` poller, and an app that offers "leave a message" while no operator is
/// online.
@Suite(.timeLimit(.minutes(2)))
struct WebimOnlineStatusTests {
    static func availability(_ event: ChatEvent) -> ChatEvent.Availability? {
        if case .availability(let availability) = event.kind { return availability }
        return nil
    }

    @Test func thePollerReportsEachOfTheFourStatuses() async throws {
        try await withWebimEmulator { control in
            let clock = try #require(control.virtualClock)
            let backend = try WebimBackend(
                configuration: WebimConfiguration(accountName: control.baseURL, visitorFieldsJSON: control.visitorFields, onlineStatusPollInterval: .seconds(7)),
                transport: control.transport
            )
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession(backend: backend) { probe in
                _ = try await probe.openConversation()
                var seen: [ChatEvent.Availability] = []
                for (status, expected) in [("busy_online", ChatEvent.Availability.busyOnline), ("busy_offline", .busyOffline), ("offline", .offline), ("online", .online)] {
                    let from = probe.recorder.events.count
                    control.server.setOnlineStatus(status)
                    // The next get-online-status is due in 7 s of the virtual clock.
                    try await clock.advance(toSleeperDueIn: .seconds(7))
                    try await probe.recorder.waitUntil("\(status)") { events in
                        events.dropFirst(from).contains { Self.availability($0) == expected }
                    }
                    seen += probe.recorder.events.dropFirst(from).compactMap(Self.availability)
                }
                #expect(seen == [.busyOnline, .busyOffline, .offline, .online])
                print("webim online status (open chat, get-online-status every 7 s of the virtual clock): \(seen.map(\.rawValue))")
            }
        }
    }

    @Test func anAppLeavesAMessageWhileNoOperatorIsOnlineAndChatsWhenOneIsBack() async throws {
        try await withWebimEmulator { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession { probe in
                try await probe.recorder.first("online at first") { Self.availability($0) == .online }
                control.server.setOnlineStatus("offline")
                try await probe.recorder.first("offline: leave a message") { Self.availability($0) == .offline }
                // What the app shows instead of a chat: an appeal, answered later.
                let appeals = ChatSession(
                    backend: try WebimAppealsBackend(configuration: WebimAppealsConfiguration(accountName: control.baseURL, userToken: "switching-user"), transport: control.transport),
                    configuration: .virtualTime, clock: ConformanceContext(emulator: control).makeClock(), logger: .quiet
                )
                let appealID = try await withRecording(appeals) { recorder in
                    try await appeals.resume()
                    try await recorder.waitUntil("the appeals session connects") { $0.contains(where: \.isConnected) }
                    let id = try await appeals.startConversation(ConversationDraft(firstMessage: MessageDraft(text: "Call me back, please"))).id
                    await appeals.close()
                    return id
                }
                let visitor = try #require(control.server.visitor(ofUserToken: "switching-user"))
                #expect(control.server.appeals(ofVisitor: visitor).map(\.texts) == [["Call me back, please"]])
                control.server.setOnlineStatus("online")
                try await probe.recorder.waitUntil("online again") { events in
                    events.drop { Self.availability($0) != .offline }.contains { Self.availability($0) == .online }
                }
                let chat = try await probe.openConversation()
                try await chat.send(text: "I am back in the chat")
                try await probe.recorder.first("chatting again") { $0.updatedMessage?.text == "I am back in the chat" && $0.updatedMessage?.serverID != nil }
                let states = probe.recorder.events.compactMap(Self.availability)
                print("webim leave a message: availability \(states.map(\.rawValue)), appeal \(appealID) written while offline, chat after")
            }
        }
    }
}

extension WebimWireDetailTests {
    /// `server-not-ready` (the server is starting: Android and Rox retry, iOS 4.0 does not
    /// special-case it) and `session_not_found` (the server forgot the page) are retried: the
    /// adapter re-initialises after the engine's backoff instead of ending the session, as it does
    /// for `reinit-required`. On init and on the long-poll alike.
    @Test(arguments: [("server-not-ready", WebimServer.Endpoint.initialize), ("server-not-ready", .delta), ("session_not_found", .delta), ("session_not_found", .initialize)])
    func aServerThatIsNotReadyOrLostThePageIsRetried(_ code: String, _ endpoint: WebimServer.Endpoint) async throws {
        try await withWebimEmulator { control in
            try await ConformanceHarness(context: ConformanceContext(emulator: control)).withSession(resume: endpoint == .delta) { probe in
                let before = control.server.initLocations.count
                let eventsBefore = probe.recorder.events.count
                control.server.inject(.error(code), on: endpoint)
                if endpoint == .initialize { try await probe.session.resume() }
                try await probe.recorder.waitUntil("initialised after \(code)") { _ in control.server.initLocations.count > before }
                // The server has the new init; the session is connected again once its answer is in.
                try await probe.waitForConnection(after: eventsBefore)
                let chat = try await probe.openConversation()
                try await chat.send(text: "after \(code)")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "after \(code)" && $0.updatedMessage?.serverID != nil }
                #expect(await probe.session.isClosed == false)
                #expect(!probe.recorder.events.contains { if case .fatal = $0.kind { return true } else { return false } })
                let errors = probe.recorder.events.compactMap { event -> String? in
                    if case .connection(_, .connectionLost(let error)?) = event.kind { return error.vendorCode }
                    return nil
                }
                print("webim \(code) on \(endpoint.rawValue): retried, \(control.server.initLocations.count - before) init(s), link losses \(errors)")
            }
        }
    }
}

/// The SDK's fields the adapter did not map before (issue 13 §3), each end to end.
@Suite(.timeLimit(.minutes(2)))
struct WebimMappedFieldTests {
    func harness(_ control: WebimEmulatorControl) -> ConformanceHarness {
        ConformanceHarness(context: ConformanceContext(emulator: control))
    }

    @Test func theAccountAndLocationSettingsAndHintsEnabledReachTheApp() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                @Sendable func settings(_ events: [ChatEvent]) -> [JSONValue] {
                    events.compactMap { event in
                        if case .settingsChanged(let value) = event.kind { return value }
                        return nil
                    }
                }
                try await probe.recorder.waitUntil("hintsEnabled") { settings($0).contains { $0["hintsEnabled"]?.boolValue == false } }
                try await probe.recorder.waitUntil("the account's settings") { events in
                    settings(events).contains { $0["accountConfig"]?["visitor_message_editing"]?.boolValue == true && $0["locationSettings"] != nil }
                }
            }
        }
    }

    /// What the server said of its service is readable at any moment, not only heard as it
    /// happened: a screen opened after connecting reads the online status, the visit session
    /// state, the departments (the emulator's fields and types are the SDK's `DepartmentItem`
    /// fixture's) and the hints setting.
    @Test func currentValuesAreReadableAfterConnecting() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                try await probe.waitForConnection()
                try await probe.recorder.waitUntil("departments") { events in
                    events.contains { if case .settingsChanged(let value) = $0.kind { value["departments"] != nil } else { false } }
                }
                let session = probe.session
                let requests = WebimRequests(session: session)
                #expect(await session.availability == .online)
                #expect(await requests.visitSessionState() == "idle", "no chat yet")
                #expect(await session.settings["hintsEnabled"]?.boolValue == false)
                let departments = await requests.departments()
                #expect(departments.map(\.key) == ["sales", "support"])
                #expect(departments.map(\.availability) == [.online, .busyOnline])
                // The emulator's item has the SDK fixture's fields, each of the same JSON type.
                let fixture = try JSONValue(parsing: Data(contentsOf: WebimCodecTests.fixtures.appendingPathComponent("DepartmentItemTests__DEPARTMENT_ITEM_JSON_STRING__L32.json")))
                let served = try #require(await session.settings["departments"]?.arrayValue?.first)
                #expect(served.objectValue.map { Set($0.keys) } == fixture.objectValue.map { Set($0.keys) })
                @Sendable func type(_ value: JSONValue?) -> String {
                    switch value {
                    case .string?: "string"
                    case .int?, .double?: "number"
                    case .object?: "object"
                    case .array?: "array"
                    case .bool?: "bool"
                    default: "null"
                    }
                }
                for (key, value) in fixture.objectValue ?? [:] { #expect(type(served[key]) == type(value), "\(key)") }
                // A change is kept too.
                control.server.setOnlineStatus("offline")
                try await probe.recorder.waitUntil("offline-message") { events in
                    events.contains { if case .settingsChanged(let value) = $0.kind { value["visitSessionState"] == "offline-message" } else { false } }
                }
                #expect(await requests.visitSessionState() == "offline-message")
                #expect(await session.availability == .offline, "offline-message: no operator takes chats")
                print("webim current values: \(String(describing: await session.availability)), visit \(await requests.visitSessionState() ?? "-"), departments \(departments.map(\.key))")
            }
        }
    }

    /// The location's hello message is readable while the chat has no message, and gone at the
    /// next init once it has one; the visitor as the server describes them follows `VISITOR_FULL`.
    @Test func theHelloMessageAndTheVisitorAreReadable() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), helloMessage: "Hello! Ask us anything.")) { control in
            try await harness(control).withSession { probe in
                try await probe.waitForConnection()
                let requests = WebimRequests(session: probe.session)
                try await probe.recorder.waitUntil("the hello message") { events in
                    events.contains { if case .settingsChanged(let value) = $0.kind { value["helloMessage"] != nil } else { false } }
                }
                #expect(await requests.helloMessage() == "Hello! Ask us anything.")
                #expect(await requests.visitor()?.id == control.visitorID)
                #expect(await requests.visitor()?.fields["display_name"] == "Alice")
                control.server.setVisitorFields(["name": "Alice Smith", "email": "alice@example.com"], ofVisitor: control.visitorID)
                try await probe.recorder.waitUntil("VISITOR_FULL") { events in
                    events.contains { if case .settingsChanged(let value) = $0.kind { value["visitor"]?["fields"]?["email"] != nil } else { false } }
                }
                let visitor = await requests.visitor()
                #expect(visitor?.name == "Alice Smith" && visitor?.email == "alice@example.com" && visitor?.iconShape == "rhombus")
                // Once the chat has a message, the next init says no hello message.
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "hi")
                try await waitUntil("hi on the server", timeout: .seconds(20), signal: control.server.changes) {
                    control.server.messages(ofVisitor: control.visitorID).contains { $0.text == "hi" }
                }
                let seen = probe.recorder.events.count
                control.server.inject(.reinitRequired, on: .delta)
                try await probe.recorder.waitUntil("re-initialised") { $0.dropFirst(seen).contains(where: \.isConnected) }
                try await probe.recorder.waitUntil("no hello message") { events in
                    events.dropFirst(seen).contains { if case .settingsChanged(let value) = $0.kind { value["helloMessage"] == .null } else { false } }
                }
                #expect(await requests.helloMessage() == nil)
                print("webim hello message and visitor: shown while empty, gone after a message; visitor \(visitor?.name ?? "-") <\(visitor?.email ?? "-")>")
            }
        }
    }

    /// The SDK calls the README's table lists beside the typed requests, each checked on the
    /// server: a keyboard answer, pre-chat fields, the resolution survey, and a message with a
    /// `data` payload that comes back in the stored message.
    @Test func keyboardPrechatResolutionAndDataReachTheServer() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let webim = WebimRequests(session: probe.session)
                try await webim.sendKeyboardResponse(buttonID: "yes", requestMessageID: "msg-keyboard")
                #expect(control.server.lastParameters(of: "chat.keyboard_response") == ["button-id": "yes", "request-message-id": "msg-keyboard"])
                try await probe.session.setCustomFields(["plan": "gold"])
                let prechat = try #require(control.server.lastParameters(of: "chat.set_prechat_fields")?["prechat-key-independent-fields"])
                #expect(try JSONValue(parsing: prechat) == ["plan": "gold"])
                try await webim.answerResolutionSurvey(resolved: true, operatorID: control.agent.id)
                #expect(control.server.lastParameters(of: "chat.resolution_survey_select") == ["answer": "1", "operator_id": String(control.agent.id)])
                let sent = try await chat.send(MessageDraft(text: "my order", payload: ["orderId": 42]))
                let stored = try await probe.recorder.first("the echo") { $0.updatedMessage?.clientID == sent.clientID && $0.updatedMessage?.serverID != nil }
                #expect(control.server.lastParameters(of: "chat.message")?["data"].flatMap { try? JSONValue(parsing: $0) } == ["orderId": 42])
                #expect(stored.updatedMessage?.payload?["data"] == ["orderId": 42], "the server's `data` comes back with the message")
            }
        }
    }

    @Test func aHintQuestionIsSentAsOne() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try await chat.send(MessageDraft(text: "How do I return an item?", vendorOptions: ["hint_question": "1"]))
                try await probe.recorder.first("sent") { $0.updatedMessage?.serverID != nil && $0.updatedMessage?.text == "How do I return an item?" }
                #expect(control.server.lastParameters(of: "chat.message")?["hint_question"] == "1")
                try await chat.send(text: "plain")
                try await probe.recorder.first("sent plain") { $0.updatedMessage?.serverID != nil && $0.updatedMessage?.text == "plain" }
                #expect(control.server.lastParameters(of: "chat.message")?["hint_question"] == nil, "only when asked")
            }
        }
    }

    @Test func theOperatorsAvatarAndTheLastRatingOnTheAppsScale() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try control.agent.send("Hello", to: control.visitorID)
                let message = try await probe.recorder.first("the operator's message") { $0.addedMessage?.text == "Hello" }.addedMessage
                let avatar = message?.payload?["avatarURL"]?.stringValue
                #expect(avatar == "\(control.baseURL)/webim/images/avatar/\(control.agent.id).png", "the per-message avatar, as a full URL")
                let webim = WebimRequests(session: probe.session)
                #expect(try await webim.lastRating(ofOperator: control.agent.id) == nil, "never rated")
                try await chat.rateAgent(nil, rating: 4, comment: nil)
                // OPERATOR_RATE refreshes the conversation: 4 on the app's scale (1 on the wire).
                try await probe.recorder.first("the conversation carries the rating") { event in
                    if case .conversationUpdated(let info) = event.kind { return info.customData?["operatorRatings"]?[String(control.agent.id)]?.intValue == 4 }
                    return false
                }
                #expect(try await webim.lastRating(ofOperator: control.agent.id) == 4)
                #expect(control.server.ratings.last?.rate == 1, "the wire's −2…2")
            }
        }
    }

    @Test func clearingTheHistoryRemovesEveryStoredMessage() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                try control.agent.send("one", to: control.visitorID)
                try await probe.waitForMessages(["one"], in: chat)
                try await WebimRequests(session: probe.session).clearHistory()
                #expect(try await chat.storedMessages(before: nil, limit: .max).isEmpty, "removed before the call returned")
                #expect(probe.recorder.events.contains { if case .historyCleared = $0.kind { return true } else { return false } })
                #expect(control.server.messages(ofVisitor: control.visitorID).isEmpty)
            }
        }
    }

    @Test func infoBusyActionRequestAndInvitationMessages() async throws {
        try await withWebimEmulator { control in
            try await harness(control).withSession { probe in
                // An invitation: the operator starts a chat the visitor did not ask for.
                try control.agent.invite(visitor: control.visitorID, text: "Can I help you?")
                try await probe.recorder.first("invited") { event in
                    if case .conversationStateChanged(.invitation, _) = event.kind { return true }
                    if case .conversationAdded(let info) = event.kind { return info.state == .invitation }
                    if case .conversationUpdated(let info) = event.kind { return info.state == .invitation }
                    return false
                }
                try control.agent.sendInfo("Olga joined the chat", to: control.visitorID)
                try control.agent.sendOperatorBusy(to: control.visitorID)
                try control.agent.sendActionRequest("Please call us back", to: control.visitorID)
                let chat = try await probe.session.conversation(WebimBackend.conversationID)
                try await probe.waitForMessages(["Olga joined the chat", "All operators are busy", "Please call us back"], in: chat)
                let kinds = Dictionary(uniqueKeysWithValues: try await chat.storedMessages(before: nil, limit: .max).map { ($0.text, $0.kind) })
                #expect(kinds["Olga joined the chat"] == .system)
                #expect(kinds["All operators are busy"] == .agentBusy)
                #expect(kinds["Please call us back"] == .actionRequest)
                #expect(kinds["Can I help you?"] == .text)
            }
        }
    }

    @Test func initCarriesTheAppsDetailsAndTheServerChecksTheVisitorHash() async throws {
        let key = "e64e35642555f3ecd64ae7dbb600dca8"
        // The identification v2 vector of the Webim knowledge base (protocols/webim.md §5).
        let vector = WebimServer.visitorHash(
            fields: ["id": "12345", "display_name": "Евгений", "phone": "+78123855337", "email": "abc@webim.ru"], expires: 1_481_195_621, privateKey: key
        )
        #expect(vector.hasPrefix("07ef16b8") && vector.hasSuffix("cd86f"), "the emulator's hash is the published one: \(vector)")
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), visitorHashKey: key)) { control in
            let expires: Int64 = 4_102_444_800
            let fields = ["id": "alice", "display_name": "Alice"]
            let hash = WebimServer.visitorHash(fields: fields, expires: expires, privateKey: key)
            let signed = #"{"fields":{"id":"alice","display_name":"Alice"},"expires":\#(expires),"hash":"\#(hash)"}"#
            let backend = try WebimBackend(configuration: WebimConfiguration(
                accountName: control.baseURL, appVersion: "2.7.1", visitorFieldsJSON: signed, pageTitle: "Shop", deviceToken: "apns-token-1", pushSystem: .apns
            ), transport: control.transport)
            try await harness(control).withSession(backend: backend) { _ in
                let sent = try #require(control.server.lastParameters(of: "init"))
                #expect(sent["app-version"] == "2.7.1" && sent["title"] == "Shop" && sent["platform"] == "ios")
                #expect(sent["push-token"] == "apns-token-1" && sent["push-service"] == "apns")
            }
            let forged = signed.replacingOccurrences(of: hash, with: String(hash.reversed()))
            let refused = try WebimBackend(configuration: WebimConfiguration(accountName: control.baseURL, visitorFieldsJSON: forged), transport: control.transport)
            try await harness(control).withSession(backend: refused, resume: false) { probe in
                try await probe.session.resume()
                let event = try await probe.recorder.first("fatal") { if case .fatal = $0.kind { return true } else { return false } }
                guard case .fatal(let error) = event.kind else { return }
                #expect(WebimFatalError(error) == .wrongProvidedVisitorHash, "a typed reason, not a string")
            }
        }
    }

    @Test func builderErrorsAreTyped() {
        let cases: [(WebimConfiguration, WebimBuilderError)] = [
            (WebimConfiguration(accountName: ""), .nilAccountName),
            (WebimConfiguration(accountName: "demo", location: ""), .nilLocation),
            (WebimConfiguration(accountName: "demo", deviceToken: "t"), .invalidRemoteNotificationConfiguration),
            (WebimConfiguration(accountName: "demo", visitorFieldsJSON: #"{"id":"a"}"#, providedAuthorizationToken: "p"), .invalidAuthentificatorParameters),
            (WebimConfiguration(accountName: "demo", visitorFieldsJSON: "not json"), .invalidVisitorFields),
        ]
        for (configuration, expected) in cases {
            do {
                try configuration.validate()
                Issue.record("\(expected) was accepted")
            } catch let error as SwitchboardError {
                #expect(WebimBuilderError(error) == expected, "\(error)")
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(throws: SwitchboardError.self) { try WebimAppealsConfiguration(accountName: "demo", userToken: "").validate() }
        #expect(WebimFatalError(SwitchboardError(.fatal, "x", vendorCode: "visitor_banned")) == .visitorBanned)
        #expect(WebimFatalError(SwitchboardError(.fatal, "x", vendorCode: "domain-not-from-whitelist")) == .unknown("domain-not-from-whitelist"))
        #expect(WebimFatalError(SwitchboardError(.connectionLost, "x", vendorCode: "reinit-required")) == nil)
    }
}
