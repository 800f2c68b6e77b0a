import Foundation
import Logging
import Tracing

// The link: one child task of the loop that opens the backend's connection, reads its updates and
// performs the requests the machine hands it.
extension ChatSession {
    /// A request handed to a link to perform.
    struct LinkJob: Sendable {
        let ticket: Int
        let request: BackendRequest
        /// A traced send's span: the request runs as a child span of it.
        var trace: SendTrace? = nil
    }

    /// What the loop holds of the link it started: the stream it hands work through.
    struct LinkHandles {
        let id: Int
        let jobs: AsyncStream<LinkJob>.Continuation
    }

    /// Starts link `id` with what the session resumes from.
    func startLink(_ id: Int) {
        let (jobs, continuation) = AsyncStream.makeStream(of: LinkJob.self)
        link = LinkHandles(id: id, jobs: continuation)
        let context = ConnectionContext(
            session: self.id,
            credentials: machine.credentials,
            cursor: machine.cursor,
            conversationSequences: machine.conversations.sequences,
            clock: clock,
            logger: logger
        )
        spawns.append(.link(id, context, jobs))
    }

    /// Hands a request to link `id`; `false` when that link takes no more work.
    func hand(_ request: BackendRequest, ticket: Int, to id: Int) -> Bool {
        var trace: SendTrace?
        if case .send(let message) = request { trace = sendTraces.byClientID[message.clientID] }
        guard let link, link.id == id, case .enqueued = link.jobs.yield(LinkJob(ticket: ticket, request: request, trace: trace)) else { return false }
        return true
    }

    /// One link's scope: opens it, serves its updates and the requests the loop hands it as
    /// child tasks (each forgotten when done), and reports how it ended. It runs in the loop's
    /// scope of links, which the loop cancels to abandon a link that connects (``abortLink``):
    /// its connect is cancelled and its error dropped (the link ended on purpose). Out of line,
    /// with its end: its task lives as long as the link and keeps its frames at their deepest.
    @inline(never)
    nonisolated func runLink(_ id: Int, context: ConnectionContext, jobs: AsyncStream<LinkJob>) async {
        var failure: (any Error)?
        do {
            try await openLink(id, context: context, jobs: jobs)
        } catch {
            failure = Task.isCancelled ? nil : error
        }
        linkClosed(id, failure)
    }

    @inline(never)
    private nonisolated func linkClosed(_ id: Int, _ failure: (any Error)?) {
        inbox.yield(.linkClosed(id, failure.map(SwitchboardError.classify)))
    }

    /// Opens the backend's link and serves it: reads its updates and performs the requests the
    /// loop hands it, each as a child task.
    private nonisolated func openLink(
        _ id: Int,
        context: ConnectionContext,
        jobs: AsyncStream<LinkJob>
    ) async throws {
        let inbox = self.inbox
        try await backend.withConnection(context) { connection in
            inbox.yield(.linkOpened(id))
            await self.serve(connection, link: id, jobs: jobs)
        }
    }

    /// Serves an open link: its updates, and a child task per request the loop hands it. Out of
    /// line, as are the reader and each request: a task keeps its frames at their deepest for as
    /// long as it lives, and the link's tasks live as long as the link.
    ///
    /// A counted link (``BackendUpdates/makeStream()``) hands its updates to the inbox itself, in
    /// the task that yields them: no reader task, and no hop between tasks for an update. Another
    /// link's stream is read by a reader task.
    @inline(never)
    private nonisolated func serve(_ connection: any BackendConnection, link id: Int, jobs: AsyncStream<LinkJob>) async {
        let updates = connection.updates
        let taken = TakenUpdates()
        let pipe = updates.pipe
        if let pipe, !attach(pipe, link: id, counting: taken) {
            // Read by someone else already: this link cannot be served.
            inbox.yield(.linkFailed(id, SwitchboardError(.fatal, "the link's updates are read by something else than the session (an iterator, another session)")))
        }
        await ChildTasks.withScope { group in
            if pipe == nil { await startReader(updates, link: id, counting: taken, in: &group) }
            var pending = jobs.makeAsyncIterator()
            while let job = await Self.next(&pending) {
                await start(job, on: connection, link: id, after: updates, taken: taken, in: &group)
            }
            group.cancelAll()
        }
        // The link is closing: what it yields from now on is dropped, what it handed in and is
        // still held goes, and no request waits on it.
        if let pipe {
            pipe.detach()
            inbox.dropHeld(counting: taken)
        }
    }

    /// Has `pipe` hand the link's updates and its end to the inbox as the link yields them;
    /// `false` when something else reads it.
    @inline(never)
    private nonisolated func attach(_ pipe: UpdatePipe, link id: Int, counting taken: TakenUpdates) -> Bool {
        let inbox = self.inbox
        let delivery = UpdatePipe.Delivery(
            update: { update in inbox.offerUpdate(.update(id, update), counting: taken) },
            end: { failure in inbox.offerEnd(.linkFailed(id, Self.linkEnd(failure)), counting: taken) }
        )
        return pipe.attach(delivery)
    }

