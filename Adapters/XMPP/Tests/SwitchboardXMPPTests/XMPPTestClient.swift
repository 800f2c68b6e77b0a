import Foundation
import Logging
@_spi(TestKit) import Switchboard
import SwitchboardTestKit
import SwitchboardTransport

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The other side of a test: an XMPP client (an agent, or the customer's control connection)
/// speaking RFC 7395 over a WebSocket to Prosody. Written without the adapter's code, and reading
/// XML with Foundation's `XMLParser` instead of the adapter's reader, so the two check each other.
///
/// Connections are scoped (``withClient(_:user:resource:presence:_:)``): the reader runs inside
/// the scope and nothing outlives it. Every stanza carries `xmlns='jabber:client'`: Prosody ends
/// the stream on one without it.
struct XMPPTestClient: Sendable {
    /// The full JID the server bound.
    let jid: String
    let server: ProsodyServer
    private let socket: TextWebSocket
    private let inbox: Inbox
    /// How long one answer of the server may take.
    let timeout: Duration = .seconds(15)

    var bareJID: String { Self.bare(jid) }

    /// Logs in as `user` (password `secret-<user>`, SASL PLAIN) with `resource`, runs `body`, and
    /// closes the stream.
    ///
    /// Without `presence` the connection is invisible to routing: messages to the bare JID skip
    /// it, and the messages kept offline are not flushed to it. With it, the server sends those
    /// offline messages at once, and routes messages to the bare JID here.
    static func withClient<T: Sendable>(
        _ server: ProsodyServer,
        user: String,
        resource: String,
        presence: Bool = false,
        _ body: @Sendable (XMPPTestClient) async throws -> T
    ) async throws -> T {
        let configuration = WebSocketTransport.Configuration(
            maxMessageSize: 1 << 20, headers: ["Sec-WebSocket-Protocol": "xmpp"], allowsPlainText: true
        )
        return try await WebSocketTransport.network.withTextWebSocket(url: server.url, configuration: configuration, logger: .quiet) { socket in
            let inbox = Inbox()
            return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
                group.addTask { await inbox.read(socket.messages) }
                defer { group.cancelAll() }
                let connecting = XMPPTestClient(jid: "", server: server, socket: socket, inbox: inbox)
                let result: Swift.Result<T, any Error>
                do {
                    let jid = try await connecting.logIn(user: user, resource: resource)
                    let client = XMPPTestClient(jid: jid, server: server, socket: socket, inbox: inbox)
                    if presence { try await client.write("<presence xmlns='jabber:client'/>") }
                    result = .success(try await body(client))
                } catch {
                    result = .failure(error)
                }
                await connecting.closeStream()
                return try result.get()
            }
        }
    }

    // MARK: Stanzas

    /// Sends a chat message as a client would: with an origin id (XEP-0359, the same as the
    /// stanza id) and markable (XEP-0333). Returns the id.
    @discardableResult
    func send(_ text: String, to peer: String, id: String = UUID().uuidString) async throws -> String {
        try await write(
            "<message xmlns='jabber:client' type='chat' to='\(Self.escape(peer))' id='\(Self.escape(id))'>"
                + "<body>\(Self.escape(text))</body><origin-id xmlns='\(Namespace.stanzaID)' id='\(Self.escape(id))'/>"
                + "<markable xmlns='\(Namespace.markers)'/></message>"
        )
        return id
    }

    /// A chat state (XEP-0085): `composing`, `paused`, `active`, `inactive` or `gone`; never
    /// archived (`no-store`).
    func chatState(_ state: String, to peer: String) async throws {
        try await write(
            "<message xmlns='jabber:client' type='chat' to='\(Self.escape(peer))' id='\(UUID().uuidString)'>"
                + "<\(state) xmlns='\(Namespace.chatStates)'/><no-store xmlns='\(Namespace.hints)'/></message>"
        )
    }

    /// Marks the message `id` (its stanza or origin id) displayed (XEP-0333), archived (`store`).
    func displayed(_ id: String, to peer: String) async throws {
        try await write(
            "<message xmlns='jabber:client' type='chat' to='\(Self.escape(peer))' id='\(UUID().uuidString)'>"
                + "<displayed xmlns='\(Namespace.markers)' id='\(Self.escape(id))'/><store xmlns='\(Namespace.hints)'/></message>"
        )
    }

    /// Adds `contact` to this account's roster (no subscription). Every session of the account
    /// that asked for the roster gets the push.
    func addToRoster(_ contact: String, name: String) async throws {
        let id = UUID().uuidString
        try await request(
            "<iq xmlns='jabber:client' type='set' id='\(id)'><query xmlns='\(Namespace.roster)'>"
                + "<item jid='\(Self.escape(contact))' name='\(Self.escape(name))'/></query></iq>",
            id: id
        )
    }

    /// Waits until the server has handled everything sent before (it answers a ping after them,
    /// on one stream, in order), and throws when it bounced a message this stream sent.
    func sync() async throws {
        let id = UUID().uuidString
        try await request("<iq xmlns='jabber:client' type='get' id='\(id)' to='\(server.domain)'><ping xmlns='\(Namespace.ping)'/></iq>", id: id)
        if let bounce = received.first(where: { $0.name == "message" && $0["type"] == "error" }) {
            throw Self.stanzaError(bounce, "message \(bounce["id"] ?? "")")
        }
    }

    /// This account's archive (XEP-0313), with `peer` only when given, oldest first: every
    /// archived message, markers and corrections too (see ``ArchivedMessage/isMessage``). Pages
    /// of 100 (RSM) until the server says the last is complete. With `room`, that room's archive
    /// instead.
    func archive(with peer: String?, room: String? = nil) async throws -> [ArchivedMessage] {
        var collected: [ArchivedMessage] = []
        var after: String?
        while true {
            let id = UUID().uuidString
            let queryID = UUID().uuidString
            let to = room.map { " to='\(Self.escape($0))'" } ?? ""
            var query = "<iq xmlns='jabber:client' type='set' id='\(id)'\(to)><query xmlns='\(Namespace.mam)' queryid='\(queryID)'>"
            query += "<x xmlns='\(Namespace.dataForms)' type='submit'><field var='FORM_TYPE' type='hidden'><value>\(Namespace.mam)</value></field>"
            if let peer { query += "<field var='with'><value>\(Self.escape(peer))</value></field>" }
            query += "</x><set xmlns='\(Namespace.rsm)'><max>100</max>"
            if let after { query += "<after>\(Self.escape(after))</after>" }
            query += "</set></query></iq>"
            let answer = try await request(query, id: id)
            // The results come before the answer, on one stream, in order.
            let results = inbox.takeAll { $0.name == "message" && $0.child("result", Namespace.mam)?["queryid"] == queryID }
            for result in results {
                guard let message = ArchivedMessage(result) else {
                    throw SwitchboardError(.protocolViolation, "an archive result of no known shape: \(result)")
                }
                collected.append(message)
            }
            guard let fin = answer.child("fin", Namespace.mam) else {
                throw SwitchboardError(.protocolViolation, "the archive's answer has no fin: \(answer)")
            }
            let last = fin.child("set", Namespace.rsm)?.child("last")?.text
            if fin["complete"] == "true" || results.isEmpty || last == nil { return collected }
            after = last
        }
    }

    /// Takes the first stanza that came in and that no wait took yet, matching `matches`; waits
    /// up to `timeout` for it.
    func waitForStanza(_ what: String, timeout: Duration? = nil, where matches: (Element) -> Bool) async throws -> Element {
        try await inbox.take(what, timeout: timeout ?? self.timeout, where: matches)
    }

    /// Waits until `condition` holds for everything the server sent since the login (taken or
    /// not), up to `timeout`: what it sent by then.
    func waitUntil(_ what: String, timeout: Duration, _ condition: ([Element]) -> Bool) async throws -> [Element] {
        try await inbox.waitUntil(what, timeout: timeout, condition)
    }

    /// Everything the server sent since the login, in order.
    var received: [Element] { inbox.received }

    /// Waits until the server ends the stream (a stream error, its `<close/>`, or the socket
    /// closed): what ended it. A stream error's condition is the error's `vendorCode`.
    func waitForStreamEnd(timeout: Duration) async throws -> SwitchboardError {
        try await inbox.waitForEnd(timeout: timeout)
    }

    // MARK: The stream

    private func logIn(user: String, resource: String) async throws -> String {
        try await openStream()
        let credentials = Data("\0\(user)\0\(server.password(of: user))".utf8).base64EncodedString()
        try await write("<auth xmlns='\(Namespace.sasl)' mechanism='PLAIN'>\(credentials)</auth>")
        let outcome = try await waitForStanza("the SASL outcome") {
            $0.namespace == Namespace.sasl && ($0.name == "success" || $0.name == "failure")
        }
        guard outcome.name == "success" else {
            throw SwitchboardError(.authenticationFailed, "\(user) was refused: \(outcome.children.map(\.name))")
        }
        try await openStream()
        let id = UUID().uuidString
        let bound = try await request(
            "<iq xmlns='jabber:client' type='set' id='\(id)'><bind xmlns='\(Namespace.bind)'><resource>\(Self.escape(resource))</resource></bind></iq>",
            id: id
        )
        guard let jid = bound.child("bind", Namespace.bind)?.child("jid")?.text, !jid.isEmpty else {
            throw SwitchboardError(.protocolViolation, "the bind answer has no JID: \(bound)")
        }
        return jid
    }

    /// Opens (or, after SASL, restarts) the stream: the server answers with its `<open/>` and the
    /// features.
    private func openStream() async throws {
        try await write("<open xmlns='\(Namespace.framing)' to='\(server.domain)' version='1.0'/>")
        _ = try await waitForStanza("the stream's opening") { $0.name == "open" && $0.namespace == Namespace.framing }
        _ = try await waitForStanza("the stream features") { $0.name == "features" && $0.namespace == Namespace.streams }
    }

    /// Closes the stream unless the server did: `<close/>`, then the server's own (bounded), so
    /// the session is gone from the server when the scope ends.
    fileprivate func closeStream() async {
        guard !inbox.hasEnded else { return }
        try? await write("<close xmlns='\(Namespace.framing)'/>")
        _ = try? await inbox.waitForEnd(timeout: .seconds(5))
    }

    /// Sends an iq and waits for its answer; an error answer throws.
    @discardableResult
    func request(_ stanza: String, id: String) async throws -> Element {
        try await write(stanza)
        let answer = try await waitForStanza("the answer to iq \(id)") {
            $0.name == "iq" && $0["id"] == id && ($0["type"] == "result" || $0["type"] == "error")
        }
        if answer["type"] == "error" { throw Self.stanzaError(answer, "iq \(id)") }
        return answer
    }

    func write(_ text: String) async throws {
        try await socket.send(text)
    }

    // MARK: Helpers

    /// The bare JID of a full one.
    static func bare(_ jid: String) -> String { String(jid.prefix { $0 != "/" }) }

    /// Text escaped for XML content and attributes (either quote).
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "'": escaped += "&apos;"
            case "\"": escaped += "&quot;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// An error stanza's condition (RFC 6120 §8.3) as a refusal; the condition is the
    /// `vendorCode`.
    static func stanzaError(_ stanza: Element, _ what: String) -> SwitchboardError {
        let condition = stanza.child("error")?.children.first { $0.namespace == Namespace.stanzaErrors && $0.name != "text" }?.name ?? "unknown"
        return SwitchboardError(.messageRejected, "the server refused \(what): \(condition)", vendorCode: condition)
    }

    /// One frame parsed: RFC 7395 puts one whole element in each.
    ///
    /// libxml2 (under FoundationXML) has global state, and parallel tests crashed in `XMLParser`
    /// on Linux: every parse in the process takes one lock.
    static func parse(_ frame: String) throws -> Element {
        try parserLock.withLock { _ in
            let builder = TreeBuilder()
            let parser = XMLParser(data: Data(frame.utf8))
            parser.shouldProcessNamespaces = true
            parser.delegate = builder
            guard parser.parse(), let root = builder.root else {
                throw SwitchboardError(.protocolViolation, "a frame that is not one XML element (\(frame.utf8.count) bytes): \(String(describing: parser.parserError))")
            }
            return root
        }
    }
}

