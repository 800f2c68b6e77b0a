import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// One XMPP stream over one WebSocket: the login, the reader, the heartbeat, and the requests.
///
/// Split by what it does: the login (`XMPPLink+Login`), what the server sends
/// (`XMPPLink+Inbound`), the archive (catch-up, the follower and history: `XMPPLink+Archive`),
/// what the user does and files (`XMPPLink+Requests`), and rooms (`XMPPLink+Rooms`);
/// `XMPPLinkState` is what they share under the lock.
///
/// The lock guards the id counter, the time of the last inbound frame, the archive clock and
/// cursor, the archive pages being collected, the conversations this link announced, the rooms,
/// the upload service and what was put up, and the frames held while the login assembles its
/// snapshot. Frames are never logged: a PLAIN `<auth>`
/// carries the password and messages carry text.
final class XMPPLink: BackendConnection {
    let output: LinkOutput
    var updates: BackendUpdates { output.updates }
    let socket: TextWebSocket
    let http: HTTPTransport
    let configuration: XMPPConfiguration
    let context: ConnectionContext
    let replies = PendingReplies<XMPPElement>()
    /// The account's bare JID.
    let me: String

    let state: Locked<State>
    /// Rings when a live message came: the follower reads the archive after the cursor, which
    /// brings what this link was not sent (the user's sends from another device, messages to
    /// another of the account's resources) and moves the cursor.
    let follow: AsyncStream<Void>.Continuation
    let followSignals: AsyncStream<Void>
    /// The session's dropped stream this link tries to resume, until the server answered.
    let resuming: Locked<SuspendedStream?>

    /// - Parameters:
    ///   - resuming: the session's dropped stream, to resume.
    ///   - suspended: where the link puts its stream as it ends, for the session's next link.
    init(
        socket: TextWebSocket, http: HTTPTransport, configuration: XMPPConfiguration, context: ConnectionContext,
        resuming: SuspendedStream? = nil, suspended: XMPPSuspendedStreams? = nil
    ) {
        (followSignals, follow) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.socket = socket
        self.http = http
        self.configuration = configuration
        self.context = context
        self.me = configuration.bareJID
        let cursor = XMPPCursor(context.cursor)
        var initial = State(clock: XMPPArchiveClock(last: cursor?.time))
        initial.cursorID = cursor?.archiveID
        // A cursor written before the user's archive showed anything (rooms only): the
        // catch-up goes from its time, as from a refused id's.
        if let cursor, cursor.archiveID == nil { initial.since = cursor.time.addingTimeInterval(-300) }
        initial.live = cursor?.live ?? []
        for (room, position) in cursor?.rooms ?? [:] {
            initial.rooms[room] = State.Room(nick: configuration.localPart, archiveID: position.archiveID, clock: XMPPArchiveClock(last: position.time), known: true)
            initial.hadRooms = true
        }
        initial.handled = Set(initial.live)
        // Ids go on from the dropped link's: what the server sends again answers its requests,
        // not this link's.
        if let resuming { initial.nextID = resuming.state.nextID }
        let state = Locked(initial)
        let resumingStream = Locked(resuming)
        self.state = state
        self.resuming = resumingStream
        let replies = self.replies
        self.output = LinkOutput { reason in
            // The stream first: the waiting requests' clean-up changes the state.
            let now = context.clock.date
            if let suspended, let stream = Self.suspension(after: reason, state: state, resuming: resumingStream, now: now) {
                suspended.keep(stream, for: context.session, now: now)
            }
            replies.close(reason)
        }
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
            // A closed stream ends the server's session now, not when it notices the socket gone
            // (and nothing is left to resume).
            if output.endedWith == nil {
                state.withLock { $0.closedByClient = true }
                try? await socket.send(XMPPStanzas.close)
            }
            return result
        }
    }

    func ping() async throws {
        try await socket.send(XMPPStanzas.ping(id: nextID("ping"), to: configuration.domain))
    }

    /// Sends an `iq` and waits for its answer; an error answer classified.
    func request(_ id: String, _ stanza: String, name: String) async throws -> XMPPElement {
        let answer = try await exchange(id, stanza, name: name)
        if answer["type"] == "error" { throw XMPPMapping.error(answer, request: name) }
        return answer
    }

    /// Sends `stanza` and waits for what the reader hands over under `key`.
    func exchange(_ key: String, _ stanza: String, name: String) async throws -> XMPPElement {
        try output.checkOpen()
        let timeout = configuration.requestTimeout
        return try await replies.request(
            key, label: name, timeout: timeout, clock: context.clock,
            timedOut: { SwitchboardError(.timedOut, "\(name) got no answer within \(timeout)") },
            send: { try await socket.send(stanza) }
        )
    }

    /// The time of a message the server stamped `stamp` (or that came now, unstamped): never
    /// later than now, as a server's clock may be ahead.
    func time(stamped stamp: Date?) -> Date {
        let now = context.clock.date
        return min(stamp ?? now, now)
    }

    func nextID(_ prefix: String) -> String {
        state.withLock { state in
            defer { state.nextID += 1 }
            return "\(prefix)-\(state.nextID)"
        }
    }
}
