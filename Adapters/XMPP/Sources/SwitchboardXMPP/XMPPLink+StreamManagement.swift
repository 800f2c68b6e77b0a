import Foundation
import Logging
import Switchboard
import SwitchboardTransport

/// Stream management (XEP-0198): the stanzas the server sent counted and acknowledged, and a
/// dropped link's stream resumed by the next link of the same session where the server still
/// holds it.
///
/// Resumed, the server's session goes on as it was: the same resource, the rooms still joined,
/// and the stanzas it sent that the client had not counted sent again (Prosody stamps each with
/// a `<delay>`). The next link takes the dropped link's state with it and skips the login's
/// bind, roster, catch-up and room joins. A server that cannot resume (the session timed out, a
/// restart) answers `<failed/>`, and the link logs in afresh and catches up from the archive.
///
/// What the client sent that the server had not taken is not sent again by the link: the
/// engine sends again what failed with the old link (a send, checked against the archive
/// first; a read marker), and typing is not worth sending late.
extension XMPPLink {
    /// What a stream the server enabled management on needs, carried from link to link.
    struct StreamManagement: Sendable {
        /// The stream's id for resuming it; `nil` when the server would not keep it.
        var id: String?
        /// How long the server keeps a dropped stream (`max`), in seconds, when it said.
        var keptFor: Int?
        /// Stanzas received since the server enabled management, modulo 2³² (the `h` of `<a/>`
        /// and `<resume/>`).
        var handled: UInt32 = 0
    }

    /// A dropped link's stream, and everything its link knew, for the next link to resume.
    struct SuspendedStream: Sendable {
        var id: String
        var state: State
        /// The cursor the link had handed on with its last event: the engine's stored one when
        /// it took everything the link yielded.
        var cursor: SyncCursor?
        /// Until when the server keeps it.
        var until: Date
    }

    /// Enables management on the stream, asking the server to keep it when the link drops.
    /// Called when the login is done (a link that drops before that logs in afresh); a server
    /// that refuses, or does not answer in time, leaves the link without it.
    func enableStreamManagement() async throws {
        state.withLock { $0.enableSent = true }
        do {
            let answer = try await exchange("#sm", XMPPStanzas.enableStreamManagement, name: "enable")
            if answer.name != "enabled" {
                context.logger.debug("xmpp: the server refused stream management", metadata: ["condition": .string(answer.children.first?.name ?? "")])
            }
        } catch let error as SwitchboardError where error.code == .timedOut {
            context.logger.debug("xmpp: the server did not answer <enable/>; the link goes on without stream management")
        }
    }

    /// Tries to resume `suspended`: `true` when the server did (the reader put the dropped link's
    /// state in place as its answer came, before what the server sends again).
    ///
    /// Only from the cursor the engine gave this link: where the engine's stored cursor is not
    /// the one the dropped link handed on last (a commit failed, another session of the same
    /// id), what it holds is not what the dropped link knew, and the link logs in afresh.
    func resume(_ suspended: SuspendedStream) async throws -> Bool {
        guard Self.samePositions(suspended.cursor, context.cursor) else {
            resuming.withLock { $0 = nil }
            context.logger.debug("xmpp: the stored cursor is not the dropped link's; logging in afresh")
            return false
        }
        let answer = try await exchange("#sm", XMPPStanzas.resume(previd: suspended.id, handled: suspended.state.stream?.handled ?? 0), name: "resume")
        guard answer.name == "resumed" else {
            resuming.withLock { $0 = nil }
            context.logger.debug("xmpp: the server could not resume the stream; logging in afresh", metadata: ["condition": .string(answer.children.first?.name ?? "")])
            return false
        }
        context.logger.debug("xmpp: stream resumed")
        // What the archive took while the link was down that the server does not send again
        // (the user's sends from another device) comes with the follower.
        follow.yield()
        return true
    }

    /// Whether two cursors name the same positions. Before the user's archive showed anything
    /// (rooms only), a cursor's time is when it was written, not a position.
    static func samePositions(_ one: SyncCursor?, _ other: SyncCursor?) -> Bool {
        guard var one = XMPPCursor(one), let other = XMPPCursor(other) else { return one == other }
        if one.archiveID == nil, other.archiveID == nil { one.time = other.time }
        return one == other
    }

    /// The reader's part: `<r/>` answered with the count, the answers to `<enable/>` and
    /// `<resume/>` recorded before any stanza after them is counted.
    func streamManagement(_ element: XMPPElement) async {
        switch element.name {
        case "r":
            // Not before management is on, nor once the link ended: a count the next link's
            // `<resume/>` does not have would make the server drop what this one never handed on.
            guard let handled = state.withLock({ $0.ended ? nil : $0.stream?.handled }) else { return }
            try? await socket.send(XMPPStanzas.ack(handled: handled))
        case "a":
            // The server's count of what it took: the engine sends again what failed, so the link
            // keeps no copies to compare it with.
            break
        case "enabled", "resumed":
            guard element.name == "enabled" ? enabled(element) : resumed(element) else {
                output.yield(.problem(SwitchboardError(.protocolViolation, "an <\(element.name)/> this link did not ask for")))
                return
            }
            replies.resolve("#sm", with: element)
        case "failed":
            replies.resolve("#sm", with: element)
        default:
            output.yield(.problem(SwitchboardError(.protocolViolation, "a stream management element the adapter does not know: <\(element.name)>")))
        }
    }

