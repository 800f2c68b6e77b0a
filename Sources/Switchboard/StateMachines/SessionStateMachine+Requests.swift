import Foundation
import Logging

/// The link as the session's machine sees it — what the connection machine's decisions mean for
/// the rest of the session, the deadlines, and the requests the link carries in their lanes, each
/// outcome routed to what asked for it. Inputs reach these through
/// ``SessionStateMachine/handle(_:facts:at:using:)``.
extension SessionStateMachine {
    // MARK: The link

    /// What the connection machine decided, performed: the link's own effects, and what a link
    /// coming or going means for the rest of the session.
    mutating func effects(of decided: [ConnectionStateMachine.Action], at moment: Moment) -> [Effect] {
        var effects: [Effect] = []
        for action in decided {
            switch action {
            case .startLink(let id): effects.append(.startLink(id))
            case .finishJobs(let id): effects.append(.finishJobs(id))
            case .abortConnect(let id): effects.append(.abortConnect(id))
            case .publish(let state, let reason): effects.append(.publish(.connection(state, reason: reason), nil))
            case .setReconnectTimer(let delay): deadlines[.reconnect] = moment.now + delay
            case .cancelReconnectTimer: deadlines[.reconnect] = nil
            case .setStableTimer(let id, let delay): deadlines[.linkStable(id)] = moment.now + delay
            case .cancelStableTimer(let id): deadlines[.linkStable(id)] = nil
            case .linkEstablished:
                statistics.connects += 1
                // The outbox resumes, the read markers set while offline go, the open fills ask
                // again, and a backend that pushes nothing is asked what changed meanwhile.
                effects += self.effects(of: expireOutbox(at: moment) + outbox { $0.connected() } + linkOpened() + pollDue(isLinkOpen: connection.isLinkOpen), at: moment)
            case .linkDropped(let interrupted):
                if interrupted { statistics.connectionFailures += 1 }
                effects += linkGone(interrupted: interrupted, at: moment)
            case .clearCredentials:
                credentials = Credentials()
                effects.append(.write([.saveCredentials(credentials)]))
            case .gaveUp(let error):
                effects += [.log(.error, "session ended", error), .publish(.fatal(error), nil)]
            }
        }
        return effects
    }

    /// The link is gone and everything it carried has reported: what is still in its lanes never
    /// got an answer (app requests fail), and ``linkDropped(interrupted:inFlightSends:)`` says
    /// what that means.
    mutating func linkGone(interrupted: Bool, at moment: Moment) -> [Effect] {
        // What a windowed link sent before its window goes with it: the next link's window covers it.
        window = nil
        let inFlightSends = lanes.inFlightWork.compactMap { work -> ClientMessageID? in
            if case .send(let entry) = work { return entry.clientID }
            return nil
        }
        var effects: [Effect] = []
        for request in lanes.removeAll() {
            effects += abandon(request.work, SwitchboardError(.connectionLost, "the link closed before \(request.work.request.name) was answered"))
        }
        return effects + self.effects(of: linkDropped(interrupted: interrupted, inFlightSends: inFlightSends), at: moment)
    }

    /// Fails the sends that waited longer than the configured expiry.
    mutating func expireOutbox(at moment: Moment) -> [Action] {
        guard let expiry = settings.configuration.outboxExpiry else { return [] }
        return outbox { $0.expire(createdBefore: moment.date.addingTimeInterval(-expiry.seconds)) }
    }

    // MARK: Timers

    /// A timer that was due fires.
    mutating func fired(_ timer: Timer, at moment: Moment) -> [Effect] {
        switch timer {
        case .reconnect:
            return effects(of: connection.reconnectTimerFired(), at: moment)
        case .linkStable(let id):
            connection.stableTimerFired(id)
            return []
        case .hold(let conversation):
            return effects(of: holdTimerFired(in: conversation), at: moment)
        case .outboxRetry(let conversation):
            statistics.sendRetries += 1
            return effects(of: expireOutbox(at: moment) + outbox { $0.retryTimerFired(conversation) }, at: moment)
        case .typing(let conversation):
            return effects(of: typingTimerFired(in: conversation, now: moment.now), at: moment)
        case .poll:
            return effects(of: pollDue(isLinkOpen: connection.isLinkOpen), at: moment)
        case .window:
            guard let window else { return [] }
            let error = SwitchboardError(.protocolViolation, "a windowed link sent no snapshot in \(settings.configuration.windowTimeout)")
            return [.log(.warning, "\(window.held.count) updates waited for the window; applied as they came", error)] + releaseWindow()
        }
    }

