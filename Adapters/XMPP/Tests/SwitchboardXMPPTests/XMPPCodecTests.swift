import Foundation
import Switchboard
@_spi(WireReaders) import SwitchboardXMPP
import Testing

/// The restricted-XML reader, the stanza mapping and the archive clock, on frames recorded from
/// Prosody 0.12.3 (Debian 0.12.3-1+deb12u1) by a client of its WebSocket on 2026-11-28.
struct XMPPCodecTests {
    enum Recorded {
        static let features = """
            <stream:features xmlns:stream='http://etherx.jabber.org/streams' xmlns='jabber:client'><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism><mechanism>SCRAM-SHA-1</mechanism></mechanisms></stream:features>
            """
        static let liveMessage = """
            <message xml:lang='en' id='a1' xmlns='jabber:client' type='chat' from='agent1@localhost/desk' to='customer@localhost'><body>hello &amp; you&apos;re</body><origin-id id='a1' xmlns='urn:xmpp:sid:0'/><stanza-id by='customer@localhost' id='26NMe-Mzf61LHrwsMvuZHOrL' xmlns='urn:xmpp:sid:0'/></message>
            """
        static let bounce = """
            <message id='c2' xmlns='jabber:client' type='error' from='nobody@localhost' to='customer@localhost/phone'><error type='cancel'><service-unavailable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></message>
            """
        static let archived = """
            <message xmlns='jabber:client' to='customer@localhost/phone'><result queryid='q1' id='ohnDVARQIgNF16VUcYPkyWME' xmlns='urn:xmpp:mam:2'><forwarded xmlns='urn:xmpp:forward:0'><delay xmlns='urn:xmpp:delay' stamp='2026-11-28T14:00:18Z'/><message xml:lang='en' id='c1' xmlns='jabber:client' type='chat' from='customer@localhost/phone' to='agent1@localhost'><body>hi</body><origin-id id='c1' xmlns='urn:xmpp:sid:0'/></message></forwarded></result></message>
            """
        static let fin = """
            <iq type='result' xmlns='jabber:client' id='q1' to='customer@localhost/phone'><fin complete='true' xmlns='urn:xmpp:mam:2'><set xmlns='http://jabber.org/protocol/rsm'><last>LGfcSLFRrGQRitFWPaKGUuEM</last><first>26NMe-Mzf61LHrwsMvuZHOrL</first></set></fin></iq>
            """
        static let unknownArchiveID = """
            <iq type='error' xmlns='jabber:client' id='q2' to='customer@localhost/phone'><error type='modify'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>
            """
        static let streamError = """
            <stream:error xmlns:stream='http://etherx.jabber.org/streams' xmlns='jabber:client'><unsupported-stanza-type xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>
            """
    }

    @Test func readsPrefixesDefaultNamespacesAndEntities() throws {
        let features = try XMLReader.read(Recorded.features)
        #expect(features.is("features", "http://etherx.jabber.org/streams"))
        let mechanisms = try #require(features.child("mechanisms", "urn:ietf:params:xml:ns:xmpp-sasl"))
        #expect(mechanisms.children("mechanism").map(\.text) == ["PLAIN", "SCRAM-SHA-1"])
        // The children inherit the default namespace of their nearest declaring ancestor.
        #expect(mechanisms.children[0].namespace == "urn:ietf:params:xml:ns:xmpp-sasl")

        let message = try XMLReader.read(Recorded.liveMessage)
        #expect(message.child("body", "jabber:client")?.text == "hello & you're")
        #expect(message["xml:lang"] == "en")
        #expect(try XMLReader.read("<a xmlns='x' b='&#x3C;&#65;&quot;'>&#128512;</a>")["b"] == "<A\"")
        #expect(try XMLReader.read("<a xmlns='x'>&#128512;</a>").text == "😀")
        #expect(try XMLReader.read(#"<a xmlns="x" b = "1" ><c/> text </a>"#).text == " text ")
    }

