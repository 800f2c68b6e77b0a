import Foundation
public import Switchboard
public import SwitchboardTransport

/// CXone's analytics (protocols/cxone.md §3.15) over HTTP (H4), with the SDK's visit and page
/// rules. They need no socket: as in the SDK, which sends them once the channel configuration is
/// loaded, an app may view pages and open the chat window before connecting.
///
/// One belongs to each ``CXoneBackend`` (``CXoneBackend/analytics``) and is shared by its links:
/// the visitor id it makes is the one the socket connects with, and a link persists its visit and
/// page with the session's credentials. An app that views pages before its session first connects
/// restores them first (``restore(from:account:)``), so a restarted app goes on as the same
/// visitor in the same visit.
///
/// Rules: a visit lasts 30 minutes and each `PageView` extends it (a new visit is announced with
/// `VisitorVisit` first); a `PageView` of another page (title and url both differ) ends the
/// previous one with `TimeSpentOnPage`; `TimeSpentOnPage` is sent only for the page last viewed.
///
/// The lock guards the visitor, the visit and the page.
public final class CXoneAnalytics: Sendable {
    struct Page: Sendable, Equatable {
        var title: String
        var url: String
        var since: Double
    }

    struct State: Sendable {
        var visitorID: String?
        var visitID: String?
        var visitExpires: Double?
        var page: Page?
    }

    let configuration: CXoneConfiguration
    let transport: HTTPTransport
    let clock: SessionClock
    /// The SDK makes a new destination id on every prepare; here, per backend.
    let destinationID = UUID().uuidString.lowercased()
    private let state = Locked(State())

    /// The credential keys this keeps (the session persists them for a link).
    static let keys = ["visitor-id", "visit-id", "visit-expires", "page-title", "page-url", "page-since"]

    /// - Parameters:
    ///   - configuration: the channel's environment, brand and channel.
    ///   - transport: the HTTP client the events go out on.
    ///   - clock: dates the events (the app's clock; links use their session's).
    public init(configuration: CXoneConfiguration, transport: HTTPTransport = HTTPTransport(), clock: SessionClock = .continuous) {
        self.configuration = configuration
        self.transport = transport.allowingPlainText(configuration.allowsPlainText)
        self.clock = clock
    }

    /// The visitor id (the SDK's `analytics.visitorId`), made on first use.
    public var visitorID: String {
        state.withLock { state in
            if let id = state.visitorID { return id }
            let id = UUID().uuidString.lowercased()
            state.visitorID = id
            return id
        }
    }

    /// Takes the visitor, the visit and the page the session's store kept for `account` and the
    /// configured customer (``CXoneConfiguration/customerID``, the store scope's user), where
    /// this has none yet. Call it before the session runs (it reads the store once).
    public func restore(from store: any ChatStore, account: String = "default") async throws {
        adopt(try await store.fetchCredentials(scope: StoreScope(backend: "cxone", account: account, user: configuration.customerID)))
    }

    /// `PageView`; starts a visit (`VisitorVisit`) when none is running, and ends the previous
    /// page (`TimeSpentOnPage`) when both its title and url differ. Returns the events sent.
    @discardableResult
    public func viewPage(title: String, url: String) async throws -> [JSONValue] {
        try await send("PageView", data: ["title": .string(title), "url": .string(url)], now: clock.date)
    }

    /// `TimeSpentOnPage` for the page last viewed (nothing for another page).
    @discardableResult
    public func viewPageEnded(title: String, url: String) async throws -> [JSONValue] {
        try await send("TimeSpentOnPage", data: ["title": .string(title), "url": .string(url)], now: clock.date)
    }

    /// `ChatWindowOpened` (within a visit: view a page first).
    @discardableResult
    public func chatWindowOpen() async throws -> [JSONValue] {
        try await send("ChatWindowOpened", data: [:], now: clock.date)
    }

    // MARK: The rules (a link calls them too, with its session's clock)

