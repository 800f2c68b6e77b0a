import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// The gateway's HTTP endpoints for operators: `/health` (the process answers), `/ready` (it
/// holds its lock connection and the database answers) and `/metrics` (Prometheus's text format);
/// and, with a token configured, the API for other programs (``GatewayAPI``).
enum GatewayHTTP {
    static func application(
        host: String,
        port: Int,
        metrics: GatewayMetrics,
        registry: PrometheusCollectorRegistry,
        logger: Logger,
        readiness: @escaping @Sendable () async -> (Bool, String),
        api: GatewayAPI?,
        onListening: @escaping @Sendable (Int) -> Void
    ) -> (service: any Service, routes: [String]) {
        let router = Router(context: BasicWebSocketRequestContext.self)
        let webSocketRouter = Router(context: BasicWebSocketRequestContext.self)
        if let api {
            api.register(on: router)
            api.registerWebSocket(on: webSocketRouter)
        }
        router.get("/health") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: "alive\n")))
        }
        router.get("/ready") { _, _ in
            let (ready, reason) = await readiness()
            return Response(
                status: ready ? .ok : .serviceUnavailable,
                headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: reason + "\n"))
            )
        }
        router.get("/metrics") { _, _ in
            await metrics.update()
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
            )
        }
        let routes = (router.routes + webSocketRouter.routes).map { "\($0.method) \($0.path)" }
        let application = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: webSocketRouter),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "switchboard-gateway"),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) },
            logger: logger
        )
        return (application, routes)
    }
}
