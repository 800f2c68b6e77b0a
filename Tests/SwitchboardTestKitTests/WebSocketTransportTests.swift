import Foundation
import Logging
import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The WebSocket transport when the server is not there: a classified error, never a crash. (The
/// client's handler used to capture the link's body through `withoutActuallyEscaping`; a refused
/// connection left the handler alive inside WSClient, and the runtime trapped.)
@Suite(.timeLimit(.minutes(1)))
struct WebSocketTransportTests {
    @Test func aRefusedConnectionIsALostLinkAndTheProcessGoesOn() async throws {
        for attempt in 1...3 {
            do {
                _ = try await WebSocketTransport.network.withTextWebSocket(url: "ws://127.0.0.1:1/ws", logger: .quiet) { _ in
                    Issue.record("attempt \(attempt): a socket to a port nothing listens on")
                }
            } catch let error as SwitchboardError {
                #expect(error.code == .connectionLost, "\(error)")
                #expect(error.message.contains("connection refused"), "a reason a person reads: \(error.message)")
            }
        }
    }
}
