package import Foundation
package import Logging

/// Line output without touching C's global `stdout` (not concurrency-safe in Swift 6).
package struct StandardOutput: Sendable {
    package init() {}

    package func write(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

extension Logger {
    /// A logger that drops everything: the commands print events and lines of their own.
    package static var off: Logger { Logger(label: "switchboard.off", factory: { _ in SwiftLogNoOpLogHandler() }) }
}

/// A table for a terminal: each column padded to its widest cell, two spaces between columns.
package enum TextTable {
    /// The lines of `rows` under `header` (every row as many cells as the header).
    package static func lines(header: [String], rows: [[String]]) -> [String] {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { cells in zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ") }
    }
}
