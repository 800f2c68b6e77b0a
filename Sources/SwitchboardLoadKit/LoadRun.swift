import Foundation
import Logging
@_spi(TestKit) public import Switchboard
@_spi(TestKit) public import SwitchboardTestKit

/// Many sessions in one process against one emulator: each its own customer with a conversation,
/// all connected at once, exchanging messages with the agent, then every session's store compared
/// with the server's log.
///
/// Used by `switchboard load` (2,000 sessions, by hand) and by `swift test` (a few dozen).
public struct LoadRun: Sendable {
    public struct Figures: Sendable, CustomStringConvertible {
        public var backend = ""
        public var sessions = 0
        /// Every session's stored rows against the server's log of its conversation, added up.
        public var audit = StoreAudit()
        /// Sessions whose store did not match the server's log within ``LoadRun/convergeTimeout``,
        /// with what the wait saw of the first.
        public var notConverged = 0
        public var convergence = ""
        /// Resident memory the connected, idle sessions added (with the emulator's side of each
        /// connection, which runs in the same process), per session.
        public var bytesPerConnectedSession = 0.0
        /// Resident memory at the end of the traffic, over the start, per session.
        public var bytesPerSessionAfterTraffic = 0.0
        public var secondsToConnect = 0.0
        public var secondsOfTraffic = 0.0

        /// Messages on the server at the end, all conversations, both ways.
        public var messages: Int { audit.messages }

        public var isClean: Bool { notConverged == 0 && audit.isClean }

        public var description: String {
            """
            \(backend): \(sessions) sessions, \(audit); memory per session \(Int((bytesPerConnectedSession / 1024).rounded())) KB connected, \
            \(Int((bytesPerSessionAfterTraffic / 1024).rounded())) KB after the traffic; \
            connect \(String(format: "%.1f", secondsToConnect)) s, traffic \(String(format: "%.1f", secondsOfTraffic)) s\
            \(notConverged == 0 ? "" : "; NOT CONVERGED: \(notConverged) sessions, first: \(convergence)")
            """
        }
    }

    /// One control per customer, all of the same emulator.
    public var controls: [any EmulatorControl]
    /// Messages each way per session.
    public var messagesPerSession: Int
    public var configuration: SessionConfiguration
    /// How long connecting and preparing the conversations may take.
    public var timeout: Duration
    /// How long each session may take to match the server's log once its traffic is sent; a
    /// session that does not is reported (``Figures/notConverged``) with its audit.
    public var convergeTimeout: Duration
    public var progress: @Sendable (String) -> Void

    public init(
        controls: [any EmulatorControl],
        messagesPerSession: Int,
        configuration: SessionConfiguration = SessionConfiguration(),
        timeout: Duration = .seconds(300),
        convergeTimeout: Duration = .seconds(300),
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.controls = controls
        self.messagesPerSession = messagesPerSession
        self.configuration = configuration
        self.timeout = timeout
        self.convergeTimeout = convergeTimeout
        self.progress = progress
    }

    public func run() async throws -> Figures {
        let bus = EventBus()
        let store = InMemoryChatStore()
        let changed = AsyncSignal()
        let watcher = bus.subscribe(filter: .all, buffering: .unbounded)
        let count = controls.count
        var figures = Figures(sessions: count)
        ProcessMemory.releaseFreed()
        let start = try ProcessMemory.residentBytes()
        var sessions: [ChatSession] = []
        for (index, control) in controls.enumerated() {
            sessions.append(
                ChatSession(
                    id: SessionID("load-\(index)"), backend: try await control.makeCustomerBackend(), account: "customer-\(index)",
                    store: store, bus: bus, configuration: configuration, logger: Logger(label: "load", factory: { _ in SwiftLogNoOpLogHandler() })
                )
            )
        }
        figures.backend = sessions.first?.descriptor.name.rawValue ?? ""
        let connected = ConnectedSessions()
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in watcher {
                    if event.isConnected { connected.insert(event.origin.session) }
                    changed.signal()
                }
            }
            for session in sessions {
                group.addTask { try await session.run() }
                try await session.resume()
            }
            try await waitUntil("\(count) sessions connected", timeout: timeout, signal: changed) { connected.count >= count }
            figures.secondsToConnect = started.duration(to: .now).seconds
            figures.bytesPerConnectedSession = Double(try ProcessMemory.residentBytes() - start) / Double(count)
            progress("\(figures.backend): \(count) sessions connected; traffic")

