package import Foundation
package import Switchboard

/// Progress lines for long work in `connect`: a conversation catching up, a long history loading.
/// They go to standard error and only when it is a terminal, so piped output and logs stay clean.
package struct ProgressReporter: Sendable {
    package let enabled: Bool

    package static let standardError = ProgressReporter(enabled: isatty(STDERR_FILENO) == 1)
    package static let off = ProgressReporter(enabled: false)

    package func report(_ line: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

/// Follows a session's events and says how far each conversation's catch-up has come: how many
/// of how many events, in steps of a tenth, once it is behind by ``threshold`` or more.
///
/// The head is the conversation's `lastSequence` (from its added or updated event); the start is
/// the sequence below the first event that arrives, since events caught up are events like any
/// other.
package struct CatchUpProgress: Sendable {
    package init() {}

    /// How far behind a conversation must be for its catch-up to be reported.
    package static let threshold: Int64 = 50

    private struct Tracked {
        var head: Int64?
        var newest: Int64?
        var start: Int64?
        var reportedStep = -1
    }

    private var conversations: [ConversationID: Tracked] = [:]

    /// A line to print for `event`, if any.
    package mutating func observe(_ event: ChatEvent) -> String? {
        guard let id = event.conversationID else { return nil }
        var tracked = conversations[id] ?? Tracked()
        defer { conversations[id] = tracked }
        switch event.kind {
        case .conversationAdded(let info), .conversationUpdated(let info):
            guard let head = info.lastSequence else { return nil }
            tracked.head = max(head, tracked.head ?? head)
        case .messageAdded(let message, _):
            guard let sequence = message.sequence else { return nil }
            if tracked.newest == nil, let head = tracked.head, head - (sequence - 1) >= Self.threshold {
                tracked.start = sequence - 1
            }
            tracked.newest = max(sequence, tracked.newest ?? sequence)
        default:
            return nil
        }
        guard let start = tracked.start, let head = tracked.head, let newest = tracked.newest else { return nil }
        let total = max(1, head - start)
        let done = min(total, newest - start)
        if done >= total {
            tracked.start = nil
            return "caught up \(id): \(total) events"
        }
        let step = Int(done * 10 / total)
        guard step > tracked.reportedStep else { return nil }
        tracked.reportedStep = step
        return "catching up \(id): \(done) of \(total) events"
    }
}
