import Foundation
public import Switchboard

/// One check of the `ChatStore` contract: what the engine relies on from a store. A store's
/// tests run every case of ``StoreContract/cases`` with a function that makes a new, empty store.
///
/// ```swift
/// @Test(arguments: StoreContract.cases)
/// func contract(_ contractCase: StoreContractCase) async throws {
///     try await contractCase.run { try MyStore.makeEmpty() }
/// }
/// ```
public struct StoreContractCase: Sendable, CustomStringConvertible {
    public let name: String
    let body: @Sendable (StoreContract.Fixture) async throws -> Void

    init(_ name: String, _ body: @escaping @Sendable (StoreContract.Fixture) async throws -> Void) {
        self.name = name
        self.body = body
    }

    /// Runs the case on stores from `makeStore` (some cases use several); throws
    /// ``ConformanceFailure`` naming what does not hold.
    public func run(_ makeStore: @escaping @Sendable () async throws -> any ChatStore) async throws {
        try await body(StoreContract.Fixture(makeStore: makeStore))
    }

    public var description: String { name }
}

/// The `ChatStore` contract, for every store: the in-memory store, SQLite, PostgreSQL, and a
/// store an app writes itself.
public enum StoreContract {
    public static let cases: [StoreContractCase] = [
        conversationsKeepTheirOrderAndScope, aConfirmedMessageReplacesItsPendingCopy, pagesFollowTheMessageOrder,
        theFirstCallOnAScopeMayBeAnyCall, markersSequencesCursorOutboxAndCredentials, aBatchIsAppliedInOrderAsOne,
        theOldestConfirmedMessageAndThePendingOnesAreReadAlone, reconciliationCandidatesInOneRead, usersOfOneAccountAreApartAndForgottenWhole,
    ]

    /// What the cases share: two scopes, a conversation, a time base and a message maker.
    struct Fixture: Sendable {
        let makeStore: @Sendable () async throws -> any ChatStore
        let scope = StoreScope(backend: "test", account: "alice")
        let other = StoreScope(backend: "test", account: "bob")
        let conversation = ConversationID("c1")
        let base = Date(timeIntervalSinceReferenceDate: 800_000_000)

        func message(server: String?, client: String?, sequence: Int64? = nil, second: Double, text: String) -> Message {
            Message(
                serverID: server.map(MessageID.init), clientID: client.map(ClientMessageID.init), conversationID: conversation, sequence: sequence,
                text: text, time: base.addingTimeInterval(second)
            )
        }

        func entry(_ clientID: String, text: String) -> OutboxEntry {
            OutboxEntry(message: OutgoingMessage(clientID: ClientMessageID(clientID), conversationID: conversation, content: MessageDraft(text: text)), createdAt: base)
        }
    }

    static let conversationsKeepTheirOrderAndScope = StoreContractCase("conversations keep their order and scope") { f in
        let store = try await f.makeStore()
        for id in ["b", "a", "c"] { try await store.saveConversation(ConversationInfo(id: ConversationID(id), kind: .supportChat), scope: f.scope) }
        try await store.saveConversation(ConversationInfo(id: "b", kind: .supportChat, title: "renamed"), scope: f.scope)
        try await store.saveConversation(ConversationInfo(id: "z", kind: .direct), scope: f.other)
        try requireEqual(try await store.fetchConversations(scope: f.scope).map(\.id.rawValue), ["b", "a", "c"], "first-saved order survives an update")
        try requireEqual(try await store.fetchConversation("b", scope: f.scope)?.title, "renamed", "the update is stored")
        try require(try await store.fetchConversation("z", scope: f.scope) == nil, "scopes do not see each other")
        try await store.saveMessages([f.message(server: "m1", client: nil, second: 1, text: "x")], scope: f.scope)
        try await store.saveReadMarker(.sequence(3), of: "bob", in: f.conversation, scope: f.scope)
        try await store.saveSequence(3, for: f.conversation, scope: f.scope)
        try await store.removeConversation(f.conversation, scope: f.scope)
        try requireEqual(try await store.countMessages(in: f.conversation, scope: f.scope), 0, "removing a conversation removes its messages")
        try require(try await store.fetchReadMarkers(in: f.conversation, scope: f.scope).isEmpty, "removing a conversation removes its read markers")
        try require(try await store.fetchSequences(scope: f.scope)[f.conversation] == nil, "removing a conversation removes its sequence")
    }

