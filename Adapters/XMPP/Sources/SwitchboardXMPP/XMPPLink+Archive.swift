import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// The archive (XEP-0313) and the login: SASL, catch-up after the cursor, the follower, and
/// history.
extension XMPPLink {
    /// Opens the stream, logs in (SASL SCRAM, or PLAIN where allowed), binds a resource, reads the roster, catches up
    /// from the archive, says it is available, and hands the engine its snapshot.
    func login() async throws {
        let features = try await exchange("#features", XMPPStanzas.open(to: configuration.domain), name: "open")
        let mechanisms = features.child("mechanisms", NS.sasl)?.children("mechanism", NS.sasl).map(\.text) ?? []
        try await authenticate(offered: mechanisms)
        let restarted = try await exchange("#features", XMPPStanzas.open(to: configuration.domain), name: "open")
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
        if let cursor = XMPPCursor(context.cursor) {
            // The roster, then everything archived after the cursor as events, page by page.
            state.withLock { state in
                output.yield(.snapshot(BackendSnapshot(conversations: order.compactMap { conversations[$0] }.map { ConversationSnapshot(conversation: $0) }, isComplete: false)))
                state.known = Set(order)
                state.cursorID = cursor.position.archiveID
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
                    let time = state.clock.next(stamp: min(item.stamp ?? context.clock.date, context.clock.date))
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
                    receive(item.message, archiveID: item.archiveID, stamp: min(item.stamp ?? context.clock.date, context.clock.date), &state)
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
        state.withLock { state in
            for element in state.held ?? [] { deliver(element, &state) }
            state.held = nil
        }
    }

    /// The cursor as it stands: where the archive was read to, the clock, and what came live
    /// since; `nil` before the archive showed the link anything.
    func cursor(_ state: State) -> SyncCursor? {
        guard let archiveID = state.cursorID else { return nil }
        return XMPPCursor(position: XMPPArchivePosition(archiveID: archiveID, time: state.clock.last ?? context.clock.date), live: state.live).token
    }

    /// SASL: SCRAM where the server offers it (SHA-256, then SHA-1); PLAIN where it offers only
    /// that, the configuration allows it, and the link is `wss://` or loopback (over plain `ws://`
    /// anyone on the way could strip SCRAM from the offer and read the password).
    ///
    /// - Throws: `fatal` when the server offers nothing this client may use: trying again cannot
    ///   help.
    func authenticate(offered mechanisms: [String]) async throws {
        guard let mechanism = XMPPSCRAM.Mechanism.allCases.first(where: { mechanisms.contains($0.rawValue) }) else {
            let encryptedOrLocal = (try? PlainTextPolicy.check(configuration.url, allowed: false)) != nil
            guard mechanisms.contains("PLAIN"), configuration.allowsPlainLogin, encryptedOrLocal else {
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

    /// Archived stanzas after the cursor, in the archive's order, each once; then the cursor
    /// after them. Chat states of then are no news now.
    func receiveArchived(_ items: [XMPPMapping.ArchiveItem], olderThan floor: Date? = nil, _ state: inout State) {
        for item in items {
            // Each once: a live copy, a held one, a repeat, or a confirmed send came first.
            state.passed(item.archiveID)
            guard state.handle(item.archiveID) else { continue }
            if case .typing? = XMPPMapping.change(item.message) { continue }
            if XMPPMapping.bare(item.message["from"] ?? me) == me, let id = item.message["id"] {
                // What this link sent: a send whose answer is on its way delivers it, and the
                // link's own markers, corrections and retractions are not news.
                if state.sending.contains(id) || state.sentIDs.contains(id) { continue }
            }
            let stamp = min(item.stamp ?? context.clock.date, context.clock.date)
            // Catching up from a time: what is stamped before it only fills in.
            let position: ChatEvent.MessagePosition = floor.map { stamp < $0 } == true ? .history : .newest
            receive(item.message, archiveID: item.archiveID, stamp: stamp, position: position, &state)
        }
        guard let last = items.last?.archiveID else { return }
        state.cursorID = last
        state.since = nil
        if let cursor = cursor(state) { output.yield(.cursor(cursor)) }
    }

    /// What a catch-up from `since` (five minutes before the refused cursor's time) takes as
    /// history: stamped a whole second before the cursor's time, so surely delivered before
    /// (the archive's stamps are whole seconds; the clock's times may be later than a stamp).
    static func floor(below since: Date) -> Date {
        Date(timeIntervalSince1970: (since.addingTimeInterval(300).timeIntervalSince1970).rounded(.down) - 1)
    }

    /// Reads the archive after the cursor whenever a live message rang.
    func followArchive() async {
        for await _ in followSignals {
            do {
                try await catchUp()
            } catch {
                if output.endedWith != nil || Task.isCancelled { return }
                output.yield(.problem(SwitchboardError.classify(error)))
            }
        }
    }

    /// The archive after the cursor (from the newest page when there is none), or since a time,
    /// page by page.
    ///
    /// An archive id the server no longer has (expired, or another server's) is reported, and the
    /// catch-up goes from a little before the cursor's time instead; what is stamped before that
    /// time only fills in (the engine drops what it has).
    func catchUp(since start: Date? = nil) async throws {
        let (cursorID, refusedSince) = state.withLock { ($0.cursorID, $0.since) }
        var start = start ?? (cursorID == nil ? refusedSince : nil)
        var floor = start.map(Self.floor(below:))
        var page = start != nil ? .oldest : cursorID.map { XMPPStanzas.Page.after($0) } ?? .newest
        while true {
            let result: (items: [XMPPMapping.ArchiveItem], complete: Bool)
            do {
                result = try await archivePage(with: nil, start: start, page: page, max: 100)
            } catch let error as SwitchboardError where error.vendorCode == "item-not-found" && start == nil {
                let since = state.withLock { state in
                    let since = (state.clock.last ?? XMPPCursor(context.cursor)?.position.time ?? context.clock.date).addingTimeInterval(-300)
                    state.cursorID = nil
                    state.since = since
                    return since
                }
                output.yield(.problem(SwitchboardError(.protocolViolation, "the stored archive id was refused; catching up from its time", underlying: error)))
                start = since
                floor = Self.floor(below: since)
                page = .oldest
                continue
            }
            state.withLock { receiveArchived(result.items, olderThan: floor, &$0) }
            guard !result.complete, let last = result.items.last?.archiveID else { return }
            page = .after(last)
        }
    }

    /// A page of the conversation's archive, older than the anchor, oldest first: the anchor is
    /// the previous page's token (its oldest archive id) or a time (the store's oldest message).
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        var page = XMPPStanzas.Page.newest
        var end: Date?
        var upper: Date?
        switch query.before {
        case .token(let text):
            guard let token = XMPPArchivePosition(text) else { throw SwitchboardError(.invalidArgument, "not an XMPP history token") }
            page = .before(token.archiveID)
            upper = token.time
        case .time(let time):
            upper = time
            if let archiveID = state.withLock({ $0.archiveIDs[State.TimeKey(conversation: query.conversationID, time: time)] }) {
                page = .before(archiveID)
            } else {
                // A message an earlier link stored: `end` is inclusive and whole seconds, and a
                // live message's time is its arrival (the server's clock may be ahead), so it
                // goes ten seconds past: the page may repeat messages, which the engine drops.
                end = time.addingTimeInterval(10)
            }
        case .sequence:
            throw SwitchboardError(.invalidArgument, "XMPP history pages from an archive id or a time, not a sequence")
        case nil:
            break
        }
        let result: (items: [XMPPMapping.ArchiveItem], complete: Bool)
        do {
            result = try await archivePage(with: query.conversationID.rawValue, end: end, page: page, max: query.limit)
        } catch let error as SwitchboardError where error.vendorCode == "item-not-found" && upper != nil {
            // An anchor the server no longer has: from its time instead.
            result = try await archivePage(with: query.conversationID.rawValue, end: upper!.addingTimeInterval(10), page: .newest, max: query.limit)
        }
        let times = XMPPArchiveClock.below(upper, stamps: result.items.map { $0.stamp ?? upper ?? context.clock.date })
        // Newest first, so a correction or retraction is met before the message it changes (on
        // this page or an older one).
        var messages: [Message] = []
        state.withLock { state in
            let conversation = query.conversationID
            for (item, time) in zip(result.items, times).reversed() {
                if let change = XMPPMapping.change(item.message) {
                    switch change {
                    case .replace(let id, _), .retract(let id):
                        if state.historyChanges[conversation, default: [:]].count >= 5_000 { state.historyChanges[conversation] = [:] }
                        if state.historyChanges[conversation]?[id] == nil {
                            state.historyChanges[conversation, default: [:]][id] = (change, XMPPMapping.bare(item.message["from"] ?? me))
                        }
                    case .typing, .displayed:
                        break
                    }
                    continue
                }
                guard var message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time) else { continue }
                // Only the author's own changes count.
                if let id = XMPPMapping.stanzaID(of: message), let (change, author) = state.historyChanges[conversation]?[id], message.sender == ParticipantID(author) {
                    switch change {
                    case .retract: continue
                    case .replace(_, let text):
                        message.text = text
                        message.isEdited = true
                    case .typing, .displayed:
                        break
                    }
                }
                messages.insert(message, at: 0)
            }
        }
        let next = result.items.first.map { XMPPArchivePosition(archiveID: $0.archiveID, time: times[0]).anchor }
        state.withLock { state in
            for message in messages where state.recent[message.serverID?.rawValue ?? ""] == nil { state.keep(message) }
        }
        return HistoryPage(messages: messages, hasMore: !result.complete && next != nil, nextAnchor: next)
    }

    /// One archive query (XEP-0313): the results the reader collected for it, and whether the
    /// server said they reach the end.
    func archivePage(
        with peer: String?, start: Date? = nil, end: Date? = nil, ids: [String] = [], page: XMPPStanzas.Page, max: Int
    ) async throws -> (items: [XMPPMapping.ArchiveItem], complete: Bool) {
        // Not guessable: results are matched to their query by it.
        let id = "mam-\(UUID().uuidString)"
        state.withLock { $0.pages[id] = [] }
        defer { state.withLock { _ = $0.pages.removeValue(forKey: id) } }
        let answer = try await request(id, XMPPStanzas.archiveQuery(id: id, queryID: id, with: peer, start: start, end: end, ids: ids, page: page, max: max), name: "archive")
        let complete = answer.child("fin", NS.mam)?["complete"] == "true"
        return (state.withLock { $0.pages[id] ?? [] }, complete)
    }
}
