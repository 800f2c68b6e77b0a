public import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
public import Switchboard

/// HTTP requests for adapters, on AsyncHTTPClient (real deadlines and cancellation; URLSession
/// on Linux rounds timeouts to whole seconds). Failures become classified ``SwitchboardError``s;
/// HTTP statuses are returned for the adapter to interpret.
///
/// A transport made with ``init(handler:maxBodySize:)`` sends nothing over the network: each
/// request goes to a function in the same process (an emulator's routes, in
/// `SwitchboardEmulation`), so adapter tests run without sockets and on a test clock.
public struct HTTPTransport: Sendable {
    /// A request as the transport sends it, for a handler in the same process.
    public struct Request: Sendable {
        public var method: String
        /// The whole URL, query included.
        public var url: String
        public var headers: [(String, String)]
        public var body: Data

        public init(method: String, url: String, headers: [(String, String)] = [], body: Data = Data()) {
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
        }
    }

    /// Answers requests in the same process. It has no deadline of its own: on a test clock, a
    /// request waits for its answer as long as the handler takes.
    public typealias Handler = @Sendable (Request) async throws -> Response

    public struct Response: Sendable {
        public var status: Int
        public var body: Data
        public var headers: [(String, String)]

        public init(status: Int, body: Data, headers: [(String, String)] = []) {
            self.status = status
            self.body = body
            self.headers = headers
        }
    }

    /// A file part of a multipart body.
    public struct FilePart: Sendable {
        public var field: String
        public var filename: String
        public var contentType: String
        public var data: Data

        public init(field: String, filename: String, contentType: String, data: Data) {
            self.field = field
            self.filename = filename
            self.contentType = contentType
            self.data = data
        }
    }

    private enum Exchange: Sendable {
        case network(HTTPClient)
        case inProcess(Handler)
    }

    private let exchange: Exchange
    /// The largest response body accepted; larger fails with ``SwitchboardError/Code/payloadTooLarge``.
    public var maxBodySize: Int
    /// Whether plain `http://` to a host that is not loopback is allowed (``PlainTextPolicy``).
    public var allowsPlainText: Bool

    /// The client every transport uses unless given one: `HTTPClient.shared`'s settings with room
    /// for long-polls. A Webim session holds a connection for its long-poll all the time, so a
    /// process with many sessions on one host needs that many connections to it; `HTTPClient.shared`
    /// allows 8 per host, and the ninth session's requests waited behind the others' polls (found
    /// by `switchboard load webim`). Like `HTTPClient.shared`, it lives as long as the process.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16_384
        // An idle connection is closed after 10 s (60 s in `HTTPClient.shared`): an emulator or a
        // server shutting down gracefully waits for the idle connections its clients keep.
        configuration.connectionPool.idleTimeout = .seconds(10)
        // A connection that cannot be made fails its requests at once. AsyncHTTPClient retries a
        // failed connection attempt with backoff until each waiting request's deadline by default
        // (swift-server/async-http-client#743), so a refused port or `https://` to a plain server
        // said nothing for a whole request timeout (90 s for Webim's first request) and then
        // "timed out". Retrying a link is the session engine's job, with its own backoff.
        configuration.connectionPool.retryConnectionEstablishment = false
        // A connection, TCP and TLS handshakes, is made in 8 s or fails (90 s in `HTTPClient.shared`):
        // below the adapters' shortest request timeout (CXone's 10 s), so a server that does not
        // answer the TLS handshake (a plain HTTP server that waits for a request line) is
        // reported as such, not as a request that timed out.
        configuration.timeout.connect = .seconds(8)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public init(client: HTTPClient = HTTPTransport.sharedClient, maxBodySize: Int = 16 << 20, allowsPlainText: Bool = false) {
        self.exchange = .network(client)
        self.maxBodySize = maxBodySize
        self.allowsPlainText = allowsPlainText
    }

    /// A transport whose requests `handler` answers in the same process: no socket, no DNS, no
    /// deadline. The body limit still applies; ``PlainTextPolicy`` does not (nothing travels).
    public init(handler: @escaping Handler, maxBodySize: Int = 16 << 20) {
        self.exchange = .inProcess(handler)
        self.maxBodySize = maxBodySize
        self.allowsPlainText = true
    }

    /// This transport, also allowing plain text when `allowed` (an adapter's configuration says so).
    public func allowingPlainText(_ allowed: Bool) -> HTTPTransport {
        var transport = self
        transport.allowsPlainText = transport.allowsPlainText || allowed
        return transport
    }

