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
        ("import Observation", "it only in a file whose every declaration is marked `@available(macOS 14.0, iOS 17.0, …)` (iOS 17 / macOS 14)"),
        ("InlineArray", "an array or a tuple (iOS 26)"),
        ("Span<", "withUnsafeBufferPointer (iOS 26)"),
        ("Task(name:", "Task without a name (iOS 26)"),
        ("Task.immediate", "a task (iOS 26)"),
        ("addImmediateTask", "it only behind `#if compiler(>=6.2)` and `guard #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)` with the work done inline otherwise (iOS 26)"),
    ]

    /// Whether `text` gates what `addImmediateTask` needs: the Swift 6.2 compiler and the systems
    /// of 2025 (the one use, the engine's task per input, falls back to running the input inline).
    static func immediateTasksAreGated(_ text: String) -> Bool {
        text.contains("#if compiler(>=6.2)") && text.contains("guard #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) else")
    }

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
                let gated = Self.everyDeclarationIsGated(text)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.trimmingCharacters(in: .whitespaces)
                    guard !code.hasPrefix("//") else { continue }
                    for api in Self.newerAPIs where code.contains(api.pattern) && !(gated && api.pattern == "import Observation")
                        && !(api.pattern == "addImmediateTask" && Self.immediateTasksAreGated(text))
                    {
                        uses.append("\(directory)/\(path):\(number + 1): \(api.pattern) — use \(api.instead)")
                    }
                }
            }
        }
        print("platform check: \(files) source files of the library modules, \(uses.count) uses of APIs above iOS 16 / macOS 13")
        #expect(files > 50, "the walk found the sources")
        #expect(uses.isEmpty, "\(uses.joined(separator: "\n"))")
    }

    /// Whether each top-level type of `text` is marked available from macOS 14 and iOS 17 (the
    /// observable models: the import is fine where nothing older can reach what it brings).
    static func everyDeclarationIsGated(_ text: String) -> Bool {
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let declarations = lines.indices.filter { lines[$0].hasPrefix("public final class ") || lines[$0].hasPrefix("public struct ") || lines[$0].hasPrefix("public enum ") }
        return !declarations.isEmpty && declarations.allSatisfy { index in
            // The attributes and documentation right above the type.
            var above = index - 1
            while above >= 0, lines[above].hasPrefix("@") || lines[above].hasPrefix("///") {
                if lines[above].hasPrefix("@available(macOS 14.0, iOS 17.0") { return true }
                above -= 1
            }
            return false
        }
    }

    @Test func anObservationImportNeedsEveryDeclarationGated() {
        let gated = "public import Observation\n@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)\n@MainActor\n@Observable\npublic final class M {}\n"
        #expect(Self.everyDeclarationIsGated(gated))
        #expect(!Self.everyDeclarationIsGated(gated + "public struct Open {}\n"), "one type reachable from iOS 16 is one too many")
    }

    @Test func packageDeclaresTheDocumentedMinimum() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(manifest.contains("platforms: [.macOS(.v14), .iOS(.v16)]"), "Docs/Platforms.md explains the declared minimum")
    }
}
