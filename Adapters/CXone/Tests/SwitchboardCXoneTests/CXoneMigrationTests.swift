@_spi(TestKit) import CXoneEmulator
import Foundation
import Switchboard
import SwitchboardCXone
@_spi(TestKit) import SwitchboardTestKit
import Testing

/// What an app migrating from the CXone SDK meets (issue #31): a pre-chat form, a thread's details
/// before its first message, one live contact at a time, the customer set at run time, a refused
/// token refresh, `archive()`; against the emulator, on its test clock.
extension CXoneScenarioTests {
    /// A new thread's name and fields survive a reconnect before its first message, and a first
    /// send the link lost on the way (they used to live in the link and be dropped before the send
    /// succeeded).
    @Test func aNewThreadsNameAndFieldsSurviveAReconnectAndARetriedFirstSend() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let thread = try await probe.session.startConversation(ConversationDraft(kind: .thread, title: "Billing"))
                try await thread.setCustomFields(["order": "42"])
                control.server.inject(.closeSocket)
                try await probe.recorder.waitUntil("reconnected") { $0.filter(\.isConnected).count >= 2 }
                control.server.inject(.dropOnNext(eventType: "SendMessage"))
                let sent = try await thread.send(text: "About my invoice")
                try await probe.recorder.first("sent") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let first = try #require(control.server.received.first { $0.eventType == "SendMessage" })
                #expect(first.data["thread"]?["threadName"] == "Billing", "the name, after a reconnect")
                #expect(first.data["contact"]?["customFields"]?[0]?["ident"] == "order" && first.data["contact"]?["customFields"]?[0]?["value"] == "42", "the fields, after a lost first send")
                #expect(await probe.session.statistics.connects >= 3, "two links lost before the first message went")
                print("cxone pending thread: name and fields kept across \(await probe.session.statistics.connects - 1) reconnects; the first message carried both")
            }
        }
    }

    /// The customer's name and device token set while the app runs reach the server with the
    /// next events (the SDK's `customer.setName`, `setDeviceToken(Data)`).
    @Test func theCustomersNameAndDeviceTokenSetAtRunTimeReachTheServer() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let backend = try backend(control) { $0.firstName = "Configured" }
            try await harness(control).withSession(backend: backend) { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "before")
                try await probe.waitForMessages(["before"], in: chat)
                #expect(control.server.identity(ofCustomer: control.customerID)?["firstName"] == "Configured")
                backend.customer.setName(firstName: "Ann", lastName: "Lee")
                backend.customer.setDeviceToken(Data([0xA1, 0xB2, 0x0C]))
                let sent = try await chat.send(text: "after")
                try await probe.recorder.first("sent") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let identity = control.server.identity(ofCustomer: control.customerID)
                #expect(identity?["firstName"] == "Ann" && identity?["lastName"] == "Lee")
                let message = try #require(control.server.received.last { $0.eventType == "SendMessage" })
                #expect(message.data["deviceFingerprint"]?["deviceToken"] == "a1b20c", "the APNs token's bytes in hex")
                print("cxone customer at run time: name \(identity?["firstName"]?.stringValue ?? "-") \(identity?["lastName"]?.stringValue ?? "-"), device token \(message.data["deviceFingerprint"]?["deviceToken"]?.stringValue ?? "-")")
            }
        }
    }

    /// A third-party OAuth session whose app gives the authorization code at run time, before
    /// connecting (the SDK's `setAuthorizationCode`, `setCodeVerifier`), signs in with it.
    @Test func anAuthorizationCodeSetAtRunTimeSignsIn() async throws {
        try await withCXoneEmulator(.init(mode: .multi, securedSessions: true, thirdPartyOAuth: true)) { control in
            let backend = try securedBackend(control)
            backend.customer.setAuthorizationCode("code-at-run-time", codeVerifier: "verifier")
            try await harness(control).withSession(backend: backend) { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "signed in with the code set at run time")
                try await probe.waitForMessages(["signed in with the code set at run time"], in: chat)
                let exchanged = control.server.tokenRequests.compactMap { $0["thirdParty"]?["authorization_code"]?.stringValue }
                #expect(exchanged == ["code-at-run-time"])
            }
        }
    }

    /// A refresh the server refuses is a typed event the app can act on (the SDK's
    /// `onTokenRefreshFailed`), and the session signs in again from scratch rather than retrying
    /// its sends with a dead token.
    @Test func aRefusedTokenRefreshIsATypedEventAndTheSessionSignsInAgain() async throws {
        // Tokens live 20 s: within the 30 s margin at once, so a send refreshes first.
        try await withCXoneEmulator(.init(mode: .multi, tokenLifetime: 20)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let authorizations = { control.server.received.filter { $0.eventType == "AuthorizeCustomer" }.count }
                let before = authorizations()
                control.server.inject(.operationError(code: "TokenRefreshingFailed", eventType: "RefreshToken"))
                let sent = try await chat.send(text: "after a refused refresh")
                let event = try await probe.recorder.first("the refresh failed") { CXoneTokenRefreshFailure($0) != nil }
                let failure = try #require(CXoneTokenRefreshFailure(event))
                #expect(failure.vendorCode == "TokenRefreshingFailed" && !failure.isThirdPartyOAuth)
                try await probe.recorder.first("sent after signing in again") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                #expect(authorizations() == before + 1, "a fresh AuthorizeCustomer after the refused refresh")
                print("cxone token refresh refused: event \(failure.vendorCode), \(authorizations() - before) new sign-in, the send then confirmed")
            }
        }
    }

    /// `archive()` as the SDK's (§3.11): a thread never sent into is closed here with nothing
    /// sent; a real one is archived on the server; a closed one is refused; and the emulator
    /// refuses a thread it does not have.
    @Test func archivingFollowsTheSDKAndTheEmulatorRefusesUnknownThreads() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                try await probe.waitForConnection()
                let archives = { control.server.received.filter { $0.eventType == "ArchiveThread" }.count }
                let local = try await probe.session.startConversation(ConversationDraft(title: "never sent"))
                try await local.archive()
                #expect(archives() == 0, "nothing sent for a thread the server never had")
                #expect(try await local.info().state == .archived)
                let real = try await probe.session.startConversation(ConversationDraft(title: "real"))
                _ = try await real.send(text: "please archive me later")
                try await waitUntil("the thread on the server", timeout: .seconds(20), signal: control.server.changes) {
                    control.server.messages(inThread: real.id.rawValue).contains { $0.text == "please archive me later" }
                }
                try await real.archive()
                #expect(archives() == 1 && control.server.isArchived(thread: real.id.rawValue))
                #expect(try await real.info().state == .archived)
                let again = await #expect(throws: SwitchboardError.self) { try await real.archive() }
                #expect(again?.vendorCode == "illegalChatState")
                let gone = try await probe.session.startConversation(ConversationDraft(title: "removed by an admin"))
                _ = try await gone.send(text: "hello")
                try await waitUntil("the second thread on the server", timeout: .seconds(20), signal: control.server.changes) {
                    !control.server.messages(inThread: gone.id.rawValue).isEmpty
                }
                control.server.forgetThread(gone.id.rawValue)
                let refused = await #expect(throws: SwitchboardError.self) { try await gone.archive() }
                #expect(refused?.code == .conversationNotFound && refused?.vendorCode == "RecordNotFound")
                print("cxone archive: a local thread closed with \(0) frames, a real one archived on the server, a closed one refused (\(again?.vendorCode ?? "-")), an unknown one refused (\(refused?.vendorCode ?? "-"))")
            }
        }
    }

    /// As the SDK, a live chat has one contact at a time: starting another while one is open is
    /// refused (it used to begin a second contact); once it is closed, a new one starts.
    @Test func aLiveChatStartsNoSecondContactWhileOneIsOpen() async throws {
        try await withCXoneEmulator(.init(mode: .live)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                _ = try await chat.send(text: "first contact")
                try await probe.waitForMessages(["first contact"], in: chat)
                let begins: @Sendable () -> Int = { control.server.received.filter { $0.eventType == "SendMessage" && $0.data["messageContent"]?["parameters"]?["isInitialMessage"] == true }.count }
                let before = begins()
                let refused = await #expect(throws: SwitchboardError.self) { _ = try await probe.session.startConversation(ConversationDraft()) }
                #expect(refused?.code == .unsupported && refused?.vendorCode == "unsupportedChannelConfig")
                #expect(begins() == before, "no second contact begun")
                #expect(control.server.threads(of: control.customerID).count == 1)
                try await chat.close()
                try await probe.recorder.first("closed") {
                    if case .conversationStateChanged(let state, _) = $0.kind { return $0.conversationID == chat.id && state.isClosed } else { return false }
                }
                // Closed: the next start begins the next contact.
                let next = try await probe.session.startConversation(ConversationDraft())
                #expect(next.id != chat.id)
                try await waitUntil("the next contact begun", timeout: .seconds(20), signal: control.server.changes) { begins() == before + 1 }
                print("cxone live chat: a second start while open refused (\(refused?.vendorCode ?? "-")); after closing, the next start begins contact \(control.server.threads(of: control.customerID).count)")
            }
        }
    }

    /// With a pre-chat form, a single-thread or live-chat channel makes no thread at connect (a
    /// live chat begins no contact): as the SDK, it waits for the app's start with the answers,
    /// which a missing required one refuses, and which then travel with the thread's first message.
    @Test(arguments: [CXoneServer.Mode.single, .live])
    func aPreChatFormWaitsForTheAppsStart(_ mode: CXoneServer.Mode) async throws {
        try await withCXoneEmulator(.init(mode: mode, requiredPreChatField: "email")) { control in
            try await harness(control).withSession { probe in
                try await probe.waitForConnection()
                #expect(try await probe.session.conversations().isEmpty, "no thread before the survey is answered")
                #expect(!control.server.received.contains { $0.eventType == "SendMessage" }, "no contact begun")
                let refused = await #expect(throws: SwitchboardError.self) { _ = try await probe.session.startConversation(ConversationDraft()) }
                #expect(refused?.vendorCode == "missingPreChatCustomFields")
                let chat = try await probe.session.startConversation(ConversationDraft(customFields: ["email": "alice@example.com"]))
                _ = try await chat.send(text: "with the survey answered")
                try await probe.waitForMessages(["with the survey answered"], in: chat)
                try await waitUntil("the first message on the server", timeout: .seconds(20), signal: control.server.changes) {
                    control.server.received.contains { $0.eventType == "SendMessage" }
                }
                let first = try #require(control.server.received.first { $0.eventType == "SendMessage" })
                #expect(first.data["contact"]?["customFields"]?[0]?["ident"] == "email", "the answers open the thread or contact")
                #expect(control.server.threads(of: control.customerID).count == 1)
                print("cxone pre-chat form (\(mode)): no thread at connect, a start without the answer refused, the answers with the first message (\(first.data["messageContent"]?["payload"]?["text"]?.stringValue ?? "-"))")
            }
        }
    }

    /// The queue position reaches the app while no agent has the thread, and goes when one takes
    /// it (`SetPositionInQueue`, then `CaseInboxAssigneeChanged`).
    @Test func theQueuePositionComesAndGoesWithTheAgent() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let thread = try await probe.session.startConversation(ConversationDraft(kind: .thread, title: "Waiting"))
                _ = try await thread.send(text: "is anyone there?")
                let queued = try await probe.recorder.first("a queue position") {
                    if case .queuePosition(let position?) = $0.kind { return $0.conversationID == thread.id && position >= 1 } else { return false }
                }
                control.agent.assign(thread.id.rawValue)
                try await probe.recorder.first("the position goes with the agent") {
                    if case .queuePosition(nil) = $0.kind { return $0.conversationID == thread.id } else { return false }
                }
                if case .queuePosition(let position) = queued.kind { print("cxone queue: position \(position.map(String.init) ?? "-") until an agent took the thread") }
            }
        }
    }

    /// A file over the channel's size limit, or of a MIME type it does not take, is refused before
    /// anything is uploaded; an allowed one is uploaded and its bytes are on the server.
    @Test func attachmentsAreCheckedBeforeUploadingAndTheUploadHoldsTheBytes() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            try await harness(control).withSession { probe in
                let chat = try await probe.openConversation()
                let restrictions = try CXoneChannelConfiguration(json: control.server.channelConfiguration).fileRestrictions
                let tooBig = Data(count: Int(restrictions.allowedFileSizeMegabytes) * 1024 * 1024 + 1)
                let big = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "big.png", mimeType: "image/png", data: tooBig)]))
                let wrongType = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "tool.exe", mimeType: "application/x-msdownload", data: Data([1, 2, 3]))]))
                for (pending, code) in [(big, "invalidFileSize"), (wrongType, "invalidFileType")] {
                    let failed = try await probe.recorder.first(code) { $0.updatedMessage.map { $0.clientID == pending.clientID && $0.deliveryState.isFailed } ?? false }
                    #expect(failed.updatedMessage?.serverID == nil)
                }
                #expect(control.server.uploadRequests == 0, "nothing sent to the server's upload")
                let bytes = Data([0x89, 0x50, 0x4E, 0x47, 1, 2, 3])
                let fine = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "fine.png", mimeType: "image/png", data: bytes)]))
                try await probe.recorder.first("uploaded and sent") { $0.updatedMessage.map { $0.clientID == fine.clientID && $0.serverID != nil } ?? false }
                #expect(control.server.uploads.values.contains([UInt8](bytes)), "the server holds the file's bytes")
                print("cxone attachments: an oversized and a disallowed file refused before uploading, an allowed one uploaded (\(control.server.uploads.count) on the server)")
            }
        }
    }
}