    static let aConfirmedMessageReplacesItsPendingCopy = StoreContractCase("a confirmed message replaces its pending copy") { f in
        let store = try await f.makeStore()
        try await store.saveMessages([f.message(server: nil, client: "k1", second: 5, text: "hello")], scope: f.scope)
        try require(try await store.fetchMessage(clientID: "k1", scope: f.scope)?.serverID == nil, "a pending message has no server id")
        try await store.saveMessages([f.message(server: "s1", client: "k1", sequence: 7, second: 5, text: "hello")], scope: f.scope)
        try requireEqual(try await store.countMessages(in: f.conversation, scope: f.scope), 1, "one row, not two")
        try requireEqual(try await store.fetchMessage(serverID: "s1", in: f.conversation, scope: f.scope)?.sequence, 7, "found by server id")
        try requireEqual(try await store.fetchMessage(clientID: "k1", scope: f.scope)?.serverID, MessageID("s1"), "found by client id")
        // A server copy that arrived first, then the pending copy's confirmation: still one row.
        try await store.saveMessages(
            [f.message(server: "s2", client: nil, second: 6, text: "echo"), f.message(server: nil, client: "k2", second: 6, text: "echo")],
            scope: f.scope
        )
        try await store.saveMessages([f.message(server: "s2", client: "k2", second: 6, text: "echo")], scope: f.scope)
        try requireEqual(try await store.countMessages(in: f.conversation, scope: f.scope), 2, "the pending copy gives way to the confirmed one")
        try await store.removeMessage(serverID: "s1", in: f.conversation, scope: f.scope)
        try require(try await store.fetchMessage(clientID: "k1", scope: f.scope) == nil, "a removed message is gone by its client id too")
        try await store.removeAllMessages(in: f.conversation, scope: f.scope)
        try requireEqual(try await store.countMessages(in: f.conversation, scope: f.scope), 0, "remove all")
    }

    static let pagesFollowTheMessageOrder = StoreContractCase("pages follow the message order") { f in
        let store = try await f.makeStore()
        var messages: [Message] = []
        for index in 1...30 { messages.append(f.message(server: "s\(index)", client: nil, sequence: Int64(index), second: Double(100 - index), text: "\(index)")) }
        messages.append(f.message(server: nil, client: "pending-1", second: 0, text: "p1"))
        messages.append(f.message(server: "late", client: nil, second: 50, text: "no sequence"))
        // A fixed shuffle: the store must not rely on the order of saving.
        var generator = SeededRandomNumberGenerator(seed: 7)
        try await store.saveMessages(messages.shuffled(using: &generator), scope: f.scope)
        let all = try await store.fetchMessages(in: f.conversation, before: nil, limit: .max, scope: f.scope)
        try requireEqual(all.map(\.orderKey), all.map(\.orderKey).sorted(), "oldest first by MessageOrderKey")
        try requireEqual(all.count, 32, "every message")
        try requireEqual(all.last?.text, "p1", "pending messages come last")
        var pages: [[String]] = []
        var before: MessageOrderKey?
        while true {
            let page = try await store.fetchMessages(in: f.conversation, before: before, limit: 7, scope: f.scope)
            guard let first = page.first else { break }
            pages.insert(page.map(\.text), at: 0)
            before = first.orderKey
        }
        try requireEqual(pages.flatMap { $0 }, all.map(\.text), "pages of 7 before a key tile the whole history")
        try requireEqual(pages.count, 5, "32 messages are 5 pages of 7")
        try require(try await store.fetchMessages(in: f.conversation, before: nil, limit: 0, scope: f.scope).isEmpty, "a limit of 0 reads nothing")
    }

