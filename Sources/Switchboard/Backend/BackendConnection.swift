public import Foundation

/// One live link to a backend, valid inside ``ChatBackend/withConnection(_:_:)``.
///
/// Each request the engine makes is a method with a typed answer. A link implements the ones its
/// backend can carry out; every other one answers ``SwitchboardError/Code/unsupported`` by itself
/// (the defaults in the extension below), so a request added to the seam later is not a change
/// every adapter has to make, and no adapter lists what it does not do. The engine never calls a
/// method whose capability (``BackendRequest/requiredCapability``) the descriptor does not list.
///
/// Every method throws a classified ``SwitchboardError`` (or `CancellationError`); the engine
/// decides from the classification whether to retry.
public protocol BackendConnection: Sendable {
    /// Inbound updates in wire order. Finishes (or throws a classified error) when the link is
    /// gone. Single consumer: the engine. Made with ``BackendUpdates/makeStream()``, the answer
    /// of a request reaches the session after every update the link yielded before the request
    /// returned.
    var updates: BackendUpdates { get }

    /// Sends a message, carrying its ``OutgoingMessage/clientID`` so a resend is recognized.
    ///
    /// - Returns: the message as the server accepted it, or `nil` when the server only says it
    ///   has it (the message then comes through ``updates``, and the stored copy counts as sent).
    func send(_ message: OutgoingMessage) async throws -> Message?

    /// Changes a message's text (and payload, when one is given).
    ///
    /// - Returns: the message as the server now has it, or `nil` when its update comes through
    ///   ``updates``.
    func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message?

    /// Deletes a message.
    func delete(_ message: MessageID, in conversation: ConversationID) async throws

    /// The user's typing. `isTyping: false` with a draft is an automatic stop after silence (the
    /// draft stays); without one the user stopped.
    func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws

    /// Moves the user's read marker.
    func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws

    /// Starts a conversation.
    ///
    /// - Returns: the conversation, with the messages it began with where the first message makes
    ///   it (a Webim appeal); the engine stores both before the caller hears back.
    func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot

    /// Closes (leaves) a conversation.
    func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation

    /// Archives a conversation.
    func archiveConversation(_ conversation: ConversationID) async throws -> ClosedConversation

    /// Changes a conversation's title, public-join flag or custom data.
    ///
    /// - Returns: the conversation as the server now has it, or `nil` when the server does not
    ///   answer with it: the engine then applies the changes to the conversation it stores.
    func updateConversation(_ conversation: ConversationID, _ changes: ConversationChanges) async throws -> ConversationInfo?

    /// Rates an agent of a conversation.
    func rateAgent(in conversation: ConversationID, agent: ParticipantID?, rating: Int, comment: String?) async throws

    /// Sets custom fields of a conversation, or of the customer when `conversation` is `nil`.
    func setCustomFields(_ fields: [String: String], of conversation: ConversationID?) async throws

    /// Adds participants.
    ///
    /// - Returns: the conversation as the server now has it, or `nil` when its change comes
    ///   through ``updates``.
    func addParticipants(_ participants: [Participant], to conversation: ConversationID) async throws -> ConversationInfo?

    /// Changes participants' roles or permissions. Returns as ``addParticipants(_:to:)`` does.
    func updateParticipants(_ participants: [Participant], in conversation: ConversationID) async throws -> ConversationInfo?

    /// Removes participants. Returns as ``addParticipants(_:to:)`` does.
    func removeParticipants(_ participants: [ParticipantID], from conversation: ConversationID) async throws -> ConversationInfo?

    /// One page of older messages.
    func history(_ query: HistoryQuery) async throws -> HistoryPage

    /// Events of a conversation by sequence, inclusive (``SyncModel/sequenced(batchLimit:)``);
    /// never more than the batch limit.
    func retransmit(_ range: ClosedRange<Int64>, in conversation: ConversationID) async throws -> Retransmission

    /// Fetches what changed on a backend that pushes nothing (``SyncModel/polled``):
    /// everything again when `forced`, else what changed since the cursor the backend keeps in
    /// its credentials. The engine applies what it answers as it applies a link's updates, in
    /// one store transaction, before the caller hears back.
    func poll(forced: Bool) async throws -> [BackendUpdate]
}

/// What closing or archiving a conversation did, as the server answered.
public enum ClosedConversation: Sendable, Hashable {
    /// The server says only that it did it; the change comes through the link's updates.
    case done
    /// The conversation as the server now has it.
    case conversation(ConversationInfo)
    /// The conversation's new state (archived, closed): the engine stores it before the caller
    /// hears back. (A change the link yields as an update instead may reach the engine after the
    /// answer: the reader and the request are tasks of their own.)
    case state(ConversationInfo.State)
    /// The server deleted the conversation (a Webim offline appeal can only be deleted): the
    /// engine removes it from the store before the caller hears back.
    case removed
}