    /// The wait for a windowed link's window ends: what the link sent meanwhile goes on, in order.
    mutating func releaseWindow() -> [Effect] {
        guard let window else { return [] }
        self.window = nil
        deadlines[.window] = nil
        return window.held.map { .then(.update(window.link, $0)) }
    }

    /// The earliest deadline set, if any: the runner's one sleeper waits for it.
    var nextDeadline: Duration? { deadlines.values.min() }

    // MARK: Requests

    /// Queues `work` in its conversation's lane on the open link; `false` when there is no open
    /// link (nothing is queued).
    mutating func enqueue(_ work: LaneWork, lane: ConversationID?, into effects: inout [Effect]) -> Bool {
        guard connection.isLinkOpen else { return false }
        effects += dispatch(lanes.enqueue(work, lane: lane))
        return true
    }

    /// A request the rules decided on, queued; without an open link, what asked for it hears so:
    /// the tracker and the fill ask again on the next link, typing and a marker are dropped (the
    /// marker stays pending), the outbox resends, the next link polls.
    mutating func enqueued(_ work: LaneWork, lane: ConversationID?) -> [Effect] {
        var effects: [Effect] = []
        guard !enqueue(work, lane: lane, into: &effects) else { return effects }
        switch work {
        case .retransmit(let conversation, let range): retransmitNotSent(range, in: conversation)
        case .backfill(let query): backfillNotSent(in: query.conversationID)
        case .poll: pollAbandoned()
        // Not sent (no link): typing is dropped, the marker waits for the next link.
        case .typing(_, _, _, let reply?): effects.append(.answer(reply.answering(.sent)))
        case .markRead(_, _, let reply?): effects.append(.answer(reply.answering(())))
        case .send, .typing, .markRead, .app, .start, .history: break
        }
        return effects
    }

    /// The requests the lanes let start, handed to the open link. (Without one they stay in their
    /// lanes, and are answered when the link has gone: ``linkGone(interrupted:at:)``.)
    mutating func dispatch(_ requests: [RequestLanesStateMachine<LaneWork>.Request]) -> [Effect] {
        guard let id = connection.openLinkID else { return [] }
        return requests.map { request in
            connection.requestDispatched(id)
            return .request(link: id, ticket: request.ticket, request.work.request)
        }
    }

    mutating func requestFinished(_ ticket: Int, result: Result<BackendResponse, SwitchboardError>, link id: Int, at moment: Moment) -> [Effect] {
        let (finished, next) = lanes.finished(ticket)
        var effects = dispatch(next)
        var failure: SwitchboardError?
        if case .failure(let error) = result {
            failure = error
            if error.code == .fatal { effects.append(.log(.debug, "a request answered with a fatal error", error)) }
        }
        // A fatal answer ends the session; a good one proves the link healthy; the last answer a
        // draining link waited for lets it close.
        effects += self.effects(of: connection.requestFinished(id, failure: failure), at: moment)
        guard let finished else { return effects }
        // What a poll found, or a vendor call changed, is stored and announced before its caller
        // hears back.
        switch result {
        case .success(.updates(let updates)): effects += updates.map { .then(.answeredUpdate($0)) }
        case .success(.vendor(let answer)): effects += answer.updates.map { .then(.answeredUpdate($0)) }
        default: break
        }
        return effects + [.then(.answered(finished.work, result))]
    }

