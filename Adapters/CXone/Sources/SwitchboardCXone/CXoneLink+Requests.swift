import Foundation
import Logging
import Switchboard
import SwitchboardTransport

// The engine's requests on the open socket: sends (with uploads), read and typing, threads'
// lifecycle, custom fields, history, and the vendor calls (protocols/cxone.md §3).
extension CXoneLink {
    func send(_ outgoing: OutgoingMessage, socket: TextWebSocket) async throws {
        let id = outgoing.conversationID.rawValue
        // The fields go with the first message, and are dropped only once it is sent: a retry on
        // this link or the next carries them again.
        let (thread, token, fields) = state.withLock { ($0.threads[id] ?? Thread(), $0.credentials["access-token"], $0.contactFields[id]) }
        if thread.closed, channel.mode != .liveChat {
            throw SwitchboardError(.messageRejected, "the thread is closed", vendorCode: "illegalChatState")
        }
        var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(id)]
        if let name = thread.name { threadJSON["threadName"] = .string(name) }
        let contactFields = Self.fields(fields ?? [:], clock: context.clock)
        try await sendWelcomeIfPending(in: id, threadJSON: .object(threadJSON), contactFields: contactFields, token: token, socket: socket)
        try await beginLiveChatIfNeeded(id, socket: socket)
        let attachments = try await upload(outgoing.content.attachments)
        state.withLock { $0.threads[id, default: Thread()].sent = true }
        try await sendMessage(
            in: .object(threadJSON), messageID: outgoing.clientID.rawValue.lowercased(), text: outgoing.content.text,
            postback: outgoing.content.payload?["postback"] ?? .null, contactFields: contactFields, attachments: attachments, token: token, socket: socket
        )
        // The server knows the thread now, with its name and fields: it is no longer the local one.
        state.withLock { _ = $0.contactFields.removeValue(forKey: id) }
        var known: [String: String] = state.withLock { $0.credentials["local-thread"] == id } ? ["local-thread": ""] : [:]
        if state.withLock({ $0.credentials[Self.pendingKey(id)] != nil }) { known[Self.pendingKey(id)] = "" }
        if channel.mode != .multiThread { known["thread-id"] = id }
        if !known.isEmpty { keep(known) }
    }

    func typing(in conversation: ConversationID, isTyping: Bool, socket: TextWebSocket) async throws {
        try await send(isTyping ? "SenderTypingStarted" : "SenderTypingEnded", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)]], awaitReply: false, socket: socket)
    }

    func markRead(_ conversation: ConversationID, socket: TextWebSocket) async throws {
        // §3.13: with the thread's name; not for a thread the server does not know yet (the
        // local one before its first message), a closed one, or one still pending.
        let thread = state.withLock { $0.threads[conversation.rawValue] }
        guard let thread, thread.sent || thread.contactID != nil, !thread.closed else { return }
        var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(conversation.rawValue)]
        if let name = thread.name { threadJSON["threadName"] = .string(name) }
        try await send("MessageSeenByCustomer", data: ["thread": .object(threadJSON)], awaitReply: false, socket: socket)
    }

    func startConversation(_ draft: ConversationDraft, socket: TextWebSocket) async throws -> ConversationInfo {
        try channel.validatePreChat(draft.customFields)
        if channel.mode == .singleThread, state.withLock({ !$0.threads.isEmpty }) {
            throw SwitchboardError(.unsupported, "a single-thread channel has its thread already", vendorCode: "unsupportedChannelConfig")
        }
        // As the SDK: a live chat has one contact at a time; a new one only once it is closed. The
        // thread the link made ready for the next contact (never begun) is the one it starts.
        var id = UUID().uuidString.lowercased()
        if channel.mode == .liveChat, let (open, thread) = state.withLock({ $0.threads.first { !$0.value.closed }.map { ($0.key, $0.value) } }) {
            guard !thread.sent, !thread.begun, thread.contactID == nil else {
                throw SwitchboardError(.unsupported, "a live chat is open (\(open)): end it before starting another", vendorCode: "unsupportedChannelConfig")
            }
            id = open
        }
        state.withLock { state in
            state.threads[id] = Thread(name: draft.title, createdHere: true)
            state.contactFields[id] = draft.customFields
        }
        keepPending(id)
        if channel.mode != .multiThread { keep(["thread-id": id, "local-thread": id]) }
        let info = ConversationInfo(id: ConversationID(id), kind: .thread, title: draft.title, state: .queued)
        announceLocalThread(info)
        try await beginLiveChatIfNeeded(id, socket: socket)
        return info
    }

    /// Closes a thread: a live chat's contact ends (the server's events say so), a thread the
    /// server never saw ends here, and a messaging thread is archived. The state changed here is
    /// the answer, stored before the caller hears back.
    func closeConversation(_ conversation: ConversationID, socket: TextWebSocket) async throws -> ClosedConversation {
        if channel.mode == .liveChat {
            let contact = state.withLock { $0.threads[conversation.rawValue]?.contactID }
            state.withLock { $0.threads[conversation.rawValue, default: Thread()].closed = true }
            guard let contact else {
                // The server never saw this thread: it ends here.
                return .state(.closedByCustomer)
            }
            try await send("EndContact", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)], "contact": ["id": .string(contact)]], awaitReply: false, socket: socket)
            return .done
        }
        return try await archive(conversation, socket: socket)
    }

    func updateConversation(_ conversation: ConversationID, _ changes: ConversationChanges, socket: TextWebSocket) async throws {
        guard let title = changes.title else { return }
        try await send("UpdateThread", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue), "threadName": .string(title)]], awaitReply: false, socket: socket)
        state.withLock { $0.threads[conversation.rawValue, default: Thread()].name = title }
        keepPending(conversation.rawValue)
        // The server does not answer UpdateThread: the session applies the title itself.
    }

    func setCustomFields(_ fields: [String: String], of conversation: ConversationID?, socket: TextWebSocket) async throws {
        guard let conversation else {
            // §3.18: every current field of the customer, not only the new ones (empty ones left out).
            let all = state.withLock { state in
                state.customerFields.merge(fields) { _, new in new }
                return state.customerFields
            }
            try await send("SetCustomerCustomFields", data: ["customFields": Self.fields(all.filter { !$0.value.isEmpty }, clock: context.clock)], awaitReply: false, socket: socket)
            return
        }
        let contact = state.withLock { $0.threads[conversation.rawValue]?.contactID }
        guard let contact else {
            state.withLock { $0.contactFields[conversation.rawValue, default: [:]].merge(fields) { _, new in new } }
            keepPending(conversation.rawValue)
            return
        }
        try await send("SetContactCustomFields", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)], "contact": ["id": .string(contact)], "customFields": Self.fields(fields, clock: context.clock)], awaitReply: false, socket: socket)
    }

    // MARK: Vendor calls (``CXoneRequests``)

    func sendTranscript(of conversation: ConversationID, to email: String, socket: TextWebSocket) async throws {
        guard channel.isSendTranscriptEnabled, email.contains("@") else {
            throw SwitchboardError(.messageRejected, "the transcript cannot be sent", vendorCode: "sendTranscriptFailed")
        }
        let contact = state.withLock { $0.threads[conversation.rawValue]?.contactID }
        guard let contact else { throw SwitchboardError(.invalidArgument, "no contact", vendorCode: "consumerContact") }
        try await send("SendTranscript", data: ["consumerContact": ["id": .string(contact)], "consumerRecipients": [["idOnExternalPlatform": .string(email)]]], awaitReply: true, socket: socket)
    }

    func answerInactivityPopup(in thread: ConversationID, text: String, postback: String, socket: TextWebSocket) async throws {
        // §3.21: the button's text and postback, marked as the answer; not a message of the thread.
        let (name, token) = state.withLock { ($0.threads[thread.rawValue]?.name, $0.credentials["access-token"]) }
        var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(thread.rawValue)]
        if let name { threadJSON["threadName"] = .string(name) }
        try await sendMessage(
            in: .object(threadJSON), messageID: UUID().uuidString.lowercased(), text: text, postback: .string(postback),
            parameters: ["isInactivityPopupAnswer": true], contactFields: [], attachments: [], token: token, socket: socket
        )
    }

    /// The customer's and the visitor's ids, as the link keeps them.
    var customerAndVisitor: (customerID: String?, visitorID: String?) {
        let credentials = state.withLock { $0.credentials }
        return (credentials["customer-id"], credentials["visitor-id"])
    }

    /// Whether the thread has older messages; `nil` until it is recovered on this link.
    func hasMoreMessages(in thread: ConversationID) -> Bool? {
        // Unknown until a thread is recovered on this link (the first page brings its token).
        state.withLock { $0.threads[thread.rawValue]?.scrollToken }.map { !$0.isEmpty }
    }

    /// The customer's custom fields, empty ones left out.
    var customerCustomFields: [String: String] {
        state.withLock { $0.customerFields }.filter { !$0.value.isEmpty }
    }

    func executeTrigger(_ trigger: String, socket: TextWebSocket) async throws {
        // §3.14: its own envelope (the destination and the visitor). Chat is available: a live
        // chat's link opens only while it is online.
        guard !trigger.isEmpty else {
            throw SwitchboardError(.invalidArgument, "ExecuteTrigger needs a trigger id")
        }
        guard state.withLock({ $0.credentials["customer-id"] }) != nil else {
            throw SwitchboardError(.invalidState, "no customer yet", vendorCode: "customerAssociationFailure")
        }
        try await send("ExecuteTrigger", data: ["trigger": ["id": .string(trigger)]], destination: destinationID, awaitReply: false, socket: socket)
    }

    /// `SendMessage` (§3.8), awaiting its acknowledgment.
    func sendMessage(
        in thread: JSONValue, messageID: String, text: String, postback: JSONValue, parameters: JSONValue = [:],
        contactFields: JSONValue, attachments: [JSONValue], token: String?, socket: TextWebSocket
    ) async throws {
        var data: [String: JSONValue] = [
            "thread": thread,
            "messageContent": ["type": "TEXT", "payload": ["text": .string(text)], "parameters": parameters, "postback": postback],
            "idOnExternalPlatform": .string(messageID),
            // §3.8: all of the customer's fields ride on every message.
            "customer": ["customFields": Self.fields(state.withLock { $0.customerFields }.filter { !$0.value.isEmpty }, clock: context.clock)],
            "contact": ["customFields": contactFields],
            "attachments": .array(attachments),
            "deviceFingerprint": Self.fingerprint(configuration),
        ]
        if let token { data["accessToken"] = ["token": .string(token)] }
        try await send("SendMessage", data: .object(data), awaitReply: true, socket: socket)
    }

    /// The SDK's `archive()` (§3.11): `ArchiveThread` for a thread the server has loaded (listed
    /// with its contact, recovered, or sent into); a thread that exists only here (created, never
    /// sent) is closed locally, with nothing sent; a closed one is refused.
    func archive(_ conversation: ConversationID, socket: TextWebSocket) async throws -> ClosedConversation {
        guard channel.mode == .multiThread else {
            throw SwitchboardError(.unsupported, "archiving needs a multi-thread channel", vendorCode: "unsupportedChannelConfig")
        }
        let thread = state.withLock { $0.threads[conversation.rawValue] }
        if thread?.closed == true {
            throw SwitchboardError(.messageRejected, "the thread is closed", vendorCode: "illegalChatState")
        }
        let isLocal = thread.map { !$0.sent && $0.contactID == nil && $0.recoveryToken == nil && $0.createdHere } ?? false
        if !isLocal {
            try await send("ArchiveThread", data: ["thread": ["idOnExternalPlatform": .string(conversation.rawValue)]], awaitReply: true, socket: socket)
        }
        state.withLock { $0.threads[conversation.rawValue, default: Thread()].closed = true }
        return .state(.archived)
    }

    /// `LoadMoreMessages` with the thread's scroll token; an empty token means there is no more.
    func history(_ query: HistoryQuery, socket: TextWebSocket) async throws -> HistoryPage {
        let id = query.conversationID.rawValue
        // §3.7 names a page by its scroll token and the `createdAt` of the oldest message loaded
        // above it: the two go together. A token this adapter handed out carries its date (so it
        // stays whole on another link). A time cannot be sent: a time anchor pages down from the
        // top — the token the thread's recovery on this link gave — to the first page below that
        // time. (The thread's latest token is where the last page of any fill stopped: a second
        // fill on the same link that started there skipped the messages between, the CXone soak.)
        if case .token(let given)? = query.before {
            let (token, oldest) = Self.decodeHistoryAnchor(given)
            return try await page(id, token: token, oldest: oldest, socket: socket)
        }
        if state.withLock({ $0.threads[id]?.recoveryToken }) == nil {
            // Never recovered on this link: recover it; its messages arrive as a snapshot.
            try await recover(id, socket: socket)
        }
        guard let (top, topOldest) = state.withLock({ state in state.threads[id]?.recoveryToken.map { ($0, state.threads[id]?.recoveryOldest) } }) else {
            return HistoryPage(messages: [], hasMore: false)
        }
        guard case .time(let before)? = query.before else {
            return try await page(id, token: top, oldest: topOldest, socket: socket)
        }
        var current = try await page(id, token: top, oldest: topOldest, socket: socket)
        // Bounded: each page is older than the last; a thread deeper than this many pages above
        // the time gets what is below the last page fetched.
        for _ in 0..<Self.maxPagesToTime {
            let below = current.messages.filter { $0.time <= before }
            guard below.isEmpty, current.hasMore, case .token(let next)? = current.nextAnchor else {
                return HistoryPage(messages: below, hasMore: current.hasMore, nextAnchor: current.nextAnchor)
            }
            let (token, oldest) = Self.decodeHistoryAnchor(next)
            current = try await page(id, token: token, oldest: oldest, socket: socket)
        }
        return HistoryPage(messages: current.messages.filter { $0.time <= before }, hasMore: current.hasMore, nextAnchor: current.nextAnchor)
    }

    /// How many pages a time anchor pages down through at most.
    static let maxPagesToTime = 1_000

    /// One `LoadMoreMessages` page: the page above `token` ends with a message created at `oldest`.
    private func page(_ id: String, token scrollToken: String, oldest loaded: Date?, socket: TextWebSocket) async throws -> HistoryPage {
        guard !scrollToken.isEmpty else { return HistoryPage(messages: [], hasMore: false) }
        let oldest = loaded ?? context.clock.date
        guard let reply = try await send(
            "LoadMoreMessages",
            data: ["scrollToken": .string(scrollToken), "thread": ["idOnExternalPlatform": .string(id)], "oldestMessageDatetime": .string(oldest.formatted(CXoneServerDate.seconds))],
            awaitReply: true, socket: socket
        ) else { return HistoryPage(messages: [], hasMore: false) }
        guard case .moreMessages(let messages, let next) = try CXoneMapping.outcome(of: reply.frame, type: reply.type) else {
            throw SwitchboardError(.protocolViolation, "LoadMoreMessages answered with \(reply.type ?? "nothing")")
        }
        let pageOldest = messages.map(\.time).min() ?? oldest
        state.withLock { state in
            state.threads[id, default: Thread()].scrollToken = next
            state.threads[id]!.oldestLoaded = pageOldest
        }
        return HistoryPage(
            messages: messages.sorted { $0.time < $1.time }, hasMore: !next.isEmpty,
            nextAnchor: next.isEmpty ? nil : .token(Self.encodeHistoryAnchor(next, oldest: pageOldest))
        )
    }

    /// A history anchor: the scroll token and the oldest message's time above it, in seconds.
    static func encodeHistoryAnchor(_ token: String, oldest: Date) -> String {
        "\(Int64(oldest.timeIntervalSince1970.rounded(.down)))|\(token)"
    }

    /// The pair of ``encodeHistoryAnchor(_:oldest:)``; a bare token (from an older version) has no date.
    static func decodeHistoryAnchor(_ anchor: String) -> (token: String, oldest: Date?) {
        guard let bar = anchor.firstIndex(of: "|"), let seconds = Int64(anchor[..<bar]) else { return (anchor, nil) }
        return (String(anchor[anchor.index(after: bar)...]), Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    /// H5: one base64 JSON upload per file, after the channel's limits.
    func upload(_ attachments: [Message.Attachment]) async throws -> [JSONValue] {
        guard !attachments.isEmpty else { return [] }
        let restrictions = channel.fileRestrictions
        guard restrictions.isAttachmentsEnabled else { throw SwitchboardError(.unsupported, "attachments are disabled", vendorCode: "attachmentError") }
        var uploaded: [JSONValue] = []
        for attachment in attachments {
            let data = try attachment.contents()
            guard data.count <= Int(restrictions.allowedFileSizeMegabytes) * 1024 * 1024 else {
                throw SwitchboardError(.payloadTooLarge, "\(attachment.name) is over \(restrictions.allowedFileSizeMegabytes) MB", vendorCode: "invalidFileSize")
            }
            let mime = attachment.mimeType ?? "application/octet-stream"
            let allowed = restrictions.allowedMIMETypes.isEmpty || restrictions.allowedMIMETypes.contains { pattern in
                pattern == mime || (pattern.hasSuffix("/*") && mime.hasPrefix(String(pattern.dropLast())))
            }
            guard allowed else { throw SwitchboardError(.messageRejected, "files of type \(mime) are not allowed", vendorCode: "invalidFileType") }
            let response = try await transport.postJSON(
                "\(configuration.environment.chatURL)/1.0/brand/\(configuration.brandID)/channel/\(configuration.channelID)/attachment",
                body: ["content": .string(data.base64EncodedString()), "fileName": .string(attachment.name), "mimeType": .string(mime)],
                headers: CXoneWire.httpHeaders,
                timeout: configuration.replyTimeout
            )
            let fileURL = try CXoneHTTPAnswers.uploadedFileURL(status: response.status, body: response.body, name: attachment.name)
            uploaded.append(["url": .string(fileURL), "friendlyName": .string(attachment.name), "mimeType": .string(mime), "fileName": .string(attachment.name)])
        }
        return uploaded
    }

    static func fields(_ fields: [String: String], clock: SessionClock) -> JSONValue {
        .array(fields.sorted { $0.key < $1.key }.map { ["ident": .string($0.key), "value": .string($0.value), "updatedAt": .string(CXoneServerDate.now(clock))] })
    }

    // MARK: A thread the server does not know yet

    /// The credential that keeps a local thread's name and contact fields until its first message
    /// is sent, so a reconnect (or a restart) before then loses neither.
    static func pendingKey(_ thread: String) -> String { "pending-thread-\(thread)" }

    /// Stores the name and fields of `thread` while the server does not know it.
    func keepPending(_ thread: String) {
        let value: String? = state.withLock { state in
            guard let local = state.threads[thread], local.createdHere, !local.sent, local.contactID == nil else { return nil }
            var object: [String: JSONValue] = [:]
            if let name = local.name { object["name"] = .string(name) }
            if let fields = state.contactFields[thread], !fields.isEmpty { object["fields"] = .object(fields.mapValues(JSONValue.string)) }
            return JSONValue.object(object).jsonString
        }
        if let value { keep([Self.pendingKey(thread): value]) }
    }

    /// The local threads a previous link kept (``keepPending(_:)``), as this link's.
    static func restorePending(from credentials: Credentials, into state: inout State) {
        for (key, value) in credentials.values where key.hasPrefix("pending-thread-") && !value.isEmpty {
            let thread = String(key.dropFirst("pending-thread-".count))
            guard state.threads[thread] == nil, let json = try? JSONValue(parsing: value) else { continue }
            state.threads[thread] = Thread(name: json["name"]?.stringValue, createdHere: true)
            if let fields = json["fields"]?.objectValue?.compactMapValues(\.stringValue), !fields.isEmpty { state.contactFields[thread] = fields }
        }
    }
}