extension XMPPTestClient {
    /// The XML namespaces the client uses.
    enum Namespace {
        static let framing = "urn:ietf:params:xml:ns:xmpp-framing"
        static let streams = "http://etherx.jabber.org/streams"
        static let streamErrors = "urn:ietf:params:xml:ns:xmpp-streams"
        static let stanzaErrors = "urn:ietf:params:xml:ns:xmpp-stanzas"
        static let client = "jabber:client"
        static let sasl = "urn:ietf:params:xml:ns:xmpp-sasl"
        static let bind = "urn:ietf:params:xml:ns:xmpp-bind"
        static let roster = "jabber:iq:roster"
        static let ping = "urn:xmpp:ping"
        static let mam = "urn:xmpp:mam:2"
        static let rsm = "http://jabber.org/protocol/rsm"
        static let dataForms = "jabber:x:data"
        static let forward = "urn:xmpp:forward:0"
        static let delay = "urn:xmpp:delay"
        static let stanzaID = "urn:xmpp:sid:0"
        static let markers = "urn:xmpp:chat-markers:0"
        static let chatStates = "http://jabber.org/protocol/chatstates"
        static let hints = "urn:xmpp:hints"
        static let correction = "urn:xmpp:message-correct:0"
        static let retraction = "urn:xmpp:message-retract:1"
        static let muc = "http://jabber.org/protocol/muc"
        static let mucUser = "http://jabber.org/protocol/muc#user"
        /// The retraction of XEP-0424 before 0.4, inside a fastening (XEP-0422).
        static let retractionFastened = "urn:xmpp:message-retract:0"
        static let fastening = "urn:xmpp:fasten:0"
    }

