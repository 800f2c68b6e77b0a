import Foundation
import Switchboard
@_spi(WireReaders) import SwitchboardMatrix
import Testing

/// The adapter's reading of answers recorded from a real Synapse 1.163.2
/// (`Tests/Fixtures/matrix`, made by `scripts/matrix-record-fixtures.py`): runs in every
/// `swift test`, with or without a homeserver.
@Suite struct MatrixCodecTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/Fixtures/matrix")

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(name))
    }

    /// The recording's user (alice) and room.
    static func recording() throws -> (me: String, room: ConversationID) {
        let login = try JSONValue(parsing: try data("login.json"))
        let sync = try JSONValue(parsing: try data("sync-initial.json"))
        let room = try #require(sync["rooms"]?["join"]?.objectValue?.keys.first)
        return (try #require(login["user_id"]?.stringValue), ConversationID(room))
    }

    static func updates(_ batch: MatrixSyncReader.Batch) -> [BackendUpdate] {
        batch.items.compactMap { item in
            if case .update(let update) = item { return update }
            return nil
        }
    }

    static func kinds(_ batch: MatrixSyncReader.Batch) -> [BackendEvent.Kind] {
        updates(batch).compactMap { update in
            if case .event(let event) = update { return event.kind }
            return nil
        }
    }

    @Test func theFirstSyncIsACompleteSnapshotOfTheJoinedRooms() throws {
        let (me, room) = try Self.recording()
        var reader = MatrixSyncReader(me: me, homeserver: "http://127.0.0.1:8008")
        let batch = try reader.read(try Self.data("sync-initial.json"), first: true)
        guard case .update(.snapshot(let snapshot))? = batch.items.first else {
            Issue.record("the first item is not a snapshot: \(batch.items.first.map { "\($0)" } ?? "none")")
            return
        }
        #expect(snapshot.isComplete)
        let conversation = try #require(snapshot.conversations.first)
        #expect(conversation.conversation.id == room)
        #expect(conversation.conversation.title == "Support")
        #expect(conversation.conversation.customData?["topic"]?.stringValue == "Orders")
        #expect(conversation.conversation.participants.count == 2)
        let agent = try #require(conversation.conversation.participants.first { $0.id.rawValue != me })
        #expect(agent.permissions.isOwner, "the room's creator has power level 100")
        #expect(conversation.conversation.participants.first { $0.id.rawValue == me }?.permissions.canManageParticipants == false)
        // The recorded timeline is limited (10 events, most of them state): its one message is
        // the window the engine fills below.
        #expect(conversation.messages.map(\.text) == ["Hello, how can I help?"])
        #expect(batch.items.last == .update(.cursor(.token(batch.nextBatch))))
        #expect(reader.windows[room] != nil)
    }

    @Test func anIncrementalSyncBecomesEventsInWireOrder() throws {
        let (me, room) = try Self.recording()
        var reader = MatrixSyncReader(me: me, homeserver: "http://127.0.0.1:8008")
        _ = try reader.read(try Self.data("sync-initial.json"), first: true)
        let batch = try reader.read(try Self.data("sync-incremental.json"), first: false)
        let kinds = Self.kinds(batch)
        let added = kinds.compactMap { kind -> Message? in
            if case .messageAdded(let message, _) = kind { return message }
            return nil
        }
        // The customer's own message carries its transaction id back: the echo reconciles it.
        #expect(added.map(\.text) == ["Where is my order?", "An agent answers now"])
        #expect(added[0].clientID == "txn-42")
        #expect(added[0].sender?.rawValue == me)
        // A notice is a bot's; its edit in the same sync is applied to it.
        #expect(added[1].senderRole == .bot)
        #expect(added[1].isEdited)
        // The redacted message is not shown; its redaction removes it where it was stored.
        #expect(kinds.contains { if case .messageRemoved = $0 { return true } else { return false } })
        #expect(kinds.contains { if case .conversationUpdated(let info) = $0 { return info.customData?["topic"]?.stringValue == "Order 1234" } else { return false } })
        #expect(kinds.contains { if case .typing(let who, true, _) = $0 { return who.rawValue != me } else { return false } })
        #expect(kinds.contains { if case .readMarker(_, .message(let id)) = $0 { return id == added[1].serverID } else { return false } })
        #expect(Self.updates(batch).last == .cursor(.token(batch.nextBatch)))
        _ = room
    }

    @Test func aLimitedTimelineIsASnapshotOfItsWindow() throws {
        let (me, room) = try Self.recording()
        var reader = MatrixSyncReader(me: me, homeserver: "http://127.0.0.1:8008")
        _ = try reader.read(try Self.data("sync-initial.json"), first: true)
        _ = try reader.read(try Self.data("sync-incremental.json"), first: false)
        let batch = try reader.read(try Self.data("sync-limited.json"), first: false, since: "s-before")
        let snapshots = Self.updates(batch).compactMap { update -> BackendSnapshot? in
            if case .snapshot(let snapshot) = update { return snapshot }
            return nil
        }
        let snapshot = try #require(snapshots.first)
        #expect(!snapshot.isComplete, "one room's window, not the account's list")
        #expect(snapshot.conversations.first?.messages.map(\.text) == (15..<25).map { "burst \($0)" })
        #expect(snapshot.conversations.first?.messagesAreComplete == false)
        #expect(snapshot.conversations.first?.skippedAfter == .token("s-before"), "the gap starts at the sync's since")
        let sync = try JSONValue(parsing: try Self.data("sync-limited.json"))
        #expect(reader.windows[room]?.last?.prevBatch == sync["rooms"]?["join"]?[room.rawValue]?["timeline"]?["prev_batch"]?.stringValue)
        #expect(reader.windows[room]?.last?.oldest == snapshot.conversations.first?.messages.first?.time)
    }

    @Test func aMessagesPageMapsOldestFirst() throws {
        let (me, room) = try Self.recording()
        let page = try JSONValue(parsing: try Self.data("messages-page.json"))
        let messages = (page["chunk"]?.arrayValue ?? []).compactMap { MatrixMapping.message($0, room: room, me: me, homeserver: "http://h") }.reversed()
        #expect(messages.map(\.text) == (5..<15).map { "burst \($0)" })
        #expect(messages.allSatisfy { $0.serverID != nil && $0.clientID == nil })
    }

    @Test func errorsAreClassifiedWithTheVendorCodeKept() throws {
        let forbidden = MatrixMapping.error(status: 403, body: try Self.data("forbidden.json"), request: "send")
        #expect(forbidden.code == .permissionDenied && forbidden.vendorCode == "M_FORBIDDEN")
        let login = MatrixMapping.error(status: 403, body: try Self.data("login-forbidden.json"), request: "login")
        #expect(login.code == .authenticationFailed)
        let token = MatrixMapping.error(status: 401, body: try Self.data("unknown-token.json"), request: "sync")
        #expect(token.code == .authenticationFailed && token.vendorCode == "M_UNKNOWN_TOKEN")
        let limited = MatrixMapping.error(status: 429, body: Data(#"{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":2500}"#.utf8), request: "send")
        #expect(limited.code == .rateLimited && limited.retryAfter == .milliseconds(2500))
        #expect(MatrixMapping.error(status: 502, body: Data("<html>bad gateway</html>".utf8), request: "sync").code == .serverError)
        #expect(MatrixMapping.error(status: 413, body: Data(#"{"errcode":"M_TOO_LARGE"}"#.utf8), request: "send").code == .payloadTooLarge)
        #expect(MatrixMapping.error(status: 403, body: Data(#"{"errcode":"M_USER_DEACTIVATED"}"#.utf8), request: "sync").code == .fatal)
    }

    @Test(arguments: [
        "", "<html>", "[]", "{}", #"{"next_batch": 5}"#, #"{"next_batch":"s1","rooms":{"join":{"!r:h":[]}}}"#,
        #"{"next_batch":"s1","rooms":{"join":{"!r:h":{"timeline":{"events":[{"type":5},{"content":[]},null]}}}}}"#,
        #"{"next_batch":"s1","rooms":{"join":{"!r:h":{"ephemeral":{"events":[{"type":"m.typing","content":{"user_ids":"x"}},{"type":"m.receipt","content":[]}]}}}}}"#,
    ])
    func badInputIsRefusedOrReadWithoutCrashing(_ text: String) throws {
        var reader = MatrixSyncReader(me: "@me:h", homeserver: "http://h")
        do {
            let batch = try reader.read(Data(text.utf8), first: false)
            #expect(batch.nextBatch == "s1")
        } catch {
            #expect(error.code == .protocolViolation)
        }
    }

    @Test func aMediaAddressBecomesTheAuthenticatedDownloadURL() {
        #expect(
            MatrixMapping.downloadURL(mxc: "mxc://example.org/abc123", homeserver: "https://matrix.example.org/")?.absoluteString
                == "https://matrix.example.org/_matrix/client/v1/media/download/example.org/abc123"
        )
        #expect(MatrixMapping.downloadURL(mxc: "https://not-mxc", homeserver: "https://h") == nil)
    }

    @Test func theConfigurationIsCheckedBeforeAnythingIsSent() {
        #expect(throws: SwitchboardError.self) { try MatrixBackend(configuration: .init(homeserver: "matrix.org", login: .accessToken("t"))) }
        #expect(throws: SwitchboardError.self) { try MatrixBackend(configuration: .init(homeserver: "https://h", login: .password(user: "", password: "p"))) }
        #expect(throws: Never.self) { try MatrixBackend(configuration: .init(homeserver: "https://h", login: .accessToken("t"))) }
    }
}
