package import Crypto
package import Foundation
package import Switchboard
@_spi(TestKit) package import SwitchboardTestKit
package import SwitchboardTransport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real Synapse homeserver for the live tests and the bench's peer rows: installed by
/// `scripts/synapse.sh install` (`.ci/run` does it), started per test or run on a free loopback
/// port in a temporary directory, and stopped afterwards. Package-only: the Matrix adapter never
/// depends on it.
package enum Synapse {
    package static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The virtual environment `scripts/synapse.sh install` made (or `SYNAPSE_VENV`).
    package static var venv: String {
        ProcessInfo.processInfo.environment["SYNAPSE_VENV"] ?? repository.appendingPathComponent(".build-synapse/venv").path
    }

    /// The installation, as a live server the tests need: a local run without it skips the live
    /// Matrix tests, a CI run fails them (``LiveServer``).
    package static var live: LiveServer {
        LiveServer(
            name: "Synapse installation",
            address: FileManager.default.isExecutableFile(atPath: venv + "/bin/python") ? venv : nil,
            howToStart: "Run scripts/synapse.sh install (Synapse from PyPI into .build-synapse/; CI does), then swift test."
        )
    }

    /// The shared secret of `scripts/synapse.sh`'s test configuration.
    package static let registrationSecret = "switchboard-test-registration-secret"

    package static let transport = HTTPTransport(allowsPlainText: true)

    /// Runs a fresh homeserver around `body`.
    ///
    /// The port is free when it is picked, and can be taken before Synapse binds it: by an
    /// outgoing connection's ephemeral port, or another test's server (CI saw "Address already in
    /// use" once). A start that finds its port taken is tried again on another, three times at most.
    package static func withServer<T: Sendable>(_ body: (SynapseServer) async throws -> T) async throws -> T {
        _ = try live.require()
        var attempt = 1
        while true {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("synapse-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let port = try freeLoopbackPort()
            let output = directory.appendingPathComponent("stdout.log")
            let child = try SpawnedChild(
                ["/bin/bash", repository.appendingPathComponent("scripts/synapse.sh").path, "run", directory.path, String(port)],
                output: output.path
            )
            let server = SynapseServer(baseURL: "http://127.0.0.1:\(port)", directory: directory)
            defer {
                child.kill()
                try? FileManager.default.removeItem(at: directory)
            }
            // Ours once its own log says it listens on the port: another test's server on a port
            // both picked answers `/versions` too (seen once: a test registered its users on the
            // other server, "User ID already taken").
            let serverLog = directory.appendingPathComponent("homeserver.log")
            let listening = { ((try? String(contentsOf: serverLog, encoding: .utf8)) ?? "").contains("now listening on TCP port \(port)") }
            do {
                try await waitUntilReady(server, running: { child.isRunning }, listening: listening, log: output)
            } catch where attempt < 3 && ((try? String(contentsOf: output, encoding: .utf8)) ?? "").contains("Address already in use") {
                print("synapse: port \(port) was taken before the server bound it; starting again on another (attempt \(attempt + 1))")
                attempt += 1
                continue
            }
            return try await body(server)
        }
    }

    /// A fresh homeserver with two registered users: the agent (the other side) and the app's
    /// customer, named `customer`.
    package static func withUsers<T: Sendable>(
        customer name: String = "alice",
        _ body: (SynapseServer, _ agent: MatrixTestUser, _ customer: MatrixTestUser) async throws -> T
    ) async throws -> T {
        try await withServer { server in
            try await body(server, try await server.register("agent"), try await server.register(name))
        }
    }

    /// Asks `/versions` until the server answers, once its own log says it listens on the port.
    /// The only wait in these tests that is not on an event: a process starting up announces
    /// nothing else; it is bounded (60 s) and fails with the server's own output.
    private static func waitUntilReady(_ server: SynapseServer, running: () -> Bool, listening: () -> Bool, log: URL) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if listening(), let response = try? await transport.get(server.baseURL + "/_matrix/client/versions", timeout: .seconds(2)), response.status == 200 {
                return
            }
            guard running() else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw SwitchboardError(.notConnected, "Synapse did not start: \(text.suffix(2000))")
    }
}

/// One running homeserver.
package struct SynapseServer: Sendable {
    package let baseURL: String
    package let directory: URL

    /// Registers a user by the shared secret (Synapse's admin API); the password is `secret-<name>`.
    package func register(_ name: String) async throws -> MatrixTestUser {
        let nonce = try await MatrixTestUser.call(baseURL, "GET", "/_synapse/admin/v1/register", token: nil)["nonce"]?.stringValue ?? ""
        let password = "secret-\(name)"
        let message = [nonce, name, password, "notadmin"].joined(separator: "\0")
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(message.utf8), using: SymmetricKey(data: Data(Synapse.registrationSecret.utf8)))
        let answer = try await MatrixTestUser.call(
            baseURL, "POST", "/_synapse/admin/v1/register",
            body: ["nonce": .string(nonce), "username": .string(name), "password": .string(password), "admin": false,
                   "mac": .string(mac.map { String(format: "%02x", $0) }.joined())],
            token: nil
        )
        guard let token = answer["access_token"]?.stringValue, let userID = answer["user_id"]?.stringValue else {
            throw SwitchboardError(.protocolViolation, "register: \(answer)")
        }
        return MatrixTestUser(baseURL: baseURL, token: token, userID: userID, password: password)
    }
}