    @Test(arguments: [
        "<!DOCTYPE a [<!ENTITY x 'y'>]><a/>",
        "<a xmlns='x'><!-- a comment --></a>",
        "<?xml version='1.0'?><a/>",
        "<a xmlns='x'>&undefined;</a>",
        "<a xmlns='x'>&#0;</a>",
        "<p:a/>",
        "<a xmlns='x' p:b='1'/>",
        "<a xmlns='x'><b></a>",
        "<a xmlns='x'>",
        "<a xmlns='x'/><b/>",
        "text",
        "",
        "<a xmlns='x' b='1' b='2'/>",
        "<a xmlns='x' b=1/>",
        "<a xmlns='x'b='1'/>",
        "<a xmlns='x'><![CDATA[x]]></a>",
        "<a xmlns='x'>]]></a>",
    ])
    func refusesWhatRestrictedXMLDoesNotAllow(_ frame: String) {
        #expect(throws: SwitchboardError.self) { try XMLReader.read(frame) }
    }

    @Test func refusesNestingDeeperThanTheLimit() throws {
        let deep = String(repeating: "<a xmlns='x'>", count: 10_000) + String(repeating: "</a>", count: 10_000)
        let error = try #require(throws: SwitchboardError.self) { try XMLReader.read(deep) }
        #expect(error.code == .protocolViolation)
        let allowed = String(repeating: "<a xmlns='x'>", count: XMLReader.maxDepth) + String(repeating: "</a>", count: XMLReader.maxDepth)
        #expect(throws: Never.self) { try XMLReader.read(allowed) }
    }

    @Test func refusesManyDeclarationsAndTellsTextXMLCannotCarry() {
        let declarations = (0...XMLReader.maxDeclarations).map { " xmlns:p\($0)='u\($0)'" }.joined()
        #expect(throws: SwitchboardError.self) { try XMLReader.read("<a xmlns='x'\(declarations)/>") }
        #expect(XMLReader.isAllowed("tab\tand line\nend, 😀"))
        #expect(!XMLReader.isAllowed("bell \u{7}"))
        #expect(!XMLReader.isAllowed("\u{FFFE}"))
    }

    @Test func readsChangesAndCarbons() throws {
        let correction = try XMLReader.read("<message xmlns='jabber:client' type='chat' from='agent1@localhost/desk'><body>fixed</body><replace xmlns='urn:xmpp:message-correct:0' id='m1'/></message>")
        #expect(XMPPMapping.change(correction) == .replace("m1", text: "fixed"))
        let composing = try XMLReader.read("<message xmlns='jabber:client' type='chat'><composing xmlns='http://jabber.org/protocol/chatstates'/></message>")
        #expect(XMPPMapping.change(composing) == .typing(true))
        // A body with a chat state is a message, not a change.
        let message = try XMLReader.read("<message xmlns='jabber:client' type='chat'><body>hi</body><active xmlns='http://jabber.org/protocol/chatstates'/></message>")
        #expect(XMPPMapping.change(message) == nil)
        let carbon = """
            <message xmlns='jabber:client' from='customer@localhost' to='customer@localhost/phone'><sent xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' type='chat' from='customer@localhost/desk' to='agent1@localhost'><displayed xmlns='urn:xmpp:chat-markers:0' id='a1'/></message></forwarded></sent></message>
            """
        let copied = try #require(XMPPMapping.carbon(try XMLReader.read(carbon), me: "customer@localhost"))
        #expect(copied.sent)
        #expect(XMPPMapping.change(copied.message) == .displayed("a1"))
        // A carbon from anyone but the account is spoofed.
        #expect(XMPPMapping.carbon(try XMLReader.read(carbon.replacingOccurrences(of: "from='customer@localhost' to=", with: "from='agent1@localhost' to=")), me: "customer@localhost") == nil)
    }

    @Test func escapesWhatItWrites() throws {
        let text = "<b>&'\" 😀"
        let element = try XMLReader.read("<a xmlns='x' v='\(XMLReader.escape(text))'>\(XMLReader.escape(text))</a>")
        #expect(element.text == text)
        #expect(element["v"] == text)
    }

