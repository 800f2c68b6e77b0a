import Foundation
import Logging

// Requests in their lanes: queued on the open link, dispatched to it, and their outcomes routed
// to what asked for them; polling.
extension ChatSession {
    // MARK: Requests

    /// What a request in a lane is for, so its outcome reaches the right state machine.
    enum LaneWork: Sendable {
        case send(OutboxEntry)
        case retransmit(ConversationID, ClosedRange<Int64>)
        /// A history page below a recent window (``WindowBackfillStateMachine``).
        case backfill(HistoryQuery)
        case typing(ConversationID, isTyping: Bool, draft: String?)
        case markRead(ConversationID, ChatEvent.ReadMarker)
        /// The engine's own poll of a backend that pushes nothing.
        case poll
        /// An app request; its caller waits for the answer, applied as `applying` says.
        case app(BackendRequest, AppCommand.Applying, Reply<BackendResponse>)
        /// The app's new conversation; its caller waits for it to be stored.
        case start(ConversationDraft, Reply<ConversationID>)
        /// A history page the app asked for; its callers wait in the conversation's state.
        case history(HistoryQuery)

        var request: BackendRequest {
            switch self {
            case .send(let entry): .send(entry.message)
            case .retransmit(let conversation, let range): .retransmit(conversation, range)
            case .backfill(let query): .history(query)
            case .typing(let conversation, let isTyping, let draft): .typing(conversation, isTyping: isTyping, draft: draft)
            case .markRead(let conversation, let marker): .markRead(conversation, upTo: marker)
            case .poll: .poll(forced: false)
            case .app(let request, _, _): request
            case .start(let draft, _): .startConversation(draft)
            case .history(let query): .history(query)
            }
        }
    }

    /// Queues a request in its conversation's lane on the open link; `false` when there is no
    /// open link (nothing is queued).
    @discardableResult
    func enqueue(_ work: LaneWork, lane: ConversationID?) -> Bool {
        guard isLinkOpen else { return false }
        dispatch(lanes.enqueue(work, lane: lane))
        return true
    }

    private func dispatch(_ requests: [RequestLanesStateMachine<LaneWork>.Request]) {
        // A request the link no longer takes (it is going) stays in its lane and is answered
        // when the link closes (see `linkDropped`).
        guard let id = connection.openLinkID, let link, link.id == id else { return }
        for request in requests {
            if case .enqueued = link.jobs.yield(LinkJob(ticket: request.ticket, request: request.work.request)) {
                connection.requestDispatched(id)
            }
        }
    }

    func requestFinished(_ ticket: Int, result: Result<BackendResponse, SwitchboardError>, link linkID: Int) async {
        let (finished, next) = lanes.finished(ticket)
        dispatch(next)
        if case .failure(let error) = result, error.code == .fatal {
            logger.debug("a request answered with a fatal error", metadata: ["error": "\(error)"])
        }
        // A fatal answer ends the session; a good one proves the link healthy; the last answer a
        // draining link waited for lets it close.
        await perform(connection.requestFinished(linkID, failure: result.failure))
        guard let finished else { return }
        if case .success(.updates(let updates)) = result {
            // What a poll found is stored and published before its caller hears back.
            await inOneTransaction { for update in updates { await apply(update) } }
        }
        switch finished.work {
        case .send(let entry):
            await sendFinished(entry, result: result)
        case .retransmit(let conversation, let range):
            // A retransmit's events (up to a hundred) go into one store transaction, as the
            // updates of a link that arrive together do.
            await inOneTransaction { await perform(machine.retransmitFinished(range, in: conversation, result: result)) }
        case .backfill(let query):
            await pageFinished(query.conversationID, result: result)
        case .typing:
            if case .failure(let error) = result {
                // Typing is best effort: a failure is only logged.
                logger.debug("typing notification failed", metadata: ["error": "\(error)"])
            }
        case .markRead(let conversation, let marker):
            await perform(machine.readMarkerAnswered(marker, in: conversation, result: result))
        case .poll:
            if case .failure(let error) = result, error.code != .cancelled {
                logger.debug("poll failed", metadata: ["error": "\(error)"])
            }
            await perform(machine.pollFinished(isLinkOpen: isLinkOpen))
        case .app(_, let applying, let reply):
            if case .success(let response) = result { await run { $0.appRequestAnswered(response, as: applying, facts: $1) } }
            reply.complete(result)
        case .start(_, let reply):
            await conversationStarted(result, reply: reply)
        case .history(let query):
            await historyPageArrived(result, in: query.conversationID)
        }
    }

    // MARK: Polling

    /// Asks a backend that pushes nothing for its changes, unless a poll is queued already.
    func pollNow() async {
        await perform(machine.pollDue(isLinkOpen: isLinkOpen))
    }

    /// A request that never got an answer because its link or the session went away.
    func requestAbandoned(_ work: LaneWork, error: SwitchboardError) {
        switch work {
        case .send, .retransmit, .backfill, .typing, .markRead:
            // The outbox resends, the tracker and the window fill re-plan, typing is dropped, the
            // marker stays pending.
            break
        case .poll:
            // The next link polls when it opens.
            machine.pollAbandoned()
        case .app(_, _, let reply):
            reply.fail(error)
        case .start(_, let reply):
            reply.fail(error)
        case .history(let query):
            failHistoryWaiters(in: query.conversationID, error)
        }
    }
}

extension Result {
    /// The error, when this is a failure.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
