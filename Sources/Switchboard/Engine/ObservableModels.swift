#if canImport(Observation)
public import Observation

/// A conversation's ``Timeline`` as an `@Observable` model, for a SwiftUI view to bind to:
/// ``items`` follows the conversation while ``run()`` runs. A view's `.task` that is cancelled
/// when the view goes and started again when it comes back runs it again, on a fresh timeline.
///
/// ```swift
/// @State var model: TimelineModel
/// var body: some View {
///     List(model.items) { MessageRow($0) }
///         .task { try? await model.run() }
/// }
/// ```
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
@Observable
public final class TimelineModel {
    /// The messages in the window, oldest first.
    public private(set) var items: [Message] = []
    @ObservationIgnored private let conversation: any Conversation
    @ObservationIgnored private let limit: Int
    @ObservationIgnored private var timeline: Timeline?

    /// - Parameters:
    ///   - conversation: the conversation to show.
    ///   - limit: how many of its newest messages the window holds (``loadOlder(limit:)`` adds).
    public init(conversation: any Conversation, limit: Int) {
        self.conversation = conversation
        self.limit = limit
    }

    /// Follows the conversation until the task is cancelled (a view's `.task`) or its bus ends.
    ///
    /// - Throws: what reading the stored messages throws.
    public func run() async throws {
        let timeline = try await conversation.timeline(limit: limit)
        self.timeline = timeline
        defer { self.timeline = nil }
        for await update in timeline {
            items = update.items
        }
    }

    /// Asks for up to `limit` older messages; they arrive in ``items`` through ``run()``.
    ///
    /// - Returns: how many older messages were found; 0 when there is nothing older or the model
    ///   does not run.
    @discardableResult
    public func loadOlder(limit: Int) async throws -> Int {
        guard let timeline else { return 0 }
        return try await timeline.loadOlder(limit: limit)
    }
}

/// An ``Inbox`` as an `@Observable` model: ``items`` and ``unreadTotal`` follow the conversations
/// of the sessions while ``run()`` runs (again on a fresh inbox each time it is started).
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
@Observable
public final class InboxModel {
    /// The conversations, newest activity first.
    public private(set) var items: [InboxItem] = []
    /// Messages from others not read, across every conversation listed.
    public private(set) var unreadTotal = 0
    @ObservationIgnored private let bus: EventBus
    @ObservationIgnored private let sessions: [any Session]

    /// - Parameters:
    ///   - bus: the bus the sessions publish on.
    ///   - sessions: the sessions whose conversations the model lists.
    public init(bus: EventBus, sessions: [any Session]) {
        self.bus = bus
        self.sessions = sessions
    }

    /// Follows the sessions' conversations until the task is cancelled (a view's `.task`) or the
    /// bus ends.
    ///
    /// - Throws: what reading the stored conversations throws.
    public func run() async throws {
        for await update in try await Inbox(bus: bus, sessions: sessions) {
            if items != update.items { items = update.items }
            if unreadTotal != update.unreadTotal { unreadTotal = update.unreadTotal }
        }
    }
}
#endif
