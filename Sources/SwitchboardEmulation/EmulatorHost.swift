public import Hummingbird
public import HummingbirdWebSocket
public import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Hosts an emulator's routes on a real socket: 127.0.0.1 and a port the OS picks by default, so
/// tests never collide. In-process (tests, the demo) it runs for the duration of a closure;
/// standalone (`switchboard emulate`) until the task is cancelled or the process is signalled.
public enum EmulatorHost {
    /// The largest WebSocket frame the host reads (1 MiB); an emulator refuses what its protocol
    /// does not allow below that with the protocol's own error. (Hummingbird's default, 16 KiB,
    /// closed the socket with 1009 on legal frames.)
    public static let maxWebSocketFrame = 1 << 20

    /// Runs the emulator around `body`, which gets the bound port; stops it when `body` returns.
    ///
    /// The server is stopped gracefully: it stops accepting and hands every connection it had
    /// accepted to its handler, open sockets are closed with 1000, and what is still open after
    /// ``stopGracePeriod`` is cut. Cancelling the server's task instead can drop a connection that
    /// was accepted but not yet handed out, which SwiftNIO traps on ("Deinited NIOAsyncWriter
    /// without calling finish()", swift-nio#2637) for a server whose connections are async
    /// channels from the start (`FaultProxy`'s; Hummingbird's become one after the first request).
    public static func withRunning<Result: Sendable>(
        router: Router<BasicWebSocketRequestContext>,
        webSocketRoutes: [WebSocketRoute],
        host: String = "127.0.0.1",
        port: Int = 0,
        maxWebSocketFrame: Int = EmulatorHost.maxWebSocketFrame,
        logger: Logger,
        _ body: @Sendable (Int) async throws -> Result
    ) async throws -> Result {
        let webSocketRouter = Self.webSocketRouter(webSocketRoutes)
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: webSocketRouter, configuration: .init(ws: Self.configuration(webSocketRoutes, maxWebSocketFrame))),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? port)
                portContinuation.finish()
            },
            logger: logger
        )
        var configuration = ServiceGroupConfiguration(services: [application], logger: logger)
        configuration.maximumGracefulShutdownDuration = stopGracePeriod
        let server = ServiceGroup(configuration: configuration)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // However the server ends — failing to bind, say — the wait for its port ends too.
                defer { portContinuation.finish() }
                try await Self.explainingBindFailure(host: host, port: port) { try await server.run() }
            }
            defer { group.cancelAll() }
            for await bound in ports {
                let result: Swift.Result<Result, any Error>
                do {
                    result = .success(try await body(bound))
                } catch {
                    result = .failure(error)
                }
                await server.triggerGracefulShutdown()
                // Its end, within the grace period (past it the group cancels the server).
                while !group.isEmpty { _ = try? await group.next() }
                return try result.get()
            }
            // The server stopped before it was bound: its error, or a clear one.
            try await group.next()
            throw EmulatorHostError(description: "the emulator's server on \(host):\(port) stopped before it was bound")
        }
    }

    /// How long open connections get to finish after SIGINT or SIGTERM (a WebSocket is closed
    /// with 1000, an answer under way is written) before they are cut: a long-poll held for 20 s
    /// must not hold the process.
    public static let signalGracePeriod: Duration = .milliseconds(500)

    /// How long open connections get to finish when ``withRunning(router:webSocketRoutes:host:port:maxWebSocketFrame:logger:_:)``'s
    /// body returns (a long-poll a client still holds is cut after it).
    public static let stopGracePeriod: Duration = .milliseconds(100)

    /// Runs the emulator until cancelled or signalled (SIGINT, SIGTERM); `onBound` gets the port.
    /// A signal stops it within ``signalGracePeriod`` and it returns normally.
    ///
    /// - Throws: ``EmulatorHostError`` when the port is in use; what the server throws otherwise.
    public static func run(
        router: Router<BasicWebSocketRequestContext>,
        webSocketRoutes: [WebSocketRoute],
        host: String = "127.0.0.1",
        port: Int = 0,
        maxWebSocketFrame: Int = EmulatorHost.maxWebSocketFrame,
        logger: Logger,
        onBound: @escaping @Sendable (Int) async -> Void
    ) async throws {
        let webSocketRouter = Self.webSocketRouter(webSocketRoutes)
        let application = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: webSocketRouter, configuration: .init(ws: Self.configuration(webSocketRoutes, maxWebSocketFrame))),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            onServerRunning: { channel in await onBound(channel.localAddress?.port ?? port) },
            logger: logger
        )
        var configuration = ServiceGroupConfiguration(services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = signalGracePeriod
        let group = ServiceGroup(configuration: configuration)
        try await explainingBindFailure(host: host, port: port) { try await group.run() }
    }

    /// Frames up to `maxWebSocketFrame`, or the largest a route reads (the agent console takes
    /// files); each route still refuses a message over its own limit.
    static func configuration(_ routes: [WebSocketRoute], _ maxWebSocketFrame: Int) -> WebSocketServerConfiguration {
        WebSocketServerConfiguration(maxFrameSize: max(maxWebSocketFrame, routes.map(\.maxFrameSize).max() ?? 0))
    }

    /// Serves each route's sockets through ``EmulatedSocket``.
    static func webSocketRouter(_ routes: [WebSocketRoute]) -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        for route in routes {
            router.ws(RouterPath(route.path), shouldUpgrade: { request, _ in
                route.refuses(request.uri.description) ? .dontUpgrade : .upgrade([:])
            }) { inbound, outbound, context in
                let uri = context.request.uri.description
                await EmulatedSocket.serve(inbound: inbound, outbound: outbound, maxFrameSize: route.maxFrameSize, clock: route.clock) { socket in
                    route.open(uri, socket)
                }
            }
        }
        return router
    }

    /// Runs `body`, turning a failure to bind because the address is taken into one line.
    private static func explainingBindFailure(host: String, port: Int, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw EmulatorHostError(description: "port \(port) is in use: another process listens on \(host):\(port) (choose another port, or 0 for a free one)")
        }
    }
}

/// The emulator's server could not start.
public struct EmulatorHostError: Error, Sendable, CustomStringConvertible {
    public var description: String
}
