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