/// The other side of a test: a Matrix user driven through the client-server API directly, as
/// another client (an agent, a peer) would. Written here without the adapter's code.
package struct MatrixTestUser: Sendable {
    package let baseURL: String
    package let token: String
    package let userID: String
    package let password: String

    package var localPart: String { String(userID.dropFirst().prefix { $0 != ":" }) }

    package static func call(_ base: String, _ method: String, _ path: String, query: [(String, String)] = [], body: JSONValue? = nil, token: String?) async throws -> JSONValue {
        var headers: [(String, String)] = []
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        let response: HTTPTransport.Response
        if method == "GET" {
            response = try await Synapse.transport.get(base + path, query: query, headers: headers, timeout: .seconds(40))
        } else {
            response = try await Synapse.transport.postJSON(base + path, body: body ?? [:], method: method, headers: headers, timeout: .seconds(40))
        }
        let json = (try? JSONValue(parsing: response.body)) ?? .null
        guard response.status == 200 else { throw SwitchboardError(.messageRejected, "\(method) \(path): \(response.status) \(json)") }
        return json
    }

    package func call(_ method: String, _ path: String, query: [(String, String)] = [], body: JSONValue? = nil) async throws -> JSONValue {
        try await Self.call(baseURL, method, path, query: query, body: body, token: token)
    }

    package static func encode(_ segment: String) -> String { HTTPTransport.percentEncode(segment) }

    /// A room named `name`: `private_chat` (joined by invitation) or `public_chat` (anyone joins).
    package func createRoom(name: String, inviting: [String], preset: String = "private_chat") async throws -> ConversationID {
        let answer = try await call(
            "POST", "/_matrix/client/v3/createRoom",
            body: ["name": .string(name), "preset": .string(preset), "invite": .array(inviting.map { .string($0) })]
        )
        return ConversationID(answer["room_id"]?.stringValue ?? "")
    }

    package func join(_ room: ConversationID) async throws {
        _ = try await call("POST", "/_matrix/client/v3/join/\(Self.encode(room.rawValue))", body: [:])
    }

    @discardableResult
    package func send(_ text: String, in room: ConversationID, transaction: String = UUID().uuidString) async throws -> MessageID {
        let answer = try await call(
            "PUT", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/send/m.room.message/\(Self.encode(transaction))",
            body: ["msgtype": "m.text", "body": .string(text)]
        )
        return MessageID(answer["event_id"]?.stringValue ?? "")
    }

    package func edit(_ message: MessageID, in room: ConversationID, to text: String) async throws {
        _ = try await call(
            "PUT", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/send/m.room.message/\(UUID().uuidString)",
            body: ["msgtype": "m.text", "body": .string("* \(text)"), "m.new_content": ["msgtype": "m.text", "body": .string(text)],
                   "m.relates_to": ["rel_type": "m.replace", "event_id": .string(message.rawValue)]]
        )
    }

    package func redact(_ message: MessageID, in room: ConversationID) async throws {
        _ = try await call("PUT", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/redact/\(Self.encode(message.rawValue))/\(UUID().uuidString)", body: [:])
    }

    package func typing(_ isTyping: Bool, in room: ConversationID) async throws {
        _ = try await call("PUT", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/typing/\(Self.encode(userID))", body: ["typing": .bool(isTyping), "timeout": 120_000])
    }

    package func leave(_ room: ConversationID) async throws {
        _ = try await call("POST", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/leave", body: [:])
    }

    package func markRead(_ message: MessageID, in room: ConversationID) async throws {
        _ = try await call("POST", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/receipt/m.read/\(Self.encode(message.rawValue))", body: [:])
    }

    /// Every `m.room.message` of the room, oldest first (the server's truth).
    package func messages(in room: ConversationID) async throws -> [JSONValue] {
        var events: [JSONValue] = []
        var from: String?
        repeat {
            var query = [("dir", "b"), ("limit", "100"), ("filter", #"{"types":["m.room.message"]}"#)]
            if let from { query.append(("from", from)) }
            let page = try await call("GET", "/_matrix/client/v3/rooms/\(Self.encode(room.rawValue))/messages", query: query)
            events += page["chunk"]?.arrayValue ?? []
            from = page["end"]?.stringValue
        } while from != nil
        return events.reversed()
    }

    /// The texts of the room's messages that are not edits, oldest first.
    package func texts(in room: ConversationID) async throws -> [String] {
        try await messages(in: room).filter { $0["content"]?["m.relates_to"]?["rel_type"]?.stringValue != "m.replace" }
            .compactMap { $0["content"]?["body"]?.stringValue }
    }

    /// Long-polls `/sync` until `condition` holds for one of its answers (`timeout` at most).
    package func waitForSync(_ what: String, timeout: Duration = .seconds(30), _ condition: (JSONValue) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        var since: String?
        while ContinuousClock.now < deadline {
            var query = [("timeout", "2000")]
            if let since { query.append(("since", since)) }
            let answer = try await call("GET", "/_matrix/client/v3/sync", query: query)
            if condition(answer) { return }
            since = answer["next_batch"]?.stringValue
        }
        throw SwitchboardError(.timedOut, "\(userID) never saw \(what)")
    }
}
