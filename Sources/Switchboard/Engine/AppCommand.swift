/// What the app asks of a session, as the loop takes it: one typed input each, so the loop's
/// inputs can be listed and logged. A flow that needs the backend (a history page, starting a
/// conversation, a request whose answer is applied) is one command: the machine sends its request
/// and finishes the flow when the answer comes, with the flow's state kept in the lane's work
/// (``SessionStateMachine/LaneWork``).
enum AppCommand: Sendable {
    /// What the app wants of the connection.
    enum LifecycleChange: Sendable, Hashable {
        case resume
        case pause
        case close
    }

    /// What a request's answer does to the store before its caller hears it.
    enum Applying: Sendable {
        /// Nothing (a refresh's updates are applied as updates).
        case nothing
        /// The message or conversation the server answered with (an edit, an update).
        case response(in: ConversationID)
        /// `changes`, when the server answered without the conversation.
        case changes(ConversationChanges, to: ConversationID)
        /// Custom fields set on a conversation, kept in its `customData["customFields"]` when the
        /// server answered without the conversation, so they read back without a link.
        case customFields([String: String], to: ConversationID)
    }

    case lifecycle(LifecycleChange, Reply<Void>)
    /// A send; with the caller's client id when it chose one (a repeat is answered with the
    /// stored message instead of sent again), and its trace (the machine carries it, the runner
    /// uses it).
    case send(MessageDraft, in: ConversationID, clientID: ClientMessageID?, trace: SendTrace?, Reply<Message>)
    case typing(Bool, draft: String?, in: ConversationID, Reply<TypingOutcome>)
    case markRead(ChatEvent.ReadMarker?, in: ConversationID, Reply<Void>)
    /// The next history page from the backend; answered once it is stored (with nothing when
    /// there is no older history or no link). Joins a page already on its way.
    case history(ConversationID, limit: Int, Reply<Void>)
    case startConversation(ConversationDraft, Reply<ConversationID>)
    /// A request on the live link, in its conversation's lane.
    case request(BackendRequest, Applying, Reply<BackendResponse>)

    /// Whom to answer when the command cannot run.
    var reply: any FailableReply {
        switch self {
        case .lifecycle(_, let reply): reply
        case .send(_, _, _, _, let reply): reply
        case .typing(_, _, _, let reply): reply
        case .markRead(_, _, let reply): reply
        case .history(_, _, let reply): reply
        case .startConversation(_, let reply): reply
        case .request(_, _, let reply): reply
        }
    }
}

/// A reply that can be failed without knowing what it answers.
protocol FailableReply: Sendable {
    func fail(_ error: any Error)
}

/// The one answer an app command's caller waits for.
struct Reply<Value: Sendable>: FailableReply {
    private let resume: @Sendable (Result<Value, any Error>) -> Void

    /// Answers a caller waiting on `continuation`.
    init(continuation: CheckedContinuation<Value, any Error>) {
        self.resume = { continuation.resume(with: $0) }
    }

    /// Answers by calling `resume` (once).
    init(_ resume: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        self.resume = resume
    }

    func succeed(_ value: Value) { resume(.success(value)) }
    func fail(_ error: any Error) { resume(.failure(error)) }
    func complete(_ result: Result<Value, SwitchboardError>) { resume(result.mapError { $0 as any Error }) }
}
