import Foundation
import Switchboard

/// Rooms (XEP-0045) as a client other than the adapter does them: join, leave, write, and the
/// owner's and moderator's moves.
extension XMPPTestClient {
    /// Joins `room` as `nick`, without the room's history, and waits for its own presence there
    /// (status 110).
    func joinRoom(_ room: String, nick: String) async throws {
        try await write(
            "<presence xmlns='jabber:client' to='\(Self.escape(room))/\(Self.escape(nick))'><x xmlns='\(Namespace.muc)'><history maxstanzas='0'/></x></presence>"
        )
        let own = try await waitForStanza("its own presence in \(room)") { Self.isOwnPresence($0, in: room, nick: nick) && $0["type"] == nil }
        // A room this join made is locked until it is configured: an instant room (the defaults).
        if own.child("x", Namespace.mucUser)?.children.contains(where: { $0.name == "status" && $0["code"] == "201" }) == true {
            let id = UUID().uuidString
            try await request(
                "<iq xmlns='jabber:client' type='set' id='\(id)' to='\(Self.escape(room))'><query xmlns='\(Namespace.muc)#owner'><x xmlns='\(Namespace.dataForms)' type='submit'/></query></iq>",
                id: id
            )
        }
    }

    /// Leaves `room` and waits until the room says it left.
    func leaveRoom(_ room: String, nick: String) async throws {
        try await write("<presence xmlns='jabber:client' type='unavailable' to='\(Self.escape(room))/\(Self.escape(nick))'/>")
        _ = try await waitForStanza("its leave of \(room)") { Self.isOwnPresence($0, in: room, nick: nick) && $0["type"] == "unavailable" }
    }

    /// Destroys `room`, which this account owns (XEP-0045 §10.9): its occupants are told, and
    /// the room is gone.
    func destroyRoom(_ room: String) async throws {
        let id = UUID().uuidString
        try await request(
            "<iq xmlns='jabber:client' type='set' id='\(id)' to='\(Self.escape(room))'><query xmlns='\(Namespace.muc)#owner'><destroy><reason>closed by the test</reason></destroy></query></iq>",
            id: id
        )
    }

    /// Kicks the occupant with `nick` out of `room` (XEP-0045 §8.2): a moderator's move.
    func kick(_ nick: String, from room: String) async throws {
        let id = UUID().uuidString
        try await request(
            "<iq xmlns='jabber:client' type='set' id='\(id)' to='\(Self.escape(room))'><query xmlns='\(Namespace.muc)#admin'><item nick='\(Self.escape(nick))' role='none'/></query></iq>",
            id: id
        )
    }

    static func isOwnPresence(_ stanza: Element, in room: String, nick: String) -> Bool {
        stanza.name == "presence" && stanza["from"] == "\(room)/\(nick)"
            && stanza.child("x", Namespace.mucUser)?.children.contains { $0.name == "status" && $0["code"] == "110" } == true
    }

    /// Sends a message to everyone in `room`, with an origin id. Returns the id.
    @discardableResult
    func sendToRoom(_ text: String, room: String, id: String = UUID().uuidString) async throws -> String {
        try await write(
            "<message xmlns='jabber:client' type='groupchat' to='\(Self.escape(room))' id='\(Self.escape(id))'>"
                + "<body>\(Self.escape(text))</body><origin-id xmlns='\(Namespace.stanzaID)' id='\(Self.escape(id))'/></message>"
        )
        return id
    }
}
