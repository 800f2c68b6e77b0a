package import SwitchboardCommandKit
import Foundation
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import NIOWebSocket
import SwitchboardCXone
import CXoneEmulator
import WSClient

/// The CXone emulator on 127.0.0.1 for `switchboard bench`, `soak` and `load`, with the raw
/// client the benchmark measures the adapter against.
package struct CXoneRig: EmulatorRigRunner {
    package init() {}

    package var title: String { "CXone" }

    package func withRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T {
        let server = CXoneServer(configuration: CXoneServer.Configuration(mode: .multi))
        return try await CXoneEmulator(server: server, logger: Logger.quiet).withRunning { endpoints in
            let channel = try CXoneChannelConfiguration(json: server.channelConfiguration)
            let makeBackend: @Sendable (CXoneEmulator.Endpoints, String) -> any ChatBackend = { endpoints, customer in
                CXoneBackend(
                    configuration: CXoneConfiguration(
                        environment: CXoneEnvironment(chatURL: endpoints.chatURL, socketURL: endpoints.socketURL, tokenURL: endpoints.tokenURL),
                        brandID: server.configuration.brandID,
                        channelID: server.configuration.channelID,
                        customerID: customer
                    ),
                    channel: channel
                )
            }
            let control = CXoneEmulatorControl(server: server, endpoints: endpoints, makeBackend: makeBackend)
            return try await body(
                EmulatorRig(
                    control: control,
                    raw: { conversation in
                        RawCXoneClient(
                            socketURL: endpoints.socketURL, brandID: server.configuration.brandID, channelID: server.configuration.channelID,
                            customerID: control.customerID, thread: conversation.rawValue
                        )
                    },
                    // A load run's thread waits as long as its run does (many first messages at once).
                    customer: {
                        CXoneEmulatorControl(
                            server: server, endpoints: endpoints, customerID: "customer-\($0)", patience: .seconds(300), makeBackend: makeBackend
                        )
                    }
                )
            )
        }
    }
}

package struct RawCXoneClient: RawChatClient {
    package let socketURL: String
    package let brandID: Int
    package let channelID: String
    package let customerID: String
    package let thread: String
    /// The SDK version the raw client announces (the one the emulator accepts).
    private let sdkVersion = "3.3.1"

    private func event(_ type: String, _ id: String, data: [String: Any]) -> [String: Any] {
        [
            "action": type == "AuthorizeCustomer" ? "register" : "chatWindowEvent", "eventId": id,
            "payload": [
                "brand": ["id": brandID], "channel": ["id": channelID], "customerIdentity": ["idOnExternalPlatform": customerID],
                "eventType": type, "data": data,
            ],
        ]
    }

    package func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double]) {
        let visitor = UUID().uuidString.lowercased()
        let url = "\(socketURL)?brandId=\(brandID)&channelId=\(channelID)&visitorId=\(visitor)&sdkPlatform=ios&sdkVersion=\(sdkVersion)"
        let result = Locked<(sends: [Double], agents: [Double])>(([], []))
        try await RawSocket.connect(url) { @concurrent inbound, outbound in
            let authorize = UUID().uuidString.lowercased()
            try await RawSocket.send(
                event("AuthorizeCustomer", authorize, data: ["disableChannelInfo": true, "sdkPlatform": "ios", "sdkVersion": sdkVersion]), on: outbound
            )
            try await RawSocket.next(&inbound) { $0["eventId"] as? String == authorize }
            for index in 0..<exchanges {
                let id = UUID().uuidString.lowercased()
                let answer = "agent to raw \(round).\(index)"
                let times = try await RawSocket.exchange(
                    &inbound,
                    send: event(
                        "SendMessage", id,
                        data: [
                            "thread": ["idOnExternalPlatform": thread], "idOnExternalPlatform": id,
                            "messageContent": ["type": "TEXT", "payload": ["text": "raw \(round).\(index)"]],
                        ]
                    ),
                    on: outbound,
                    confirmed: { $0["eventId"] as? String == id },
                    answer: answer,
                    agentSend: agentSend,
                    arrived: { object in
                        let message = (object["data"] as? [String: Any])?["message"] as? [String: Any]
                        return ((message?["messageContent"] as? [String: Any])?["payload"] as? [String: Any])?["text"] as? String == answer
                    }
                )
                result.withLock { $0.sends.append(times.sent); $0.agents.append(times.received) }
            }
        }
        return result.withLock { $0 }
    }
}
