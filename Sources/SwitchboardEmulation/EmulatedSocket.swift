public import HummingbirdWebSocket
public import Switchboard
import NIOWebSocket

/// The server side of one emulated WebSocket: what an emulator's model sends goes out in order
/// (a pause holds back everything after it, for slow-reply faults); what the client sends comes
/// back through the handlers that ``serve(inbound:outbound:maxFrameSize:clock:open:)`` is given.
public struct EmulatedSocket: Sendable {
    enum Item: Sendable {
        case text(String)
        case pause(Duration)
        /// The newest of what ``sendNewest(_:)`` was given, if not written yet.
        case newest
    }

    /// A frame from the client, or the end of reading (a frame over the limit or a broken socket).
    public enum Inbound: Sendable {
        case text(String)
        case binary
        case failed
    }

    /// What the emulator does with the client's frames, and when the socket is gone.
    public struct Handlers: Sendable {
        public var receive: @Sendable (Inbound) -> Void
        public var closed: @Sendable () -> Void
        /// Work of the socket's own while it is open (the agent console's pushes of what
        /// changed), cancelled when the socket ends; its end does not end the socket.
        public var run: (@Sendable () async -> Void)?

        public init(receive: @escaping @Sendable (Inbound) -> Void, closed: @escaping @Sendable () -> Void, run: (@Sendable () async -> Void)? = nil) {
            self.receive = receive
            self.closed = closed
            self.run = run
        }
    }

    let continuation: AsyncStream<Item>.Continuation
    /// What ``sendNewest(_:)`` holds until the writer takes it.
    let newest = Locked<String?>(nil)

    init(continuation: AsyncStream<Item>.Continuation) { self.continuation = continuation }

    public func send(_ text: String) { continuation.yield(.text(text)) }

    /// Sends `text` unless a newer `sendNewest` replaces it before the socket writes it: for
    /// state pushed whole (the agent console's), so a reader that stalls gets the newest once,
    /// not every one queued behind it.
    public func sendNewest(_ text: String) {
        let queued = newest.withLock { newest in
            defer { newest = text }
            return newest != nil
        }
        if !queued { continuation.yield(.newest) }
    }

    /// What an item puts on the wire: its text, the newest state not yet written, or nothing.
    func text(of item: Item) -> String? {
        switch item {
        case .text(let text): text
        case .newest: newest.withLock { newest in defer { newest = nil }; return newest }
        case .pause: nil
        }
    }
    public func pause(for delay: Duration) { continuation.yield(.pause(delay)) }
    /// Writes what is queued, then closes the socket (going away).
    public func close() { continuation.finish() }

    /// Serves one upgraded socket until either side ends it. `open` registers the socket with the
    /// emulator's model and returns its handlers.
    public static func serve(
        inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter,
        maxFrameSize: Int,
        clock: SessionClock = .continuous,
        open: (EmulatedSocket) -> Handlers
    ) async {
        let (items, continuation) = AsyncStream.makeStream(of: Item.self)
        let socket = EmulatedSocket(continuation: continuation)
        let handlers = open(socket)
        defer {
            handlers.closed()
            continuation.finish()
        }
        await handlers.running {
            await carry(items, of: socket, inbound: inbound, outbound: outbound, maxFrameSize: maxFrameSize, clock: clock, handlers: handlers)
        }
    }

    private static func carry(
        _ items: AsyncStream<Item>,
        of socket: EmulatedSocket,
        inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter,
        maxFrameSize: Int,
        clock: SessionClock,
        handlers: Handlers
    ) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await item in items {
                    do {
                        if case .pause(let delay) = item {
                            try await clock.sleep(for: delay)
                        } else if let frame = socket.text(of: item) {
                            try await outbound.writeTextMessage(frame)
                        }
                    } catch {
                        return
                    }
                }
                try? await outbound.close(.goingAway, reason: "closed by the server")
            }
            group.addTask {
                do {
                    for try await message in inbound.messages(maxSize: maxFrameSize) {
                        switch message {
                        case .text(let text): handlers.receive(.text(text))
                        case .binary: handlers.receive(.binary)
                        }
                    }
                } catch {
                    handlers.receive(.failed)
                }
            }
            await group.next()
            group.cancelAll()
        }
    }
}

extension EmulatedSocket.Handlers {
    /// Runs `body` with ``run`` beside it, and cancels ``run`` when `body` returns.
    func running(_ body: @Sendable () async -> Void) async {
        guard let run else { return await body() }
        await withoutActuallyEscaping(body) { body in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await run() }
                await body()
                group.cancelAll()
            }
        }
    }
}
