import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// One XMPP stream over one WebSocket: the login, the reader, the heartbeat, and the requests.
///
/// The lock guards the id counter, the time of the last inbound frame, the archive clock and
/// cursor, the archive pages being collected, the conversations this link announced, and the
/// frames held while the login assembles its snapshot. Frames are never logged: a PLAIN `<auth>`
/// carries the password and messages carry text.
final class XMPPLink: BackendConnection {
    private let output: LinkOutput
    var updates: AsyncThrowingStream<BackendUpdate, any Error> { output.updates }
    private let socket: TextWebSocket
    private let configuration: XMPPConfiguration
    private let context: ConnectionContext
    private let replies = PendingReplies<XMPPElement>()
    /// The account's bare JID.
    private let me: String

    private struct State {
        var nextID = 1
        var lastInbound: Duration = .zero
        var clock: XMPPArchiveClock
        /// The newest archive id delivered: where the next link catches up from.
        var cursorID: String?
        /// The results of the archive queries in flight, by query id, in the order they came.
        var pages: [String: [XMPPMapping.ArchiveItem]] = [:]
        /// Messages and roster pushes that came while the login assembled its snapshot, handled
        /// after it (in the order they came); `nil` once the snapshot is out.
        var held: [XMPPElement]? = []
        /// Conversations this link announced (the roster, and peers met since).
        var known: Set<ConversationID> = []
        /// Archive ids the login's catch-up delivered: a live copy of one is not delivered twice.
        var delivered: Set<String> = []
        /// Messages the server bounced (`type='error'`), by id, until their send looks.
        var bounced: [String: SwitchboardError] = [:]
        /// The archive id of each time this link gave a message: a history page below a stored
        /// message (the engine names it by its time) starts just before its archive id.
        var archiveIDs: [Date: String] = [:]

        /// Remembers where `time` is in the archive, forgetting all once there are many (a page
        /// below a forgotten time falls back to the time filter).
        mutating func remember(_ archiveID: String, at time: Date) {
            if archiveIDs.count >= 20_000 { archiveIDs.removeAll(keepingCapacity: true) }
            archiveIDs[time] = archiveID
        }
    }

    private let state: Locked<State>