    static let theFirstCallOnAScopeMayBeAnyCall = StoreContractCase("the first call on a scope may be any call") { f in
        let entry = f.entry("k1", text: "hi")
        let store = try await f.makeStore()
        try await store.saveOutboxEntry(entry, scope: f.scope)
        try requireEqual(try await store.fetchOutbox(scope: f.scope), [entry], "an outbox entry on a scope nothing else has touched")
        try await f.makeStore().saveMessages([f.message(server: "s1", client: nil, second: 1, text: "x")], scope: f.other)
        try await f.makeStore().saveCursor(.revision("1"), scope: f.other)
        try requireEqual(try await f.makeStore().fetchOutbox(scope: f.other), [], "a read on a new store")
    }

    static let markersSequencesCursorOutboxAndCredentials = StoreContractCase("markers, sequences, cursor, outbox and credentials") { f in
        let store = try await f.makeStore()
        try await store.saveReadMarker(.sequence(4), of: "bob", in: f.conversation, scope: f.scope)
        try await store.saveReadMarker(.message("s9"), of: "bob", in: f.conversation, scope: f.scope)
        try await store.saveReadMarker(.time(f.base), of: "carol", in: f.conversation, scope: f.scope)
        try requireEqual(try await store.fetchReadMarkers(in: f.conversation, scope: f.scope), ["bob": .message("s9"), "carol": .time(f.base)], "a marker per participant, the latest")
        try await store.saveSequence(10, for: f.conversation, scope: f.scope)
        try await store.saveSequence(12, for: f.conversation, scope: f.scope)
        try requireEqual(try await store.fetchSequences(scope: f.scope), [f.conversation: 12], "the latest sequence")
        try await store.saveCursor(.revision("r7"), scope: f.scope)
        try requireEqual(try await store.fetchCursor(scope: f.scope), .revision("r7"), "the cursor")
        try await store.saveCursor(nil, scope: f.scope)
        try requireEqual(try await store.fetchCursor(scope: f.scope), nil, "a cursor saved as nil is gone")
        let entries = (1...3).map { f.entry("k\($0)", text: "\($0)") }
        for entry in entries { try await store.saveOutboxEntry(entry, scope: f.scope) }
        var retried = entries[0]
        retried.attempts = 2
        try await store.saveOutboxEntry(retried, scope: f.scope)
        try await store.removeOutboxEntry("k2", scope: f.scope)
        try requireEqual(try await store.fetchOutbox(scope: f.scope), [retried, entries[2]], "FIFO, updated in place")
        try require(try await store.fetchCredentials(scope: f.scope).isEmpty, "no credentials before they are saved")
        try await store.saveCredentials(Credentials(["token": "t"]), scope: f.scope)
        try requireEqual(try await store.fetchCredentials(scope: f.scope)["token"], "t", "the credentials")
        try require(try await store.fetchCredentials(scope: f.other).isEmpty, "another account's credentials are its own")
    }

    static let aBatchIsAppliedInOrderAsOne = StoreContractCase("a batch is applied in order, as one") { f in
        let store = try await f.makeStore()
        var pending = f.message(server: nil, client: "k1", second: 5, text: "hello")
        pending.deliveryState = .pending
        let entry = f.entry("k1", text: "hello")
        try await store.apply([.saveConversation(ConversationInfo(id: f.conversation)), .saveMessages([pending]), .saveOutboxEntry(entry)], scope: f.scope)
        try requireEqual(try await store.fetchOutbox(scope: f.scope), [entry], "the send's outbox entry")
        try requireEqual(try await store.fetchPendingMessages(scope: f.scope).map(\.clientID), ["k1"], "the send's message")
        // The send's outcome: the confirmed message and the end of the entry, together.
        var confirmed = pending
        confirmed.serverID = "s1"
        confirmed.sequence = 1
        confirmed.deliveryState = .sent
        try await store.apply(
            [.saveMessages([confirmed]), .removeOutboxEntry("k1"), .saveSequence(1, for: f.conversation), .saveCursor(.revision("r1"))],
            scope: f.scope
        )
        try require(try await store.fetchOutbox(scope: f.scope).isEmpty, "the entry is gone")
        try require(try await store.fetchPendingMessages(scope: f.scope).isEmpty, "nothing pending")
        try requireEqual(try await store.countMessages(in: f.conversation, scope: f.scope), 1, "one message")
        try requireEqual(try await store.fetchSequences(scope: f.scope), [f.conversation: 1], "the sequence")
        try requireEqual(try await store.fetchCursor(scope: f.scope), .revision("r1"), "the cursor")
        // In order: a save then a removal of the same message leaves nothing.
        try await store.apply(
            [.saveMessages([f.message(server: "s2", client: nil, sequence: 2, second: 6, text: "x")]), .removeMessage("s2", in: f.conversation)],
            scope: f.scope
        )
        try require(try await store.fetchMessage(serverID: "s2", in: f.conversation, scope: f.scope) == nil, "a save then a removal leaves nothing")
    }

