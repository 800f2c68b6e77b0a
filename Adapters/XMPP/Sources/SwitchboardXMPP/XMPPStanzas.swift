import Foundation

/// The namespaces the adapter speaks.
enum NS {
    static let framing = "urn:ietf:params:xml:ns:xmpp-framing"
    static let stream = "http://etherx.jabber.org/streams"
    static let streams = "urn:ietf:params:xml:ns:xmpp-streams"
    static let client = "jabber:client"
    static let sasl = "urn:ietf:params:xml:ns:xmpp-sasl"
    static let bind = "urn:ietf:params:xml:ns:xmpp-bind"
    static let sm = "urn:xmpp:sm:3"
    static let stanzas = "urn:ietf:params:xml:ns:xmpp-stanzas"
    static let roster = "jabber:iq:roster"
    static let mam = "urn:xmpp:mam:2"
    static let forward = "urn:xmpp:forward:0"
    static let delay = "urn:xmpp:delay"
    static let rsm = "http://jabber.org/protocol/rsm"
    static let dataForms = "jabber:x:data"
    static let sid = "urn:xmpp:sid:0"
    static let markers = "urn:xmpp:chat-markers:0"
    static let ping = "urn:xmpp:ping"
    static let chatStates = "http://jabber.org/protocol/chatstates"
    static let hints = "urn:xmpp:hints"
    static let correct = "urn:xmpp:message-correct:0"
    static let retract = "urn:xmpp:message-retract:1"
    static let fallback = "urn:xmpp:fallback:0"
    static let carbons = "urn:xmpp:carbons:2"
    static let muc = "http://jabber.org/protocol/muc"
    static let discoInfo = "http://jabber.org/protocol/disco#info"
    static let conferenceInvite = "jabber:x:conference"
    static let occupantID = "urn:xmpp:occupant-id:0"
    static let discoItems = "http://jabber.org/protocol/disco#items"
    static let upload = "urn:xmpp:http:upload:0"
    static let oob = "jabber:x:oob"
    static let mucUser = "http://jabber.org/protocol/muc#user"
    static let mucOwner = "http://jabber.org/protocol/muc#owner"
}

/// Stanzas as the adapter writes them: every one in `jabber:client` (Prosody resets a stream
/// whose stanzas lack it), text and attributes escaped.
enum XMPPStanzas {
    static func open(to domain: String) -> String {
        "<open xmlns='\(NS.framing)' to='\(attribute(domain))' version='1.0'/>"
    }

    static let close = "<close xmlns='\(NS.framing)'/>"

    /// PLAIN's message (RFC 4616): no authorization identity, the user, the password.
    static func plainToken(user: String, password: String) -> Data {
        Data(([0] + Array(user.utf8) + [0] + Array(password.utf8)) as [UInt8])
    }

    /// An empty initial response is `=` (RFC 6120 §6.4.2).
    static func auth(_ mechanism: String, _ payload: Data) -> String {
        "<auth xmlns='\(NS.sasl)' mechanism='\(attribute(mechanism))'>\(payload.isEmpty ? "=" : payload.base64EncodedString())</auth>"
    }

    static let saslAbort = "<abort xmlns='\(NS.sasl)'/>"

    /// An empty response is an empty element (RFC 6120 §6.4.3).
    static func saslResponse(_ payload: Data) -> String {
        payload.isEmpty ? "<response xmlns='\(NS.sasl)'/>" : "<response xmlns='\(NS.sasl)'>\(payload.base64EncodedString())</response>"
    }

    static func bind(id: String, resource: String?) -> String {
        let resource = resource.map { "<resource>\(XMLText($0))</resource>" } ?? ""
        return "<iq xmlns='\(NS.client)' type='set' id='\(attribute(id))'><bind xmlns='\(NS.bind)'>\(resource)</bind></iq>"
    }

