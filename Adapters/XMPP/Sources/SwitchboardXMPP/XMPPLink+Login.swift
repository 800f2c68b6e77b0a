import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// The login: the stream, SASL, the resource, carbons, the roster, the first catch-up, the
/// snapshot, and the rooms of the cursor joined again.
extension XMPPLink {
    /// Opens the stream, logs in (SASL SCRAM, or PLAIN where allowed), and resumes the session's
    /// dropped stream where the server still holds it; otherwise binds a resource, reads the
    /// roster, catches up from the archive, says it is available, hands the engine its snapshot,
    /// and turns stream management on.
    func login() async throws {
        let features = try await exchange("#features", XMPPStanzas.open(to: configuration.domain), name: "open")
        let mechanisms = features.child("mechanisms", NS.sasl)?.children("mechanism", NS.sasl).map(\.text) ?? []
        try await authenticate(offered: mechanisms)
        let restarted = try await exchange("#features", XMPPStanzas.open(to: configuration.domain), name: "open")
        let offersManagement = restarted.child("sm", NS.sm) != nil && configuration.resumesStreams
        if let suspended = resuming.withLock({ $0 }) {
            if offersManagement, try await resume(suspended) { return }
            // Logging in afresh: the dropped stream is not this link's to hand on.
            resuming.withLock { $0 = nil }
        }
        guard restarted.child("bind", NS.bind) != nil else { throw SwitchboardError(.protocolViolation, "the server offers no resource binding") }
        let bindID = nextID("bind")
        let bound = try await request(bindID, XMPPStanzas.bind(id: bindID, resource: configuration.resource), name: "bind")
        context.logger.debug("xmpp: bound", metadata: ["resource": .string(bound.child("bind", NS.bind)?.child("jid", NS.bind)?.text.split(separator: "/").last.map(String.init) ?? "")])

        // The user's other devices' markers, corrections and retractions, copied here live.
        let carbonsID = nextID("carbons")
        do {
            _ = try await request(carbonsID, XMPPStanzas.enableCarbons(id: carbonsID), name: "carbons")
        } catch let error as SwitchboardError where error.code != .connectionLost && error.code != .timedOut {
            context.logger.debug("xmpp: the server has no carbons; the other devices' changes come with the next catch-up", metadata: ["code": .string(error.code.description)])
        }

        let rosterID = nextID("roster")
        let roster = try await request(rosterID, XMPPStanzas.rosterGet(id: rosterID), name: "roster")
        var conversations: [ConversationID: ConversationInfo] = [:]
        var order: [ConversationID] = []
        for item in roster.child("query", NS.roster)?.children("item", NS.roster) ?? [] {
            guard let jid = item["jid"] else { continue }
            let info = XMPPMapping.conversation(peer: XMPPMapping.bare(jid), name: item["name"], me: me)
            if conversations.updateValue(info, forKey: info.id) == nil { order.append(info.id) }
        }

        // The archive first: a query before the first presence tells Prosody not to send the
        // offline messages again (they are in the archive).
        if state.withLock({ $0.cursorID != nil || $0.since != nil }) {
            // The roster, then everything archived after the cursor as events, page by page.
            state.withLock { state in
                output.yield(.snapshot(BackendSnapshot(conversations: order.compactMap { conversations[$0] }.map { ConversationSnapshot(conversation: $0) }, isComplete: false)))
                state.known = Set(order)
            }
            try await catchUp()
        } else {
            // The first link of this store: the archive's newest page as the windows of its
            // conversations.
            let window = try await archivePage(with: nil, page: .newest, max: 50).items
            state.withLock { state in
                var windows: [ConversationID: [Message]] = [:]
                var changes: [XMPPMapping.ArchiveItem] = []
                for item in window {
                    if let change = XMPPMapping.change(item.message) {
                        if case .typing = change { continue }
                        changes.append(item)
                        continue
                    }
                    let time = state.clock.next(stamp: time(stamped: item.stamp))
                    guard let message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time) else { continue }
                    state.keep(message)
                    // A held copy of it (a carbon) is not handled again.
                    _ = state.handle(item.archiveID)
                    if conversations[message.conversationID] == nil {
                        conversations[message.conversationID] = XMPPMapping.conversation(peer: message.conversationID.rawValue, name: nil, me: me)
                        order.append(message.conversationID)
                    }
                    windows[message.conversationID, default: []].append(message)
                }
                let snapshots = order.compactMap { id in conversations[id].map { ConversationSnapshot(conversation: $0, messages: windows[id] ?? []) } }
                // Not complete: conversations stored from earlier links stay (the roster is not
                // all of them).
                output.yield(.snapshot(BackendSnapshot(conversations: snapshots, isComplete: false)))
                state.known = Set(order)
                for item in changes {
                    _ = state.handle(item.archiveID)
                    receive(item.message, archiveID: item.archiveID, stamp: time(stamped: item.stamp), &state)
                }
                if let last = window.last?.archiveID {
                    state.cursorID = last
                    if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
                }
            }
        }
        try await socket.send(XMPPStanzas.presence)
        // What the archive took between the query and the presence.
        try await catchUp()
        try await reenterRooms()
        state.withLock { state in
            for element in state.held ?? [] { deliver(element, &state) }
            state.held = nil
        }
        if offersManagement { try await enableStreamManagement() }
    }

    /// SASL: SCRAM where the server offers it (SHA-256, then SHA-1); PLAIN where it offers only
    /// that, the configuration allows it, and the link is `wss://` or loopback (over plain `ws://`
    /// anyone on the way could strip SCRAM from the offer and read the password).
    ///
    /// - Throws: `fatal` when the server offers nothing this client may use: trying again cannot
    ///   help.
    func authenticate(offered mechanisms: [String]) async throws {
        guard let mechanism = XMPPSCRAM.Mechanism.allCases.first(where: { mechanisms.contains($0.rawValue) }) else {
            guard mechanisms.contains("PLAIN"), configuration.allowsPlainLogin, PlainTextPolicy.isEncryptedOrLoopback(configuration.url) else {
                let why =
                    !mechanisms.contains("PLAIN") ? "" : !configuration.allowsPlainLogin ? " (PLAIN is not allowed by the configuration)" : " (not PLAIN over plain ws:// to another host)"
                throw SwitchboardError(
                    .fatal,
                    "the server offers \(mechanisms.isEmpty ? "no SASL mechanism" : mechanisms.joined(separator: ", ")); this version logs in with SCRAM-SHA-256, SCRAM-SHA-1 or PLAIN\(why)"
                )
            }
            let answer = try await exchange("#sasl", XMPPStanzas.auth("PLAIN", XMPPStanzas.plainToken(user: configuration.localPart, password: configuration.password)), name: "auth")
            guard answer.name == "success" else { throw Self.saslOutcome(answer) }
            return
        }
        var generator = SystemRandomNumberGenerator()
        var scram = XMPPSCRAM(mechanism: mechanism, user: configuration.localPart, password: configuration.password, clientNonce: XMPPSCRAM.nonce(using: &generator))
        let challenge = try await exchange("#sasl", XMPPStanzas.auth(mechanism.rawValue, Data(scram.clientFirst.utf8)), name: "auth")
        guard challenge.name == "challenge" else { throw Self.saslOutcome(challenge) }
        let final = try await abortingOnRefusal { try scram.clientFinal(serverFirst: try Self.saslText(challenge)) }
        var outcome = try await exchange("#sasl", XMPPStanzas.saslResponse(Data(final.utf8)), name: "auth")
        if outcome.name == "challenge" {
            // The server's signature as a challenge of its own (RFC 6120 §6.3.10 allows it in
            // `<success>` too): checked, then an empty response.
            try await abortingOnRefusal { try scram.verify(serverFinal: try Self.saslText(outcome)) }
            outcome = try await exchange("#sasl", XMPPStanzas.saslResponse(Data()), name: "auth")
            guard outcome.name == "success" else {
                // A third challenge: the exchange has no step left for it.
                if outcome.name == "challenge" { try? await socket.send(XMPPStanzas.saslAbort) }
                throw Self.saslOutcome(outcome)
            }
            return
        }
        guard outcome.name == "success" else { throw Self.saslOutcome(outcome) }
        // After `<success>` there is nothing to abort: the link ends with the error.
        try scram.verify(serverFinal: try Self.saslText(outcome))
    }

    /// Runs a step of the client's side of SASL; when it refuses what the server sent, tells the
    /// server (`<abort/>`, RFC 6120 §6.4.4) before the error ends the link.
    private func abortingOnRefusal<T>(_ step: () throws -> T) async throws -> T {
        do {
            return try step()
        } catch {
            try? await socket.send(XMPPStanzas.saslAbort)
            throw error
        }
    }

    /// A `<failure>` classified; anything else where a challenge or success was due is a
    /// protocol violation.
    static func saslOutcome(_ element: XMPPElement) -> SwitchboardError {
        element.name == "failure" ? XMPPMapping.saslFailure(element) : SwitchboardError(.protocolViolation, "a SASL <\(element.name)> where the login expected another step")
    }

    /// The base64 payload of a SASL element, as text.
    static func saslText(_ element: XMPPElement) throws -> String {
        let text = element.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: text), let decoded = String(data: data, encoding: .utf8) else {
            throw SwitchboardError(.protocolViolation, "a SASL <\(element.name)> whose payload is not base64 text")
        }
        return decoded
    }
}
