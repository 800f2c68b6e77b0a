public import Logging
import Switchboard

/// Keeps every log line a logger made, at every level: for tests that check what a session
/// writes to its logs (nothing secret, at trace level included).
public final class LogRecorder: Sendable {
    private let lines = Locked<[String]>([])

    public init() {}

    /// A logger at `level` whose lines this recorder keeps.
    public func logger(label: String = "switchboard.recorded", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { label in Handler(label: label, recorder: self) }
        logger.logLevel = level
        return logger
    }

    /// Every line so far: level, label, message and metadata, as one string each.
    public var recorded: [String] { lines.withLock { $0 } }

    fileprivate func keep(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let label: String
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
            let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            recorder.keep("\(event.level) \(label) \(event.message) \(fields) [\(event.source)]")
        }
    }
}