    static func rosterGet(id: String) -> String {
        "<iq xmlns='\(NS.client)' type='get' id='\(attribute(id))'><query xmlns='\(NS.roster)'/></iq>"
    }

    static func result(to iq: String, from: String?) -> String {
        let to = from.map { " to='\(attribute($0))'" } ?? ""
        return "<iq xmlns='\(NS.client)' type='result' id='\(attribute(iq))'\(to)/>"
    }

    /// The answer to a request the adapter does not serve (RFC 6120 §8.2.3: every get and set is
    /// answered).
    static func notImplemented(to iq: String, from: String?) -> String {
        let to = from.map { " to='\(attribute($0))'" } ?? ""
        return "<iq xmlns='\(NS.client)' type='error' id='\(attribute(iq))'\(to)><error type='cancel'>"
            + "<feature-not-implemented xmlns='\(NS.stanzas)'/></error></iq>"
    }

    static func ping(id: String, to domain: String) -> String {
        "<iq xmlns='\(NS.client)' type='get' id='\(attribute(id))' to='\(attribute(domain))'><ping xmlns='\(NS.ping)'/></iq>"
    }

    static let presence = "<presence xmlns='\(NS.client)'/>"

    // MARK: Stream management (XEP-0198)

    /// Management on, and the stream kept for a resumption when the link drops.
    static let enableStreamManagement = "<enable xmlns='\(NS.sm)' resume='true'/>"

    /// Resumes stream `previd`, having handled `handled` of the stanzas the server sent.
    static func resume(previd: String, handled: UInt32) -> String {
        "<resume xmlns='\(NS.sm)' h='\(handled)' previd='\(attribute(previd))'/>"
    }

    static func ack(handled: UInt32) -> String {
        "<a xmlns='\(NS.sm)' h='\(handled)'/>"
    }

    /// A chat message; its id and origin id (XEP-0359) are the client id, which the archive
    /// keeps, so a resend after a lost answer can be recognized there.
    ///
    /// A file is its download address as the body and as out-of-band data (XEP-0066), as
    /// clients expect after an HTTP upload (XEP-0363).
    static func chat(to peer: String, clientID: String, body: String, file: String? = nil) -> String {
        "<message xmlns='\(NS.client)' type='chat' to='\(attribute(peer))' id='\(attribute(clientID))'>"
            + "<body>\(XMLText(file ?? body))</body>\(outOfBand(file))<origin-id xmlns='\(NS.sid)' id='\(attribute(clientID))'/>"
            + "<markable xmlns='\(NS.markers)'/></message>"
    }

    private static func outOfBand(_ url: String?) -> String {
        url.map { "<x xmlns='\(NS.oob)'><url>\(XMLText($0))</url></x>" } ?? ""
    }

    /// A slot for an HTTP upload (XEP-0363): where to `PUT` the file, and where it is fetched.
    static func uploadSlot(to service: String, id: String, filename: String, size: Int, contentType: String) -> String {
        "<iq xmlns='\(NS.client)' type='get' id='\(attribute(id))' to='\(attribute(service))'><request xmlns='\(NS.upload)' "
            + "filename='\(attribute(filename))' size='\(size)' content-type='\(attribute(contentType))'/></iq>"
    }

    /// The services of the user's server (XEP-0030).
    static func discoItems(_ jid: String, id: String) -> String {
        "<iq xmlns='\(NS.client)' type='get' id='\(attribute(id))' to='\(attribute(jid))'><query xmlns='\(NS.discoItems)'/></iq>"
    }

    /// A chat state (XEP-0085): `composing`, `paused`, `active`; never archived. To a room, a
    /// `groupchat` one.
    static func chatState(_ state: String, to peer: String, type: String = "chat") -> String {
        "<message xmlns='\(NS.client)' type='\(type)' to='\(attribute(peer))'><\(state) xmlns='\(NS.chatStates)'/><no-store xmlns='\(NS.hints)'/></message>"
    }

    // MARK: Rooms (XEP-0045)

