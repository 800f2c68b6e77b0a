public import Foundation

/// Everything the engine asks of a backend, as one value: the only request type an adapter
/// handles. Each request names the capability it needs (``requiredCapability``).
public enum BackendRequest: Sendable, Hashable {
    case send(OutgoingMessage)
    case edit(ConversationID, MessageID, text: String, payload: JSONValue?)
    case delete(ConversationID, MessageID)
    /// The user's typing. `isTyping: false` with a draft is an automatic stop after silence: the
    /// user paused and the draft stays; without one the user stopped (sent or cleared it).
    case typing(ConversationID, isTyping: Bool, draft: String?)
    case markRead(ConversationID, upTo: ChatEvent.ReadMarker)
    case startConversation(ConversationDraft)
    case closeConversation(ConversationID)
    case archiveConversation(ConversationID)
    case updateConversation(ConversationID, ConversationChanges)
    case rateAgent(ConversationID, agent: ParticipantID?, rating: Int, comment: String?)
    /// Custom fields of a conversation, or of the customer when the conversation is `nil`.
    case setCustomFields(ConversationID?, [String: String])
    case addParticipants(ConversationID, [Participant])
    case updateParticipants(ConversationID, [Participant])
    case removeParticipants(ConversationID, [ParticipantID])
    case history(HistoryQuery)
    /// Events of a conversation by sequence, inclusive; never more than the batch limit of the
    /// descriptor's ``SyncModel/sequenced(batchLimit:)``.
    case retransmit(ConversationID, ClosedRange<Int64>)
    /// A vendor-only call (``VendorRequest``), carried out on the live link.
    case vendor(VendorCall)
    /// Fetches what changed on a backend that pushes nothing (``SyncModel/polled``):
    /// everything again when `forced`, else what changed since the cursor the backend keeps in
    /// its credentials. Answered with ``BackendResponse/updates(_:)``.
    case poll(forced: Bool)

    /// The capability a backend must list for the engine to send this request. A retransmit and
    /// a poll need none: the engine asks them only of a backend whose ``SyncModel`` is
    /// ``SyncModel/sequenced(batchLimit:)`` or ``SyncModel/polled``.
    public var requiredCapability: BackendCapabilities? {
        switch self {
        case .send(let message):
            if !message.content.attachments.isEmpty { return .files }
            return message.content.quote == nil ? nil : .quotes
        case .edit: return .edit
        case .delete: return .delete
        case .typing: return .typing
        case .markRead: return .readMarkers
        case .startConversation, .closeConversation: return .conversationLifecycle
        case .archiveConversation: return .archive
        case .updateConversation: return .conversationUpdate
        case .rateAgent: return .agentRating
        case .setCustomFields: return .customFields
        case .addParticipants, .updateParticipants, .removeParticipants: return .participantsManagement
        case .history: return .historyPaging
        case .vendor: return .vendorRequests
        // The engine asks these only of a backend whose sync model has them.
        case .retransmit, .poll: return nil
        }
    }

    /// The conversation the request is about: the engine's request lane. `nil` for requests of
    /// the whole session (starting a conversation, the customer's fields, a vendor call).
    public var conversationID: ConversationID? {
        switch self {
        case .send(let message): message.conversationID
        case .edit(let conversation, _, _, _), .delete(let conversation, _), .typing(let conversation, _, _),
            .markRead(let conversation, _), .closeConversation(let conversation), .archiveConversation(let conversation),
            .updateConversation(let conversation, _), .rateAgent(let conversation, _, _, _),
            .addParticipants(let conversation, _), .updateParticipants(let conversation, _),
            .removeParticipants(let conversation, _), .retransmit(let conversation, _):
            conversation
        case .setCustomFields(let conversation, _): conversation
        case .history(let query): query.conversationID
        case .startConversation, .vendor, .poll: nil
        }
    }

    /// A short name for logs (never the content).
    public var name: String {
        switch self {
        case .send: return "send"
        case .edit: return "edit"
        case .delete: return "delete"
        case .typing: return "typing"
        case .markRead: return "markRead"
        case .startConversation: return "startConversation"
        case .closeConversation: return "closeConversation"
        case .archiveConversation: return "archiveConversation"
        case .updateConversation: return "updateConversation"
        case .rateAgent: return "rateAgent"
        case .setCustomFields: return "setCustomFields"
        case .addParticipants: return "addParticipants"
        case .updateParticipants: return "updateParticipants"
        case .removeParticipants: return "removeParticipants"
        case .history: return "history"
        case .retransmit: return "retransmit"
        case .vendor(let call): return call.description
        case .poll(let forced): return forced ? "poll(forced)" : "poll"
        }
    }
}