    /// An element of a frame: its local name and namespace, its attributes (prefixed ones as
    /// written: `xml:lang`), its child elements, and the text directly inside it.
    struct Element: Sendable, CustomStringConvertible {
        var name: String
        var namespace: String
        var attributes: [String: String]
        var children: [Element] = []
        var text = ""

        subscript(attribute: String) -> String? { attributes[attribute] }

        /// The first child named `name` (in `namespace`, when given).
        func child(_ name: String, _ namespace: String? = nil) -> Element? {
            children.first { $0.name == name && (namespace == nil || $0.namespace == namespace) }
        }

        /// Names, namespaces and attributes, nested; no text (a message's body stays out of
        /// failure messages).
        var description: String {
            let attributes = self.attributes.sorted { $0.key < $1.key }.map { " \($0.key)='\($0.value)'" }.joined()
            return "<\(name) ns='\(namespace)'\(attributes)>" + children.map(\.description).joined() + "</\(name)>"
        }
    }
}

/// One message of an archive (XEP-0313 result): who sent it to whom (bare JIDs), when
/// (second resolution), and what it carries.
extension ProsodyServer {
    /// Runs `body` on a connection of `user` (no presence), then waits until the server handled
    /// what it sent, failing on a bounce.
    func asUser(_ user: String, resource: String = "desk", _ body: @Sendable (XMPPTestClient) async throws -> Void) async throws {
        try await XMPPTestClient.withClient(self, user: user, resource: resource) { client in
            try await body(client)
            try await client.sync()
        }
    }