    public func get(
        _ url: String,
        query: [(String, String)] = [],
        headers: [(String, String)] = [],
        timeout: Duration
    ) async throws -> Response {
        let full = query.isEmpty ? url : url + (url.contains("?") ? "&" : "?") + Self.formEncode(query)
        return try await execute(Request(method: "GET", url: full, headers: headers), timeout: timeout)
    }

    /// `application/x-www-form-urlencoded` POST.
    public func postForm(
        _ url: String,
        fields: [(String, String)],
        headers: [(String, String)] = [],
        timeout: Duration
    ) async throws -> Response {
        try await postData(url, data: Data(Self.formEncode(fields).utf8), contentType: "application/x-www-form-urlencoded", headers: headers, timeout: timeout)
    }

    /// A JSON POST (or PUT).
    public func postJSON(
        _ url: String,
        body: JSONValue,
        method: String = "POST",
        headers: [(String, String)] = [],
        timeout: Duration
    ) async throws -> Response {
        let request = Request(method: method == "PUT" ? "PUT" : "POST", url: url, headers: Self.replacing("Content-Type", with: "application/json", in: headers), body: body.jsonData())
        return try await execute(request, timeout: timeout)
    }

    /// A POST (or PUT) of raw bytes with their content type (a media upload; an XMPP upload slot
    /// takes a PUT).
    public func postData(
        _ url: String,
        data: Data,
        contentType: String,
        method: String = "POST",
        headers: [(String, String)] = [],
        timeout: Duration
    ) async throws -> Response {
        let request = Request(method: method, url: url, headers: Self.replacing("Content-Type", with: contentType, in: headers), body: data)
        return try await execute(request, timeout: timeout)
    }

    /// `multipart/form-data` POST with text fields and one file.
    public func postMultipart(
        _ url: String,
        fields: [(String, String)],
        file: FilePart,
        headers: [(String, String)] = [],
        timeout: Duration
    ) async throws -> Response {
        let boundary = "switchboard-\(UUID().uuidString)"
        var body = Data()
        func line(_ text: String) { body.append(Data((text + "\r\n").utf8)) }
        for (name, value) in fields {
            line("--\(boundary)")
            line("Content-Disposition: form-data; name=\"\(name)\"")
            line("")
            line(value)
        }
        line("--\(boundary)")
        line("Content-Disposition: form-data; name=\"\(file.field)\"; filename=\"\(file.filename)\"")
        line("Content-Type: \(file.contentType)")
        line("")
        body.append(file.data)
        line("")
        line("--\(boundary)--")
        let contentType = "multipart/form-data; boundary=\(boundary)"
        return try await execute(Request(method: "POST", url: url, headers: Self.replacing("Content-Type", with: contentType, in: headers), body: body), timeout: timeout)
    }

    /// `headers` with every `name` field (any case) replaced by one of `value`.
    static func replacing(_ name: String, with value: String, in headers: [(String, String)]) -> [(String, String)] {
        headers.filter { $0.0.caseInsensitiveCompare(name) != .orderedSame } + [(name, value)]
    }

    private func execute(_ request: Request, timeout: Duration) async throws -> Response {
        switch exchange {
        case .inProcess(let handler):
            let response: Response
            do {
                response = try await handler(request)
            } catch {
                throw Self.classify(error, cancelled: Task.isCancelled)
            }
            guard response.body.count <= maxBodySize else {
                throw SwitchboardError(.payloadTooLarge, "a response body was over \(maxBodySize) bytes")
            }
            return response
        case .network(let client):
            return try await execute(request, on: client, timeout: timeout)
        }
    }

