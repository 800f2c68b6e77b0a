import Foundation
import Switchboard
@_spi(WireReaders) import SwitchboardMatrix

/// The Matrix adapter's reading of a `/sync` answer, as the link does: the first sync of a link,
/// then the same bytes as an incremental one over the state the first left (so rooms, members and
/// recent messages are known), and the same bytes as one room event and as an error body. Any
/// input is a batch or a typed error, never a crash. Each input starts from a fresh reader, so an
/// input that crashes does so alone too (a saved crash replays).
func fuzzMatrix(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let data = Data(UnsafeBufferPointer(start: start, count: count))
    var reader = MatrixSyncReader(me: "@me:localhost", homeserver: "http://127.0.0.1:8008")
    for first in [true, false] {
        do {
            _ = try reader.read(data, first: first, since: "s1")
        } catch {
            precondition(error.code == .protocolViolation, "an unexpected code: \(error)")
        }
    }
    if let event = try? JSONValue(parsing: data) {
        _ = MatrixMapping.item(event, room: "!room:localhost", me: "@me:localhost", homeserver: "http://127.0.0.1:8008")
    }
    _ = MatrixMapping.error(status: 400 + count % 200, body: data, request: "sync")
    return 0
}