    /// Sends each text from `user` to `peer` on one connection.
    func send(_ texts: [String], from user: String, to peer: String) async throws {
        try await asUser(user) { client in
            for text in texts { _ = try await client.send(text, to: peer) }
        }
    }

    /// `user`'s archive of the chat with `peer` (all of it for `nil`), oldest first, as the
    /// server has it; with `room`, that room's archive as `user` may read it.
    func archive(of user: String, with peer: String?, room: String? = nil) async throws -> [ArchivedMessage] {
        try await XMPPTestClient.withClient(self, user: user, resource: "truth") { client in
            try await client.archive(with: peer, room: room)
        }
    }
}

struct ArchivedMessage: Sendable, Hashable {
    /// The archive's id for it (random, 24 characters on Prosody).
    var archiveID: String
    var from: String
    /// The resource of the sender's address: in a room's archive, the sender's nick.
    var nick: String?
    var to: String
    var body: String?
    /// The sender's id: its origin id (XEP-0359), else the stanza's `id`.
    var originID: String?
    /// The archive's time stamp (XEP-0203), as the server wrote it.
    var stamp: String
    var type: String?
    /// The id a correction (XEP-0308) replaces.
    var replaces: String?
    /// The id a retraction (XEP-0424) retracts.
    var retracts: String?
    /// The id a displayed marker (XEP-0333) names.
    var displayed: String?

