import Switchboard
import Testing

@testable import SwitchboardTransport

/// What a failed TLS handshake says: the server (host and port only) and the plain scheme to try.
@Suite struct HTTPTransportTests {
    struct WrongVersion: Error, CustomStringConvertible {
        // What NIOSSL reports when the server answers the TLS hello in plain text.
        var description: String { "handshakeFailed(sslError([Error: 268435703 error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER]))" }
    }

    @Test func aServerThatAnswersInPlainTextDoesNotSpeakTLS() {
        #expect(HTTPTransport.tlsFailure(WrongVersion(), url: "https://example.org:8443/x?token=secret") == "TLS handshake failed: the server at example.org:8443 does not speak TLS (try http://)")
        #expect(HTTPTransport.tlsFailure(WrongVersion(), url: "wss://localhost:8080/ws") == "TLS handshake failed: the server at localhost:8080 does not speak TLS (try ws://)")
        let error = HTTPTransport.classify(WrongVersion(), url: "https://example.org:8443/x?token=secret")
        #expect(error.code == .connectionLost)
        #expect(!error.message.contains("secret"), "the path and query stay out of the line")
    }

    @Test func plainURLsAndOtherFailuresAreNotTLSFailures() {
        #expect(HTTPTransport.tlsFailure(WrongVersion(), url: "http://localhost:8080") == nil)
        struct Refused: Error, CustomStringConvertible { var description: String { "connect(descriptor:addr:size:): Connection refused (errno: 111)" } }
        #expect(HTTPTransport.tlsFailure(Refused(), url: "https://localhost:8080") == nil)
        #expect(HTTPTransport.classify(Refused(), url: "https://localhost:8080").message == "HTTP failure: connection refused")
    }
}
