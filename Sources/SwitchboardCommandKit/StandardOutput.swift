package import Foundation

/// Line output without touching C's global `stdout` (not concurrency-safe in Swift 6).
package struct StandardOutput: Sendable {
    package init() {}

    package func write(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