    var hasBody: Bool { body != nil }

    /// Whether a chat shows it as a message of its own: a body, and neither a correction nor
    /// a retraction (both may carry a fallback body) nor a bounce.
    var isMessage: Bool { body != nil && replaces == nil && retracts == nil && type != "error" }

    /// Reads a result `<message>`; `nil` when it is not one.
    init?(_ stanza: XMPPTestClient.Element) {
        guard let result = stanza.child("result", XMPPTestClient.Namespace.mam), let archiveID = result["id"],
            let forwarded = result.child("forwarded", XMPPTestClient.Namespace.forward),
            let message = forwarded.child("message")
        else { return nil }
        self.archiveID = archiveID
        from = XMPPTestClient.bare(message["from"] ?? "")
        nick = message["from"].flatMap { from in from.firstIndex(of: "/").map { String(from[from.index(after: $0)...]) } }
        to = XMPPTestClient.bare(message["to"] ?? "")
        body = message.child("body", XMPPTestClient.Namespace.client)?.text
        originID = message.child("origin-id", XMPPTestClient.Namespace.stanzaID)?["id"] ?? message["id"]
        stamp = forwarded.child("delay", XMPPTestClient.Namespace.delay)?["stamp"] ?? ""
        type = message["type"]
        replaces = message.child("replace", XMPPTestClient.Namespace.correction)?["id"]
        retracts = message.child("retract", XMPPTestClient.Namespace.retraction)?["id"]
            ?? message.children.first { $0.name == "apply-to" && $0.namespace == XMPPTestClient.Namespace.fastening && $0.child("retract", XMPPTestClient.Namespace.retractionFastened) != nil }?["id"]
        displayed = message.child("displayed", XMPPTestClient.Namespace.markers)?["id"]
    }
}

/// Every `XMLParser` parse in the process holds it (libxml2's global state).
private let parserLock = Locked(())

/// Builds the element tree of one frame from the parser's events.
private final class TreeBuilder: NSObject, XMLParserDelegate {
    private var open: [XMPPTestClient.Element] = []
    private(set) var root: XMPPTestClient.Element?

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?,
        attributes attributeDict: [String: String]
    ) {
        open.append(XMPPTestClient.Element(name: elementName, namespace: namespaceURI ?? "", attributes: attributeDict))
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard let element = open.popLast() else { return }
        if open.isEmpty {
            root = element
        } else {
            open[open.count - 1].children.append(element)
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !open.isEmpty else { return }
        open[open.count - 1].text += string
    }
}

/// What the server sent on one stream: everything since the login in order, the elements no
/// wait has taken yet, and how the stream ended. The lock guards the state; the signal wakes the
/// waits whenever it changes.
private final class Inbox: Sendable {
    private struct State {
        var received: [XMPPTestClient.Element] = []
        var untaken: [XMPPTestClient.Element] = []
        var end: SwitchboardError?
    }

    private let state = Locked(State())
    private let changed = AsyncSignal()

