import Foundation
import Logging
import Switchboard
import SwitchboardTransport

// The link's threads: listing or recovering them on connect, the local thread the next message
// creates, a live chat's beginning, and welcome messages (protocols/cxone.md §4.6, §4.7, §3.9).
extension CXoneLink {
    /// Multi-thread: the thread list, then each thread's metadata; otherwise: recover the thread.
    func loadThreads(_ socket: TextWebSocket) async throws {
        switch channel.mode {
        case .multiThread:
            guard let list = try await send("FetchThreadList", awaitReply: true, socket: socket) else { return }
            guard let listed = Self.snapshot(in: list.frame, type: list.type) else {
                await apply(list.frame, type: list.type)
                return
            }
            var listing = listed.snapshot
            for update in listed.rest { publish(update) }
            remember(.snapshot(listing), frame: list.frame)
            // Recover the open threads (the SDK's load(with:)): their recent messages catch the
            // session up on what it missed while away, and give each thread its scroll token and
            // agent. The list and the recoveries go out as one snapshot, so the session never
            // sees a thread without its agent in between.
            let open = listing.conversations.filter { !$0.conversation.state.isClosed }.map(\.conversation.id.rawValue).sorted()
            for id in open.prefix(20) {
                let reply: Reply?
                do {
                    reply = try await send("RecoverThread", data: ["thread": ["idOnExternalPlatform": .string(id)]], awaitReply: true, socket: socket)
                } catch let error as SwitchboardError where error.code == .conversationNotFound {
                    continue
                }
                guard let reply, let recovery = Self.snapshot(in: reply.frame, type: reply.type) else {
                    if let reply { await apply(reply.frame, type: reply.type) }
                    continue
                }
                for update in recovery.rest { publish(update) }
                remember(.snapshot(recovery.snapshot), frame: reply.frame)
                for item in recovery.snapshot.conversations {
                    if let index = listing.conversations.firstIndex(where: { $0.conversation.id == item.conversation.id }) {
                        listing.conversations[index] = item
                    }
                }
            }
            // The open threads past the first 20 get their metadata instead (§3.6): the last
            // message and the owner; their messages come when the app opens or pages them. What
            // it yields waits in the engine for the window below, with what the server pushes.
            for id in open.dropFirst(20) {
                if let reply = try await send("LoadThreadMetadata", data: ["thread": ["idOnExternalPlatform": .string(id)]], awaitReply: true, socket: socket) {
                    await apply(reply.frame, type: reply.type)
                }
            }
            output.yield(.snapshot(listing))
        case .singleThread, .liveChat:
            let cached = state.withLock { $0.credentials["thread-id"] }
            let data: JSONValue? = cached.map { ["thread": ["idOnExternalPlatform": .string($0)]] }
            do {
                if let reply = try await send(channel.mode == .liveChat ? "RecoverLivechat" : "RecoverThread", data: data, awaitReply: true, socket: socket) {
                    await apply(reply.frame, type: reply.type)
                }
            } catch let error as SwitchboardError where error.code == .conversationNotFound {
                // RecoveringThreadFailed: nothing to recover.
            }
            openNewThreadIfAllClosed(reuseLocal: true)
            // The SDK's automatic create(): a live chat starts at once, so an agent sees it —
            // unless the channel has a pre-chat form, whose answers the app's start carries.
            if channel.mode == .liveChat, channel.preChatFields.isEmpty, let local = state.withLock({ $0.credentials["local-thread"] }), !local.isEmpty {
                try await beginLiveChatIfNeeded(local, socket: socket)
            }
        }
    }

    /// §3.8: a live chat's create() sends the hidden `"Begin Conversation"` (`isInitialMessage`),
    /// which opens the contact so an agent sees the customer before they write; the customer's
    /// side never shows it. After the agent closes a chat, the next one begins with the
    /// customer's first message.
    func beginLiveChatIfNeeded(_ id: String, socket: TextWebSocket) async throws {
        guard channel.mode == .liveChat else { return }
        let (thread, token, fields) = state.withLock { ($0.threads[id], $0.credentials["access-token"], $0.contactFields[id]) }
        guard let thread, !thread.begun, !thread.sent, !thread.closed else { return }
        var threadJSON: [String: JSONValue] = ["idOnExternalPlatform": .string(id)]
        if let name = thread.name { threadJSON["threadName"] = .string(name) }
        // The pre-chat answers open the contact with it.
        let contactFields = Self.fields(fields ?? [:], clock: context.clock)
        try await sendWelcomeIfPending(in: id, threadJSON: .object(threadJSON), contactFields: contactFields, token: token, socket: socket)
        try await sendMessage(
            in: .object(threadJSON), messageID: UUID().uuidString.lowercased(), text: "Begin Conversation", postback: .null,
            parameters: ["isInitialMessage": true], contactFields: contactFields, attachments: [], token: token, socket: socket
        )
        state.withLock { state in
            state.threads[id]?.begun = true
            state.threads[id]?.sent = true
            state.contactFields[id] = nil
        }
        var known: [String: String] = ["thread-id": id]
        if state.withLock({ $0.credentials["local-thread"] == id }) { known["local-thread"] = "" }
        if state.withLock({ $0.credentials[Self.pendingKey(id)] != nil }) { known[Self.pendingKey(id)] = "" }
        keep(known)
    }