    /// Management on, when this link sent `<enable/>` (even after its wait timed out: the server
    /// counts from here on).
    private func enabled(_ element: XMPPElement) -> Bool {
        state.withLock { state in
            guard state.enableSent, state.stream == nil else { return false }
            let resumable = element["resume"] == "true" || element["resume"] == "1"
            state.stream = StreamManagement(id: resumable ? element["id"] : nil, keptFor: element["max"].flatMap { Int($0) })
            return true
        }
    }

    /// The dropped link's state put in place, when this link asked to resume that stream:
    /// checked and done under one lock (the state's, then the resumed stream's, as the link's end
    /// takes them), so a link that ended meanwhile stays ended.
    private func resumed(_ element: XMPPElement) -> Bool {
        state.withLock { state in
            guard !state.ended, state.stream == nil, let suspended = resuming.withLock({ $0 }), element["previd"] == suspended.id else { return false }
            var carried = suspended.state
            carried.lastInbound = context.clock.now
            // Ids go on past this link's (its login's) and the dropped link's.
            carried.nextID = max(carried.nextID, state.nextID)
            state = carried
            resuming.withLock { $0 = nil }
            // Nothing was missed: the server sends again what the dropped link did not get.
            output.yield(.snapshot(BackendSnapshot(conversations: [], isComplete: false)))
            return true
        }
    }

    /// Counts a stanza the server sent, once management is on, after the reader handled it, and
    /// not once the link ended: a count may fall short of what the state shows (the server
    /// sends that stanza again, and its copy is dropped), never run ahead of it.
    func counted(_ element: XMPPElement) {
        guard element.namespace == NS.client, Self.stanzaNames.contains(element.name) else { return }
        countOne()
    }

    /// A frame the reader refused, counted where the server counted it: one that opens as a
    /// stanza. (Otherwise each resumption would bring one handled stanza again.)
    func countedRefused(_ frame: String) {
        let name = frame.dropFirst().prefix { $0.isLetter }
        guard frame.hasPrefix("<"), Self.stanzaNames.contains(String(name)) else { return }
        countOne()
    }

    private static let stanzaNames: Set<String> = ["message", "presence", "iq"]

    private func countOne() {
        state.withLock { state in
            if state.stream != nil, !state.ended { state.stream!.handled &+= 1 }
        }
    }

    /// What the next link of this session may resume, taken as the link ends (before the engine
    /// hears of it, so before it opens the next link): this link's stream and state, when the
    /// server keeps the stream, the link was lost (not closed by the client, ended by the server
    /// with a stream error or `<close/>`, or by a frame over the limit, which the server would
    /// send again, and again) and it left no room join halfway; the stream this link was given,
    /// when the server never answered its `<resume/>`.
    ///
    /// A room the link was not in at the end (one out of reach, kept for the next link to join
    /// again) makes the next link log in afresh: a resumed link joins no room.
    ///
    /// The state is a copy, taken before the link's waiting requests fail (their clean-up would
    /// change it): what the link's tasks do after the end (a reader that reads on after a silent
    /// heartbeat ended the link) is not in it, and not counted. What the link hands on between
    /// this copy and the end of its updates (a chat state, an occupant) the server sends again.
    static func suspension(
        after reason: SwitchboardError, state: Locked<State>, resuming: Locked<SuspendedStream?>, now: Date
    ) -> SuspendedStream? {
        state.withLock { state in
            state.ended = true
            guard reason.code == .connectionLost || reason.code == .timedOut, !state.closedByClient, !state.endedByServer else { return nil }
            if let unanswered = resuming.withLock({ $0 }) { return unanswered }
            guard let stream = state.stream, let id = stream.id, state.held == nil,
                state.rooms.values.allSatisfy({ $0.joined && !$0.joining && $0.held == nil })
            else { return nil }
            // A server that does not say how long it keeps a stream: Prosody's default.
            let until = now.addingTimeInterval(TimeInterval(stream.keptFor ?? 600))
            return SuspendedStream(id: id, state: state.forTheNextLink(), cursor: Self.cursor(state, now: now), until: until)
        }
    }
}

extension XMPPLink.State {
    /// This state as the link that resumes its stream takes it: what belonged to this link alone
    /// (its end, its requests in flight, whose answers the server sends again and are nobody's)
    /// left behind.
    fileprivate func forTheNextLink() -> Self {
        var next = self
        next.ended = false
        next.endedByServer = false
        next.sending = []
        if next.abandonedQueries.count >= 256 { next.abandonedQueries.removeAll() }
        next.abandonedQueries.formUnion(pages.keys)
        next.pages = [:]
        next.pageSources = [:]
        return next
    }
}

/// The streams sessions may resume, kept by the backend: put there by a link as it ends, taken
/// by the session's next link. One per session, dropped once its server would no longer keep it.
final class XMPPSuspendedStreams: Sendable {
    private let streams = Locked<[SessionID: XMPPLink.SuspendedStream]>([:])

    /// The stream `session` may resume, taken: a link that does not resume it hands it on only
    /// when the server never answered.
    func take(_ session: SessionID, now: Date) -> XMPPLink.SuspendedStream? {
        streams.withLock { streams in
            Self.dropExpired(&streams, now: now)
            return streams.removeValue(forKey: session)
        }
    }

    func keep(_ stream: XMPPLink.SuspendedStream, for session: SessionID, now: Date) {
        streams.withLock { streams in
            Self.dropExpired(&streams, now: now)
            streams[session] = stream
        }
    }

    private static func dropExpired(_ streams: inout [SessionID: XMPPLink.SuspendedStream], now: Date) {
        if streams.values.contains(where: { $0.until <= now }) {
            streams = streams.filter { now < $0.value.until }
        }
    }
}
