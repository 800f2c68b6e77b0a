package import SwitchboardCommandKit
import Foundation
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import AsyncHTTPClient
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import SwitchboardWebim
import WebimEmulator

/// The Webim emulator on 127.0.0.1 for `switchboard bench`, `soak` and `load`, with the raw
/// client the benchmark measures the adapter against.
package struct WebimRig: EmulatorRigRunner {
    package init() {}

    package var title: String { "Webim" }

    package func withRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T {
        let server = WebimServer()
        return try await WebimEmulator(server: server, logger: Logger.quiet).withRunning { baseURL in
            let makeBackend: @Sendable (String, String) -> any ChatBackend = { baseURL, visitorFields in
                try! WebimBackend(configuration: WebimConfiguration(accountName: baseURL, visitorFieldsJSON: visitorFields))
            }
            let control = WebimEmulatorControl(server: server, baseURL: baseURL, makeBackend: makeBackend)
            return try await body(
                EmulatorRig(
                    control: control,
                    raw: { _ in RawWebimClient(baseURL: baseURL, visitorFields: control.visitorFields) },
                    customer: { WebimEmulatorControl(server: server, baseURL: baseURL, customerID: "customer-\($0)", makeBackend: makeBackend) }
                )
            )
        }
    }
}

/// Webim over AsyncHTTPClient: `init`, then `chat.message` actions and the `delta` long-poll,
/// sequentially (the next poll is asked after the action or the agent's send).
package struct RawWebimClient: RawChatClient {
    package let baseURL: String
    package let visitorFields: String

    private func get(_ path: String, _ query: [(String, String)]) async throws -> [String: Any] {
        var components = URLComponents(string: baseURL + path)!
        components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: components.string!), timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 24)
        guard let object = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] else {
            throw SwitchboardError(.protocolViolation, "bench: \(path) answered no JSON object")
        }
        return object
    }

    private func post(_ path: String, _ form: [(String, String)]) async throws {
        var components = URLComponents()
        components.queryItems = form.map { URLQueryItem(name: $0.0, value: $0.1) }
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: components.percentEncodedQuery ?? ""))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 24)
        guard response.status == .ok else { throw SwitchboardError(.serverError, "bench: \(path) answered \(response.status)") }
    }

    package func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double]) {
        let initial = try await get(
            "/l/v/m/init",
            [
                ("device-id", "raw-bench"), ("event", "init"), ("location", "mobile"), ("platform", "ios"), ("respond-immediately", "1"),
                ("since", "0"), ("title", "bench"), ("visitor-ext", visitorFields),
            ]
        )
        let full = initial["fullUpdate"] as? [String: Any]
        guard let page = full?["pageId"] as? String, let token = full?["authToken"] as? String else {
            throw SwitchboardError(.protocolViolation, "bench: init answered no page")
        }
        var revision = "\(initial["revision"] ?? 0)"
        /// Polls `delta` until an added message satisfies `predicate`.
        func poll(until predicate: ([String: Any]) -> Bool) async throws {
            while true {
                let answer = try await get("/l/v/m/delta", [("since", revision), ("page-id", page), ("auth-token", token), ("ts", "0")])
                if let next = answer["revision"] { revision = "\(next)" }
                for case let item as [String: Any] in answer["deltaList"] as? [Any] ?? [] {
                    if item["objectType"] as? String == "CHAT_MESSAGE", let data = item["data"] as? [String: Any], predicate(data) { return }
                }
            }
        }
        var sends: [Double] = []
        var agents: [Double] = []
        for index in 0..<exchanges {
            let clientSideID = UUID().uuidString.lowercased()
            let started = ContinuousClock.now
            try await post(
                "/l/v/m/action",
                [("action", "chat.message"), ("message", "raw \(round).\(index)"), ("client-side-id", clientSideID), ("page-id", page), ("auth-token", token)]
            )
            try await poll { $0["clientSideId"] as? String == clientSideID }
            sends.append(RawTiming.seconds(since: started))
            let answer = "agent to raw \(round).\(index)"
            let asked = ContinuousClock.now
            try await agentSend(answer)
            try await poll { $0["text"] as? String == answer }
            agents.append(RawTiming.seconds(since: asked))
        }
        return (sends, agents)
    }
}