/// A request's answer in one value: what ``BackendConnection/perform(_:)`` makes of a typed
/// method's result, and what a scripted test backend answers with.
public enum BackendResponse: Sendable, Hashable {
    case done
    /// The message as the server accepted it (send, edit).
    case message(Message)
    /// The whole conversation as the server now has it (start, update). A backend whose server
    /// does not answer an update with the conversation answers ``done``: the session then applies
    /// the ``ConversationChanges`` to the conversation it stores.
    case conversation(ConversationInfo)
    case history(HistoryPage)
    /// Retransmitted events, in sequence order. `isComplete` says the server returned every
    /// event of the requested range the client may see, so a sequence missing from them does
    /// not exist (hidden or never logged) and the engine steps over it. Only a complete reply
    /// proves absence.
    case retransmitted([BackendEvent], isComplete: Bool)
    /// A vendor call's typed reply and the updates to apply before the caller hears back.
    case vendor(VendorAnswer)
    /// What a poll found, in the order the backend read it: the engine applies these as it
    /// applies a link's updates, in one store transaction, before the caller hears back.
    case updates([BackendUpdate])
    /// A conversation a start made together with its first messages (a Webim appeal is made by
    /// its first message): the engine stores both before the caller hears back.
    case startedConversation(ConversationSnapshot)
}

/// A new conversation to start.
public struct ConversationDraft: Sendable, Hashable {
    public var kind: ConversationInfo.Kind
    public var title: String?
    public var participants: [Participant]
    public var flags: ConversationInfo.Flags
    public var customData: JSONValue?
    /// Pre-chat fields (CXone survey, Webim department).
    public var customFields: [String: String]
    /// A message the conversation starts with: the message that makes a Webim appeal, the
    /// visitor's first message of a Webim chat; the other backends ignore it.
    public var firstMessage: MessageDraft?
    /// The client's id of the start (the client id of a Webim chat's or appeal's first message),
    /// so a retried start is recognised. The session makes one from its random source when `nil`.
    public var clientID: ClientMessageID?

    public init(
        kind: ConversationInfo.Kind = .supportChat,
        title: String? = nil,
        participants: [Participant] = [],
        flags: ConversationInfo.Flags = [],
        customData: JSONValue? = nil,
        customFields: [String: String] = [:],
        firstMessage: MessageDraft? = nil,
        clientID: ClientMessageID? = nil
    ) {
        self.firstMessage = firstMessage
        self.clientID = clientID
        self.kind = kind
        self.title = title
        self.participants = participants
        self.flags = flags
        self.customData = customData
        self.customFields = customFields
    }
}

/// Changes to a conversation; `nil` fields stay as they are, and the fields in ``clearing``
/// are removed.
public struct ConversationChanges: Sendable, Hashable {
    /// A field a change can remove.
    public enum Field: Sendable, Hashable, CaseIterable {
        case title
        case customData
    }

    public var title: String?
    public var isPublicJoin: Bool?
    public var customData: JSONValue?
    /// Fields to remove (a value set for the same field wins).
    public var clearing: Set<Field>

    public init(title: String? = nil, isPublicJoin: Bool? = nil, customData: JSONValue? = nil, clearing: Set<Field> = []) {
        self.title = title
        self.isPublicJoin = isPublicJoin
        self.customData = customData
        self.clearing = clearing
    }
}

/// A page of older messages to fetch.
public struct HistoryQuery: Sendable, Hashable {
    /// Where an older page starts.
    public enum Anchor: Sendable, Hashable {
        /// Before this sequence (exclusive).
        case sequence(Int64)
        /// Before this server time (exclusive).
        case time(Date)
        /// The backend's own paging token from the previous page.
        case token(String)
    }

    public var conversationID: ConversationID
    /// `nil` for the newest page.
    public var before: Anchor?
    /// Where the pages stop, when the engine fills a gap the backend bounded
    /// (``ConversationSnapshot/skippedAfter``): a page holds only messages after it, and the last
    /// one answers `hasMore: false`. `nil` for ordinary history.
    public var after: Anchor?
    public var limit: Int

    public init(conversationID: ConversationID, before: Anchor?, after: Anchor? = nil, limit: Int) {
        self.conversationID = conversationID
        self.before = before
        self.after = after
        self.limit = limit
    }
}

/// One page of history, oldest first.
public struct HistoryPage: Sendable, Hashable {
    public var messages: [Message]
    public var hasMore: Bool
    /// The anchor for the next older page, when the backend pages by token.
    public var nextAnchor: HistoryQuery.Anchor?

    public init(messages: [Message], hasMore: Bool, nextAnchor: HistoryQuery.Anchor? = nil) {
        self.messages = messages
        self.hasMore = hasMore
        self.nextAnchor = nextAnchor
    }
}
