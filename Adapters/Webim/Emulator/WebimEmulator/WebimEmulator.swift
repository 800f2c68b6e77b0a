import Foundation
public import Hummingbird
public import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOFoundationCompat
public import SwitchboardEmulation
import Switchboard

/// The Webim mobile API on a real socket at `http://127.0.0.1:PORT`, backed by a ``WebimServer``:
/// `/api/visitor/meta`, `/api/visitor/v1/configs/<location>`, `/l/v/m/init`, `/l/v/m/delta`,
/// `/l/v/m/action`, `/l/v/m/history`, `/l/v/m/upload`, `/l/v/m/download/<guid>/<name>`.
public struct WebimEmulator: HostedEmulator {
    public let server: WebimServer
    public let logger: Logger

    public init(server: WebimServer = WebimServer(), logger: Logger = Logger(label: "webim-emulator")) {
        self.server = server
        self.logger = logger.quietedForEmulation()
    }

    /// The base URL (the SDK's account name).
    public func endpoints(host: String, port: Int) -> String { "http://\(host):\(port)" }

    /// HTTP only: no WebSocket routes.
    public func webSocketRoutes() -> [WebSocketRoute] { [] }

    public func httpRouter() -> Router<BasicWebSocketRequestContext> {
        let server = self.server
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.get("/api/visitor/meta") { _, _ in Self.respond(.json(["endpoints": [:]])) }
        router.get("/api/visitor/v1/configs/:location") { _, _ in Self.respond(.json(server.accountConfig)) }
        router.get("/l/v/m/init") { request, _ in Self.respond(server.initialize(Self.query(request))) }
        router.get("/l/v/m/delta") { request, _ in Self.respond(await server.delta(Self.query(request))) }
        router.get("/l/v/m/history") { request, _ in Self.respond(server.history(Self.query(request))) }
        router.get("/l/v/m/get-online-status") { request, _ in Self.respond(server.onlineStatus(Self.query(request))) }
        router.post("/l/v/m/action") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            return Self.respond(server.action(Self.decodeForm(String(buffer: body))))
        }
        router.post("/l/v/m/upload") { request, _ in
            try await Self.upload(request) { server.upload(fields: $0, filename: $1, contentType: $2, data: $3) }
        }
        // The offline appeals of Mobile SDK 2.3, on the legacy paths (protocols/webim.md §12a).
        router.get("/l/v/delta") { request, _ in Self.respond(server.offlineInitialize(Self.query(request))) }
        router.get("/l/v/history") { request, _ in Self.respond(server.offlineHistory(Self.query(request))) }
        router.post("/l/v/action") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            return Self.respond(server.offlineAction(Self.decodeForm(String(buffer: body))))
        }
        router.post("/l/v/upload") { request, _ in
            try await Self.upload(request) { server.offlineUpload(fields: $0, filename: $1, contentType: $2, data: $3) }
        }
        router.get("/l/v/m/download/:guid/:name") { request, context in
            let query = Self.query(request)
            let result = server.download(guid: context.parameters.get("guid") ?? "", pageID: query["page-id"], expires: query["expires"], hash: query["hash"])
            return Response(
                status: .init(code: result.status),
                headers: [.contentType: result.contentType],
                body: .init(byteBuffer: ByteBuffer(data: result.data))
            )
        }
        return router
    }

    /// Reads a multipart upload (the file part `webim_upload_file` and the plain fields) and
    /// answers with what `accept` makes of it.
    static func upload(
        _ request: Request,
        _ accept: ([String: String], String, String, Data) -> WebimServer.Answer
    ) async throws -> Response {
        let body = try await request.body.collect(upTo: 64 << 20)
        guard let boundary = request.headers[.contentType].flatMap(Self.boundary),
            let parts = Self.multipart(Data(buffer: body), boundary: boundary),
            let file = parts.first(where: { $0.name == "webim_upload_file" }), let filename = file.filename
        else { return Self.respond(.error("argument-missing")) }
        var fields: [String: String] = [:]
        for part in parts where part.filename == nil { fields[part.name] = String(decoding: part.data, as: UTF8.self) }
        return Self.respond(accept(fields, filename, file.contentType ?? "application/octet-stream", file.data))
    }

    static func respond(_ answer: WebimServer.Answer) -> Response {
        if answer.dropsConnection {
            // The promised length is never reached: the client sees the connection close mid-body.
            let body = ByteBuffer(string: answer.body)
            return Response(
                status: .init(code: answer.status),
                headers: [.contentType: answer.contentType],
                body: ResponseBody(contentLength: body.readableBytes) { writer in
                    try await writer.write(body.getSlice(at: body.readerIndex, length: body.readableBytes / 2)!)
                    throw ConnectionDropped()
                }
            )
        }
        return Response(
            status: .init(code: answer.status),
            headers: [.contentType: answer.contentType],
            body: .init(byteBuffer: ByteBuffer(string: answer.body))
        )
    }

    static func query(_ request: Request) -> [String: String] {
        decodeForm(request.uri.query ?? "")
    }

    static func decodeForm(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            let key = parts[0].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? parts[0]
            let value = parts.count > 1 ? (parts[1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? parts[1]) : ""
            fields[key] = value
        }
        return fields
    }

    static func boundary(_ contentType: String) -> String? {
        contentType.components(separatedBy: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix("boundary=") }.map { String($0.dropFirst("boundary=".count)).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
    }

    struct Part {
        var name: String
        var filename: String?
        var contentType: String?
        var data: Data
    }

    /// A small multipart/form-data reader: enough for the SDK's upload.
    static func multipart(_ body: Data, boundary: String) -> [Part]? {
        let delimiter = Data("--\(boundary)".utf8)
        let headerEnd = Data("\r\n\r\n".utf8)
        var parts: [Part] = []
        var searchStart = body.startIndex
        guard var start = body.range(of: delimiter, in: searchStart..<body.endIndex)?.upperBound else { return nil }
        while let next = body.range(of: delimiter, in: start..<body.endIndex) {
            var chunk = body[start..<next.lowerBound]
            if chunk.starts(with: Data("\r\n".utf8)) { chunk = chunk.dropFirst(2) }
            if chunk.suffix(2) == Data("\r\n".utf8) { chunk = chunk.dropLast(2) }
            if let split = chunk.range(of: headerEnd) {
                let headers = String(decoding: chunk[chunk.startIndex..<split.lowerBound], as: UTF8.self)
                var part = Part(name: "", data: Data(chunk[split.upperBound...]))
                for line in headers.components(separatedBy: "\r\n") {
                    let lower = line.lowercased()
                    if lower.hasPrefix("content-disposition:") {
                        part.name = value(of: "name", in: line) ?? ""
                        part.filename = value(of: "filename", in: line)
                    } else if lower.hasPrefix("content-type:") {
                        part.contentType = line.dropFirst("content-type:".count).trimmingCharacters(in: .whitespaces)
                    }
                }
                parts.append(part)
            }
            start = next.upperBound
            searchStart = start
            if body[start...].starts(with: Data("--".utf8)) { break }
        }
        return parts
    }

    private static func value(of key: String, in header: String) -> String? {
        for item in header.components(separatedBy: ";") {
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("\(key)=\"") { return String(trimmed.dropFirst(key.count + 2).dropLast()) }
        }
        return nil
    }
}

/// Thrown by a response body to close the connection mid-answer (the `dropConnection` fault).
struct ConnectionDropped: Error {}

extension WebimServer {
    /// `GET /api/visitor/v1/configs/<location>`: the account config the SDK reads.
    var accountConfig: JSONValue {
        [
            "accountConfig": [
                "max_visitor_upload_file_size": .int(Int64(configuration.maxUploadMegabytes)),
                "allowed_upload_file_types": .string(configuration.allowedFileTypes.joined(separator: ", ")),
                "visitor_upload_file": .bool(configuration.uploadAllowed),
                "visitor_message_editing": .bool(configuration.messageEditing),
                "web_and_mobile_quoting": true,
                "rate_operator": true,
            ],
            "locationSettings": ["chat": ["visitorFields": [:]], "resources": [:]],
            "routingRules": [],
        ]
    }
}