    /// How a link's end reads to the machine: its error, or "closed" when it closed as asked.
    private nonisolated static func linkEnd(_ failure: (any Error)?) -> SwitchboardError {
        failure.map(SwitchboardError.classify) ?? SwitchboardError(.connectionLost, "the backend closed the link")
    }

    /// Starts the link's reader.
    @inline(never)
    private nonisolated func startReader(_ updates: BackendUpdates, link id: Int, counting taken: TakenUpdates, in group: inout ChildTasks) async {
        let inbox = self.inbox
        inbox.taskStarted()
        await group.addTask { await Self.read(updates, link: id, into: inbox, counting: taken) }
    }

    /// The next request the loop hands the link, out of line as the reader's next update is.
    @inline(never)
    private nonisolated static func next(_ jobs: inout AsyncStream<LinkJob>.Iterator) async -> LinkJob? {
        await jobs.next(isolation: #isolation)
    }

    /// Starts a request's child task.
    @inline(never)
    private nonisolated func start(
        _ job: LinkJob,
        on connection: any BackendConnection,
        link id: Int,
        after updates: BackendUpdates,
        taken: TakenUpdates,
        in group: inout ChildTasks
    ) async {
        inbox.taskStarted()
        await group.addTask { await self.perform(job, on: connection, link: id, after: updates, taken: taken) }
    }

    /// The link's reader: hands the inbox each update, in wire order, and the link's end.
    @inline(never)
    private nonisolated static func read(_ updates: BackendUpdates, link id: Int, into inbox: EngineInbox<SessionStateMachine.Input>, counting taken: TakenUpdates) async {
        var iterator = updates.makeAsyncIterator()
        var failure: (any Error)?
        var reporting = true
        do {
            while let update = try await next(&iterator) {
                // No more when the loop has ended or the reader is cancelled: nothing to report.
                guard await forward(update, link: id, into: inbox) else {
                    reporting = false
                    break
                }
                taken.took()
            }
        } catch {
            failure = error
        }
        ended(link: id, failure, reporting: reporting, inbox: inbox, taken: taken)
    }

    /// The link's next update (out of line, with the stream's machinery: the reader's own frame
    /// stays small, and a long-lived task keeps its deepest frames).
    @inline(never)
    private nonisolated static func next(_ iterator: inout BackendUpdates.AsyncIterator) async throws -> BackendUpdate? {
        try await iterator.next(isolation: #isolation)
    }

    /// The reader ended: the link's end, unless the loop ended first.
    @inline(never)
    private nonisolated static func ended(link id: Int, _ failure: (any Error)?, reporting: Bool, inbox: EngineInbox<SessionStateMachine.Input>, taken: TakenUpdates) {
        taken.end()
        inbox.taskEnded()
        guard reporting else { return }
        inbox.yield(.linkFailed(id, linkEnd(failure)))
    }

    /// One update into the inbox (out of line: the input it makes is not kept in the reader's
    /// frame while it waits for the next update).
    @inline(never)
    private nonisolated static func forward(_ update: BackendUpdate, link id: Int, into inbox: EngineInbox<SessionStateMachine.Input>) async -> Bool {
        await inbox.yieldUpdate(.update(id, update))
    }

    /// Performs one request on the link and hands the inbox its outcome, behind every update the
    /// link yielded before the request returned.
    @inline(never)
    private nonisolated func perform(_ job: LinkJob, on connection: any BackendConnection, link id: Int, after updates: BackendUpdates, taken: TakenUpdates) async {
        defer { inbox.taskEnded() }
        let result: Result<BackendResponse, SwitchboardError>
        // A traced send's attempt is a child span of the send's.
        let span = job.trace.map { self.tracer.startAnySpan("switchboard.backend.send", context: $0.span.context, ofKind: .client) }
        do {
            // Under the attempt's span as the current context, so what the adapter traces (an
            // HTTP client's request span, a `traceparent` header) is its child rather than the
            // session run's.
            if let span {
                result = .success(try await ServiceContext.withValue(span.context) { try await connection.perform(job.request) })
            } else {
                result = .success(try await connection.perform(job.request))
            }
        } catch {
            let failure = SwitchboardError.classify(error)
            span?.recordFailure(failure)
            result = .failure(failure)
        }
        span?.end()
        // The updates travel in the link's task (or a reader's), and the answer must not be
        // stored before them (a room's cursor before the close that moved it): it waits until
        // every update the link yielded before it is in the session's queue.
        if let yielded = updates.yielded { await taken.wait(until: yielded) }
        inbox.yield(.requestFinished(id, ticket: job.ticket, result))
    }
}