    @Test func mapsALiveMessageByTheUsersArchiveID() throws {
        let stanza = try XMLReader.read(Recorded.liveMessage)
        #expect(XMPPMapping.stanzaID(of: stanza, archive: "customer@localhost") == "26NMe-Mzf61LHrwsMvuZHOrL")
        // A stanza id by anyone else is not the user's archive's.
        #expect(XMPPMapping.stanzaID(of: stanza, archive: "agent1@localhost") == nil)
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        let message = try #require(XMPPMapping.message(stanza, archiveID: "26NMe-Mzf61LHrwsMvuZHOrL", me: "customer@localhost", time: time))
        #expect(message.conversationID == "agent1@localhost")
        #expect(message.sender == "agent1@localhost")
        #expect(message.clientID == nil)
        #expect(message.text == "hello & you're")
        #expect(message.serverID == "26NMe-Mzf61LHrwsMvuZHOrL")
    }

    @Test func mapsAnArchivedSendOfTheUserWithItsOriginID() throws {
        let item = try #require(try XMPPMapping.archiveItem(XMLReader.read(Recorded.archived)))
        #expect(item.queryID == "q1")
        #expect(item.archiveID == "ohnDVARQIgNF16VUcYPkyWME")
        #expect(item.stamp == XMPPMapping.timestamp("2026-11-28T14:00:18Z"))
        let message = try #require(XMPPMapping.message(item.message, archiveID: item.archiveID, me: "customer@localhost", time: item.stamp!))
        #expect(message.conversationID == "agent1@localhost")
        #expect(message.clientID == "c1")
        #expect(message.sender == "customer@localhost")
        // A result that lost its archive id is reported, not taken for a live message.
        let broken = Recorded.archived.replacingOccurrences(of: " id='ohnDVARQIgNF16VUcYPkyWME'", with: "")
        #expect(throws: SwitchboardError.self) { try XMPPMapping.archiveItem(XMLReader.read(broken)) }
    }

    @Test func classifiesErrors() throws {
        let bounce = XMPPMapping.error(try XMLReader.read(Recorded.bounce), request: "send")
        #expect(bounce.code == .conversationNotFound)
        #expect(bounce.vendorCode == "service-unavailable")
        let refused = XMPPMapping.error(try XMLReader.read(Recorded.unknownArchiveID), request: "archive")
        #expect(refused.vendorCode == "item-not-found")
        let stream = XMPPMapping.streamError(try XMLReader.read(Recorded.streamError))
        #expect(stream.code == .protocolViolation)
        #expect(stream.vendorCode == "unsupported-stanza-type")
        let cut = XMPPMapping.streamError(
            try XMLReader.read("<stream:error xmlns:stream='http://etherx.jabber.org/streams'><system-shutdown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>")
        )
        #expect(cut.code == .connectionLost)
        let sasl = XMPPMapping.saslFailure(try XMLReader.read("<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure>"))
        #expect(sasl.code == .authenticationFailed)
        let fin = try XMLReader.read(Recorded.fin)
        #expect(fin.child("fin", "urn:xmpp:mam:2")?["complete"] == "true")
    }

    @Test func readsTimestamps() {
        #expect(XMPPMapping.timestamp("1970-01-01T00:00:01Z") == Date(timeIntervalSince1970: 1))
        #expect(XMPPMapping.timestamp("1970-01-01T01:00:01.5+01:00") == Date(timeIntervalSince1970: 1.5))
        #expect(XMPPMapping.timestamp("1970-01-01T00:00:01") == nil)
        #expect(XMPPMapping.timestamp("yesterday") == nil)
    }

