import Foundation
import Logging

// The link: one child task of the loop that opens the backend's connection, reads its updates and
// performs the requests the loop hands it; and the connection machine's actions that start and
// end it.
extension ChatSession {
    // MARK: The link

    /// Performs what the connection machine decided.
    func perform(_ actions: [ConnectionStateMachine.Action]) async {
        for action in actions {
            switch action {
            case .startLink(let id):
                let (jobs, continuation) = AsyncStream.makeStream(of: LinkJob.self)
                let (aborted, abort) = AsyncStream.makeStream(of: Void.self)
                link = LinkHandles(id: id, jobs: continuation, abort: abort)
                let context = ConnectionContext(
                    session: self.id,
                    credentials: credentials,
                    cursor: cursor,
                    conversationSequences: conversations.sequences,
                    clock: clock,
                    logger: logger
                )
                spawns.append(.link(id, context, jobs, aborted: aborted))
            case .finishJobs(let id):
                if link?.id == id { link?.jobs.finish() }
            case .abortConnect(let id):
                if link?.id == id { link?.abort.finish() }
            case .publish(let state, let reason):
                publish(.connection(state, reason: reason), conversation: nil)
            case .setReconnectTimer(let delay):
                setTimer(.reconnect, after: delay)
            case .cancelReconnectTimer:
                cancelTimer(.reconnect)
            case .setStableTimer(let id, let delay):
                setTimer(.linkStable(id), after: delay)
            case .cancelStableTimer(let id):
                cancelTimer(.linkStable(id))
            case .linkEstablished:
                statisticsValue.connects += 1
                await linkEstablished()
            case .linkDropped(let interrupted):
                link = nil
                if interrupted { statisticsValue.connectionFailures += 1 }
                await linkDropped(interrupted: interrupted)
            case .clearCredentials:
                credentials = Credentials()
                await persist(.saveCredentials(credentials))
            case .gaveUp(let error):
                logger.error("session ended", metadata: ["error": "\(error)"])
                publish(.fatal(error), conversation: nil)
            }
        }
    }

    /// One link's scope: opens it, reads its updates, performs the requests the loop hands it as
    /// child tasks (each forgotten when done), and reports how it ended.
    nonisolated func runLink(_ id: Int, context: ConnectionContext, jobs: AsyncStream<LinkJob>, aborted: AsyncStream<Void>) async {
        var failure: SwitchboardError?
        do {
            // The link's scope beside a watcher of `aborted`: whichever ends first ends the other.
            // An aborted connect is cancelled and its error dropped (the link ended on purpose).
            try await withThrowingTaskGroup(of: Void.self) { scope in
                scope.addTask { try await self.openLink(id, context: context, jobs: jobs) }
                scope.addTask { for await _ in aborted {} }
                try await scope.next()
                scope.cancelAll()
            }
        } catch {
            failure = SwitchboardError.classify(error)
        }
        inbox.yield(.linkClosed(id, failure))
    }

    /// Opens the backend's link and serves it: reads its updates and performs the requests the
    /// loop hands it, each as a child task.
    private nonisolated func openLink(_ id: Int, context: ConnectionContext, jobs: AsyncStream<LinkJob>) async throws {
        let inbox = self.inbox
        try await backend.withConnection(context) { connection in
            inbox.yield(.linkOpened(id))
            await ChildTasks.withScope { group in
                inbox.taskStarted()
                await group.addTask {
                    defer { inbox.taskEnded() }
                    do {
                        for try await update in connection.updates {
                            guard await inbox.yieldUpdate(.update(id, update)) else { return }
                        }
                        inbox.yield(.linkFailed(id, SwitchboardError(.connectionLost, "the backend closed the link")))
                    } catch {
                        inbox.yield(.linkFailed(id, SwitchboardError.classify(error)))
                    }
                }
                for await job in jobs {
                    inbox.taskStarted()
                    await group.addTask {
                        defer { inbox.taskEnded() }
                        let result: Result<BackendResponse, SwitchboardError>
                        do {
                            result = .success(try await connection.perform(job.request))
                        } catch {
                            result = .failure(SwitchboardError.classify(error))
                        }
                        inbox.yield(.requestFinished(id, ticket: job.ticket, result))
                    }
                }
                group.cancelAll()
            }
        }
    }

    var isLinkOpen: Bool { connection.isLinkOpen }
}
