import Foundation
import Switchboard
@_spi(TestKit) @_spi(WireReaders) import SwitchboardWebim

/// Every Webim answer the adapter reads, through the functions its links read them with: any
/// bytes give an outcome or a `SwitchboardError`, never a crash.
///
/// - The online link (`WebimLink`): `init` and `delta` answers (`WebimDeltaReader.read`, twice, so
///   a reader that has read the input survives it again), the `history` answers (before and
///   since), the `upload` answer, the account config (`readConfigAnswer`), an action answer
///   (`readActionAnswer`) and the `get-online-status` answer (`readOnlineStatus`).
/// - The offline appeals' link (`WebimAppealsLink`): the `history` answer, as a poll and as a
///   forced re-read (`WebimAppealsBackend.readHistoryAnswer`), the `chat.offline_message` answer
///   of a new appeal and of a message in one, and the `upload` answer.
/// - Push payloads (`WebimPushNotifications`).
func fuzzWebim(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let data = Data(bytes: start, count: count)
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    var credentials = Credentials()
    credentials["page-id"] = "page"
    credentials["auth-token"] = "token"
    credentials["visitor-id"] = "visitor"
    var reader = WebimDeltaReader(baseURL: "https://fuzz.example")
    for _ in 0..<2 {
        switch reader.read(data, credentials: credentials, now: now) {
        case .malformed(let error): precondition(error.code == .protocolViolation)
        case .error, .unchanged, .changed: break
        }
    }
    _ = reader.readOnlineStatus(data)
    switch WebimDeltaReader.readActionAnswer(data, during: "chat.message") {
    case .malformed(let error): precondition(error.code == .protocolViolation)
    case .error, .refused, .done: break
    }
    // The answers read as a value or a typed error.
    for read in [
        { _ = try WebimDeltaReader.readUploadAnswer(data) },
        { _ = try reader.readHistoryPage(data, credentials: credentials, now: now) },
        { _ = try reader.readHistoryChanges(data, credentials: credentials, now: now) },
        {
            let config = try WebimDeltaReader.readConfigAnswer(data)
            precondition((config.maxUploadBytes ?? 0) >= 0, "a negative upload limit")
        },
        {
            for complete in [false, true] {
                _ = try WebimAppealsBackend.readHistoryAnswer(data, complete: complete, baseURL: "https://fuzz.example", credentials: credentials, now: now)
            }
        },
        {
            for appeal in [nil, ConversationID("1")] {
                do {
                    _ = try WebimAppealsBackend.readOfflineMessageAnswer(data, appeal: appeal, baseURL: "https://fuzz.example", credentials: credentials, now: now)
                } catch {
                    precondition(error is SwitchboardError, "an untyped error: \(error)")
                }
            }
        },
        { _ = try WebimAppealsBackend.readUploadAnswer(data) },
    ] as [() throws -> Void] {
        do { try read() } catch { precondition(error is SwitchboardError, "an untyped error: \(error)") }
    }
    if let json = try? JSONValue(parsing: data) {
        _ = WebimPushNotifications.isWebim(json)
        _ = WebimPushNotifications.parse(json, visitorID: "visitor")
    }
    return 0
}
