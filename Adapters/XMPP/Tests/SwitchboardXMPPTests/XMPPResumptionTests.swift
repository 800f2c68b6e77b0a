import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardTransport
@_spi(WireReaders) import SwitchboardXMPP
import Testing

/// Stream resumption (XEP-0198) against Prosody's `mod_smacks`: a link cut under the session,
/// messages sent to it while it is down, and the next link of the same session. The proof is
/// the server's own debug log (whether it resumed the session, how many stanzas it sent again)
/// and the archive compared with what the links handed on.
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPResumptionTests {
    static let customer = "customer@localhost"
    static let agent = "agent1@localhost"

    /// What one link handed on: its snapshots, messages, and the last cursor it gave.
    struct Handed: Sendable {
        var snapshots: [BackendSnapshot] = []
        var messages: [Message] = []
        var cursor: SyncCursor?
        var problems: [SwitchboardError] = []
    }

    /// One link of session `context`, read as the engine reads it: until `enough` says so; then,
    /// with `cut`, the relay cuts it and everything it yielded before its end is read too (the
    /// cursor the engine would store). Returns what it handed on, and how many links were cut.
    func link(
        _ backend: XMPPBackend, _ context: ConnectionContext, faults: XMPPFaults, cut: Bool, until enough: @escaping @Sendable (Handed) -> Bool
    ) async throws -> (handed: Handed, cuts: Int) {
        let handed = Locked(Handed())
        let cuts = Locked(0)
        do {
            try await backend.withConnection(context) { link in
                var cutting = false
                for try await update in link.updates {
                    handed.withLock { handed in
                        switch update {
                        case .snapshot(let snapshot): handed.snapshots.append(snapshot)
                        case .cursor(let cursor): handed.cursor = cursor
                        case .problem(let problem): handed.problems.append(problem)
                        case .event(let event):
                            if case .messageAdded(let message, _) = event.kind { handed.messages.append(message) }
                            if let cursor = event.cursor { handed.cursor = cursor }
                        default: break
                        }
                    }
                    guard !cutting, enough(handed.withLock { $0 }) else { continue }
                    guard cut else { return }
                    cutting = true
                    cuts.withLock { $0 = faults.relay.disconnectAll(label: "cut") }
                }
            }
            if cut { Issue.record("the link ended without an error") }
        } catch where cut {}
        return (handed.withLock { $0 }, cuts.withLock { $0 })
    }

    /// A server writing its debug log, the customer's backend through a fault relay, a message
    /// waiting, and the session's first link: its window, then the cut once it handed on its
    /// cursor.
    func withAFirstLinkCut(
        _ body: (ProsodyServer, XMPPFaults, XMPPBackend, ConnectionContext, _ first: Handed, _ cuts: Int) async throws -> Void
    ) async throws {
        try await Prosody.withServer(debugLog: true) { server in
            let faults = XMPPFaults()
            let backend = try XMPPLiveTests().backend(server, webSockets: faults.transport)
            let context = ConnectionContext(session: "resumed", clock: .continuous, logger: .quiet)
            try await server.send(["before the cut"], from: "agent1", to: Self.customer)
            let (first, cuts) = try await link(backend, context, faults: faults, cut: true) { $0.cursor != nil }
            try await body(server, faults, backend, context, first, cuts)
        }
    }

    /// With the server keeping the dropped stream, the next link resumes it: the server sends the
    /// five messages sent meanwhile again itself, and the link neither binds nor catches up; the
    /// resumed link is cut too, and the one after resumes again. With the server having ended
    /// the dropped session each time (its admin shell closes it, as a restart would), it refuses,
    /// and the link logs in afresh and catches up from the archive. Either way each message
    /// arrives once, in the archive's order.
    @Test(arguments: [true, false])
    func aCutLinkResumesItsStream(serverKeepsIt: Bool) async throws {
        try await withAFirstLinkCut { server, faults, backend, context, first, firstCuts in
            var context = context
            var (cuts, ended, rounds) = (firstCuts, 0, [Handed]())
            var sent: [String] = []
            for round in 1...2 {
                // Sent while no link is up: the server keeps them for the dropped stream, if it does.
                if !serverKeepsIt { ended += try await server.cutClientSessions(of: Self.customer) }
                let offline = (0..<5).map { "round \(round) while cut \($0)" }
                try await server.send(offline, from: "agent1", to: Self.customer)
                sent += offline
                // The next link of the same session, from the cursor the engine would have stored.
                context.cursor = (rounds.last ?? first).cursor
                let (handed, cut) = try await link(backend, context, faults: faults, cut: round < 2) { handed in
                    handed.messages.filter { $0.text.hasPrefix("round \(round)") }.count >= offline.count
                }
                cuts += cut
                rounds.append(handed)
            }

            let archive = try await server.archive(of: "customer", with: Self.agent)
            let log = server.debugLogText
            let resumed = log.components(separatedBy: "mod_smacks resuming existing session").count - 1
            let refused = log.components(separatedBy: "Tried to resume non-existent session").count - 1
            let resent = log.components(separatedBy: "resending all unacked stanzas that are still queued after resume, #queue = ").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }.reduce(0, +)
            let messages = rounds.flatMap(\.messages)
            let problems = ([first] + rounds).flatMap(\.problems)
            let stored = first.snapshots.flatMap { $0.conversations.flatMap(\.messages) } + messages
            let ids = stored.compactMap(\.serverID).map(\.rawValue)
            let lost = archive.filter { !ids.contains($0.archiveID) }.count
            let phantom = ids.filter { id in !archive.contains { $0.archiveID == id } }.count
            print(
                "xmpp live: cut links (the server keeps the stream: \(serverKeepsIt)) — cuts \(cuts), sessions the server ended \(ended), resumed \(resumed), refused \(refused), "
                    + "stanzas the server sent again \(resent), \(messages.count) messages on the next links (\(sent.count) sent while cut), snapshots \(rounds.map(\.snapshots.count)); "
                    + "\(archive.count) archived, \(stored.count) handed on, lost \(lost), phantom \(phantom), duplicated \(ids.count - Set(ids).count), "
                    + "in the archive's order \(ids == archive.map(\.archiveID)), problems \(problems.count)"
            )
            #expect(cuts == 2)
            // The answers the server sends again to the dropped links' requests are nobody's,
            // and quietly dropped.
            #expect(problems.isEmpty, "\(problems)")
            #expect(messages.map(\.text) == sent)
            #expect(ids == archive.map(\.archiveID))
            #expect(lost == 0 && phantom == 0)
            // Each link hands the engine one snapshot first; a resumed link's is empty (nothing
            // was missed).
            #expect(rounds.map(\.snapshots.count) == [1, 1])
            if serverKeepsIt {
                #expect(resumed == 2 && refused == 0)
                #expect(resent >= sent.count)
                #expect(rounds.allSatisfy { $0.snapshots.first?.conversations.isEmpty == true })
            } else {
                #expect(ended >= 2)
                #expect(resumed == 0 && refused == 2)
                #expect(resent == 0)
            }
        }
    }

    /// The engine's cursor is not the one the dropped link handed on last (here: none, as after
    /// a commit that failed before the first): the next link does not resume what the engine
    /// does not hold, and logs in afresh, its window bringing everything.
    @Test func aLinkGivenAnotherCursorLogsInAfresh() async throws {
        try await withAFirstLinkCut { server, faults, backend, context, _, cuts in
            try await server.send(["while cut"], from: "agent1", to: Self.customer)
            let (next, _) = try await link(backend, context, faults: faults, cut: false) { !$0.snapshots.isEmpty }
            let log = server.debugLogText
            // Each `<resume/>` the server got: resumed, or tried and refused.
            let attempts = ["mod_smacks resuming existing session", "Tried to resume"].map { log.components(separatedBy: $0).count - 1 }.reduce(0, +)
            let window = next.snapshots.first?.conversations.flatMap(\.messages).map(\.text) ?? []
            print("xmpp live: a link given another cursor — cuts \(cuts), resumptions asked \(attempts), the next link's window \(window)")
            #expect(cuts == 1)
            #expect(attempts == 0)
            #expect(window == ["before the cut", "while cut"])
        }
    }

    /// A session in a room, its link cut: the engine's next link resumes the stream, so the
    /// session never left the room. The member in the room saw no presence of the session's
    /// going or coming back (the server's own account), the session saw no member come or go,
    /// the messages written while it was cut arrive once, and a send afterwards is confirmed by
    /// the room.
    @Test func aSessionInARoomStaysInItThroughACut() async throws {
        try await Prosody.withServer(debugLog: true) { server in
            let live = XMPPLiveTests()
            let faults = XMPPFaults()
            let session = live.session(try live.backend(server, webSockets: faults.transport))
            try await withConnectedRecording(session) { recorder in
                try await XMPPTestClient.withClient(server, user: "agent1", resource: "desk", presence: true) { agent in
                    let started = try await session.startConversation(ConversationDraft(kind: .group, title: "Team", firstMessage: MessageDraft(text: "welcome")))
                    let room = started.id.rawValue
                    try await agent.joinRoom(room, nick: "agent1")
                    try await recorder.first("agent1 joins", where: XMPPRoomTests.joined(Self.agent))
                    let presencesBefore = agent.received.filter { $0.name == "presence" && $0["from"] == "\(room)/customer" }.count

                    let cuts = faults.relay.disconnectAll(label: "cut")
                    let cut = (0..<3).map { "while cut \($0)" }
                    for text in cut { _ = try await agent.sendToRoom(text, room: room) }
                    try await recorder.waitUntil("the three written while cut announced") { events in
                        events.compactMap(\.addedMessage).filter { $0.text.hasPrefix("while cut") }.count == cut.count
                    }
                    try await recorder.waitUntil("connected again") { $0.filter(\.isConnected).count >= 2 }
                    let sent = try await started.send(text: "back")
                    try await recorder.first("the send after the cut confirmed") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                    _ = try await agent.waitForStanza("the session's message") { $0.name == "message" && $0["from"] == "\(room)/customer" && $0.child("body")?.text == "back" }

                    let stored = try await started.storedMessages(before: nil, limit: 100)
                    let archive = try await server.archive(of: "customer", with: nil, room: room).filter(\.isMessage)
                    let storedIDs = stored.compactMap(\.serverID).map(\.rawValue)
                    let archived = archive.map(\.archiveID)
                    let added = recorder.events.compactMap(\.addedMessage).map(\.text)
                    let presencesAfter = agent.received.filter { $0.name == "presence" && $0["from"] == "\(room)/customer" }.count
                    let membership = recorder.events.filter { event in
                        switch event.kind {
                        case .participantsAdded, .participantsRemoved: event.conversationID == started.id
                        default: false
                        }
                    }.count
                    let resumed = server.debugLogText.components(separatedBy: "mod_smacks resuming existing session").count - 1
                    print(
                        "xmpp live: a room through a cut — cuts \(cuts), resumed \(resumed), the session's presences the member saw after joining \(presencesAfter - presencesBefore), "
                            + "membership events after agent1 joined \(membership - 1); \(archive.count) in the room's archive, \(stored.count) stored (pending \(stored.filter { $0.serverID == nil }.count)), "
                            + "lost \(Set(archived).subtracting(storedIDs).count), phantom \(Set(storedIDs).subtracting(archived).count), duplicated \(added.count - Set(added).count), "
                            + "in the archive's order \(storedIDs == archived)"
                    )
                    #expect(cuts == 1)
                    #expect(resumed == 1)
                    #expect(presencesAfter == presencesBefore, "the session never left the room")
                    #expect(membership == 1, "only agent1's join")
                    #expect(stored.map(\.text) == ["welcome"] + cut + ["back"])
                    #expect(storedIDs == archived)
                    #expect(added.count == Set(added).count)
                }
            }
        }
    }
}