    /// Joins `room` as `nick`, without the room's own history: the archive brings it, with ids.
    static func joinRoom(_ room: String, nick: String) -> String {
        "<presence xmlns='\(NS.client)' to='\(attribute(room))/\(attribute(nick))'><x xmlns='\(NS.muc)'><history maxstanzas='0'/></x></presence>"
    }

    static func leaveRoom(_ room: String, nick: String) -> String {
        "<presence xmlns='\(NS.client)' type='unavailable' to='\(attribute(room))/\(attribute(nick))'/>"
    }

    /// The configuration of a room the user just made: its name, kept when everyone left,
    /// members' addresses visible to all (so each is a participant by their own JID), archived.
    static func configureRoom(_ room: String, title: String?, id: String) -> String {
        func field(_ name: String, _ value: String) -> String { "<field var='\(name)'><value>\(XMLText(value))</value></field>" }
        return "<iq xmlns='\(NS.client)' type='set' id='\(attribute(id))' to='\(attribute(room))'><query xmlns='\(NS.mucOwner)'>"
            + "<x xmlns='\(NS.dataForms)' type='submit'><field var='FORM_TYPE' type='hidden'><value>http://jabber.org/protocol/muc#roomconfig</value></field>"
            + (title.map { field("muc#roomconfig_roomname", $0) } ?? "")
            + field("muc#roomconfig_persistentroom", "1") + field("muc#roomconfig_whois", "anyone") + field("muc#roomconfig_enablearchiving", "1")
            + "</x></query></iq>"
    }

    /// The room's default configuration, accepted as it is (an instant room, XEP-0045 §10.1.2).
    static func instantRoom(_ room: String, id: String) -> String {
        "<iq xmlns='\(NS.client)' type='set' id='\(attribute(id))' to='\(attribute(room))'><query xmlns='\(NS.mucOwner)'><x xmlns='\(NS.dataForms)' type='submit'/></query></iq>"
    }

    /// Destroys a room the user owns (XEP-0045 §10.9).
    static func destroyRoom(_ room: String, id: String) -> String {
        "<iq xmlns='\(NS.client)' type='set' id='\(attribute(id))' to='\(attribute(room))'><query xmlns='\(NS.mucOwner)'><destroy/></query></iq>"
    }

    /// A message to everyone in the room; its id and origin id are the client id, as for a chat.
    static func groupchat(to room: String, clientID: String, body: String, file: String? = nil) -> String {
        "<message xmlns='\(NS.client)' type='groupchat' to='\(attribute(room))' id='\(attribute(clientID))'>"
            + "<body>\(XMLText(file ?? body))</body>\(outOfBand(file))<origin-id xmlns='\(NS.sid)' id='\(attribute(clientID))'/></message>"
    }

    /// What the room says of itself (XEP-0030): its name is its identity's.
    static func discoInfo(_ jid: String, id: String) -> String {
        "<iq xmlns='\(NS.client)' type='get' id='\(attribute(id))' to='\(attribute(jid))'><query xmlns='\(NS.discoInfo)'/></iq>"
    }

    /// An invitation to the room, through the room (XEP-0045 §7.8.2).
    static func invite(_ jid: String, to room: String) -> String {
        "<message xmlns='\(NS.client)' to='\(attribute(room))'><x xmlns='\(NS.mucUser)'><invite to='\(attribute(jid))'/></x></message>"
    }

    /// A read marker (XEP-0333) naming the peer's message by its id; archived, so the user's
    /// other devices find it.
    static func displayed(_ stanzaID: String, to peer: String, id: String) -> String {
        "<message xmlns='\(NS.client)' type='chat' to='\(attribute(peer))' id='\(attribute(id))'>"
            + "<displayed xmlns='\(NS.markers)' id='\(attribute(stanzaID))'/><store xmlns='\(NS.hints)'/></message>"
    }

