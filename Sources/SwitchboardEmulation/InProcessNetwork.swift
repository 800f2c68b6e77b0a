import Foundation
import HTTPTypes
public import Hummingbird
public import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOEmbedded
import NIOFoundationCompat
public import Switchboard
public import SwitchboardTransport

/// An emulator's routes without a socket: an `HTTPTransport` that hands each request to the
/// emulator's router and a `WebSocketTransport` that opens its sockets on the emulator's model,
/// both in the same process. Adapter scenario tests use it to run on a test clock: no port, no
/// TCP, no deadline but the ones the test moves time past. Make one with
/// `HostedEmulator.inProcess()`; one socket-level run per adapter (its conformance suite) keeps
/// the network path tested.
///
/// What a socket carries is what the host would carry: text frames in order, the emulator's
/// pauses timed on its route's clock, a frame over a side's limit ending the socket with the same
/// error as on the network, and either side's close ending it for both. A request or a socket to
/// another scheme, host or port than the endpoints' is refused, as nothing listens there; an error
/// a route throws is a 500, as the host answers it.
///
/// Unlike a server, a route's handler runs in the task of the request: a request the client
/// cancels (its link ended) stops the handler where it waits.
public struct InProcessNetwork: Sendable {
    /// The host and port the endpoints name. Nothing listens there: a client given these
    /// endpoints with the network transports fails at once ("connection refused").
    public static let host = "127.0.0.1"
    public static let port = 9

    public let http: HTTPTransport
    public let webSockets: WebSocketTransport

    init(router: Router<BasicWebSocketRequestContext>, webSocketRoutes: [WebSocketRoute], logger: Logger) {
        let responder = router.buildResponder()
        self.http = HTTPTransport(handler: { request in
            try Self.checkAddress(request.url, schemes: ["http"])
            return try await Self.respond(to: request, with: responder, logger: logger)
        })
        self.webSockets = WebSocketTransport { url, configuration in
            try Self.checkAddress(url, schemes: ["ws"])
            let uri = Self.pathAndQuery(of: url)
            let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
            guard let route = webSocketRoutes.first(where: { $0.path == path }) else {
                throw SwitchboardError(.connectionLost, "the server answered but would not open a WebSocket at \(path) (is the path right?)")
            }
            guard !route.refuses(uri) else {
                throw SwitchboardError(.connectionLost, "the server refused the WebSocket handshake at \(path)")
            }
            return Self.open(route, uri: uri, maxMessageSize: configuration.maxMessageSize)
        }
    }

    /// Refuses a URL the endpoints do not name, as the network would: nothing listens there.
    static func checkAddress(_ url: String, schemes: Set<String>) throws {
        let components = URLComponents(string: url)
        guard let scheme = components?.scheme?.lowercased(), schemes.contains(scheme), components?.host == host, components?.port == port else {
            throw SwitchboardError(.connectionLost, "HTTP failure: connection refused (in process, only \(schemes.sorted().joined(separator: ", "))://\(host):\(port) answers)")
        }
    }

    /// `/path?query` of a URL (`/` when it has no path).
    static func pathAndQuery(of url: String) -> String {
        guard let components = URLComponents(string: url) else { return url }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        return components.percentEncodedQuery.map { "\(path)?\($0)" } ?? path
    }

    static func respond(
        to request: HTTPTransport.Request,
        with responder: some HTTPResponder<BasicWebSocketRequestContext>,
        logger: Logger
    ) async throws -> HTTPTransport.Response {
        var fields = HTTPFields()
        for (name, value) in request.headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        fields[.contentLength] = String(request.body.count)
        let head = HTTPRequest(
            method: HTTPRequest.Method(request.method) ?? .get,
            scheme: "http",
            authority: "\(host):\(port)",
            path: pathAndQuery(of: request.url),
            headerFields: fields
        )
        let hummingbirdRequest = Request(head: head, body: RequestBody(buffer: ByteBuffer(data: request.body)))
        let context = BasicWebSocketRequestContext(source: ApplicationRequestContextSource(channel: NIOAsyncTestingChannel(), logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: hummingbirdRequest, context: context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: hummingbirdRequest, context: context)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // What the host answers for an error that is not an HTTP response.
            response = Response(status: .internalServerError)
        }
        let body = CollectedBody()
        try await response.body.write(body)
        return HTTPTransport.Response(
            status: Int(response.status.code),
            body: Data(buffer: body.bytes),
            headers: response.headers.map { ($0.name.rawName, $0.value) }
        )
    }

    /// Opens a socket on `route`'s model: the client's frames go to its handlers in the sender's
    /// task; the model's go to the client's messages while the link runs the socket.
    static func open(_ route: WebSocketRoute, uri: String, maxMessageSize: Int) -> WebSocketTransport.InProcessSocket {
        let (items, itemsContinuation) = AsyncStream.makeStream(of: EmulatedSocket.Item.self)
        let (messages, messagesContinuation) = AsyncThrowingStream.makeStream(of: String.self)
        let emulated = EmulatedSocket(continuation: itemsContinuation)
        let handlers = route.open(uri, emulated)
        let closed = Locked(false)
        /// Ends the socket for both sides, once: the model hears it is closed, the client's
        /// messages end (with `error`, when a frame broke the socket).
        let end: @Sendable (SwitchboardError?) -> Void = { error in
            guard closed.withLock({ closed in
                defer { closed = true }
                return !closed
            }) else { return }
            itemsContinuation.finish()
            messagesContinuation.finish(throwing: error)
            handlers.closed()
        }
        let socket = TextWebSocket(
            messages: messages,
            send: { text in
                guard !closed.withLock({ $0 }) else { throw SwitchboardError(.connectionLost, "the WebSocket is closed") }
                guard text.utf8.count <= route.maxFrameSize else {
                    // The host's read fails on the frame and the socket ends, whatever the model does.
                    handlers.receive(.failed)
                    end(nil)
                    return
                }
                handlers.receive(.text(text))
            },
            close: { end(nil) }
        )
        let carry: @Sendable () async -> Void = {
            carrying: for await item in items {
                if case .pause(let delay) = item {
                    do { try await route.clock.sleep(for: delay) } catch { break carrying }
                } else if let text = emulated.text(of: item) {
                    guard text.utf8.count <= maxMessageSize else {
                        end(SwitchboardError(.payloadTooLarge, "a message was over \(maxMessageSize) bytes"))
                        return
                    }
                    messagesContinuation.yield(text)
                }
            }
        }
        return WebSocketTransport.InProcessSocket(socket: socket) {
            await handlers.running { await carry() }
            // The model closed the socket, or the link is done with it.
            end(nil)
        }
    }
}

/// Collects a response body. The lock guards the bytes.
private final class CollectedBody: ResponseBodyWriter, Sendable {
    private let buffer = Locked(ByteBuffer())

    var bytes: ByteBuffer { buffer.withLock { $0 } }

    func write(_ part: ByteBuffer) async throws {
        buffer.withLock { bytes in
            var part = part
            bytes.writeBuffer(&part)
        }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
