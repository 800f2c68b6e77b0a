import CoreMetrics
import Foundation
import Switchboard

/// The gateway's metrics (swift-metrics, exported by ``Gateway``'s `/metrics`): how many sessions
/// it runs and how many of their links are up, and counters that add up what every session of the
/// process did — messages in and out, sends failed, reconnects, retransmits — however often the
/// sessions move between processes (each session's own counts start at zero in each process; the
/// gateway adds what grew since it last looked, and once more when the session stops).
final class GatewayMetrics: Sendable {
    let sessionsRunning: Gauge
    let linksUp: Gauge
    let messagesIn: Counter
    let messagesOut: Counter
    let sendsFailed: Counter
    let sendRetries: Counter
    let reconnects: Counter
    let retransmits: Counter
    let storeWrites: CoreMetrics.Timer

    private struct Running {
        var session: ChatSession
        var counted = SessionStatistics()
    }

    private let running = Locked([String: Running]())

    init(factory: any MetricsFactory) {
        func name(_ name: String) -> String { "switchboard_gateway_" + name }
        sessionsRunning = Gauge(label: name("sessions_running"), factory: factory)
        linksUp = Gauge(label: name("links_up"), factory: factory)
        messagesIn = Counter(label: name("messages_in_total"), factory: factory)
        messagesOut = Counter(label: name("messages_out_total"), factory: factory)
        sendsFailed = Counter(label: name("sends_failed_total"), factory: factory)
        sendRetries = Counter(label: name("send_retries_total"), factory: factory)
        reconnects = Counter(label: name("reconnects_total"), factory: factory)
        retransmits = Counter(label: name("retransmit_requests_total"), factory: factory)
        storeWrites = CoreMetrics.Timer(label: name("store_write_seconds"), factory: factory)
        sessionsRunning.record(0)
        linksUp.record(0)
    }

    /// A session runs in this process from now on.
    func started(_ key: String, _ session: ChatSession) {
        running.withLock { $0[key] = Running(session: session) }
    }

    /// The session stopped here: what it did since the last look is added, and it leaves.
    func stopped(_ key: String) async {
        guard let session = running.withLock({ $0[key]?.session }) else { return }
        add(key, session, statistics: await session.statistics)
        running.withLock { running in
            if running[key]?.session === session { running.removeValue(forKey: key) }
        }
        await refreshGauges()
    }

    /// Adds what every running session did since the last look and sets the gauges: before
    /// each scrape.
    func update() async {
        for (key, entry) in running.withLock({ $0 }) {
            add(key, entry.session, statistics: await entry.session.statistics)
        }
        await refreshGauges()
    }

    /// Adds what grew since the figures last counted, in one step with moving them: two scrapes
    /// at once, or a scrape and a stop, count each message once; figures read before the newest
    /// counted ones add nothing; a session that has since been replaced under its key (taken
    /// over again) adds nothing of the old one's.
    private func add(_ key: String, _ session: ChatSession, statistics: SessionStatistics) {
        let counted: SessionStatistics? = running.withLock { running in
            guard var entry = running[key], entry.session === session else { return nil }
            let before = entry.counted
            entry.counted.messagesReceived = max(before.messagesReceived, statistics.messagesReceived)
            entry.counted.messagesSent = max(before.messagesSent, statistics.messagesSent)
            entry.counted.sendFailures = max(before.sendFailures, statistics.sendFailures)
            entry.counted.sendRetries = max(before.sendRetries, statistics.sendRetries)
            entry.counted.connects = max(before.connects, statistics.connects)
            entry.counted.retransmitRequests = max(before.retransmitRequests, statistics.retransmitRequests)
            running[key] = entry
            return before
        }
        guard let counted else { return }
        messagesIn.increment(by: max(0, statistics.messagesReceived - counted.messagesReceived))
        messagesOut.increment(by: max(0, statistics.messagesSent - counted.messagesSent))
        sendsFailed.increment(by: max(0, statistics.sendFailures - counted.sendFailures))
        sendRetries.increment(by: max(0, statistics.sendRetries - counted.sendRetries))
        // The first connect of a session in this process is no reconnect.
        reconnects.increment(by: max(0, max(0, statistics.connects - 1) - max(0, counted.connects - 1)))
        retransmits.increment(by: max(0, statistics.retransmitRequests - counted.retransmitRequests))
    }

    private func refreshGauges() async {
        let sessions = running.withLock { $0.values.map(\.session) }
        var up = 0
        for session in sessions where await session.connectionState == .connected { up += 1 }
        sessionsRunning.record(sessions.count)
        linksUp.record(up)
    }
}