    /// A correction (XEP-0308) of the user's message with this id.
    static func correction(of stanzaID: String, text: String, to peer: String, id: String) -> String {
        "<message xmlns='\(NS.client)' type='chat' to='\(attribute(peer))' id='\(attribute(id))'>"
            + "<body>\(XMLText(text))</body><replace xmlns='\(NS.correct)' id='\(attribute(stanzaID))'/></message>"
    }

    /// A retraction (XEP-0424) of the user's message with this id, with the fallback body the
    /// XEP asks for, for clients that do not know it.
    static func retraction(of stanzaID: String, to peer: String, id: String) -> String {
        "<message xmlns='\(NS.client)' type='chat' to='\(attribute(peer))' id='\(attribute(id))'>"
            + "<retract xmlns='\(NS.retract)' id='\(attribute(stanzaID))'/><fallback xmlns='\(NS.fallback)' for='\(NS.retract)'/>"
            + "<body>This person attempted to retract a previous message, but it's unsupported by your client.</body>"
            + "<store xmlns='\(NS.hints)'/></message>"
    }

    /// Carbons (XEP-0280): the user's other devices' messages, copied to this one.
    static func enableCarbons(id: String) -> String {
        "<iq xmlns='\(NS.client)' type='set' id='\(attribute(id))'><enable xmlns='\(NS.carbons)'/></iq>"
    }

    /// Where a MAM page (XEP-0313) starts or ends, as RSM (XEP-0059) says it.
    enum Page {
        /// The newest page.
        case newest
        /// The oldest page (of what the filter lets through).
        case oldest
        /// The page just after this archive id, oldest first (catch-up).
        case after(String)
        /// The page just before this archive id (history).
        case before(String)
    }

    /// A MAM query of the user's archive: `with` one peer, `end` at a time, a page of `max`.
    /// A room's archive is asked of the room (`archive`); the user's has no `to`.
    static func archiveQuery(
        id: String, queryID: String, archive: String? = nil, with peer: String?, start: Date? = nil, end: Date? = nil, ids: [String] = [], page: Page, max: Int
    ) -> String {
        var fields = "<field var='FORM_TYPE' type='hidden'><value>\(NS.mam)</value></field>"
        if let peer { fields += "<field var='with'><value>\(XMLText(peer))</value></field>" }
        if let start { fields += "<field var='start'><value>\(timestamp(start))</value></field>" }
        if !ids.isEmpty { fields += "<field var='ids'>" + ids.map { "<value>\(XMLText($0))</value>" }.joined() + "</field>" }
        if let end { fields += "<field var='end'><value>\(timestamp(end))</value></field>" }
        let anchor: String
        switch page {
        case .newest: anchor = "<before/>"
        case .oldest: anchor = ""
        case .after(let archiveID): anchor = "<after>\(XMLText(archiveID))</after>"
        case .before(let archiveID): anchor = "<before>\(XMLText(archiveID))</before>"
        }
        let to = archive.map { " to='\(attribute($0))'" } ?? ""
        return "<iq xmlns='\(NS.client)' type='set' id='\(attribute(id))'\(to)><query xmlns='\(NS.mam)' queryid='\(attribute(queryID))'>"
            + "<x xmlns='\(NS.dataForms)' type='submit'>\(fields)</x>"
            + "<set xmlns='\(NS.rsm)'><max>\(max)</max>\(anchor)</set></query></iq>"
    }

    /// XEP-0082's date-time, in whole seconds (the `end` filter is inclusive; Prosody stores
    /// whole seconds).
    static func timestamp(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let time = Date(timeIntervalSince1970: TimeInterval(seconds))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: time)
        func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        return "\(parts.year ?? 1970)-\(two(parts.month))-\(two(parts.day))T\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))Z"
    }

    private static func attribute(_ text: String) -> String { XMLReader.escape(text) }
    private static func XMLText(_ text: String) -> String { XMLReader.escape(text) }
}
