import DequeModule

/// Orders a session's requests: one lane per conversation (plus one for requests of no
/// conversation), first in first out within a lane, one request in flight per lane, and at most
/// `concurrency` lanes in flight at once. So nothing sent for a conversation overtakes what was
/// sent for it earlier — a "stopped typing" never passes its "typing", a read marker never passes
/// an older one, an edit never passes the send it edits — while conversations do not wait for
/// each other beyond the concurrency bound.
///
/// It is a pure value: the owner performs ``Request``s it returns and reports each outcome with
/// ``finished(_:)``. `Work` is whatever the owner needs to act on the outcome.
struct RequestLanesStateMachine<Work: Sendable>: Sendable {
    struct Request: Sendable {
        /// Names the request in ``finished(_:)``; unique for the machine's life.
        let ticket: Int
        let lane: ConversationID?
        let work: Work
    }

    let concurrency: Int
    private var queues: [ConversationID?: Deque<Request>] = [:]
    private var inFlight: [Int: Request] = [:]
    /// Lanes with a request waiting for a free slot, oldest first.
    private var ready: Deque<ConversationID?> = []
    private var nextTicket = 0

    init(concurrency: Int) {
        precondition(concurrency > 0, "the request concurrency must be positive")
        self.concurrency = concurrency
    }

    /// Requests queued or in flight.
    var count: Int { inFlight.count + queues.values.reduce(0) { $0 + $1.count } }
    /// Requests in flight.
    var inFlightCount: Int { inFlight.count }
    /// The work in flight now.
    var inFlightWork: [Work] { inFlight.values.sorted { $0.ticket < $1.ticket }.map(\.work) }

    /// Queues `work` in `lane`; returns what may start now (nothing, or this request).
    mutating func enqueue(_ work: Work, lane: ConversationID?) -> [Request] {
        let request = Request(ticket: nextTicket, lane: lane, work: work)
        nextTicket += 1
        let wasIdle = queues[lane, default: []].isEmpty && !isBusy(lane)
        queues[lane, default: []].append(request)
        if wasIdle { ready.append(lane) }
        return start()
    }

    /// The request `ticket` finished; returns it (nil for an unknown ticket) and what may start now.
    mutating func finished(_ ticket: Int) -> (finished: Request?, start: [Request]) {
        guard let request = inFlight.removeValue(forKey: ticket) else { return (nil, []) }
        if queues[request.lane]?.isEmpty == false { ready.append(request.lane) }
        return (request, start())
    }

    /// Empties every lane (the link they would go out on is gone): in flight first, then queued,
    /// each in its order.
    mutating func removeAll() -> [Request] {
        let all = inFlight.values.sorted { $0.ticket < $1.ticket }
            + queues.values.flatMap { $0 }.sorted { $0.ticket < $1.ticket }
        queues.removeAll()
        inFlight.removeAll()
        ready.removeAll()
        return all
    }

    private func isBusy(_ lane: ConversationID?) -> Bool {
        inFlight.values.contains { $0.lane == lane }
    }

    private mutating func start() -> [Request] {
        var started: [Request] = []
        while inFlight.count < concurrency, let lane = ready.popFirst() {
            guard let request = queues[lane]?.popFirst() else { continue }
            if queues[lane]?.isEmpty == true { queues[lane] = nil }
            inFlight[request.ticket] = request
            started.append(request)
        }
        return started
    }
}