            let traffic = ContinuousClock.now
            let messages = messagesPerSession
            let timeout = self.timeout
            let convergeTimeout = self.convergeTimeout
            let results = try await withThrowingTaskGroup(of: (ConversationID, Int, String?).self) { traffic in
                for (index, (session, control)) in zip(sessions, controls).enumerated() {
                    traffic.addTask {
                        let conversation = try await control.prepareConversation(using: session)
                        try await waitUntil("session \(index) knows its conversation", timeout: timeout, signal: changed) {
                            try await session.conversations().contains { $0.id == conversation }
                        }
                        let chat = try await session.conversation(conversation)
                        let sent = Self.sent(by: index, messages: messages)
                        for (step, text) in sent.enumerated() {
                            _ = try await chat.send(text: text)
                            try await control.agentSend("agent \(index) \(step)", in: conversation)
                        }
                        do {
                            try await waitUntil("session \(index) converges on the server's log", timeout: convergeTimeout, signal: changed) {
                                try await StoreAudit.converged(chat, on: control, expected: 2 * messages, sent: sent)
                            }
                        } catch let failure as ConformanceFailure {
                            // Not converged: the run fails, and the audit below says what is wrong.
                            return (conversation, index, "\(failure)")
                        }
                        return (conversation, index, nil)
                    }
                }
                var results: [(ConversationID, Int, String?)] = []
                for try await result in traffic { results.append(result) }
                return results
            }
            figures.secondsOfTraffic = traffic.duration(to: .now).seconds
            figures.bytesPerSessionAfterTraffic = Double(try ProcessMemory.residentBytes() - start) / Double(count)

            // Every row each session stored, of every state, against the server's log.
            for (conversation, index, failure) in results {
                if let failure {
                    if figures.notConverged == 0 { figures.convergence = failure }
                    figures.notConverged += 1
                }
                let truth = try await controls[index].serverMessages(in: conversation)
                let stored = await store.fetchMessages(in: conversation, before: nil, limit: .max, scope: sessions[index].scope)
                figures.audit.add(StoreAudit.compare(server: truth, stored: stored, sent: Self.sent(by: index, messages: messagesPerSession)))
            }
            group.cancelAll()
        }
        return figures
    }

    /// The texts session `index` sends, each once.
    static func sent(by index: Int, messages: Int) -> [String] {
        (0..<messages).map { "customer \(index) \($0)" }
    }

    /// The sessions seen connected, by the watcher task; read by the waits.
    private final class ConnectedSessions: Sendable {
        private let ids = Locked<Set<SessionID>>([])
        func insert(_ id: SessionID) { ids.withLock { _ = $0.insert(id) } }
        var count: Int { ids.withLock(\.count) }
    }
}

/// The process's memory as the load run and `switchboard bench` measure it.
public enum ProcessMemory {
    /// Hands the allocator's free memory back to the system (glibc's `malloc_trim`, looked up at
    /// run time), so what an earlier figure freed is not reused unseen by the next.
    public static func releaseFreed() {
        #if os(Linux)
        typealias Trim = @convention(c) (Int) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") {
            _ = unsafeBitCast(symbol, to: Trim.self)(0)
        }
        #endif
    }

    /// A process's resident memory (Linux `/proc/<pid>/statm`): this process's unless told.
    public static func residentBytes(ofProcess pid: Int32? = nil) throws -> Int {
        let path = "/proc/\(pid.map(String.init) ?? "self")/statm"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), case let fields = text.split(separator: " "),
            fields.count > 1, let pages = Int(fields[1])
        else {
            throw SwitchboardError(.unsupported, "the memory figures read \(path) (Linux)")
        }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