    init(socket: TextWebSocket, configuration: XMPPConfiguration, context: ConnectionContext) {
        let replies = self.replies
        self.output = LinkOutput { replies.close($0) }
        self.socket = socket
        self.configuration = configuration
        self.context = context
        self.me = configuration.bareJID
        self.state = Locked(State(clock: XMPPArchiveClock(last: XMPPCursor(context.cursor)?.last)))
    }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        let heartbeat = Heartbeat(interval: configuration.heartbeatInterval, pongTimeout: configuration.pongTimeout, onlyWhenSilent: true)
        return try await output.whileRunning([
            { await self.readLoop() },
            {
                await heartbeat.run(
                    clock: self.context.clock, lastHeard: { self.state.withLock { $0.lastInbound } }, ping: { try await self.ping() }, ending: self.output
                )
            },
        ]) {
            try await login()
            let result = try await body(self)
            // A closed stream ends the server's session now, not when it notices the socket gone.
            try? await socket.send(XMPPStanzas.close)
            return result
        }
    }

    // MARK: Inbound

    private func readLoop() async {
        do {
            for try await text in socket.messages {
                state.withLock { $0.lastInbound = context.clock.now }
                await route(text)
            }
            output.end(SwitchboardError(.connectionLost, "the server closed the WebSocket"))
        } catch {
            output.end(SwitchboardError.classify(error))
        }
    }

    private func route(_ text: String) async {
        let element: XMPPElement
        do {
            element = try XMLReader.read(text)
        } catch {
            output.yield(.problem(error))
            return
        }
        switch (element.namespace, element.name) {
        case (NS.framing, "open"):
            break
        case (NS.framing, "close"):
            output.end(SwitchboardError(.connectionLost, "the server closed the stream"))
        case (NS.stream, "features"):
            replies.resolve("#features", with: element)
        case (NS.stream, "error"):
            output.end(XMPPMapping.streamError(element))
        case (NS.sasl, "success"), (NS.sasl, "failure"):
            replies.resolve("#sasl", with: element)
        case (NS.client, "iq"):
            await iq(element)
        case (NS.client, "message"):
            message(element)
        case (NS.client, "presence"):
            // Presence is not part of the model yet.
            break
        default:
            output.yield(.problem(SwitchboardError(.protocolViolation, "an element the adapter does not know: <\(element.name) xmlns='\(element.namespace)'>")))
        }
    }

    private func iq(_ element: XMPPElement) async {
        let id = element["id"] ?? ""
        let from = element["from"]
        switch element["type"] {
        case "result", "error":
            // A heartbeat's answer has no waiter: hearing it was the point.
            replies.resolve(id, with: element)
        case "set" where element.child("query", NS.roster) != nil:
            // A roster push comes from the account itself (RFC 6121 §2.1.6); one from anyone else
            // is spoofed.
            guard from == nil || XMPPMapping.bare(from!) == me else {
                try? await socket.send(XMPPStanzas.notImplemented(to: id, from: from))
                return
            }
            try? await socket.send(XMPPStanzas.result(to: id, from: from))
            deliverOrHold(element)
        case "get" where element.child("ping", NS.ping) != nil:
            try? await socket.send(XMPPStanzas.result(to: id, from: from))
        case "get", "set":
            try? await socket.send(XMPPStanzas.notImplemented(to: id, from: from))
        default:
            output.yield(.problem(SwitchboardError(.protocolViolation, "an iq of type \(element["type"] ?? "none")")))
        }
    }

    private func message(_ element: XMPPElement) {
        do {
            if let item = try XMPPMapping.archiveItem(element) {
                let collected = state.withLock { state in
                    guard state.pages[item.queryID] != nil else { return false }
                    state.pages[item.queryID]!.append(item)
                    return true
                }
                if !collected { output.yield(.problem(SwitchboardError(.protocolViolation, "an archive result for a query nobody asked"))) }
                return
            }
        } catch {
            output.yield(.problem(error))
            return
        }
        if element["type"] == "error", let id = element["id"] {
            let error = XMPPMapping.error(element, request: "send")
            state.withLock { $0.bounced[id] = error }
            return
        }
        deliverOrHold(element)
    }

    /// Hands a live message or roster push on, or holds it while the login's snapshot is being
    /// assembled: under the lock, so nothing overtakes what was held.
    private func deliverOrHold(_ element: XMPPElement) {
        state.withLock { state in
            if state.held != nil {
                state.held!.append(element)
            } else {
                deliver(element, &state)
            }
        }
    }

    private func deliver(_ element: XMPPElement, _ state: inout State) {
        if element.name == "iq" {
            for item in element.child("query", NS.roster)?.children("item", NS.roster) ?? [] {
                guard let jid = item["jid"], item["subscription"] != "remove" else { continue }
                let info = XMPPMapping.conversation(peer: XMPPMapping.bare(jid), name: item["name"], me: me)
                let added = state.known.insert(info.id).inserted
                output.yield(.event(BackendEvent(added ? .conversationAdded(info) : .conversationUpdated(info), conversation: info.id, time: context.clock.date)))
            }
            return
        }
        guard element.child("body", NS.client) != nil else { return }
        let archiveID = XMPPMapping.stanzaID(of: element, archive: me)
        if let archiveID, state.delivered.contains(archiveID) { return }
        // Not archived (a `no-store` hint, or archiving off): its own id is all there is.
        let serverID = archiveID ?? "message:\(element["id"] ?? UUID().uuidString)"
        let stamp = element.child("delay", NS.delay)?["stamp"].flatMap(XMPPMapping.timestamp) ?? context.clock.date
        let time = state.clock.next(stamp: stamp)
        guard let message = XMPPMapping.message(element, archiveID: serverID, me: me, time: time) else { return }
        announce(message.conversationID, &state)
        var cursor: SyncCursor?
        if let archiveID {
            state.remember(archiveID, at: time)
            state.cursorID = archiveID
            cursor = XMPPCursor(archiveID: archiveID, last: time).token
        }
        output.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: message.conversationID, cursor: cursor, time: time)))
    }

    /// A peer met outside the roster is a conversation too: announced before its first message.
    private func announce(_ conversation: ConversationID, _ state: inout State) {
        guard state.known.insert(conversation).inserted else { return }
        let info = XMPPMapping.conversation(peer: conversation.rawValue, name: nil, me: me)
        output.yield(.event(BackendEvent(.conversationAdded(info), conversation: conversation, time: context.clock.date)))
    }

    private func ping() async throws {
        try await socket.send(XMPPStanzas.ping(id: nextID("ping"), to: configuration.domain))
    }

    // MARK: Login

    /// Opens the stream, logs in (SASL PLAIN), binds a resource, reads the roster, catches up
    /// from the archive, says it is available, and hands the engine its snapshot.
    private func login() async throws {
        let features = try await exchange("#features", XMPPStanzas.open(to: configuration.domain), name: "open")
        let mechanisms = features.child("mechanisms", NS.sasl)?.children("mechanism", NS.sasl).map(\.text) ?? []
        guard mechanisms.contains("PLAIN") else {
            throw SwitchboardError(.unsupported, "the server offers \(mechanisms.joined(separator: ", ")); this version logs in with PLAIN only")
        }
        let answer = try await exchange("#sasl", XMPPStanzas.plainAuth(user: configuration.localPart, password: configuration.password), name: "auth")
        guard answer.name == "success" else { throw XMPPMapping.saslFailure(answer) }
        let restarted = try await exchange("#features", XMPPStanzas.open(to: configuration.domain), name: "open")
        guard restarted.child("bind", NS.bind) != nil else { throw SwitchboardError(.protocolViolation, "the server offers no resource binding") }
        let bindID = nextID("bind")
        let bound = try await request(bindID, XMPPStanzas.bind(id: bindID, resource: configuration.resource), name: "bind")
        context.logger.debug("xmpp: bound", metadata: ["resource": .string(bound.child("bind", NS.bind)?.child("jid", NS.bind)?.text.split(separator: "/").last.map(String.init) ?? "")])

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
        let cursor = XMPPCursor(context.cursor)
        var items: [XMPPMapping.ArchiveItem] = []
        var asWindows = cursor == nil
        if let cursor {
            do {
                items = try await pagesAfter(cursor.archiveID)
            } catch let error as SwitchboardError where error.vendorCode == "item-not-found" {
                output.yield(.problem(SwitchboardError(.protocolViolation, "the stored archive id was refused; catching up from the newest page", underlying: error)))
                asWindows = true
            } catch let error as CatchUpTooLong {
                context.logger.debug("xmpp: more than \(error.pages) archive pages missed; taking the newest as a window")
                asWindows = true
            }
        }
        if asWindows {
            items = try await archivePage(with: nil, end: nil, page: .newest, max: 50).items
        }
        try await socket.send(XMPPStanzas.presence)
        // What the archive took between the query and the presence.
        if let newest = items.last?.archiveID ?? (asWindows ? nil : cursor?.archiveID) {
            items += try await pagesAfter(newest)
        } else {
            items += try await archivePage(with: nil, end: nil, page: .newest, max: 50).items
        }

        state.withLock { state in
            var windows: [ConversationID: [Message]] = [:]
            var events: [Message] = []
            var seen = Set<String>()
            for item in items where seen.insert(item.archiveID).inserted {
                let time = state.clock.next(stamp: item.stamp ?? context.clock.date)
                guard let message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time) else { continue }
                state.remember(item.archiveID, at: time)
                if conversations[message.conversationID] == nil {
                    conversations[message.conversationID] = XMPPMapping.conversation(peer: message.conversationID.rawValue, name: nil, me: me)
                    order.append(message.conversationID)
                }
                if asWindows { windows[message.conversationID, default: []].append(message) } else { events.append(message) }
            }
            let snapshots = order.compactMap { id in
                conversations[id].map { ConversationSnapshot(conversation: $0, messages: windows[id] ?? []) }
            }
            // Not complete: conversations stored from earlier links stay (the roster is not all
            // of them).
            output.yield(.snapshot(BackendSnapshot(conversations: snapshots, isComplete: false)))
            for message in events {
                output.yield(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: message.conversationID, time: message.time)))
            }
            state.known = Set(order)
            state.delivered = seen
            if let newest = items.last?.archiveID, let last = state.clock.last {
                state.cursorID = newest
                output.yield(.cursor(XMPPCursor(archiveID: newest, last: last).token))
            }
            for element in state.held ?? [] { deliver(element, &state) }
            state.held = nil
        }
    }

    /// The catch-up went on for more pages than a link reads at once.
    private struct CatchUpTooLong: Error {
        var pages: Int
    }

    /// Every archived message after `archiveID`, oldest first.
    private func pagesAfter(_ archiveID: String, maxPages: Int = 20) async throws -> [XMPPMapping.ArchiveItem] {
        var items: [XMPPMapping.ArchiveItem] = []
        var after = archiveID
        for _ in 0..<maxPages {
            let page = try await archivePage(with: nil, end: nil, page: .after(after), max: 100)
            items += page.items
            guard !page.complete, let last = page.items.last?.archiveID else { return items }
            after = last
        }
        throw CatchUpTooLong(pages: maxPages)
    }

    // MARK: Requests

    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        guard outgoing.content.attachments.isEmpty else {
            throw SwitchboardError(.unsupported, "files are not offered by this version of the XMPP adapter")
        }
        let peer = outgoing.conversationID.rawValue
        let clientID = outgoing.clientID.rawValue
        // XMPP servers do not recognize a repeated message id: a resend after a lost answer looks
        // in the archive first.
        if let sent = try await archived(clientID, with: peer) { return sent }
        try output.checkOpen()
        try await socket.send(XMPPStanzas.chat(to: peer, clientID: clientID, body: outgoing.content.text))
        // The server handles a stream's stanzas in order: the query after the message finds it
        // archived, and a bounce came before the query's answer.
        let sent = try await archived(clientID, with: peer)
        if let bounce = state.withLock({ $0.bounced.removeValue(forKey: clientID) }) { throw bounce }
        guard let sent else { throw SwitchboardError(.protocolViolation, "the server did not archive the message it accepted") }
        return sent
    }

    /// The user's message with this origin id among the newest of the conversation's archive.
    private func archived(_ clientID: String, with peer: String) async throws -> Message? {
        let page = try await archivePage(with: peer, end: nil, page: .newest, max: 20)
        guard let item = page.items.last(where: { item in
            XMPPMapping.bare(item.message["from"] ?? me) == me
                && (item.message.child("origin-id", NS.sid)?["id"] ?? item.message["id"]) == clientID
        }) else { return nil }
        let time = state.withLock { state in
            let time = state.clock.next(stamp: item.stamp ?? context.clock.date)
            state.remember(item.archiveID, at: time)
            return time
        }
        return XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time)
    }

    /// A page of the conversation's archive, older than the anchor, oldest first: the anchor is
    /// the previous page's token (its oldest archive id) or a time (the store's oldest message).
    func history(_ query: HistoryQuery) async throws -> HistoryPage {
        var page = XMPPStanzas.Page.newest
        var end: Date?
        var upper: Date?
        switch query.before {
        case .token(let text):
            guard let token = XMPPPageToken(text) else { throw SwitchboardError(.invalidArgument, "not an XMPP history token") }
            page = .before(token.archiveID)
            upper = token.time
        case .time(let time):
            upper = time
            if let archiveID = state.withLock({ $0.archiveIDs[time] }) {
                page = .before(archiveID)
            } else {
                // A message an earlier link stored: `end` is inclusive and whole seconds, so the
                // page may repeat messages of that second, which the engine already has.
                end = time
            }
        case .sequence:
            throw SwitchboardError(.invalidArgument, "XMPP history pages from an archive id or a time, not a sequence")
        case nil:
            break
        }
        let result = try await archivePage(with: query.conversationID.rawValue, end: end, page: page, max: query.limit)
        let times = XMPPArchiveClock.below(upper, stamps: result.items.map { $0.stamp ?? upper ?? context.clock.date })
        let messages = zip(result.items, times).compactMap { item, time in
            XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time)
        }
        let next = result.items.first.map { XMPPPageToken(archiveID: $0.archiveID, time: times[0]).anchor }
        state.withLock { state in for (item, time) in zip(result.items, times) { state.remember(item.archiveID, at: time) } }
        return HistoryPage(messages: messages, hasMore: !result.complete && next != nil, nextAnchor: next)
    }

    /// One archive query (XEP-0313): the results the reader collected for it, and whether the
    /// server said they reach the end.
    private func archivePage(
        with peer: String?, end: Date?, page: XMPPStanzas.Page, max: Int
    ) async throws -> (items: [XMPPMapping.ArchiveItem], complete: Bool) {
        let id = nextID("mam")
        state.withLock { $0.pages[id] = [] }
        defer { state.withLock { _ = $0.pages.removeValue(forKey: id) } }
        let answer = try await request(id, XMPPStanzas.archiveQuery(id: id, queryID: id, with: peer, end: end, page: page, max: max), name: "archive")
        let complete = answer.child("fin", NS.mam)?["complete"] == "true"
        return (state.withLock { $0.pages[id] ?? [] }, complete)
    }

    /// Sends an `iq` and waits for its answer; an error answer classified.
    private func request(_ id: String, _ stanza: String, name: String) async throws -> XMPPElement {
        let answer = try await exchange(id, stanza, name: name)
        if answer["type"] == "error" { throw XMPPMapping.error(answer, request: name) }
        return answer
    }

    /// Sends `stanza` and waits for what the reader hands over under `key`.
    private func exchange(_ key: String, _ stanza: String, name: String) async throws -> XMPPElement {
        try output.checkOpen()
        let timeout = configuration.requestTimeout
        return try await replies.request(
            key, label: name, timeout: timeout, clock: context.clock,
            timedOut: { SwitchboardError(.timedOut, "\(name) got no answer within \(timeout)") },
            send: { try await socket.send(stanza) }
        )
    }

    private func nextID(_ prefix: String) -> String {
        state.withLock { state in
            defer { state.nextID += 1 }
            return "\(prefix)-\(state.nextID)"
        }
    }
}
