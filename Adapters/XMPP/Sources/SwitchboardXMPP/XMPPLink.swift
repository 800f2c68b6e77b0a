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
        /// Archived stanzas this link handled that the archive may still show it after the
        /// cursor (live ones, own sends): each is handled once, and forgotten when the archive
        /// shows it.
        var delivered: Set<String> = []
        /// `delivered` in the order it was delivered: the cursor carries the newest.
        var deliveredOrder: [String] = []
        /// Archive ids this link delivered or confirmed: the archive's copy of one is not news.
        /// (Not those history paged: one of those may be news the follower has yet to bring.)
        var handled: Set<String> = []
        /// Where the catch-up goes from while the archive refuses the stored id and has shown
        /// nothing newer.
        var since: Date?
        /// What the login's catch-up handled, while it holds live stanzas.
        var caughtUp: Set<String> = []
        /// Messages the server bounced (`type='error'`), by id, until their send looks.
        var bounced: [String: SwitchboardError] = [:]
        /// The archive id of each time this link gave a message, per conversation: a history
        /// page below a stored message (the engine names it by its time) starts just before its
        /// archive id.
        var archiveIDs: [TimeKey: String] = [:]

        struct TimeKey: Hashable {
            var conversation: ConversationID
            var time: Date
        }

        /// Remembers where `time` is in the conversation's archive, forgetting all once there are
        /// many (a page below a forgotten time falls back to the time filter).
        mutating func remember(_ archiveID: String, in conversation: ConversationID, at time: Date) {
            if archiveIDs.count >= 20_000 { archiveIDs.removeAll(keepingCapacity: true) }
            archiveIDs[TimeKey(conversation: conversation, time: time)] = archiveID
        }

        mutating func bounce(_ id: String, _ error: SwitchboardError) {
            // A bounce nobody waits for (it came after its send's answer) is not kept forever.
            if bounced.count >= 256 { bounced.removeAll(keepingCapacity: true) }
            bounced[id] = error
        }

        /// The messages this link delivered, confirmed or paged, by archive id, and the archive
        /// id of each by its id attribute: what a marker, a correction or a retraction names.
        var recent: [String: Message] = [:]
        var archiveIDByStanzaID: [StanzaKey: String] = [:]
        /// Ids of what this link sent besides messages (markers, corrections, retractions): the
        /// archive's copy of one is not news.
        var sentIDs: Set<String> = []
        /// Client ids of sends whose answer is on its way: the follower leaves their archived
        /// copy to the send.
        var sending: Set<String> = []
        /// Corrections and retractions a history page met, per conversation, by the id of the
        /// message they change: older pages show that message changed, or not at all.
        var historyChanges: [ConversationID: [String: (change: XMPPMapping.Change, author: String)]] = [:]

        struct StanzaKey: Hashable {
            var conversation: ConversationID
            var id: String
        }

        mutating func keep(_ message: Message) {
            guard let archiveID = message.serverID?.rawValue else { return }
            remember(archiveID, in: message.conversationID, at: message.time)
            if recent.count >= 5_000 {
                recent.removeAll(keepingCapacity: true)
                archiveIDByStanzaID.removeAll(keepingCapacity: true)
            }
            recent[archiveID] = message
            if let stanzaID = XMPPMapping.stanzaID(of: message) {
                archiveIDByStanzaID[StanzaKey(conversation: message.conversationID, id: stanzaID)] = archiveID
            }
        }

        mutating func deliver(_ archiveID: String) -> Bool {
            guard delivered.insert(archiveID).inserted else { return false }
            deliveredOrder.append(archiveID)
            return true
        }

        /// The archive showed `archiveID`: whether the link had delivered it already.
        mutating func passed(_ archiveID: String) -> Bool {
            guard delivered.remove(archiveID) != nil else { return false }
            deliveredOrder.removeAll { $0 == archiveID }
            return true
        }

        mutating func handle(_ archiveID: String) {
            if handled.count >= 20_000 { handled.removeAll(keepingCapacity: true) }
            handled.insert(archiveID)
        }

        func original(named stanzaID: String, in conversation: ConversationID) -> Message? {
            archiveIDByStanzaID[StanzaKey(conversation: conversation, id: stanzaID)].flatMap { recent[$0] }
        }

        mutating func sent(_ id: String) {
            if sentIDs.count >= 1_000 { sentIDs.removeAll(keepingCapacity: true) }
            sentIDs.insert(id)
        }
    }

    private let state: Locked<State>
    /// Rings when a live message came: the follower reads the archive after the cursor, which
    /// brings what this link was not sent (the user's sends from another device, messages to
    /// another of the account's resources) and moves the cursor.
    private let follow: AsyncStream<Void>.Continuation
    private let followSignals: AsyncStream<Void>

    init(socket: TextWebSocket, configuration: XMPPConfiguration, context: ConnectionContext) {
        (followSignals, follow) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let replies = self.replies
        self.output = LinkOutput { replies.close($0) }
        self.socket = socket
        self.configuration = configuration
        self.context = context
        self.me = configuration.bareJID
        let cursor = XMPPCursor(context.cursor)
        var initial = State(clock: XMPPArchiveClock(last: cursor?.last))
        initial.delivered = Set(cursor?.delivered ?? [])
        initial.deliveredOrder = cursor?.delivered ?? []
        self.state = Locked(initial)
    }

    func run<Result: Sendable>(_ body: @Sendable (any BackendConnection) async throws -> Result) async throws -> Result {
        let heartbeat = Heartbeat(interval: configuration.heartbeatInterval, pongTimeout: configuration.pongTimeout, onlyWhenSilent: true)
        return try await output.whileRunning([
            { await self.readLoop() },
            { await self.followArchive() },
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
            // Answers come from the account or its server; one from anyone else is spoofed. A
            // heartbeat's answer has no waiter: hearing it was the point.
            guard from.map({ XMPPMapping.bare($0) == me || $0 == configuration.domain }) ?? true else {
                output.yield(.problem(SwitchboardError(.protocolViolation, "an iq answer from \(XMPPMapping.bare(from!)), not the server")))
                return
            }
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
                // The archive's results come from the account itself (no `from`, or its bare JID).
                guard element["from"].map({ XMPPMapping.bare($0) == me }) ?? true else {
                    output.yield(.problem(SwitchboardError(.protocolViolation, "an archive result from someone else")))
                    return
                }
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
            state.withLock { $0.bounce(id, error) }
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
        var stanza = element
        if let carbon = XMPPMapping.carbon(element, me: me) {
            stanza = carbon.message
            // The user's own message from another device: the copy carries no archive id, so it
            // comes from the archive, with its id, when the follower looks.
            if carbon.sent, stanza.child("body", NS.client) != nil, XMPPMapping.change(stanza) == nil {
                follow.yield()
                return
            }
        }
        let archiveID = XMPPMapping.stanzaID(of: stanza, archive: me)
        if let archiveID {
            guard !state.caughtUp.contains(archiveID), state.deliver(archiveID) else { return }
            follow.yield()
        }
        // A `<delay>` is the sender's word: never later than now.
        let stamp = min(XMPPMapping.delay(of: stanza) ?? context.clock.date, context.clock.date)
        receive(stanza, archiveID: archiveID, stamp: stamp, &state)
    }

    /// One message stanza, live or from the archive, in order: a message, or a change to one.
    private func receive(_ stanza: XMPPElement, archiveID: String?, stamp: Date, position: ChatEvent.MessagePosition = .newest, _ state: inout State) {
        if let change = XMPPMapping.change(stanza) {
            apply(change, of: stanza, stamp: stamp, &state)
            return
        }
        guard stanza.child("body", NS.client) != nil else { return }
        // Not archived (a `no-store` hint, or archiving off): its own id is all there is.
        let serverID = archiveID ?? "message:\(stanza["id"] ?? UUID().uuidString)"
        let time = state.clock.next(stamp: stamp)
        guard let message = XMPPMapping.message(stanza, archiveID: serverID, me: me, time: time) else { return }
        state.keep(message)
        state.handle(serverID)
        announce(message.conversationID, &state)
        output.yield(.event(BackendEvent(.messageAdded(message, position: position), conversation: message.conversationID, cursor: cursor(state), time: time)))
    }

    /// The cursor as it stands: where the archive was read to, the clock, and what came live
    /// since; `nil` before the archive showed the link anything.
    private func cursor(_ state: State) -> SyncCursor? {
        guard let archiveID = state.cursorID else { return nil }
        return XMPPCursor(archiveID: archiveID, last: state.clock.last ?? context.clock.date, delivered: state.deliveredOrder).token
    }

    /// Archived stanzas after the cursor, in the archive's order, each once; then the cursor
    /// after them. Chat states of then are no news now.
    private func receiveArchived(_ items: [XMPPMapping.ArchiveItem], olderThan floor: Date? = nil, _ state: inout State) {
        for item in items {
            guard !state.passed(item.archiveID), !state.handled.contains(item.archiveID) else { continue }
            // While the login holds live stanzas, a held copy of this one is not handled again.
            if state.held != nil { state.caughtUp.insert(item.archiveID) }
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
    private func followArchive() async {
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
    private func catchUp(since start: Date? = nil) async throws {
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
                    let since = (state.clock.last ?? XMPPCursor(context.cursor)?.last ?? context.clock.date).addingTimeInterval(-300)
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

    /// A chat state, a read marker, a correction or a retraction, from the peer or (a marker,
    /// a correction, a retraction) from the user's other device. One naming a message this link
    /// has not seen is reported: the original is needed to apply it.
    private func apply(_ change: XMPPMapping.Change, of stanza: XMPPElement, stamp: Date, _ state: inout State) {
        let from = XMPPMapping.bare(stanza["from"] ?? me)
        let peer = from == me ? XMPPMapping.bare(stanza["to"] ?? me) : from
        guard !peer.isEmpty, peer != me else { return }
        let conversation = ConversationID(peer)
        let author = ParticipantID(from)
        func yield(_ kind: BackendEvent.Kind) {
            announce(conversation, &state)
            output.yield(.event(BackendEvent(kind, conversation: conversation, time: stamp)))
        }
        switch change {
        case .typing(let isTyping):
            // The user's own chat states on another device are not news.
            guard from != me else { return }
            yield(.typing(author, isTyping: isTyping, draft: nil))
        case .displayed(let stanzaID):
            // Read up to that message; one this link has not seen is read up to when the marker
            // was sent.
            let marker = state.archiveIDByStanzaID[State.StanzaKey(conversation: conversation, id: stanzaID)].map { ChatEvent.ReadMarker.message(MessageID($0)) } ?? .time(stamp)
            yield(.readMarker(author, marker))
        case .replace(let stanzaID, let text):
            guard var original = state.original(named: stanzaID, in: conversation), original.sender == author else {
                output.yield(.problem(SwitchboardError(.messageNotFound, "a correction of a message this link has not seen", vendorCode: "replace")))
                return
            }
            original.text = text
            original.isEdited = true
            state.keep(original)
            yield(.messageUpdated(original))
        case .retract(let stanzaID):
            guard let original = state.original(named: stanzaID, in: conversation), original.sender == author, let id = original.serverID else {
                output.yield(.problem(SwitchboardError(.messageNotFound, "a retraction of a message this link has not seen", vendorCode: "retract")))
                return
            }
            state.recent[id.rawValue] = nil
            yield(.messageRemoved(id))
        }
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
                state.cursorID = cursor.archiveID
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
                    state.handle(item.archiveID)
                    // A held copy of it (a carbon) is not handled again.
                    state.caughtUp.insert(item.archiveID)
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
                    state.caughtUp.insert(item.archiveID)
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
            state.caughtUp = []
        }
    }

    // MARK: Requests

    func send(_ outgoing: OutgoingMessage) async throws -> Message? {
        guard outgoing.content.attachments.isEmpty else {
            throw SwitchboardError(.unsupported, "files are not offered by this version of the XMPP adapter")
        }
        guard XMLReader.isAllowed(outgoing.content.text) else {
            // The server would end the stream for it, and the outbox would send it again.
            throw SwitchboardError(.invalidArgument, "the text holds a control character XML does not allow")
        }
        let peer = outgoing.conversationID.rawValue
        let clientID = outgoing.clientID.rawValue
        // XMPP servers do not recognize a repeated message id: a resend after a lost answer looks
        // in the conversation's newest archived messages first.
        state.withLock { _ = $0.sending.insert(clientID) }
        defer {
            state.withLock { _ = $0.sending.remove(clientID) }
            // The cursor goes on past it.
            follow.yield()
        }
        let recent = try await archivePage(with: peer, page: .newest, max: 50).items
        if let item = recent.last(where: { isMine($0, clientID) }) {
            if let bounce = state.withLock({ $0.bounced.removeValue(forKey: clientID) }) { throw bounce }
            return confirm(item, time: nil)
        }
        // Its place among the live messages is when it is sent: one that arrives while the
        // answer is on its way is newer.
        let time = state.withLock { $0.clock.next(stamp: context.clock.date) }
        try output.checkOpen()
        try await socket.send(XMPPStanzas.chat(to: peer, clientID: clientID, body: outgoing.content.text))
        // The server handles a stream's stanzas in order: the archive after the newest message
        // seen above holds it now, and a bounce came before the answer.
        var page = recent.last.map { XMPPStanzas.Page.after($0.archiveID) } ?? .newest
        var sent: XMPPMapping.ArchiveItem?
        while sent == nil {
            let result = try await archivePage(with: peer, page: page, max: 100)
            sent = result.items.last { isMine($0, clientID) }
            guard !result.complete, let last = result.items.last?.archiveID else { break }
            page = .after(last)
        }
        if let bounce = state.withLock({ $0.bounced.removeValue(forKey: clientID) }) { throw bounce }
        guard let sent else {
            // Accepted but not archived (the user's archiving preferences leave this chat out):
            // its own id is all there is.
            let message = Message(
                serverID: MessageID("message:\(clientID)"), clientID: outgoing.clientID, conversationID: outgoing.conversationID,
                sender: ParticipantID(me), senderRole: .user, text: outgoing.content.text, payload: ["xmpp": ["id": .string(clientID)]], time: time
            )
            state.withLock { state in
                state.keep(message)
                state.handle(message.serverID!.rawValue)
            }
            return message
        }
        return confirm(sent, time: time)
    }

    /// Whether the archived message is the user's with this origin id.
    private func isMine(_ item: XMPPMapping.ArchiveItem, _ clientID: String) -> Bool {
        XMPPMapping.bare(item.message["from"] ?? me) == me && (item.message.child("origin-id", NS.sid)?["id"] ?? item.message["id"]) == clientID
    }

    /// The user's archived message as the send's answer: at `time`, or where this link already
    /// placed it; the archive's copy, when the follower reads it, is not news.
    private func confirm(_ item: XMPPMapping.ArchiveItem, time: Date?) -> Message? {
        state.withLock { state in
            let time = state.recent[item.archiveID]?.time ?? time ?? state.clock.next(stamp: min(item.stamp ?? context.clock.date, context.clock.date))
            guard let message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: time) else { return nil }
            // The follower's copy of it is not news.
            state.keep(message)
            state.handle(item.archiveID)
            return message
        }
    }

    func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws {
        let chatState = isTyping ? "composing" : (draft?.isEmpty == false ? "paused" : "active")
        try output.checkOpen()
        try await socket.send(XMPPStanzas.chatState(chatState, to: conversation.rawValue))
    }

    /// A displayed marker naming the newest message of the peer's at or before the marker.
    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws {
        let target: Message
        switch marker {
        case .message(let id):
            let named = try await original(id, in: conversation)
            guard named.sender == ParticipantID(me) else {
                target = named
                break
            }
            // The peer's client knows its own messages' ids: the newest of those up to it.
            guard let newest = newestFromPeer(in: conversation, atOrBefore: named.time) else { return }
            target = newest
        case .time(let time):
            guard let newest = newestFromPeer(in: conversation, atOrBefore: time) else { return }
            target = newest
        case .sequence:
            throw SwitchboardError(.invalidArgument, "XMPP read markers name a message, not a sequence")
        }
        guard let stanzaID = XMPPMapping.stanzaID(of: target) else {
            throw SwitchboardError(.messageNotFound, "the message has no id a marker can name")
        }
        try await sendAndSync("markRead") { XMPPStanzas.displayed(stanzaID, to: conversation.rawValue, id: $0) }
    }

    private func newestFromPeer(in conversation: ConversationID, atOrBefore time: Date) -> Message? {
        state.withLock { state in
            state.recent.values.filter { $0.conversationID == conversation && $0.sender != ParticipantID(me) && $0.time <= time }.max { $0.time < $1.time }
        }
    }

    /// A correction of the user's own message; the server has no echo of it for the sender, so
    /// the answer is the message as corrected.
    func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        var original = try await original(message, in: conversation)
        guard original.sender == ParticipantID(me), let stanzaID = XMPPMapping.stanzaID(of: original) else {
            throw SwitchboardError(.permissionDenied, "only the user's own messages can be corrected")
        }
        try await sendAndSync("edit") { XMPPStanzas.correction(of: stanzaID, text: text, to: conversation.rawValue, id: $0) }
        original.text = text
        original.isEdited = true
        state.withLock { $0.keep(original) }
        return original
    }

    /// A retraction of the user's own message; the server has no echo of it for the sender, so
    /// the link reports the removal itself.
    func delete(_ message: MessageID, in conversation: ConversationID) async throws {
        let original = try await original(message, in: conversation)
        guard original.sender == ParticipantID(me), let stanzaID = XMPPMapping.stanzaID(of: original) else {
            throw SwitchboardError(.permissionDenied, "only the user's own messages can be retracted")
        }
        try await sendAndSync("delete") { XMPPStanzas.retraction(of: stanzaID, to: conversation.rawValue, id: $0) }
        state.withLock { $0.recent[message.rawValue] = nil }
        output.yield(.event(BackendEvent(.messageRemoved(message), conversation: conversation, time: context.clock.date)))
    }

    /// A message by archive id: this link's, or fetched from the archive by its id.
    private func original(_ id: MessageID, in conversation: ConversationID) async throws -> Message {
        if let known = state.withLock({ $0.recent[id.rawValue] }) { return known }
        let page = try await archivePage(with: nil, ids: [id.rawValue], page: .newest, max: 1)
        guard let item = page.items.first, item.archiveID == id.rawValue,
            let message = XMPPMapping.message(item.message, archiveID: item.archiveID, me: me, time: item.stamp ?? context.clock.date),
            message.conversationID == conversation
        else {
            throw SwitchboardError(.messageNotFound, "no message \(id) in this conversation's archive")
        }
        state.withLock { $0.keep(message) }
        return message
    }

    /// Sends a stanza, then a ping whose answer comes after the server handled it: a bounce of
    /// the stanza came first and fails the call.
    private func sendAndSync(_ name: String, _ stanza: (_ id: String) -> String) async throws {
        // Unique across links and devices: the follower skips the archive's copy by it.
        let id = "\(name)-\(UUID().uuidString)"
        try output.checkOpen()
        state.withLock { $0.sent(id) }
        defer { follow.yield() }
        try await socket.send(stanza(id))
        let pingID = nextID("sync")
        _ = try await request(pingID, XMPPStanzas.ping(id: pingID, to: configuration.domain), name: name)
        if let bounce = state.withLock({ $0.bounced.removeValue(forKey: id) }) { throw bounce }
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
        let next = result.items.first.map { XMPPPageToken(archiveID: $0.archiveID, time: times[0]).anchor }
        state.withLock { state in
            for message in messages where state.recent[message.serverID?.rawValue ?? ""] == nil { state.keep(message) }
        }
        return HistoryPage(messages: messages, hasMore: !result.complete && next != nil, nextAnchor: next)
    }

    /// One archive query (XEP-0313): the results the reader collected for it, and whether the
    /// server said they reach the end.
    private func archivePage(
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