    var received: [XMPPTestClient.Element] { state.withLock { $0.received } }
    var hasEnded: Bool { state.withLock { $0.end != nil } }

    /// Reads the socket until the server ends the stream or the socket closes (or the scope is
    /// cancelled).
    func read(_ frames: TextWebSocket.Messages) async {
        var end = SwitchboardError(.connectionLost, "the socket closed")
        do {
            for try await frame in frames where !frame.allSatisfy(\.isWhitespace) {
                let element = try XMPPTestClient.parse(frame)
                if element.name == "error", element.namespace == XMPPTestClient.Namespace.streams {
                    let condition = element.children.first { $0.namespace == XMPPTestClient.Namespace.streamErrors && $0.name != "text" }?.name ?? "unknown"
                    end = SwitchboardError(.connectionLost, "the server ended the stream: \(condition)", vendorCode: condition)
                    break
                }
                if element.name == "close", element.namespace == XMPPTestClient.Namespace.framing {
                    end = SwitchboardError(.connectionLost, "the server closed the stream", vendorCode: "close")
                    break
                }
                state.withLock { state in
                    state.received.append(element)
                    state.untaken.append(element)
                }
                changed.signal()
            }
        } catch let error as SwitchboardError {
            end = error
        } catch {
            end = SwitchboardError(.connectionLost, "the socket failed", underlying: error)
        }
        let ended = end
        state.withLock { state in
            if state.end == nil { state.end = ended }
        }
        changed.signal()
    }

    /// Takes the first untaken element matching `matches`, waiting until `timeout`.
    func take(_ what: String, timeout: Duration, where matches: (XMPPTestClient.Element) -> Bool) async throws -> XMPPTestClient.Element {
        let deadline = ContinuousClock.now + timeout
        while true {
            let generation = changed.generation
            let found: Result<XMPPTestClient.Element?, SwitchboardError> = state.withLock { state in
                if let index = state.untaken.firstIndex(where: matches) { return .success(state.untaken.remove(at: index)) }
                if let end = state.end { return .failure(SwitchboardError(end.code, "\(end.message) before \(what)", vendorCode: end.vendorCode)) }
                return .success(nil)
            }
            if let element = try found.get() { return element }
            try await wait(since: generation, until: deadline, for: what)
        }
    }

    /// Takes every untaken element matching `matches`, in order, without waiting.
    func takeAll(where matches: (XMPPTestClient.Element) -> Bool) -> [XMPPTestClient.Element] {
        state.withLock { state in
            let taken = state.untaken.filter(matches)
            state.untaken.removeAll(where: matches)
            return taken
        }
    }

    func waitUntil(_ what: String, timeout: Duration, _ condition: ([XMPPTestClient.Element]) -> Bool) async throws -> [XMPPTestClient.Element] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let generation = changed.generation
            let (received, end) = state.withLock { ($0.received, $0.end) }
            if condition(received) { return received }
            if let end { throw SwitchboardError(end.code, "\(end.message) before \(what)", vendorCode: end.vendorCode) }
            try await wait(since: generation, until: deadline, for: what)
        }
    }

    func waitForEnd(timeout: Duration) async throws -> SwitchboardError {
        let deadline = ContinuousClock.now + timeout
        while true {
            let generation = changed.generation
            if let end = state.withLock({ $0.end }) { return end }
            try await wait(since: generation, until: deadline, for: "the end of the stream")
        }
    }

    /// Waits until the state changes after `generation`, or `deadline` passes; throws when it
    /// has passed already.
    private func wait(since generation: Int, until deadline: ContinuousClock.Instant, for what: String) async throws {
        guard ContinuousClock.now < deadline else {
            let pending = state.withLock { $0.untaken.map(\.name) }
            throw SwitchboardError(.timedOut, "no \(what) from the server in time (untaken: \(pending))")
        }
        let signal = changed
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await signal.wait(since: generation) }
            group.addTask { try? await ContinuousClock().sleep(until: deadline) }
            await group.next()
            group.cancelAll()
        }
        try Task.checkCancellation()
    }
}
