#if canImport(Observation)
public import Observation

/// A ``Timeline`` as an `@Observable` model, for a SwiftUI view to bind to: ``items`` follows the
/// timeline while ``run()`` runs.
///
/// ```swift
/// @State var model: TimelineModel
/// var body: some View {
///     List(model.items) { MessageRow($0) }
///         .task { await model.run() }
/// }
/// ```
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
@Observable
public final class TimelineModel {
    /// The messages in the window, oldest first.
    public private(set) var items: [Message]
    @ObservationIgnored private let timeline: Timeline

    public init(_ timeline: Timeline) {
        self.timeline = timeline
        self.items = timeline.items
    }

    /// Follows the timeline until the task is cancelled (a view's `.task`) or its bus ends.
    public func run() async {
        for await update in timeline {
            items = update.items
        }
    }

    /// Asks for up to `limit` older messages; they arrive in ``items`` through ``run()``.
    @discardableResult
    public func loadOlder(limit: Int) async throws -> Int {
        try await timeline.loadOlder(limit: limit)
    }
}

/// An ``Inbox`` as an `@Observable` model: ``items`` and ``unreadTotal`` follow the inbox while
/// ``run()`` runs.
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
@Observable
public final class InboxModel {
    /// The conversations, newest activity first.
    public private(set) var items: [InboxItem]
    /// Messages from others not read, across every conversation listed.
    public private(set) var unreadTotal: Int
    @ObservationIgnored private let inbox: Inbox

    public init(_ inbox: Inbox) {
        self.inbox = inbox
        self.items = inbox.items
        self.unreadTotal = inbox.unreadTotal
    }

    /// Follows the inbox until the task is cancelled (a view's `.task`) or its bus ends.
    public func run() async {
        for await update in inbox {
            if items != update.items { items = update.items }
            if unreadTotal != update.unreadTotal { unreadTotal = update.unreadTotal }
        }
    }
}
#endif