    /// A request's outcome reaches what asked for it.
    mutating func answered(
        _ work: LaneWork,
        result: Result<BackendResponse, SwitchboardError>,
        facts: Facts,
        at moment: Moment,
        using random: inout some RandomNumberGenerator
    ) -> Turn {
        switch work {
        case .send(let entry):
            // The confirmed message and the end of its outbox entry are stored together.
            var effects: [Effect] = []
            if case .failure(let error) = result { effects.append(.log(.debug, "send failed (attempt \(entry.attempts + 1))", error)) }
            let step = sendFinished(entry, result: result, facts: facts, using: &random)
            guard case .perform(let actions) = step else { return resolved(step, at: moment) }
            return .perform(effects + self.effects(of: actions, at: moment))
        case .retransmit(let conversation, let range):
            return .perform(effects(of: retransmitFinished(range, in: conversation, result: result), at: moment))
        case .backfill(let query):
            return resolved(pageFinished(in: query.conversationID, result: result, isLinkOpen: connection.isLinkOpen, facts: facts), at: moment)
        case .typing(_, _, _, let reply):
            // Typing is best effort: a failure is logged, and the app's call waiting for it hears it.
            let answer: [Effect] = reply.map { [.answer($0.answering(result.map { _ in TypingOutcome.sent }))] } ?? []
            if case .failure(let error) = result { return .perform([.log(.debug, "typing notification failed", error)] + answer) }
            return .perform(answer)
        case .markRead(let conversation, let marker, let reply):
            let answer: [Effect] = reply.map { [.answer($0.answering(result.map { _ in () }))] } ?? []
            return .perform(effects(of: readMarkerAnswered(marker, in: conversation, result: result), at: moment) + answer)
        case .poll:
            var effects: [Effect] = []
            if case .failure(let error) = result, error.code != .cancelled { effects.append(.log(.debug, "poll failed", error)) }
            return .perform(effects + self.effects(of: pollFinished(isLinkOpen: connection.isLinkOpen), at: moment))
        case .app(_, let applying, let reply):
            guard case .success(let response) = result else { return .perform([.answer(reply.answering(result))]) }
            let step = appRequestAnswered(response, as: applying, facts: facts)
            guard case .perform(let actions) = step else { return resolved(step, at: moment) }
            return .perform(effects(of: actions, at: moment) + [.answer(reply.answering(result))])
        case .start(_, let reply):
            // The conversation (and the messages it began with) is stored before the caller hears.
            let started: ConversationSnapshot
            switch result {
            case .success(.conversation(let info)): started = ConversationSnapshot(conversation: info)
            case .success(.startedConversation(let snapshot)): started = snapshot
            case .success(let response): return .perform([.answer(reply.failing(SwitchboardError(.protocolViolation, "startConversation answered with \(response)")))])
            case .failure(let error): return .perform([.answer(reply.failing(error))])
            }
            return .perform(effects(of: conversationStarted(started), at: moment) + [.answer(reply.answering(started.conversation.id))])
        case .history(let query):
            let conversation = query.conversationID
            switch result {
            case .success(.history(let page)):
                // The page is stored, then everyone waiting for it hears back.
                let waiters = conversations[conversation].history.pageArrived(page)
                let events = page.messages.map { BackendEvent(.messageAdded($0, position: .history), conversation: conversation, time: $0.time) }
                return .perform([.deliver(events)] + waiters.map { .answer($0.answering(())) })
            case .success(let response):
                return .perform(failHistoryWaiters(in: conversation, SwitchboardError(.protocolViolation, "history answered with \(response)")))
            case .failure(let error):
                return .perform(failHistoryWaiters(in: conversation, error))
            }
        }
    }

    /// A request that never got an answer because its link or the session went away.
    mutating func abandon(_ work: LaneWork, _ error: SwitchboardError) -> [Effect] {
        switch work {
        case .typing(_, _, _, let reply?):
            // Dropped with the link; the app's call hears why.
            return [.answer(reply.failing(error))]
        case .markRead(_, _, let reply?):
            // The marker stays pending for the next link; the app's call hears that this one went.
            return [.answer(reply.failing(error))]
        case .send, .retransmit, .backfill, .typing, .markRead:
            // The outbox resends, the tracker and the window fill re-plan, typing is dropped, the
            // marker stays pending.
            return []
        case .poll:
            // The next link polls when it opens.
            pollAbandoned()
            return []
        case .app(_, _, let reply):
            return [.answer(reply.failing(error))]
        case .start(_, let reply):
            return [.answer(reply.failing(error))]
        case .history(let query):
            return failHistoryWaiters(in: query.conversationID, error)
        }
    }

    mutating func failHistoryWaiters(in conversation: ConversationID, _ error: SwitchboardError) -> [Effect] {
        conversations[conversation].history.pageFailed().map { .answer($0.failing(error)) }
    }
}