/// Retransmitted events, in sequence order.
public struct Retransmission: Sendable, Hashable {
    public var events: [BackendEvent]
    /// `true` when the server returned every event of the requested range the client may see, so
    /// a sequence missing from them does not exist (hidden or never logged) and the engine steps
    /// over it. Only a complete reply proves absence: with `false`, a sequence missing from them
    /// is asked for again after the hold timeout.
    public var isComplete: Bool

    public init(_ events: [BackendEvent], isComplete: Bool) {
        self.events = events
        self.isComplete = isComplete
    }
}

// What a link does not implement answers "unsupported".
extension BackendConnection {
    /// The error a request this link does not carry out answers with.
    public func unsupported(_ request: String) -> SwitchboardError {
        SwitchboardError(.unsupported, "\(request) is not supported by this backend's link")
    }

    public func send(_ message: OutgoingMessage) async throws -> Message? { throw unsupported("send") }
    public func edit(_ message: MessageID, in conversation: ConversationID, text: String, payload: JSONValue?) async throws -> Message? {
        throw unsupported("edit")
    }
    public func delete(_ message: MessageID, in conversation: ConversationID) async throws { throw unsupported("delete") }
    public func typing(in conversation: ConversationID, isTyping: Bool, draft: String?) async throws { throw unsupported("typing") }
    public func markRead(_ conversation: ConversationID, upTo marker: ChatEvent.ReadMarker) async throws { throw unsupported("markRead") }
    public func startConversation(_ draft: ConversationDraft) async throws -> ConversationSnapshot { throw unsupported("startConversation") }
    public func closeConversation(_ conversation: ConversationID) async throws -> ClosedConversation { throw unsupported("closeConversation") }
    public func archiveConversation(_ conversation: ConversationID) async throws -> ClosedConversation { throw unsupported("archiveConversation") }
    public func updateConversation(_ conversation: ConversationID, _ changes: ConversationChanges) async throws -> ConversationInfo? {
        throw unsupported("updateConversation")
    }
    public func rateAgent(in conversation: ConversationID, agent: ParticipantID?, rating: Int, comment: String?) async throws {
        throw unsupported("rateAgent")
    }
    public func setCustomFields(_ fields: [String: String], of conversation: ConversationID?) async throws { throw unsupported("setCustomFields") }
    public func addParticipants(_ participants: [Participant], to conversation: ConversationID) async throws -> ConversationInfo? {
        throw unsupported("addParticipants")
    }
    public func updateParticipants(_ participants: [Participant], in conversation: ConversationID) async throws -> ConversationInfo? {
        throw unsupported("updateParticipants")
    }
    public func removeParticipants(_ participants: [ParticipantID], from conversation: ConversationID) async throws -> ConversationInfo? {
        throw unsupported("removeParticipants")
    }
    public func history(_ query: HistoryQuery) async throws -> HistoryPage { throw unsupported("history") }
    public func retransmit(_ range: ClosedRange<Int64>, in conversation: ConversationID) async throws -> Retransmission {
        throw unsupported("retransmit")
    }
    public func poll(forced: Bool) async throws -> [BackendUpdate] { throw unsupported("poll") }
}

extension BackendConnection {
    /// Carries out one request, described as a value, through the typed method that does it, and
    /// answers with the typed result in one value: what the engine uses, and what a scripted
    /// backend's test or a tool can call.
    public func perform(_ request: BackendRequest) async throws -> BackendResponse {
        switch request {
        case .send(let message):
            return try await send(message).map(BackendResponse.message) ?? .done
        case .edit(let conversation, let message, let text, let payload):
            return try await edit(message, in: conversation, text: text, payload: payload).map(BackendResponse.message) ?? .done
        case .delete(let conversation, let message):
            try await delete(message, in: conversation)
            return .done
        case .typing(let conversation, let isTyping, let draft):
            try await typing(in: conversation, isTyping: isTyping, draft: draft)
            return .done
        case .markRead(let conversation, let marker):
            try await markRead(conversation, upTo: marker)
            return .done
        case .startConversation(let draft):
            return .startedConversation(try await startConversation(draft))
        case .closeConversation(let conversation):
            return Self.response(to: try await closeConversation(conversation), of: conversation)
        case .archiveConversation(let conversation):
            return Self.response(to: try await archiveConversation(conversation), of: conversation)
        case .updateConversation(let conversation, let changes):
            return try await updateConversation(conversation, changes).map(BackendResponse.conversation) ?? .done
        case .rateAgent(let conversation, let agent, let rating, let comment):
            try await rateAgent(in: conversation, agent: agent, rating: rating, comment: comment)
            return .done
        case .setCustomFields(let conversation, let fields):
            try await setCustomFields(fields, of: conversation)
            return .done
        case .addParticipants(let conversation, let participants):
            return try await addParticipants(participants, to: conversation).map(BackendResponse.conversation) ?? .done
        case .updateParticipants(let conversation, let participants):
            return try await updateParticipants(participants, in: conversation).map(BackendResponse.conversation) ?? .done
        case .removeParticipants(let conversation, let participants):
            return try await removeParticipants(participants, from: conversation).map(BackendResponse.conversation) ?? .done
        case .history(let query):
            return .history(try await history(query))
        case .retransmit(let conversation, let range):
            let retransmission = try await retransmit(range, in: conversation)
            return .retransmitted(retransmission.events, isComplete: retransmission.isComplete)
        case .vendor(let call):
            return .vendor(try await call.perform(on: self))
        case .poll(let forced):
            return .updates(try await poll(forced: forced))
        }
    }

