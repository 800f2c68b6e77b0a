import Foundation
import Switchboard
@_spi(WireReaders) import SwitchboardXMPP

/// The XMPP adapter's reading of one WebSocket frame, as the link does: the restricted-XML reader,
/// then, on an element, each mapping the link applies (an archive result, a live message by its
/// archive id, a stanza error, a stream error, a SASL failure). Any input is an element or a typed
/// error, never a crash.
func fuzzXMPP(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    let element: XMPPElement
    do {
        element = try XMLReader.read(text)
    } catch {
        precondition(error.code == .protocolViolation, "an unexpected code: \(error)")
        return 0
    }
    do {
        if let item = try XMPPMapping.archiveItem(element) {
            _ = XMPPMapping.message(item.message, archiveID: item.archiveID, me: "customer@localhost", time: item.stamp ?? Date(timeIntervalSince1970: 0))
        }
    } catch {
        precondition(error.code == .protocolViolation, "an unexpected code: \(error)")
    }
    if let archiveID = XMPPMapping.stanzaID(of: element, archive: "customer@localhost") {
        _ = XMPPMapping.message(element, archiveID: archiveID, me: "customer@localhost", time: Date(timeIntervalSince1970: 0))
    }
    _ = XMPPMapping.error(element, request: "fuzz")
    _ = XMPPMapping.streamError(element)
    _ = XMPPMapping.saslFailure(element)
    _ = XMPPMapping.timestamp(element.text)
    return 0
}
