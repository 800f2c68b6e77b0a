import Foundation
import Logging
import Switchboard
import SwitchboardTransport

// Analytics over HTTP with the SDK's visit and page rules (protocols/cxone.md §3.15).
extension CXoneLink {
    /// Analytics through the link (``CXoneRequests``): the backend's ``CXoneAnalytics`` on the
    /// session's clock, its visit and page then kept with the credentials, so they outlive a
    /// reconnect and a restart.
    ///
    /// - Returns: the events sent, in order.
    func analytics(_ type: String, data: JSONValue) async throws -> [JSONValue] {
        let sent = try await analytics.send(type, data: data, now: context.clock.date)
        let kept = analytics.credentials
        state.withLock { $0.credentials.values.merge(kept.values) { _, new in new } }
        output.yield(.credentials(kept))
        return sent
    }
}