    static let theOldestConfirmedMessageAndThePendingOnesAreReadAlone = StoreContractCase("the oldest confirmed message and the pending ones are read alone") { f in
        let store = try await f.makeStore()
        var failed = f.message(server: nil, client: "k2", second: 1, text: "failed")
        failed.deliveryState = .failed("no")
        var waiting = f.message(server: nil, client: "k1", second: 0, text: "waiting")
        waiting.deliveryState = .pending
        try await store.saveMessages(
            [f.message(server: "s3", client: nil, sequence: 3, second: 30, text: "c"), f.message(server: "s2", client: nil, sequence: 2, second: 20, text: "b"), waiting, failed],
            scope: f.scope
        )
        try requireEqual(try await store.fetchOldestConfirmedMessage(in: f.conversation, scope: f.scope)?.serverID, MessageID("s2"), "the oldest confirmed")
        try require(try await store.fetchOldestConfirmedMessage(in: "empty", scope: f.scope) == nil, "none in an empty conversation")
        let waitingOnes = try await store.fetchPendingMessages(scope: f.scope)
        try requireEqual(waitingOnes.map(\.text), ["waiting"], "failed messages are not waiting")
        try require(try await store.fetchPendingMessages(scope: f.other).isEmpty, "another account has none")
    }

    /// The lookup incoming messages are reconciled with: by server id in the conversation, by
    /// client id in the whole scope, any number of keys at once, another account seeing nothing.
    static let reconciliationCandidatesInOneRead = StoreContractCase("reconciliation candidates in one read") { f in
        let store = try await f.makeStore()
        try await store.saveMessages(
            [f.message(server: "s1", client: nil, second: 1, text: "agent"), f.message(server: nil, client: "c1", second: 2, text: "mine, pending")]
                + (2...700).map { f.message(server: "s\($0)", client: nil, second: Double($0 + 2), text: "agent \($0)") },
            scope: f.scope
        )
        let both = try await store.fetchMessages(serverIDs: ["s1"], clientIDs: ["c1"], in: f.conversation, scope: f.scope)
        try requireEqual(Set(both.map(\.text)), ["agent", "mine, pending"], "by server id and by client id")
        try require(try await store.fetchMessages(serverIDs: ["s9999"], clientIDs: [], in: f.conversation, scope: f.scope).isEmpty, "an unknown id")
        try require(try await store.fetchMessages(serverIDs: ["s1"], clientIDs: ["c1"], in: f.conversation, scope: f.other).isEmpty, "another account")
        try require(try await store.fetchMessages(serverIDs: ["s1"], clientIDs: [], in: "c2", scope: f.scope).isEmpty, "by server id, in its conversation")
        // More keys than one SQLite statement takes (it reads in chunks of 500).
        let many = try await store.fetchMessages(serverIDs: (1...700).map { MessageID("s\($0)") }, clientIDs: [], in: f.conversation, scope: f.scope)
        try requireEqual(many.count, 700, "700 keys at once")
    }

