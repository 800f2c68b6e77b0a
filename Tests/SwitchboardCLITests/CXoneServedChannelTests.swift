import CXoneEmulator
import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import Testing

@testable import switchboard
import SwitchboardBench
import SwitchboardCommandKit

/// The CXone emulator's socket refuses a request naming a brand or channel it does not serve,
/// for a client that never reads the channel configuration (the raw client of `bench`, say): an
/// `OperationError` for the request, `CustomerAuthorizationFailed`, naming what was asked for.
@Suite(.timeLimit(.minutes(1)))
struct CXoneServedChannelTests {
    @Test(arguments: [(1386, "chat_typo"), (1387, "chat_emulator")])
    func aRequestForAnotherChannelIsRefusedOnTheSocket(_ brand: Int, _ channel: String) async throws {
        let server = CXoneServer(configuration: .init(mode: .multi))
        let reply = Locked<(code: String?, message: String?)?>(nil)
        try await CXoneEmulator(server: server, logger: .quiet).withRunning { endpoints in
            let url = "\(endpoints.socketURL)?brandId=\(brand)&channelId=\(channel)&visitorId=v1&sdkPlatform=ios&sdkVersion=3.3.1"
            try await RawSocket.connect(url) { @concurrent inbound, outbound in
                try await RawSocket.send(
                    [
                        "action": "register", "eventId": "authorize-1",
                        "payload": [
                            "brand": ["id": brand], "channel": ["id": channel], "customerIdentity": ["idOnExternalPlatform": "customer-1"],
                            "eventType": "AuthorizeCustomer", "data": ["disableChannelInfo": true, "sdkPlatform": "ios", "sdkVersion": "3.3.1"],
                        ],
                    ],
                    on: outbound
                )
                try await RawSocket.next(&inbound) { object in
                    guard object["eventId"] as? String == "authorize-1" else { return false }
                    let error = object["error"] as? [String: Any]
                    let answer = (code: error?["errorCode"] as? String, message: error?["errorMessage"] as? String)
                    reply.withLock { $0 = answer }
                    return true
                }
            }
        }
        let error = try #require(reply.withLock { $0 }, "an answer to AuthorizeCustomer")
        print("cxone socket, brand \(brand) channel \(channel): \(error.code ?? "no error"): \(error.message ?? "-")")
        #expect(error.code == "CustomerAuthorizationFailed")
        #expect(error.message?.hasPrefix("brand \(brand) has no channel \(channel)") == true)
        #expect(server.refusedRequests == 1)
        #expect(server.received.isEmpty, "nothing refused is handled")
    }
}
