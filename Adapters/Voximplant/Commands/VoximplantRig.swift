package import SwitchboardCommandKit
import Foundation
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
package import NIOWebSocket
import SwitchboardVoximplant
import VoximplantEmulator
package import WSClient

/// The Voximplant-style emulator on 127.0.0.1 for `switchboard bench`, `soak` and `load`, with the raw
/// client the benchmark measures the adapter against.
package struct VoximplantRig: EmulatorRigRunner {
    package init() {}

    package var title: String { "Voximplant-style" }

    package func withRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T {
        let server = VoximplantServer()
        return try await VoximplantEmulator(server: server, logger: Logger.quiet).withRunning { url in
            let makeBackend: @Sendable (String, String, String) -> any ChatBackend = { url, user, token in
                VoximplantBackend(configuration: VoximplantConfiguration(url: url, user: user, token: token), logger: Logger.quiet)
            }
            let control = VoximplantEmulatorControl(server: server, url: url, makeBackend: makeBackend)
            return try await body(
                EmulatorRig(
                    control: control,
                    raw: { conversation in
                        RawVoximplantClient(url: url, user: control.customer, token: control.customerToken, conversation: conversation.rawValue)
                    },
                    customer: { VoximplantEmulatorControl(server: server, url: url, customerName: "customer\($0)", makeBackend: makeBackend) }
                )
            )
        }
    }
}

/// The Voximplant-style protocol with no Switchboard code in between: `login`, then `sendMessage`
/// requests and their events, on a raw WebSocket.
package struct RawVoximplantClient: RawChatClient {
    package let url: String
    package let user: String
    package let token: String
    package let conversation: String

    /// The `login` request and its response.
    @concurrent package func login(_ inbound: inout RawSocket.Inbound, _ outbound: WebSocketOutboundWriter) async throws {
        try await RawSocket.send(["type": "request", "id": "login", "name": "login", "params": ["user": user, "token": token]], on: outbound)
        try await RawSocket.next(&inbound) { $0["id"] as? String == "login" }
    }

    package func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double]) {
        let result = Locked<(sends: [Double], agents: [Double])>(([], []))
        try await RawSocket.connect(url) { @concurrent inbound, outbound in
            try await login(&inbound, outbound)
            for index in 0..<exchanges {
                let id = "raw-\(round)-\(index)"
                let answer = "agent to raw \(round).\(index)"
                let times = try await RawSocket.exchange(
                    &inbound,
                    send: [
                        "type": "request", "id": id, "name": "sendMessage",
                        "params": ["conversation": conversation, "text": "raw \(round).\(index)", "payload": [Any](), "clientMessageId": id],
                    ],
                    on: outbound,
                    confirmed: { $0["id"] as? String == id },
                    answer: answer,
                    agentSend: agentSend,
                    arrived: { ($0["message"] as? [String: Any])?["text"] as? String == answer }
                )
                result.withLock { $0.sends.append(times.sent); $0.agents.append(times.received) }
            }
        }
        return result.withLock { $0 }
    }
}