    private func execute(_ request: Request, on client: HTTPClient, timeout: Duration) async throws -> Response {
        try PlainTextPolicy.check(request.url, allowed: allowsPlainText)
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if request.method != "GET" { outgoing.body = .bytes(ByteBuffer(data: request.body)) }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outgoing, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
        } catch {
            throw Self.classify(error, cancelled: Task.isCancelled, url: request.url)
        }
        let buffer: ByteBuffer
        do {
            buffer = try await response.body.collect(upTo: maxBodySize)
        } catch let error as NIOTooManyBytesError {
            throw SwitchboardError(.payloadTooLarge, "a response body was over \(maxBodySize) bytes", underlying: error)
        } catch {
            throw Self.classify(error, cancelled: Task.isCancelled)
        }
        return Response(
            status: Int(response.status.code),
            body: Data(buffer: buffer),
            headers: response.headers.map { ($0.name, $0.value) }
        )
    }

    /// A request torn down with its task (its link ended) did not lose its connection, whatever
    /// the client reports as the connection closes under it (often a parser error at the cut):
    /// it was cancelled, which the outbox does not count against the send.
    static func classify(_ error: any Error, cancelled: Bool = false, url: String? = nil) -> SwitchboardError {
        if let error = error as? SwitchboardError { return error }
        if cancelled || error is CancellationError || (error as? HTTPClientError) == .cancelled {
            return SwitchboardError(.cancelled, "cancelled", underlying: error)
        }
        if let url, let tls = tlsFailure(error, url: url) {
            return SwitchboardError(.connectionLost, tls, underlying: error)
        }
        if let error = error as? HTTPClientError, error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            return SwitchboardError(.timedOut, "the HTTP request timed out", underlying: error)
        }
        return SwitchboardError(.connectionLost, "HTTP failure: \(failureReason(error))", underlying: error)
    }

    /// A network failure in a few words a person reads: "connection refused", "host not found", a
    /// TLS failure; else the error's type. Never the error's whole description, which may hold a
    /// URL with a token in it.
    public static func failureReason(_ error: any Error) -> String {
        let text = String(describing: error).lowercased()
        let reasons: [(needles: [String], reason: String)] = [
            (["refused"], "connection refused"),
            (["nodename nor servname", "name or service not known", "no address", "getaddrinfo", "resolv", "unknownhost", "nxdomain"], "host not found"),
            (["tls", "ssl", "certificate", "handshake"], "TLS failure"),
            (["reset by peer", "connection reset"], "connection reset"),
            (["unreachable"], "network unreachable"),
            (["timed out", "timeout"], "timed out"),
        ]
        for entry in reasons where entry.needles.contains(where: text.contains) { return entry.reason }
        return "\(type(of: error))"
    }

    /// A failed TLS handshake in one line that says what to do, or `nil` for another failure.
    ///
    /// A server that answers the handshake in plain text (an HTTP server on an `https://` URL)
    /// "does not speak TLS"; one that does not answer it within the connect timeout may be a plain
    /// server that waits for a request line. Names the host and port only, never the path or
    /// query, which may hold a token.
    ///
    /// - Parameters:
    ///   - error: what the HTTP or WebSocket client failed with.
    ///   - url: the URL it connected to, `https://…` or `wss://…`.
    /// - Returns: "TLS handshake failed: …", or `nil` when `error` is not a TLS failure.
    public static func tlsFailure(_ error: any Error, url: String) -> String? {
        let components = URLComponents(string: url)
        let scheme = components?.scheme?.lowercased()
        guard scheme == "https" || scheme == "wss" else { return nil }
        let plain = scheme == "wss" ? "ws://" : "http://"
        let host = components?.host ?? "?"
        let server = components?.port.map { "\(host):\($0)" } ?? host
        let text = String(describing: error).lowercased()
        if (error as? HTTPClientError) == .tlsHandshakeTimeout {
            return "TLS handshake failed: the server at \(server) did not answer it in time (a plain server? try \(plain))"
        }
        if (error as? HTTPClientError) == .connectTimeout {
            return "no connection to the server at \(server) in time (TCP and TLS handshakes; for a plain server, try \(plain))"
        }
        if ["wrong_version_number", "wrong version number", "http_request", "record_too_large", "packet_length_too_long"].contains(where: text.contains) {
            return "TLS handshake failed: the server at \(server) does not speak TLS (try \(plain))"
        }
        if text.contains("cannotuseipaddressinsni") {
            return "TLS handshake failed: this client cannot name an IP address in TLS (\(server)); use the server's host name (localhost for 127.0.0.1)"
        }
        if text.contains("certificate") {
            return "TLS handshake failed: the certificate of the server at \(server) was not accepted"
        }
        if ["tls", "ssl", "handshake"].contains(where: text.contains) {
            return "TLS handshake failed with the server at \(server)"
        }
        return nil
    }

    /// `k=v&k=v` with strict RFC 3986 percent-encoding (space as `%20`, never `+`), as the Webim
    /// SDK encodes.
    public static func formEncode(_ fields: [(String, String)]) -> String {
        fields.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    public static func percentEncode(_ text: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: ":#[]@!$&'()*+,;=")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