    /// As the SDK's create(): with no open thread (none yet, or the live chat just closed), a
    /// local one waits for the customer's next message, which creates it on the server. After a
    /// reconnect, the local thread the customer never wrote in is the same one again
    /// (`reuseLocal`), so the session does not collect empty threads.
    func openNewThreadIfAllClosed(reuseLocal: Bool = false) {
        // With a pre-chat form the SDK waits for the app's create(with:): `startConversation`
        // with the survey's answers makes the thread.
        guard channel.preChatFields.isEmpty else { return }
        let id = state.withLock { state -> String? in
            guard !state.threads.values.contains(where: { !$0.closed }) else { return nil }
            var id = UUID().uuidString.lowercased()
            if reuseLocal, let local = state.credentials["local-thread"], !local.isEmpty, state.threads[local] == nil { id = local }
            state.threads[id] = Thread()
            return id
        }
        guard let id else { return }
        keep(["thread-id": id, "local-thread": id])
        announceLocalThread(ConversationInfo(id: ConversationID(id), kind: .thread, state: .queued))
    }

    /// A thread only this client knows yet, with the stored welcome message in it, if any.
    func announceLocalThread(_ info: ConversationInfo) {
        let welcome = welcomeMessage(for: info.id.rawValue)
        output.yield(.snapshot(BackendSnapshot(conversations: [ConversationSnapshot(conversation: info, messages: welcome.map { [$0] } ?? [])], isComplete: false)))
    }

    /// `FireProactiveAction`: a welcome message is kept for the threads to come (as the SDK keeps
    /// it) and put into the current local thread if the customer has not written there yet; its
    /// handover fields join the customer's fields. Other actions stay events for the app.
    func receiveProactiveAction(_ data: JSONValue) {
        do {
            guard let welcome = try CXoneWelcomeMessage(proactiveActionData: data) else { return }
            let pending = state.withLock { state -> String? in
                state.customerFields.merge(welcome.handoverFields) { _, new in new }
                guard let current = state.credentials["thread-id"], let thread = state.threads[current],
                    !thread.sent, !thread.closed, thread.contactID == nil
                else { return nil }
                return current
            }
            keep(["welcome-message": welcome.bodyText])
            if let pending, let message = welcomeMessage(for: pending) {
                output.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: message.conversationID)))
            }
        } catch {
            output.yield(.problem(error as? SwitchboardError ?? SwitchboardError(.protocolViolation, "FireProactiveAction: \(error)")))
        }
    }

    /// The stored welcome message, its variables filled, as the agent's first message of
    /// `thread`; remembered so the first send of that thread brings it to the server.
    func welcomeMessage(for thread: String) -> Message? {
        let made = state.withLock { state -> (id: String, text: String, isNew: Bool)? in
            guard let body = state.credentials["welcome-message"], !body.isEmpty else { return nil }
            if state.credentials["welcome-thread"] == thread, let id = state.credentials["welcome-id"], !id.isEmpty, let text = state.credentials["welcome-text"] {
                // The same thread again (after a reconnect): the same message.
                return (id, text, false)
            }
            let text = CXoneWelcomeMessage.fill(body, firstName: configuration.firstName, lastName: configuration.lastName, customerFields: state.customerFields)
            return (UUID().uuidString.lowercased(), text, true)
        }
        guard let made else { return nil }
        if made.isNew { keep(["welcome-thread": thread, "welcome-id": made.id, "welcome-text": made.text]) }
        return Message(
            serverID: MessageID(made.id), conversationID: ConversationID(thread), senderRole: .agent, kind: .text, text: made.text,
            payload: ["welcomeMessage": true], time: context.clock.date
        )
    }

    /// §3.9: before the first message of the thread holding the welcome message, `SendOutbound`
    /// gives the server the welcome message; the stored one is then spent.
    func sendWelcomeIfPending(in thread: String, threadJSON: JSONValue, contactFields: JSONValue, token: String?, socket: TextWebSocket) async throws {
        let welcome = state.withLock { state -> (id: String, text: String)? in
            guard state.credentials["welcome-thread"] == thread, let id = state.credentials["welcome-id"], !id.isEmpty,
                let text = state.credentials["welcome-text"]
            else { return nil }
            return (id, text)
        }
        guard let welcome else { return }
        var data: [String: JSONValue] = [
            "thread": threadJSON,
            "messageContent": ["type": "TEXT", "payload": ["text": .string(welcome.text)]],
            "idOnExternalPlatform": .string(welcome.id),
            "consumerContact": ["customFields": contactFields],
            "attachments": [],
            "browserFingerprint": Self.fingerprint(configuration),
        ]
        if let token { data["accessToken"] = ["token": .string(token)] }
        try await send("SendOutbound", data: .object(data), awaitReply: false, socket: socket)
        keep(Self.cleared(Self.welcomeCredentials))
    }

    static let welcomeCredentials = ["welcome-message", "welcome-thread", "welcome-id", "welcome-text"]

    /// `RecoverThread` for one thread; a thread the server does not know is skipped.
    func recover(_ id: String, socket: TextWebSocket) async throws {
        do {
            if let reply = try await send("RecoverThread", data: ["thread": ["idOnExternalPlatform": .string(id)]], awaitReply: true, socket: socket) {
                await apply(reply.frame, type: reply.type)
            }
        } catch let error as SwitchboardError where error.code == .conversationNotFound {
            return
        }
    }
}
