import Foundation
import Switchboard

/// `JSONValue(parsing:)`, the parser every adapter reads through: any bytes either fail with a
/// typed error or parse to a value that writes and reads back as itself.
func fuzzJSON(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let data = Data(bytes: start, count: count)
    let value: JSONValue
    do {
        value = try JSONValue(parsing: data)
    } catch let error as SwitchboardError {
        precondition(error.code == .protocolViolation, "not a protocol violation: \(error)")
        return 0
    } catch {
        preconditionFailure("an untyped error: \(error)")
    }
    let written = value.jsonData()
    guard let again = try? JSONValue(parsing: written) else { preconditionFailure("what was written does not parse: \(written)") }
    precondition(again == value, "written and read back, the value changed")
    precondition(again.jsonData() == written, "writing is not stable")
    return 0
}
