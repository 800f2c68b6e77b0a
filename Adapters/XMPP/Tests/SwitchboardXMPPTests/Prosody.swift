import Foundation
import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardTransport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real Prosody for the XMPP live tests: Debian's package (`.ci/run` installs it), started per
/// test on a free loopback port, with a configuration, accounts and data of its own in a
/// temporary directory, and killed afterwards.
enum Prosody {
    /// The server (`SWITCHBOARD_PROSODY` names another installation's).
    static var executable: String {
        ProcessInfo.processInfo.environment["SWITCHBOARD_PROSODY"] ?? "/usr/bin/prosody"
    }

    /// `prosodyctl`, installed beside the server: accounts and the admin shell.
    static var controlTool: String {
        URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("prosodyctl").path
    }

    /// The installation, as a live server the tests need: a local run without it skips the live
    /// XMPP tests, a CI run fails them (``LiveServer``).
    static var live: LiveServer {
        let installed = FileManager.default.isExecutableFile(atPath: executable) && FileManager.default.isExecutableFile(atPath: controlTool)
        return LiveServer(
            name: "Prosody installation",
            address: installed ? executable : nil,
            howToStart: "apt-get install prosody (Debian's 0.12; .ci/run does), then swift test."
        )
    }

    /// The live suites' condition.
    static var needed: ConditionTrait { .enabled(if: live.runsTests, Comment(rawValue: live.skipNote)) }

    static let transport = HTTPTransport(allowsPlainText: true)

