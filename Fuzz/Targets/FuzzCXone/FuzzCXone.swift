import Switchboard
import SwitchboardCXone

/// The CXone adapter's reading of a WebSocket frame (`CXoneWire.classify`, then
/// `CXoneMapping.outcome` for an event, as the link does) and of a channel configuration: any
/// input is an outcome or a typed error, never a crash.
func fuzzCXone(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
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
    return 0
}