    private static func response(to closed: ClosedConversation, of conversation: ConversationID) -> BackendResponse {
        switch closed {
        case .done: .done
        case .conversation(let info): .conversation(info)
        // Applied, like a poll's updates, before the caller hears back.
        case .removed: .updates([.event(BackendEvent(.conversationRemoved, conversation: conversation))])
        case .state(let state): .updates([.event(BackendEvent(.conversationStateChanged(state, previous: nil), conversation: conversation))])
        }
    }
}

/// A vendor-only call, typed: a value that says what to ask and what the answer is
/// (`VoximplantRequests.joinConversation(_:)`, CXone's transcript, Webim's location change).
/// An app runs one with ``ChatSession/perform(_:)``; the engine carries it out on the session's
/// live link, in the session's request lane, and hands back its ``Reply`` as it is.
///
/// An adapter writes one type per call. Its ``perform(on:)`` finds the adapter's own link with
/// ``link(_:as:)``: on another backend's session the call answers
/// ``SwitchboardError/Code/unsupported``.
public protocol VendorRequest: Sendable {
    associatedtype Reply: Sendable

    /// A short name for logs (never the content).
    var name: String { get }

    /// Carries the call out on the session's live link.
    ///
    /// - Returns: the reply, with what the call changed (a conversation the user joined) to
    ///   store and publish before the caller hears back.
    func perform(on connection: any BackendConnection) async throws -> VendorResult<Reply>
}

extension VendorRequest {
    /// The link as the adapter's own type.
    ///
    /// - Throws: ``SwitchboardError/Code/unsupported`` when the session's link is another
    ///   backend's.
    public func link<Link: BackendConnection>(_ connection: any BackendConnection, as type: Link.Type) throws(SwitchboardError) -> Link {
        guard let link = connection as? Link else {
            throw SwitchboardError(.unsupported, "\(name) is a request of another backend than this session's")
        }
        return link
    }
}

/// What a ``VendorRequest`` answers.
public struct VendorResult<Reply: Sendable>: Sendable {
    public var reply: Reply
    /// Updates the engine applies, in one store transaction, before the caller hears back.
    public var updates: [BackendUpdate]

    public init(_ reply: Reply, updates: [BackendUpdate] = []) {
        self.reply = reply
        self.updates = updates
    }
}

/// A ``VendorRequest`` as one value of ``BackendRequest``: its name and how to carry it out.
public struct VendorCall: Sendable, Hashable, CustomStringConvertible {
    private final class Box: Sendable {
        let perform: @Sendable (any BackendConnection) async throws -> VendorAnswer
        init(_ perform: @escaping @Sendable (any BackendConnection) async throws -> VendorAnswer) { self.perform = perform }
    }

    /// The request's ``VendorRequest/name``.
    public let name: String
    private let box: Box

    public init<Request: VendorRequest>(_ request: Request) {
        self.name = request.name
        self.box = Box { connection in
            let result = try await request.perform(on: connection)
            return VendorAnswer(result.reply, updates: result.updates)
        }
    }

    /// Carries the call out on `connection`.
    public func perform(on connection: any BackendConnection) async throws -> VendorAnswer {
        try await box.perform(connection)
    }

    public var description: String { "vendor(\(name))" }

    /// Two calls are the same when they are the same value (one app call).
    public static func == (lhs: VendorCall, rhs: VendorCall) -> Bool { lhs.box === rhs.box }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(box)) }
}

/// A ``VendorCall``'s answer: the request's typed reply, kept as it is, and the updates to apply.
public struct VendorAnswer: Sendable, Hashable {
    private final class Box: Sendable {
        let value: any Sendable
        init(_ value: any Sendable) { self.value = value }
    }

    private let box: Box
    /// Updates the engine applies before the caller hears back.
    public let updates: [BackendUpdate]

    public init(_ reply: any Sendable, updates: [BackendUpdate] = []) {
        self.box = Box(reply)
        self.updates = updates
    }

    /// The reply, as the request's type.
    public func reply<Reply>(as type: Reply.Type) -> Reply? { box.value as? Reply }

    public static func == (lhs: VendorAnswer, rhs: VendorAnswer) -> Bool { lhs.box === rhs.box && lhs.updates == rhs.updates }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(box)) }
}
