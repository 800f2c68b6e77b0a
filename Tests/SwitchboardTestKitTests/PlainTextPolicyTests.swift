import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// Plain `http://` and `ws://` only to loopback, unless allowed; everything encrypted goes.
@Suite struct PlainTextPolicyTests {
    @Test(arguments: [
        ("ws://127.0.0.1:8080/ws", false, true), ("http://localhost:9000", false, true), ("ws://[::1]:80/", false, true),
        ("http://127.10.0.3/x", false, true), ("wss://chat.example.com/ws", false, true), ("https://demo.webim.ru", false, true),
        ("ws://chat.example.com/ws", false, false), ("http://demo.webim.ru", false, false), ("http://127.0.0.1.evil.com/", false, false),
        ("http://10.0.0.5/", false, false), ("ws://chat.example.com/ws", true, true), ("http://10.0.0.5/", true, true),
    ])
    func plainTextIsRefusedOffLoopback(_ url: String, _ allowed: Bool, _ passes: Bool) {
        // What passes without being allowed is what may carry a secret.
        if !allowed { #expect(PlainTextPolicy.isEncryptedOrLoopback(url) == passes) }
        if passes {
            #expect(throws: Never.self) { try PlainTextPolicy.check(url, allowed: allowed) }
        } else {
            #expect { try PlainTextPolicy.check(url, allowed: allowed) } throws: { error in
                guard let error = error as? SwitchboardError else { return false }
                return error.code == .fatal && error.message.contains("refused")
            }
        }
    }

    @Test func aURLWithoutAHostIsAnInvalidArgument() {
        #expect { try PlainTextPolicy.check("not a url", allowed: false) } throws: { ($0 as? SwitchboardError)?.code == .invalidArgument }
        #expect(!PlainTextPolicy.isEncryptedOrLoopback("not a url"))
    }

    @Test func theTransportsCheckBeforeConnecting() async {
        await #expect { try await HTTPTransport().get("http://example.invalid/", timeout: .seconds(1)) } throws: {
            ($0 as? SwitchboardError)?.code == .fatal
        }
        await #expect {
            try await WebSocketTransport.network.withTextWebSocket(url: "ws://example.invalid/ws", logger: .quiet) { _ in }
        } throws: { ($0 as? SwitchboardError)?.code == .fatal }
    }
}
