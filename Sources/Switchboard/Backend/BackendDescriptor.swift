/// What a backend can do: a typed set the engine and the conformance suite gate on.
///
/// A call that needs a capability the backend lacks throws ``SwitchboardError/Code/unsupported``
/// before anything is sent.
public struct BackendCapabilities: OptionSet, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let typing = BackendCapabilities(rawValue: 1 << 0)
    public static let readMarkers = BackendCapabilities(rawValue: 1 << 1)
    // 1 << 2 was `sequences`: how a backend syncs is its descriptor's `sync` (``SyncModel``).
    public static let historyPaging = BackendCapabilities(rawValue: 1 << 3)
    public static let files = BackendCapabilities(rawValue: 1 << 4)
    public static let threads = BackendCapabilities(rawValue: 1 << 5)
    public static let participantsManagement = BackendCapabilities(rawValue: 1 << 6)
    public static let conversationUpdate = BackendCapabilities(rawValue: 1 << 7)
    /// Start and close conversations.
    public static let conversationLifecycle = BackendCapabilities(rawValue: 1 << 8)
    public static let agentRating = BackendCapabilities(rawValue: 1 << 9)
    public static let customFields = BackendCapabilities(rawValue: 1 << 10)
    public static let analytics = BackendCapabilities(rawValue: 1 << 11)
    public static let edit = BackendCapabilities(rawValue: 1 << 12)
    public static let delete = BackendCapabilities(rawValue: 1 << 13)
    public static let quotes = BackendCapabilities(rawValue: 1 << 14)
    public static let archive = BackendCapabilities(rawValue: 1 << 15)
    /// Vendor-specific requests (``VendorRequest``).
    public static let vendorRequests = BackendCapabilities(rawValue: 1 << 16)
    // 1 << 17 was `polling`: ``SyncModel/polled``.
    /// The conversations the backend reports carry the user's own unread count
    /// (``ConversationInfo/unreadCount``), and a reported count wins over the engine's (the backend
    /// knows what the user read on other devices); between reports the engine counts. Without it
    /// the engine keeps its own count and a reported conversation does not change it. (Not in ``all``: it says what the backend's data
    /// holds, not a call it takes.)
    public static let unreadCounts = BackendCapabilities(rawValue: 1 << 18)

    public static let all: BackendCapabilities = [
        .typing, .readMarkers, .historyPaging, .files, .threads, .participantsManagement,
        .conversationUpdate, .conversationLifecycle, .agentRating, .customFields, .analytics, .edit, .delete,
        .quotes, .archive, .vendorRequests,
    ]

    private static let names: [(BackendCapabilities, String)] = [
        (.typing, "typing"), (.readMarkers, "readMarkers"),
        (.historyPaging, "historyPaging"), (.files, "files"), (.threads, "threads"),
        (.participantsManagement, "participantsManagement"), (.conversationUpdate, "conversationUpdate"),
        (.conversationLifecycle, "conversationLifecycle"), (.agentRating, "agentRating"),
        (.customFields, "customFields"), (.analytics, "analytics"), (.edit, "edit"), (.delete, "delete"),
        (.quotes, "quotes"), (.archive, "archive"), (.vendorRequests, "vendorRequests"),
        (.unreadCounts, "unreadCounts"),
    ]

    public var description: String {
        let names = Self.names.filter { contains($0.0) }.map(\.1)
        return names.count == 1 ? names[0] : "[\(names.joined(separator: ", "))]"
    }
}

/// How outgoing typing notifications are throttled for a backend.
public enum TypingPolicy: Sendable, Hashable {
    /// Send at most one update (with the draft) per `interval`; send "stopped" after `autoStop`
    /// without keystrokes. Webim: 1 s and 5 s.
    case coalesce(interval: Duration, autoStop: Duration)
    /// Send "typing" at most once per `interval` and never "stopped": the far side lets it
    /// expire. Voximplant: 10 s.
    case minimumInterval(Duration)
    /// Send "started" once and "ended" when the user stops or after `autoStop`. CXone.
    case startEnd(autoStop: Duration)
}

