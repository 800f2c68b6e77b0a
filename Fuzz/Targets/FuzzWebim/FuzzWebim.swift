import Foundation
import Switchboard
import SwitchboardWebim

/// The Webim adapter's reading of `init`, `delta`, `history` and `upload` answers
/// (`WebimDeltaReader`, which the link uses), of offline appeals' `history` answers, and of push payloads: any bytes give an outcome, never a crash; a fresh reader and one
/// that has read the input before both survive it.
func fuzzWebim(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let data = Data(bytes: start, count: count)
    var credentials = Credentials()
    credentials["page-id"] = "page"
    credentials["auth-token"] = "token"
    credentials["visitor-id"] = "visitor"
    var reader = WebimDeltaReader(baseURL: "https://fuzz.example")
    for _ in 0..<2 {
        switch reader.read(data, credentials: credentials, now: Date(timeIntervalSince1970: 1_700_000_000)) {
        case .malformed(let error): precondition(error.code == .protocolViolation)
        case .error, .unchanged, .changed: break
        }
    }
    // History answers (before and since) and the upload answer: a value or a typed error.
    for read in [
        { _ = try WebimDeltaReader.readUploadAnswer(data) },
        { _ = try reader.readHistoryPage(data, credentials: credentials, now: Date(timeIntervalSince1970: 1_700_000_000)) },
        { _ = try reader.readHistoryChanges(data, credentials: credentials, now: Date(timeIntervalSince1970: 1_700_000_000)) },
        {
            for complete in [false, true] {
                _ = try WebimAppealsBackend.readHistoryAnswer(
                    data, complete: complete, baseURL: "https://fuzz.example", credentials: credentials, now: Date(timeIntervalSince1970: 1_700_000_000)
                )
            }
        },
    ] as [() throws -> Void] {
        do { try read() } catch { precondition(error is SwitchboardError, "an untyped error: \(error)") }
    }
    if let json = try? JSONValue(parsing: data) {
        _ = WebimPushNotifications.isWebim(json)
        _ = WebimPushNotifications.parse(json, visitorID: "visitor")
    }
    return 0
}
