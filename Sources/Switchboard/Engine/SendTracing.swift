import Foundation
import Tracing

/// One traced send: a span from the app's call to the server's answer, with the store writes that
/// queue it and end it and each attempt at the backend as child spans.
///
/// The span starts in the app's task (its parent is the app's current span, if any) and ends in
/// the session's loop once every message of the send left the outbox — sent, or failed for good —
/// or at once when nothing was queued (a repeat answered from the store, a refusal). A session that
/// ends with the send still queued ends its span saying so: whoever runs the session next sends it.
final class SendTrace: Sendable {
    let span: any Span
    private struct State {
        /// The send's messages still in the outbox.
        var open: Set<ClientMessageID> = []
        var queued = false
        var failure: String?
        var ended = false
    }

    private let state = Locked(State())

    init(span: any Span) {
        self.span = span
    }

    /// The store took the send's outbox entry `id`.
    func queued(_ id: ClientMessageID) {
        state.withLock {
            $0.open.insert(id)
            $0.queued = true
        }
    }

    /// Whether the loop queued any of the send's messages (it then ends the span).
    var wasQueued: Bool { state.withLock { $0.queued } }

    /// The outbox entry `id` left the outbox: sent, or failed for good with `failure`. The span ends
    /// with the last.
    func answered(_ id: ClientMessageID, failure: String?) {
        let (last, failure) = state.withLock { state in
            state.open.remove(id)
            if let failure { state.failure = state.failure ?? failure }
            return (state.open.isEmpty, state.failure)
        }
        guard last else { return }
        end(outcome: failure == nil ? "sent" : "failed", failure: failure)
    }

    /// Ends the span once, whoever gets here first: only that one sets its outcome and status.
    /// An error is recorded as the logs see it (classified: a foreign error by its type only).
    func end(outcome: String, failure: String? = nil, error: (any Error)? = nil) {
        guard state.withLock({ state -> Bool in
            defer { state.ended = true }
            return !state.ended
        }) else { return }
        let error = error.map(SwitchboardError.classify)
        span.attributes["switchboard.send.outcome"] = outcome
        if let error { span.recordError(error) }
        if failure != nil || error != nil { span.setStatus(SpanStatus(code: .error, message: failure ?? error?.message)) }
        span.end()
    }
}

extension Span {
    /// Records how a traced step failed, as the logs see it; a cancelled step is no error.
    func recordFailure(_ error: SwitchboardError) {
        guard error.code != .cancelled else { return }
        recordError(error)
        setStatus(SpanStatus(code: .error, message: error.message))
    }
}

/// What the loop holds of traced sends: each queued message's trace until the server answered it,
/// and the trace of the send command being handled.
struct SendTraces {
    var byClientID: [ClientMessageID: SendTrace] = [:]
    /// The send whose command the loop handles now: its outbox entries are stored under it.
    var current: SendTrace?
    /// Why a traced send failed for good, from the loop's `sendFailed` input until the write that
    /// takes its entry out of the outbox is stored (that write stores the failed message too,
    /// unless the message is gone: a cleared history).
    var failing: [ClientMessageID: String] = [:]

    /// The loop is about to fail the outbox entry `id` for good.
    mutating func failing(_ id: ClientMessageID, reason: String) {
        guard byClientID[id] != nil else { return }
        failing[id] = reason
    }

    /// The traces `writes` queue (under ``current``) or answer, each once.
    func touched(by writes: [StoreWrite]) -> [SendTrace] {
        guard current != nil || !byClientID.isEmpty else { return [] }
        var traces: [SendTrace] = []
        func add(_ trace: SendTrace?) {
            guard let trace, !traces.contains(where: { $0 === trace }) else { return }
            traces.append(trace)
        }
        let queued = Self.queuedMessages(in: writes)
        for write in writes {
            switch write {
            case .saveOutboxEntry(let entry) where queued.contains(entry.clientID): add(current)
            case .removeOutboxEntry(let id): add(byClientID[id])
            default: break
            }
        }
        return traces
    }

    /// The client ids of the messages `writes` store as pending: a send queues its entry with
    /// its pending message, where a retry only saves the entry again.
    static func queuedMessages(in writes: [StoreWrite]) -> Set<ClientMessageID> {
        var ids: Set<ClientMessageID> = []
        for case .saveMessages(let messages) in writes {
            for message in messages where message.deliveryState == .pending {
                if let id = message.clientID { ids.insert(id) }
            }
        }
        return ids
    }

    /// After `writes` were stored: the entries they queued belong to ``current``; those they
    /// removed are answered (failed for good when the loop failed them, or when the same writes
    /// store the message failed).
    mutating func stored(_ writes: [StoreWrite]) {
        guard current != nil || !byClientID.isEmpty else { return }
        var failures = failing
        for case .saveMessages(let messages) in writes {
            for message in messages {
                if let id = message.clientID, case .failed(let reason) = message.deliveryState { failures[id] = reason }
            }
        }
        let queued = current == nil ? [] : Self.queuedMessages(in: writes)
        for write in writes {
            switch write {
            case .saveOutboxEntry(let entry):
                guard let current, byClientID[entry.clientID] == nil, queued.contains(entry.clientID) else { continue }
                byClientID[entry.clientID] = current
                current.queued(entry.clientID)
            case .removeOutboxEntry(let id):
                failing.removeValue(forKey: id)
                byClientID.removeValue(forKey: id)?.answered(id, failure: failures[id])
            default:
                break
            }
        }
    }
}