    /// Five messages of one archived second keep the archive's order; a history page below them
    /// stays below them.
    @Test func theArchiveClockKeepsTheArchivesOrderWithinASecond() {
        let second = Date(timeIntervalSince1970: 1_800_000_000)
        var clock = XMPPArchiveClock()
        let times = (0..<5).map { _ in clock.next(stamp: second) }
        #expect(times == times.sorted())
        #expect(Set(times).count == 5)
        // A live message whose arrival time is older than what came before still goes after it.
        #expect(clock.next(stamp: second.addingTimeInterval(-10)) > times[4])
        let page = XMPPArchiveClock.below(times[0], stamps: [second, second, second])
        #expect(page == page.sorted() && Set(page).count == 3)
        #expect(page.last! < times[0])
        // The cursor carries the clock across a restart; a page's anchor is written the same way.
        let position = XMPPArchivePosition(archiveID: "abc", time: times[4])
        let restored = XMPPCursor(XMPPCursor(position: position).token)?.position
        #expect(restored?.archiveID == "abc")
        #expect(abs(restored!.time.timeIntervalSince(times[4])) < 0.000_001)
        guard case .token(let anchor) = position.anchor else {
            Issue.record("a page's anchor is a token")
            return
        }
        #expect(XMPPArchivePosition(anchor) == restored)
        for bad in ["no-time", "abc 12 more", " 12", "abc x", ""] { #expect(XMPPArchivePosition(bad) == nil, "\(bad)") }
        #expect(XMPPCursor(.token("no-time")) == nil)
        // The ids delivered live after it travel with it, the newest 100 at most.
        let live = XMPPCursor(position: position, live: (0..<150).map { "id\($0)" })
        #expect(XMPPCursor(live.token)?.live == (50..<150).map { "id\($0)" })
        #expect(XMPPCursor(live.token)?.position == restored)
        // The rooms travel with it, each with its archive's id (none yet for one), and a cursor
        // with rooms but nothing from the user's archive.
        let rooms = XMPPCursor(
            archiveID: nil, time: times[4], live: [],
            rooms: ["a@conference.localhost": XMPPCursor.Room(archiveID: "r:1", time: times[2]), "b@conference.localhost": XMPPCursor.Room()]
        )
        let roomsBack = XMPPCursor(rooms.token)
        #expect(roomsBack?.rooms.keys.sorted() == ["a@conference.localhost", "b@conference.localhost"])
        #expect(roomsBack?.rooms["a@conference.localhost"]?.archiveID == "r:1")
        #expect(abs(roomsBack!.rooms["a@conference.localhost"]!.time!.timeIntervalSince(times[2])) < 0.000_001)
        #expect(roomsBack?.rooms["b@conference.localhost"] == XMPPCursor.Room())
        #expect(roomsBack?.archiveID == nil && roomsBack?.position == nil)
        #expect(XMPPCursor(XMPPCursor(position: position, live: ["l1"], rooms: ["a@c": XMPPCursor.Room(archiveID: "r")]).token)?.live == ["l1"])
        // A room entry out of shape is skipped, not the cursor.
        let skipped = XMPPCursor(.token("abc 12 l1 room::-:x room:a@c:x:y room:b@c:-:r"))
        #expect(skipped?.archiveID == "abc" && skipped?.live == ["l1"] && skipped?.rooms == ["b@c": XMPPCursor.Room(archiveID: "r")])
    }

    /// A file message: out-of-band data (XEP-0066) whose `http(s)` address is the whole body; a
    /// body that says more, or another scheme, is text.
    @Test func readsFilesSentAsTheirAddress() throws {
        func message(_ body: String, _ url: String) throws -> Message? {
            XMPPMapping.message(
                try XMLReader.read(
                    "<message xmlns='jabber:client' type='chat' from='agent1@localhost/desk' to='customer@localhost'><body>\(body)</body>"
                        + "<x xmlns='jabber:x:oob'><url>\(url)</url></x></message>"
                ),
                archiveID: "a1", me: "customer@localhost", time: Date()
            )
        }
        let url = "https://upload.example.org/files/abc/my%20report.pdf"
        let file = try #require(try message(url, url))
        #expect(file.kind == .file && file.text.isEmpty)
        #expect(file.attachments.first?.name == "my report.pdf" && file.attachments.first?.url?.absoluteString == url)
        let captioned = try #require(try message("look: \(url)", url))
        #expect(captioned.kind == .text && captioned.attachments.isEmpty && captioned.text == "look: \(url)")
        let other = try #require(try message("file:///etc/passwd", "file:///etc/passwd"))
        #expect(other.kind == .text && other.attachments.isEmpty)
        // A name decoded once, with no path separators or control characters.
        #expect(XMPPMapping.fileName(URL(string: "https://h/f/..%2F..%2Fetc%2Fpasswd")!) == ".._.._etc_passwd")
        #expect(XMPPMapping.fileName(URL(string: "https://h/f/a%0Ab%1B%5B31m.txt")!) == "ab[31m.txt")
        #expect(XMPPMapping.fileName(URL(string: "https://h/f/%252F")!) == "%2F")
        #expect(XMPPMapping.fileName(URL(string: "https://h/")!) == "file")
    }

    /// A room's presences and messages: the occupant (the user's own, a new room), its
    /// participant by its own JID where the room shows it, a groupchat message by its sender; an
    /// invitation is no chat message, though it carries a body.
    @Test func readsRoomsOccupantsAndInvitations() throws {
        let own = try XMLReader.read(
            "<presence xmlns='jabber:client' from='team@conference.localhost/customer' to='customer@localhost/x'><x xmlns='http://jabber.org/protocol/muc#user'>"
                + "<item affiliation='owner' role='moderator' jid='customer@localhost/x'/><status code='110'/><status code='201'/></x></presence>"
        )
        let occupant = try #require(XMPPMapping.occupant(own))
        #expect(occupant.room == "team@conference.localhost" && occupant.nick == "customer" && occupant.isSelf && occupant.created && !occupant.left)
        #expect(XMPPMapping.participant(occupant, me: "customer@localhost").permissions.isOwner)
        let other = try XMLReader.read(
            "<presence xmlns='jabber:client' from='team@conference.localhost/Agent One' type='unavailable'><x xmlns='http://jabber.org/protocol/muc#user'>"
                + "<item affiliation='none' role='none' jid='Agent1@localhost/desk'/></x></presence>"
        )
        let left = try #require(XMPPMapping.occupant(other))
        #expect(left.left && !left.isSelf && left.nick == "Agent One")
        #expect(XMPPMapping.participant(left, me: "customer@localhost").id == ParticipantID("agent1@localhost"))
        let anonymous = try #require(XMPPMapping.occupant(try XMLReader.read(
            "<presence xmlns='jabber:client' from='team@c/x'><x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='none' role='visitor'/></x></presence>"
        )))
        #expect(XMPPMapping.participant(anonymous, me: "me@h").id == ParticipantID("team@c/x"))
        #expect(!XMPPMapping.participant(anonymous, me: "me@h").permissions.canWrite)
        #expect(XMPPMapping.occupant(try XMLReader.read("<presence xmlns='jabber:client' from='bob@localhost/x'/>")) == nil)
        // A change of nick (status 303) is no leave; the occupant id (XEP-0421) is read.
        let renamed = try #require(XMPPMapping.occupant(try XMLReader.read(
            "<presence xmlns='jabber:client' from='team@c/old' type='unavailable'><occupant-id xmlns='urn:xmpp:occupant-id:0' id='o1'/>"
                + "<x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' role='participant' nick='new'/><status code='303'/></x></presence>"
        )))
        #expect(renamed.left && renamed.newNick == "new" && renamed.occupantID == "o1")
        #expect(left.newNick == nil)

        let groupchat = try XMLReader.read(
            "<message xmlns='jabber:client' type='groupchat' from='team@conference.localhost/Agent One' id='m1'><body>hi all</body></message>"
        )
        let message = try #require(XMPPMapping.roomMessage(groupchat, archiveID: "a1", sender: ParticipantID("agent1@localhost"), mine: false, time: Date()))
        #expect(message.conversationID == ConversationID("team@conference.localhost") && message.text == "hi all" && message.clientID == nil)
        #expect(XMPPMapping.nick(of: groupchat) == "Agent One")
        #expect(XMPPMapping.message(groupchat, archiveID: "a1", me: "customer@localhost", time: Date()) == nil)
        let invitation = try XMLReader.read(
            "<message xmlns='jabber:client' from='team@conference.localhost' to='customer@localhost'><x xmlns='http://jabber.org/protocol/muc#user'>"
                + "<invite from='agent1@localhost'/></x><body>agent1@localhost invited you to the room team@conference.localhost</body></message>"
        )
        #expect(XMPPMapping.message(invitation, archiveID: "a2", me: "customer@localhost", time: Date()) == nil)
        let direct = try XMLReader.read(
            "<message xmlns='jabber:client' from='agent1@localhost/desk' to='customer@localhost'><x xmlns='jabber:x:conference' jid='team@conference.localhost'/><body>join us</body></message>"
        )
        #expect(XMPPMapping.message(direct, archiveID: "a3", me: "customer@localhost", time: Date()) == nil)
    }

    /// The exchanges of RFC 5802 §5 (SHA-1) and RFC 7677 §3 (SHA-256), byte for byte.
    @Test(arguments: [
        (
            XMPPSCRAM.Mechanism.sha1, "fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
        ),
        (
            XMPPSCRAM.Mechanism.sha256, "rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        ),
    ])
    func scramMatchesTheRFCs(_ vector: (XMPPSCRAM.Mechanism, String, String, String, String)) throws {
        let (mechanism, nonce, serverFirst, clientFinal, serverFinal) = vector
        var scram = XMPPSCRAM(mechanism: mechanism, user: "user", password: "pencil", clientNonce: nonce)
        #expect(scram.clientFirst == "n,,n=user,r=\(nonce)")
        #expect(try scram.clientFinal(serverFirst: serverFirst) == clientFinal)
        try scram.verify(serverFinal: serverFinal)
        // A server that does not hold the account's keys cannot sign.
        #expect(throws: SwitchboardError.self) { try scram.verify(serverFinal: "v=AAAAAAAAAAAAAAAAAAAAAAAAAAA=") }
        #expect(throws: SwitchboardError.self) { try scram.verify(serverFinal: "e=invalid-proof") }
    }

    @Test func scramRefusesAServerFirstMessageOutOfShape() {
        let refused = [
            "r=someone-elses-nonce,s=QSXCR+Q6sek8bf92,i=4096",
            "r=abc,s=QSXCR+Q6sek8bf92,i=4096",
            "r=abcdef,i=4096",
            "r=abcdef,s=QSXCR+Q6sek8bf92,i=0",
            "r=abcdef,s=QSXCR+Q6sek8bf92,i=1000000000",
            "r=abcdef,s=QSXCR+Q6sek8bf92",
            "m=ext,r=abcdef,s=QSXCR+Q6sek8bf92,i=4096",
        ]
        for serverFirst in refused {
            var scram = XMPPSCRAM(mechanism: .sha1, user: "user", password: "pencil", clientNonce: "abc")
            #expect(throws: SwitchboardError.self, "\(serverFirst)") { try scram.clientFinal(serverFirst: serverFirst) }
        }
        // Before the server's first message there is no signature to accept.
        let fresh = XMPPSCRAM(mechanism: .sha1, user: "user", password: "pencil", clientNonce: "abc")
        #expect(throws: SwitchboardError.self) { try fresh.verify(serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") }
        // A success without a signature proves nothing.
        var answered = XMPPSCRAM(mechanism: .sha1, user: "user", password: "pencil", clientNonce: "fyko+d2lbbFgONRv9qkxdawL")
        _ = try? answered.clientFinal(serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
        #expect(throws: SwitchboardError.self) { try answered.verify(serverFinal: "") }
        // SASLprep's usual cases: a no-break space is a space, a soft hyphen nothing, a ligature
        // its letters; ASCII stays as it is.
        #expect(XMPPSCRAM.prepared("pass\u{00A0}wo\u{00AD}rd\u{FB01}") == "pass wordfi")
        #expect(XMPPSCRAM.prepared("pencil") == "pencil")
        #expect(String(describing: answered).contains("pencil") == false)
        // Names escape `=` and `,`.
        #expect(XMPPSCRAM(mechanism: .sha1, user: "a=b,c", password: "p", clientNonce: "n").clientFirst == "n,,n=a=3Db=2Cc,r=n")
    }
}
