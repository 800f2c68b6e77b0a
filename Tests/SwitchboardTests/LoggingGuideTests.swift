import Foundation
import Logging
import Switchboard
import Testing

// The handlers of Docs/Logging.md, as the guide shows them (kept in step by hand; the test below
// makes sure they compile and filter as the guide says).

/// Passes a record on when its level reaches the one set for its category: the logger's label,
/// or the `backend` metadata the session and its adapter add.
struct CategoryLevelHandler: LogHandler {
    var wrapped: any LogHandler
    let label: String
    let levels: [String: Logger.Level]   // "switchboard.session", "cxone", "webim", …
    let defaultLevel: Logger.Level

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }
    // The wrapped handler sees everything this one lets through.
    var logLevel: Logger.Level {
        get { min(defaultLevel, levels.values.min() ?? defaultLevel) }
        set {}
    }

    func log(event: LogEvent) {
        let backend = (event.metadata?["backend"] ?? wrapped.metadata["backend"]).map { "\($0)" }
        let wanted = backend.flatMap { levels[$0] } ?? levels[label] ?? defaultLevel
        guard event.level >= wanted else { return }
        wrapped.log(event: event)
    }
}

/// Appends each record as one line to a file (the SDK's `FileLogWriter`).
struct FileLogHandler: LogHandler {
    let label: String
    let file: FileHandle
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = self.metadata.merging(event.metadata ?? [:]) { _, new in new }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = "\(Date().formatted(.iso8601)) \(event.level) \(label) \(fields) \(event.message)\n"
        self.file.write(Data(text.utf8))   // FileHandle writes are serialized by the system
    }
}

/// Records what reaches it, for the test.
final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    let records = Locked<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        records.withLock { $0.append("\(event.level) \(event.message)") }
    }
}

@Suite struct LoggingGuideTests {
    @Test func aLevelPerCategoryByLabelOrBackend() throws {
        let recording = RecordingLogHandler()
        let handler = CategoryLevelHandler(wrapped: recording, label: "switchboard.session", levels: ["cxone": .debug, "switchboard.session": .info], defaultLevel: .warning)
        var logger = Logger(label: "switchboard.session") { _ in handler }
        logger.debug("engine detail")             // the label's level is info: dropped
        logger.info("engine lifecycle")
        logger[metadataKey: "backend"] = "cxone"
        logger.debug("cxone detail")              // the backend's level is debug: passed
        logger.trace("cxone trace")
        #expect(recording.records.withLock { $0 } == ["info engine lifecycle", "debug cxone detail"])
    }

    @Test func theFileHandlerAppendsOneLinePerRecord() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("logging-guide-\(UUID().uuidString).log").path
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        let logger = Logger(label: "switchboard.session") { label in FileLogHandler(label: label, file: file) }
        logger.info("one", metadata: ["backend": "webim"])
        logger.warning("two")
        try file.close()
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2 && lines[0].contains("info switchboard.session backend=webim one") && lines[1].hasSuffix("two"))
    }
}