    /// Sends one analytics event by the rules above; returns the events sent, in order.
    func send(_ type: String, data: JSONValue, now: Date) async throws -> [JSONValue] {
        let visitor = visitorID
        var sent: [JSONValue] = []
        switch type {
        case "PageView":
            guard let title = data["title"]?.stringValue, let url = data["url"]?.stringValue else {
                throw SwitchboardError(.invalidArgument, "PageView needs a title and a url")
            }
            let (visit, isNew, previous) = state.withLock { state -> (String, Bool, Page?) in
                let current = state.visitID.flatMap { (state.visitExpires ?? 0) > now.timeIntervalSince1970 ? $0 : nil }
                let visit = current ?? UUID().uuidString.lowercased()
                state.visitID = visit
                state.visitExpires = now.timeIntervalSince1970 + 30 * 60
                let previous = state.page
                state.page = Page(title: title, url: url, since: now.timeIntervalSince1970)
                return (visit, current == nil, previous)
            }
            if isNew { sent.append(try await post("VisitorVisit", data: [:], visit: visit, visitor: visitor, now: now)) }
            if let previous, previous.title != title, previous.url != url {
                sent.append(try await post("TimeSpentOnPage", data: Self.timeSpent(on: previous, until: now), visit: visit, visitor: visitor, now: now))
            }
            sent.append(try await post("PageView", data: ["title": .string(title), "url": .string(url)], visit: visit, visitor: visitor, now: now))
        case "TimeSpentOnPage":
            let visit = try currentVisit(now: now)
            let page = state.withLock { state -> Page? in
                guard let page = state.page, page.title == data["title"]?.stringValue, page.url == data["url"]?.stringValue else { return nil }
                state.page = nil
                return page
            }
            guard let page else { return [] }
            sent.append(try await post("TimeSpentOnPage", data: Self.timeSpent(on: page, until: now), visit: visit, visitor: visitor, now: now))
        default:
            sent.append(try await post(type, data: data, visit: try currentVisit(now: now), visitor: visitor, now: now))
        }
        return sent
    }

    /// What this keeps, as credentials to persist (a page no longer viewed is blanked: the
    /// session merges credentials).
    var credentials: Credentials {
        state.withLock { state in
            var credentials = Credentials()
            credentials["visitor-id"] = state.visitorID
            credentials["visit-id"] = state.visitID ?? ""
            credentials["visit-expires"] = state.visitExpires.map { String($0) } ?? ""
            credentials["page-title"] = state.page?.title ?? ""
            credentials["page-url"] = state.page?.url ?? ""
            credentials["page-since"] = state.page.map { String($0.since) } ?? ""
            return credentials
        }
    }

    /// Fills in, from stored credentials, what this does not have yet.
    func adopt(_ credentials: Credentials) {
        func value(_ key: String) -> String? { credentials[key].flatMap { $0.isEmpty ? nil : $0 } }
        state.withLock { state in
            if state.visitorID == nil { state.visitorID = value("visitor-id") }
            if state.visitID == nil, let visit = value("visit-id") {
                state.visitID = visit
                state.visitExpires = value("visit-expires").flatMap(Double.init)
            }
            if state.page == nil, let title = value("page-title"), let url = value("page-url"), let since = value("page-since").flatMap(Double.init) {
                state.page = Page(title: title, url: url, since: since)
            }
        }
    }

    /// Sign-out: a new visitor, no visit, no page.
    func forget() {
        state.withLock { $0 = State() }
    }

    private func currentVisit(now: Date) throws -> String {
        let visit = state.withLock { state in state.visitID.flatMap { (state.visitExpires ?? 0) > now.timeIntervalSince1970 ? $0 : nil } }
        guard let visit else { throw SwitchboardError(.invalidArgument, "no visit: view a page first", vendorCode: "missingVisitId") }
        return visit
    }

    private static func timeSpent(on page: Page, until now: Date) -> JSONValue {
        ["url": .string(page.url), "title": .string(page.title), "timeSpentOnPage": .int(Int64(max(0, now.timeIntervalSince1970 - page.since)))]
    }

    /// H4: `POST {chatHost}/web-analytics/1.0/tenants/{brand}/visitors/{visitor}/events`.
    private func post(_ type: String, data: JSONValue, visit: String, visitor: String, now: Date) async throws -> JSONValue {
        let host = URL(string: "/web-analytics/1.0/tenants/\(configuration.brandID)/visitors/\(visitor)/events", relativeTo: URL(string: configuration.environment.chatURL))!.absoluteString
        let event: JSONValue = [
            "id": .string(UUID().uuidString.lowercased()), "type": .string(type), "visitId": .string(visit),
            "destination": ["id": .string(destinationID)], "createdAtWithMilliseconds": .string(now.formatted(CXoneServerDate.milliseconds)), "data": data,
        ]
        let response = try await transport.postJSON(host, body: event, headers: CXoneWire.httpHeaders, timeout: configuration.replyTimeout)
        guard (200..<300).contains(response.status) else { throw SwitchboardError(.serverError, "analytics: HTTP \(response.status)") }
        return event
    }
}
