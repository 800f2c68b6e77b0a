import Foundation
import Switchboard
@_spi(TestKit) @_spi(WireReaders) import SwitchboardCXone

/// Every CXone answer the adapter reads, through the functions the backend and the link read them
/// with: any input is an outcome or a `SwitchboardError`, never a crash.
///
/// - A WebSocket frame (`CXoneWire.classify`, then `CXoneMapping.outcome` for an event, as the
///   link does; an `EventInS3` download is read the same way).
/// - The HTTP answers: the channel configuration (`CXoneChannelConfiguration(json:)`), live-chat
///   availability, the token server's answer (a transaction token with its customer and third
///   party; a refresh's third-party tokens) and the attachment upload's (`CXoneHTTPAnswers`).
func fuzzCXone(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let data = Data(bytes: start, count: count)
    let text = String(decoding: data, as: UTF8.self)
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    if case .event(_, let type, let frame) = CXoneWire.classify(text) {
        do {
            _ = try CXoneMapping.outcome(of: frame, type: type, thread: ConversationID("thread"))
        } catch {
            precondition(error is SwitchboardError, "an untyped error: \(error)")
        }
    }
    if let json = try? JSONValue(parsing: text) {
        do {
            _ = try CXoneChannelConfiguration(json: json)
        } catch {
            precondition(error is SwitchboardError, "an untyped error: \(error)")
        }
    }
    // The HTTP answers as a 200; the status checks come before the body is read.
    for read in [
        { _ = try CXoneHTTPAnswers.liveChatAvailability(status: 200, body: data) },
        {
            let json = try CXoneHTTPAnswers.tokenAnswer(status: 200, body: data, failure: "transactionTokenRequestFailed")
            var refreshed = Credentials()
            CXoneHTTPAnswers.thirdPartyTokens(json, now: now, into: &refreshed)
            var credentials = Credentials()
            _ = try CXoneHTTPAnswers.transactionToken(json, now: now, into: &credentials)
        },
        { _ = try CXoneHTTPAnswers.uploadedFileURL(status: 200, body: data, name: "file.png") },
    ] as [() throws -> Void] {
        do { try read() } catch { precondition(error is SwitchboardError, "an untyped error: \(error)") }
    }
    return 0
}
