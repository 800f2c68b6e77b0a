import Switchboard
@_spi(WireReaders) import SwitchboardVoximplant

/// The Voximplant-style adapter's reading of a server frame (`VoximplantFrameReader`, which the
/// link uses): any text is a frame or a typed `malformed`, never a crash.
func fuzzVoximplant(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    // The WebSocket hands the link text; invalid UTF-8 arrives repaired.
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    if case .malformed(let error) = VoximplantFrameReader(user: "alice@app.acc").read(text) {
        precondition(error.code == .protocolViolation)
    }
    return 0
}
