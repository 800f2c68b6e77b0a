import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// The gateway's HTTP endpoints for operators: `/health` (the process answers), `/ready` (it
/// holds its lock connection and the database answers) and `/metrics` (Prometheus's text format).
enum GatewayHTTP {
    static func application(
        host: String,
        port: Int,
        metrics: GatewayMetrics,
        registry: PrometheusCollectorRegistry,
        logger: Logger,
        readiness: @escaping @Sendable () async -> (Bool, String),
        onListening: @escaping @Sendable (Int) -> Void
    ) -> any Service {
        let router = Router()
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
        return Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "switchboard-gateway"),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) },
            logger: logger
        )
    }
}
