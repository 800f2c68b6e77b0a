import Foundation
import Logging
import Switchboard
import SwitchboardTransport
import Synchronization

// Analytics over HTTP with the SDK's visit and page rules (protocols/cxone.md §3.15).
extension CXoneLink {
    /// Analytics (§3.15) with the SDK's visit and page rules: a visit lasts 30 minutes and each
    /// `PageView` extends it (a new visit is announced with `VisitorVisit` first); a `PageView` of
    /// another page (title and url both differ) ends the previous one with `TimeSpentOnPage`;
    /// `TimeSpentOnPage` is sent only for the page last viewed. The visit and the page are kept
    /// with the credentials, so they outlive a reconnect.
    ///
    /// - Returns: the events sent, in order.
    func analytics(_ type: String, data: JSONValue) async throws -> JSONValue {
        let now = context.clock.date
        var sent: [JSONValue] = []
        switch type {
        case "PageView":
            guard let title = data["title"]?.stringValue, let url = data["url"]?.stringValue else {
                throw SwitchboardError(.invalidArgument, "PageView needs a title and a url")
            }
            let (visit, isNew, previous) = state.withLock { state -> (String, Bool, (title: String, url: String, since: Double)?) in
                let expires = state.credentials["visit-expires"].flatMap(Double.init) ?? 0
                let current = state.credentials["visit-id"].flatMap { expires > now.timeIntervalSince1970 ? $0 : nil }
                let visit = current ?? UUID().uuidString.lowercased()
                state.credentials["visit-id"] = visit
                state.credentials["visit-expires"] = String(now.timeIntervalSince1970 + 30 * 60)
                var previous: (title: String, url: String, since: Double)?
                if let title = state.credentials["page-title"], let url = state.credentials["page-url"], let since = state.credentials["page-since"].flatMap(Double.init) {
                    previous = (title, url, since)
                }
                return (visit, current == nil, previous)
            }
            if isNew { sent.append(try await postAnalytics("VisitorVisit", data: [:], visit: visit)) }
            if let previous, previous.title != title, previous.url != url {
                sent.append(try await postAnalytics("TimeSpentOnPage", data: Self.timeSpent(on: previous, until: now), visit: visit))
            }
            sent.append(try await postAnalytics("PageView", data: ["title": .string(title), "url": .string(url)], visit: visit))
            keepAnalyticsState { credentials in
                credentials["page-title"] = title
                credentials["page-url"] = url
                credentials["page-since"] = String(now.timeIntervalSince1970)
            }
        case "TimeSpentOnPage":
            let visit = try currentVisit()
            let page = state.withLock { state -> (title: String, url: String, since: Double)? in
                guard let title = state.credentials["page-title"], let url = state.credentials["page-url"],
                    let since = state.credentials["page-since"].flatMap(Double.init),
                    title == data["title"]?.stringValue, url == data["url"]?.stringValue
                else { return nil }
                return (title, url, since)
            }
            guard let page else { return .array([]) }
            sent.append(try await postAnalytics("TimeSpentOnPage", data: Self.timeSpent(on: page, until: now), visit: visit))
            // The session merges credentials, so the ended page is blanked rather than removed.
            keepAnalyticsState { credentials in
                for key in ["page-title", "page-url", "page-since"] { credentials[key] = "" }
            }
        default:
            sent.append(try await postAnalytics(type, data: data, visit: try currentVisit()))
        }
        return .array(sent)
    }

    func currentVisit() throws -> String {
        let now = context.clock.date.timeIntervalSince1970
        let visit = state.withLock { state in
            state.credentials["visit-id"].flatMap { (state.credentials["visit-expires"].flatMap(Double.init) ?? 0) > now ? $0 : nil }
        }
        guard let visit else { throw SwitchboardError(.invalidArgument, "no visit: view a page first", vendorCode: "missingVisitId") }
        return visit
    }

    func keepAnalyticsState(_ change: (inout Credentials) -> Void) {
        let kept = state.withLock { state in
            change(&state.credentials)
            return state.credentials
        }
        continuation.yield(.credentials(kept))
    }

    static func timeSpent(on page: (title: String, url: String, since: Double), until now: Date) -> JSONValue {
        ["url": .string(page.url), "title": .string(page.title), "timeSpentOnPage": .int(Int64(max(0, now.timeIntervalSince1970 - page.since)))]
    }

    /// H4: `POST {chatHost}/web-analytics/1.0/tenants/{brand}/visitors/{visitor}/events`.
    func postAnalytics(_ type: String, data: JSONValue, visit: String) async throws -> JSONValue {
        let visitor = state.withLock { $0.credentials["visitor-id"] ?? "" }
        guard !visitor.isEmpty else { throw SwitchboardError(.invalidArgument, "no visitor id", vendorCode: "missingVisitorId") }
        let host = URL(string: "/web-analytics/1.0/tenants/\(configuration.brandID)/visitors/\(visitor)/events", relativeTo: URL(string: configuration.environment.chatURL))!.absoluteString
        let event: JSONValue = [
            "id": .string(UUID().uuidString.lowercased()), "type": .string(type), "visitId": .string(visit),
            "destination": ["id": .string(destinationID)], "createdAtWithMilliseconds": .string(CXoneServerDate.withMilliseconds(context.clock)), "data": data,
        ]
        let response = try await transport.postJSON(host, body: event, headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
        guard (200..<300).contains(response.status) else { throw SwitchboardError(.serverError, "analytics: HTTP \(response.status)") }
        return event
    }
}