    static let usersOfOneAccountAreApartAndForgottenWhole = StoreContractCase("users of one account are apart, and forgetting one removes all of it") { f in
        let store = try await f.makeStore()
        let alice = StoreScope(backend: "test", account: "default", user: "alice")
        let users = [alice, StoreScope(backend: "test", account: "default", user: "bob"), StoreScope(backend: "test", account: "default")]
        for scope in users {
            let name = scope.user ?? "anonymous"
            try await store.apply(
                [
                    .saveConversation(ConversationInfo(id: f.conversation, kind: .supportChat, title: name)),
                    .saveMessages([
                        f.message(server: "s-\(name)", client: nil, sequence: 1, second: 1, text: "to \(name)"),
                        f.message(server: nil, client: "k-\(name)", second: 2, text: "from \(name)"),
                    ]),
                    .saveReadMarker(.sequence(1), of: ParticipantID(name), in: f.conversation),
                    .saveSequence(1, for: f.conversation),
                    .saveCursor(.token(name)),
                    .saveOutboxEntry(f.entry("k-\(name)", text: "from \(name)")),
                    .saveCredentials(Credentials(["token": name])),
                ],
                scope: scope
            )
        }
        for scope in users {
            let name = scope.user ?? "anonymous"
            try requireEqual(try await store.fetchConversations(scope: scope).map(\.title), [name], "\(name) sees only their conversation")
            try requireEqual(
                try await store.fetchMessages(in: f.conversation, before: nil, limit: 10, scope: scope).map(\.text), ["to \(name)", "from \(name)"],
                "\(name) sees only their messages"
            )
            try requireEqual(try await store.fetchOutbox(scope: scope).map(\.clientID.rawValue), ["k-\(name)"], "\(name) sees only their outbox")
            try requireEqual(try await store.fetchCredentials(scope: scope)["token"], name, "\(name) sees only their credentials")
            try requireEqual(try await store.fetchCursor(scope: scope), .token(name), "\(name) sees only their cursor")
            try requireEqual(try await store.fetchMessage(clientID: ClientMessageID("k-\(name)"), scope: scope)?.text, "from \(name)", "\(name) finds their own send")
        }
        try require(try await store.fetchMessage(clientID: "k-bob", scope: alice) == nil, "alice does not find bob's send")

        try await store.apply([.removeEverything], scope: alice)
        try require(try await store.fetchConversations(scope: alice).isEmpty, "a forgotten user has no conversation")
        try requireEqual(try await store.countMessages(in: f.conversation, scope: alice), 0, "a forgotten user has no message")
        try require(try await store.fetchPendingMessages(scope: alice).isEmpty, "a forgotten user has no pending message")
        try require(try await store.fetchReadMarkers(in: f.conversation, scope: alice).isEmpty, "a forgotten user has no read marker")
        try require(try await store.fetchSequences(scope: alice).isEmpty, "a forgotten user has no sequence")
        try require(try await store.fetchCursor(scope: alice) == nil, "a forgotten user has no cursor")
        try require(try await store.fetchOutbox(scope: alice).isEmpty, "a forgotten user has no outbox")
        try requireEqual(try await store.fetchCredentials(scope: alice), Credentials(), "a forgotten user has no credentials")
        for scope in users.dropFirst() {
            let name = scope.user ?? "anonymous"
            try requireEqual(try await store.countMessages(in: f.conversation, scope: scope), 2, "\(name) keeps their messages")
            try requireEqual(try await store.fetchOutbox(scope: scope).count, 1, "\(name) keeps their outbox")
            try requireEqual(try await store.fetchCredentials(scope: scope)["token"], name, "\(name) keeps their credentials")
        }
    }
}

/// Throws ``ConformanceFailure`` naming both values unless they are equal.
public func requireEqual<T: Equatable>(
    _ actual: T,
    _ expected: T,
    _ what: @autoclosure () -> String,
    file: String = #fileID,
    line: Int = #line
) throws {
    if actual != expected { throw ConformanceFailure("\(what()): got \(actual), expected \(expected) (\(file):\(line))") }
}
