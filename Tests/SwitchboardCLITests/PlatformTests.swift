import Foundation
import Testing

/// The library modules stay within iOS 16 / macOS 13 (`Docs/Platforms.md`). Apple SDKs are not on
/// the CI machines, so this reads the sources in the repository for the newer APIs the package
/// replaced, and names each use it finds.
@Suite struct PlatformTests {
    /// Newer than iOS 16 / macOS 13, with what to use instead.
    static let newerAPIs: [(pattern: String, instead: String)] = [
        ("import Synchronization", "Locked (iOS 18 / macOS 15)"),
        ("Mutex<", "Locked (iOS 18 / macOS 15)"),
        ("Mutex(", "Locked (iOS 18 / macOS 15)"),
        ("Atomic<", "Locked (iOS 18 / macOS 15)"),
        ("Atomic(", "Locked (iOS 18 / macOS 15)"),
        ("withDiscardingTaskGroup", "ChildTasks (iOS 17 / macOS 14)"),
        ("withThrowingDiscardingTaskGroup", "withThrowingTaskGroup (iOS 17 / macOS 14)"),
        ("import Observation", "no replacement in the library (iOS 17 / macOS 14)"),
        ("InlineArray", "an array or a tuple (iOS 26)"),
        ("Span<", "withUnsafeBufferPointer (iOS 26)"),
        ("Task(name:", "Task without a name (iOS 26)"),
        ("Task.immediate", "a task (iOS 26)"),
    ]

    /// The modules an app links: the core, store, transport, test kit and the adapters.
    static let libraryDirectories = [
        "Sources/Switchboard", "Sources/SwitchboardSQLite", "Sources/SwitchboardTransport", "Sources/SwitchboardTestKit",
        "Adapters/Webim/Sources", "Adapters/Voximplant/Sources", "Adapters/CXone/Sources", "Adapters/Matrix/Sources",
    ]

    @Test func libraryModulesUseNothingNewerThanTheDeclaredMinimum() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var files = 0
        var uses: [String] = []
        for directory in Self.libraryDirectories {
            let base = root.appendingPathComponent(directory)
            let walker = try #require(FileManager.default.enumerator(atPath: base.path), "\(directory) is in the repository")
            for case let path as String in walker where path.hasSuffix(".swift") {
                files += 1
                let text = try String(contentsOf: base.appendingPathComponent(path), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.trimmingCharacters(in: .whitespaces)
                    guard !code.hasPrefix("//") else { continue }
                    for api in Self.newerAPIs where code.contains(api.pattern) {
                        uses.append("\(directory)/\(path):\(number + 1): \(api.pattern) — use \(api.instead)")
                    }
                }
            }
        }
        print("platform check: \(files) source files of the library modules, \(uses.count) uses of APIs above iOS 16 / macOS 13")
        #expect(files > 50, "the walk found the sources")
        #expect(uses.isEmpty, "\(uses.joined(separator: "\n"))")
    }

    @Test func packageDeclaresTheDocumentedMinimum() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(manifest.contains("platforms: [.macOS(.v14), .iOS(.v16)]"), "Docs/Platforms.md explains the declared minimum")
    }
}
