import Foundation
import Switchboard

/// The golden frames of Docs/Protocols/voximplant-style.md §9, read from the spec itself so the
/// spec and both implementations cannot drift apart.
enum GoldenFrames {
    /// Every JSON code block of §9, in order.
    static let all: [String] = {
        let spec = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Docs/Protocols/voximplant-style.md")
        let text = (try? String(contentsOf: spec, encoding: .utf8)) ?? ""
        guard let section = text.range(of: "## 9. Golden frames") else { return [] }
        var blocks: [String] = []
        var rest = text[section.upperBound...]
        while let open = rest.range(of: "```json\n"), let close = rest[open.upperBound...].range(of: "\n```") {
            blocks.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return blocks
    }()

    static var loginRequest: String { all[0] }
    static var loginResponse: String { all[1] }
    static var messageEvent: String { all[2] }
    static var participantEvent: String { all[3] }
    static var readEvent: String { all[4] }
    static var typingEvent: String { all[5] }
    static var sendRequest: String { all[6] }
    static var aclError: String { all[7] }
    static var retransmitRequest: String { all[8] }
    static var retransmitResponse: String { all[9] }

    static func json(_ frame: String) throws -> JSONValue { try JSONValue(parsing: frame) }
}