/// Numbers a backend imposes.
public struct BackendLimits: Sendable, Hashable {
    public var maxTextLength: Int
    public var maxPayloadBytes: Int
    public var typingPolicy: TypingPolicy
    public var historyPageSize: Int
    /// The backend takes a read marker behind the one it has (Voximplant-style: the marker goes
    /// where the client puts it). Where it does not, `markRead(upTo:)` with a marker behind the
    /// newest one set throws `invalidArgument` before anything is sent.
    public var readMarkersMayMoveBack: Bool
    /// Files one message can carry, or `nil` for any number. Where a draft has more, or text
    /// beside a file on a backend that takes one file per message (Webim: each upload is its own
    /// message), ``Conversation/send(_:)`` stores and sends its parts as separate messages
    /// (``MessageDraft/parts(attachmentsPerMessage:)``).
    public var attachmentsPerMessage: Int?

    public init(
        maxTextLength: Int = 5000,
        maxPayloadBytes: Int = 5 * 1024,
        typingPolicy: TypingPolicy = .minimumInterval(.seconds(10)),
        historyPageSize: Int = 50,
        readMarkersMayMoveBack: Bool = false,
        attachmentsPerMessage: Int? = nil
    ) {
        self.maxTextLength = maxTextLength
        self.maxPayloadBytes = maxPayloadBytes
        self.typingPolicy = typingPolicy
        self.historyPageSize = historyPageSize
        self.readMarkersMayMoveBack = readMarkersMayMoveBack
        self.attachmentsPerMessage = attachmentsPerMessage
    }
}

/// How a backend brings the session up to date: the engine's sync algorithm, chosen by the
/// backend as data.
public enum SyncModel: Sendable, Hashable {
    /// Each conversation's events carry a sequence, and the server retransmits ranges of them
    /// (Voximplant-style): the engine detects a gap from the sequences, holds what came after it,
    /// and fills it with ``BackendConnection/retransmit(_:in:)``, never more than `batchLimit`
    /// events a call. The link reports each conversation's head
    /// (``BackendUpdate/conversationHead(_:lastSequence:)``) for catch-up.
    case sequenced(batchLimit: Int)
    /// Each link opens with a window: a snapshot of the conversations with their newest messages
    /// (CXone's thread recovery, Webim's full update, Matrix's first sync). The engine holds the
    /// link's live events until its first snapshot arrives (so a message pushed during the
    /// recovery cannot land before the window that shows what was missed), then fills the gap
    /// between what it stored and each window from ``BackendConnection/history(_:)``, `pageSize`
    /// messages a page (at most ``SessionConfiguration/backfillPageSize``).
    case windowed(pageSize: Int)
    /// The backend pushes nothing (Webim's offline appeals): the engine asks what changed with
    /// ``BackendConnection/poll(forced:)`` when a link opens, every
    /// ``SessionConfiguration/pollInterval`` while it is up, and when the app calls
    /// ``Session/refresh(forced:)``.
    case polled
    /// The backend sends snapshots and events as they come and nothing to fill gaps with: the
    /// engine applies them in order.
    case snapshots

    /// Whether events carry per-conversation sequences (``sequenced(batchLimit:)``).
    public var isSequenced: Bool {
        if case .sequenced = self { true } else { false }
    }
}

/// Names a backend and says what it can do.
public struct BackendDescriptor: Sendable, Hashable {
    public var name: BackendName
    public var capabilities: BackendCapabilities
    public var limits: BackendLimits
    /// How the backend brings the session up to date.
    public var sync: SyncModel

    public init(name: BackendName, capabilities: BackendCapabilities, limits: BackendLimits = BackendLimits(), sync: SyncModel) {
        self.name = name
        self.capabilities = capabilities
        self.limits = limits
        self.sync = sync
    }
}