    /// Runs a fresh server around `body`, with `accounts` registered (password `secret-<name>`).
    ///
    /// The accounts are made with `prosodyctl register` before the server starts: it writes the
    /// account files, and needs no running server. The port is free when it is picked and can be
    /// taken before Prosody binds it; Prosody then logs that the port is in use and goes on
    /// running without it, so the start is tried again on another port, three times at most.
    static func withServer<T: Sendable>(
        accounts: [String] = ["customer", "agent1", "agent2", "agent3"],
        roomTombstones: Bool = true,
        debugLog: Bool = false,
        _ body: (ProsodyServer) async throws -> T
    ) async throws -> T {
        let executable = try live.require()
        var attempt = 1
        while true {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prosody-\(UUID().uuidString)")
            for folder in ["data", "certs"] {
                try FileManager.default.createDirectory(at: directory.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            defer { try? FileManager.default.removeItem(at: directory) }
            let port = try freeLoopbackPort()
            let server = ProsodyServer(
                port: port, directory: directory, accounts: accounts, roomTombstones: roomTombstones, debugLog: debugLog
            )
            try server.configuration.write(toFile: server.configFile, atomically: true, encoding: .utf8)
            for name in accounts { try await server.register(name) }
            let output = directory.appendingPathComponent("stdout.log").path
            let child = try SpawnedChild([executable, "-F", "--config", server.configFile], output: output)
            defer { child.kill() }
            do {
                try await waitUntilReady(server, running: { child.isRunning }, output: output)
            } catch where attempt < 3 && server.log.contains("this port is in use") {
                print("prosody: port \(server.port) was taken before the server bound it; starting again on another (attempt \(attempt + 1))")
                attempt += 1
                continue
            }
            return try await body(server)
        }
    }

    /// Waits until the server's own log says it serves HTTP on its port and the WebSocket path
    /// answers: the log tells our server from another test's on the same port, the answer that
    /// the listener is up. The only wait here that is not on an event (a process starting up
    /// announces nothing else); bounded (60 s), and it fails with the server's log.
    private static func waitUntilReady(_ server: ProsodyServer, running: () -> Bool, output: String) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let log = server.log
            if log.contains("Activated service 'http' on [127.0.0.1]:\(server.port)"),
                let answer = try? await transport.get(server.httpURL + "/xmpp-websocket", timeout: .seconds(2)), answer.status == 200
            {
                return
            }
            // Prosody goes on running without the port: nothing more will come.
            guard running(), !log.contains("Failed to open server port \(server.port)") else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        throw SwitchboardError(.notConnected, "Prosody did not start on port \(server.port): \(server.log.suffix(2000)) \(printed.suffix(500))")
    }

    /// Runs `arguments` to the end (at most `limit`): its exit code and what it printed.
    static func run(_ arguments: [String], in directory: URL, limit: Duration = .seconds(30)) async throws -> (status: Int32, output: String) {
        let output = directory.appendingPathComponent("run-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let child = try SpawnedChild(arguments, output: output)
        let status = try await child.waitForExit(within: limit)
        return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }
}

/// One running Prosody: the domain `localhost`, WebSocket only (RFC 7395), on a loopback port.
struct ProsodyServer: Sendable {
    let port: Int
    let directory: URL
    /// The accounts registered before the start.
    let accounts: [String]
    /// Whether a destroyed room leaves a tombstone (Prosody's default): a join then fails
    /// `gone`. Without, a join makes the room again.
    var roomTombstones = true
    /// Whether the server also writes its debug log (`debug.log`: every stanza, and mod_smacks'
    /// account of resumptions).
    var debugLog = false
    let domain = "localhost"

    var configFile: String { directory.appendingPathComponent("prosody.cfg.lua").path }
    var url: String { "ws://127.0.0.1:\(port)/xmpp-websocket" }
    var httpURL: String { "http://127.0.0.1:\(port)" }

    func password(of name: String) -> String { "secret-\(name)" }
    func jid(_ name: String) -> String { "\(name)@\(domain)" }

    /// The server's log so far (info level: start-up, bound ports, logins; no stanzas).
    var log: String { (try? String(contentsOf: directory.appendingPathComponent("prosody.log"), encoding: .utf8)) ?? "" }

    /// The debug log so far, where `debugLog` turned it on.
    var debugLogText: String { (try? String(contentsOf: directory.appendingPathComponent("debug.log"), encoding: .utf8)) ?? "" }

    /// Registers an account; the server need not run.
    func register(_ name: String) async throws {
        let (status, output) = try await Prosody.run(
            [Prosody.controlTool, "--config", configFile, "register", name, domain, password(of: name)], in: directory
        )
        guard status == 0 else { throw SwitchboardError(.notConnected, "prosodyctl register \(name) failed (\(status)): \(output)") }
    }

    /// Runs `command` in the running server's admin shell (`mod_admin_shell` over its socket in
    /// `data/`): what the shell printed, such as "OK: Total: 1 sessions closed".
    func shell(_ command: String) async throws -> String {
        let (status, output) = try await Prosody.run([Prosody.controlTool, "--config", configFile, "shell", command], in: directory)
        guard status == 0 else { throw SwitchboardError(.serverError, "prosodyctl shell \(command) failed (\(status)): \(output)") }
        return output
    }

    /// Closes every client session of `jid` (a bare JID: all its resources; a full JID: that
    /// one) from the server's side, as a shutdown does: each gets the stream error
    /// `system-shutdown` and its stream is closed, and none can be resumed (mod_smacks revokes
    /// the token on a close). Returns how many sessions the server closed.
    func cutClientSessions(of jid: String) async throws -> Int {
        let output = try await shell("c2s:close(\(Self.lua(jid)), 'test cut', 'system-shutdown')")
        guard let total = output.range(of: "Total: "), let count = Int(output[total.upperBound...].prefix { $0.isNumber }),
            output.contains("sessions closed")
        else { throw SwitchboardError(.protocolViolation, "the admin shell's answer to c2s:close is not a count: \(output)") }
        return count
    }

    /// A Lua string literal.
    static func lua(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// The server's configuration: loopback and this directory only, WebSocket on plain HTTP
    /// (the sessions count as secure, so PLAIN is offered), archiving on for every 1:1 message
    /// and kept, the admin shell on, and no setuid when the tests run as root (CI does). Rooms
    /// (MUC, with an archive) and HTTP upload (1 MiB at most) for the room and file cases.
    var configuration: String {
        let folder = directory.path
        return """
            -- Written by the XMPP live tests for one server: loopback only, everything in this directory.
            run_as_root = true
            pidfile = \(Self.lua(folder + "/prosody.pid"))
            data_path = \(Self.lua(folder + "/data"))
            certificates = \(Self.lua(folder + "/certs"))
            plugin_paths = { }
            log = { info = \(Self.lua(folder + "/prosody.log"))\(debugLog ? "; debug = \(Self.lua(folder + "/debug.log"))" : "") }
            admins = { }
            interfaces = { "127.0.0.1" }
            c2s_ports = { }
            s2s_ports = { }
            component_ports = { }
            http_ports = { \(port) }
            http_interfaces = { "127.0.0.1" }
            https_ports = { }
            https_interfaces = { "127.0.0.1" }
            consider_websocket_secure = true
            c2s_require_encryption = false
            allow_unencrypted_plain_auth = true
            authentication = "internal_hashed"
            storage = "internal"
            archive_expires_after = "never"
            default_archive_policy = true
            max_archive_query_results = 100
            smacks_hibernation_time = 60
            modules_enabled = { "disco"; "roster"; "saslauth"; "carbons"; "pep"; "smacks"; "mam"; "ping"; "websocket"; "http"; "bookmarks"; "private"; "blocklist"; "admin_shell" }
            modules_disabled = { "s2s"; "tls"; "dialback" }
            VirtualHost "\(domain)"
            Component "conference.\(domain)" "muc"
                modules_enabled = { "muc_mam" }
                muc_room_default_persistent = true
                muc_tombstones = \(roomTombstones)
                muc_log_expires_after = "never"
                muc_log_by_default = true
                restrict_room_creation = false
            Component "upload.\(domain)" "http_file_share"
                http_file_share_size_limit = 1048576
                http_host = "127.0.0.1"
                http_external_url = "\(httpURL)/"

            """
    }
}
