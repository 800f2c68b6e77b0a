package import Foundation

/// A whole `switchboard bench` run as its JSON tells it (`--json`, `--report`): where and when it
/// ran, its rows, and the rows it skipped with the reason. The format is documented in
/// `Docs/Benchmarks.md`; ``version`` rises with any change a reader has to know of.
package struct BenchRun: Codable, Sendable, Hashable {
    /// What the file is: always `switchboard-bench`.
    package var format: String
    /// The format's version: 1.
    package var version: Int
    package var environment: BenchEnvironment
    package var rows: [BenchRow]
    package var skipped: [BenchSkip]

    package static let formatName = "switchboard-bench"
    package static let currentVersion = 1

    package init(environment: BenchEnvironment, rows: [BenchRow], skipped: [BenchSkip]) {
        self.format = Self.formatName
        self.version = Self.currentVersion
        self.environment = environment
        self.rows = rows
        self.skipped = skipped
    }

    /// The JSON a run writes: keys sorted, indented, so two runs diff line by line.
    package func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try encoder.encode(self)
    }

    /// Reads what ``json()`` writes: a figure that is not finite (a side that measured nothing)
    /// is the string `inf`, `-inf` or `nan`.
    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return decoder
    }

    /// Reads a run's JSON.
    ///
    /// - Throws: `BenchFileError` saying what is wrong: not a bench run, a version this build
    ///   does not read, or JSON that does not decode.
    package static func read(_ data: Data, from path: String) throws -> BenchRun {
        struct Header: Decodable {
            var format: String?
            var version: Int?
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: data), header.format == formatName else {
            throw BenchFileError(path: path, reason: "not a switchboard bench run (no \"format\": \"\(formatName)\"; the JSON of `switchboard bench --json` is)")
        }
        guard header.version == currentVersion else {
            throw BenchFileError(path: path, reason: "format version \(header.version.map(String.init) ?? "missing"), and this build reads version \(currentVersion)")
        }
        do {
            return try decoder.decode(BenchRun.self, from: data)
        } catch {
            throw BenchFileError(path: path, reason: "does not decode as a version \(currentVersion) run: \(error)")
        }
    }

    /// Reads the run at `path`.
    package static func read(path: String) throws -> BenchRun {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw BenchFileError(path: path, reason: "cannot be read: \(error.localizedDescription)")
        }
        return try read(data, from: path)
    }
}

/// A bench file that cannot be used, and why.
package struct BenchFileError: Error, CustomStringConvertible, Equatable {
    package var path: String
    package var reason: String
    package var description: String { "\(path): \(reason)" }

    package init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

/// Rows a run did not measure, and why (a peer not installed, no PostgreSQL).
package struct BenchSkip: Codable, Sendable, Hashable {
    /// The group skipped (`Bench.Figure`'s name).
    package var figure: String
    package var reason: String

    package init(figure: String, reason: String) {
        self.figure = figure
        self.reason = reason
    }
}

/// Where and when a run ran: enough to tell two machines, two toolchains and two commits apart.
package struct BenchEnvironment: Codable, Sendable, Hashable {
    /// When the run started, ISO 8601 in UTC.
    package var date: String
    package var host: String
    /// The processor's model name, as `/proc/cpuinfo` gives it.
    package var cpu: String
    package var cores: Int
    package var memoryBytes: UInt64
    /// The operating system, as `/etc/os-release` names it, and its kernel.
    package var system: String
    /// The Swift the executable was built with (its compiler's version, to the minor).
    package var swift: String
    /// `debug` or `release`: a debug build's figures say little.
    package var build: String
    /// The commit of the working copy the bench ran in, with `-dirty` when it had changes, or
    /// `nil` outside a git working copy.
    package var commit: String?
    /// `full` or `quick`.
    package var sizes: String
    /// The command's arguments after `bench`, with any password in a URL left out.
    package var arguments: [String]

    package init(
        date: String, host: String, cpu: String, cores: Int, memoryBytes: UInt64, system: String, swift: String, build: String, commit: String?,
        sizes: String, arguments: [String]
    ) {
        self.date = date
        self.host = host
        self.cpu = cpu
        self.cores = cores
        self.memoryBytes = memoryBytes
        self.system = system
        self.swift = swift
        self.build = build
        self.commit = commit
        self.sizes = sizes
        self.arguments = arguments
    }

    /// This machine, this build and the working copy in the current directory, now.
    package static func current(sizes: String, arguments: [String], commit: String?) -> BenchEnvironment {
        let info = ProcessInfo.processInfo
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return BenchEnvironment(
            date: formatter.string(from: Date()), host: info.hostName, cpu: cpuModel() ?? "unknown", cores: info.activeProcessorCount,
            memoryBytes: info.physicalMemory, system: system(), swift: compiler, build: build, commit: commit, sizes: sizes,
            arguments: arguments.map(withoutCredentials)
        )
    }

    /// An argument with the user and password of any URL in it left out (`--postgres
    /// postgres://user:secret@host/db` is kept as `postgres://…@host/db`): a run's JSON and report
    /// are made to be shared.
    package static func withoutCredentials(_ argument: String) -> String {
        argument.replacing(/:\/\/[^\/@\s]*@/) { _ in "://…@" }
    }

    /// The compiler this was built with.
    package static var compiler: String {
        #if compiler(>=6.4)
        "Swift 6.4 or later"
        #elseif compiler(>=6.3)
        "Swift 6.3"
        #elseif compiler(>=6.2)
        "Swift 6.2"
        #elseif compiler(>=6.1)
        "Swift 6.1"
        #else
        "Swift 6.0"
        #endif
    }

    package static var build: String {
        #if DEBUG
        "debug"
        #else
        "release"
        #endif
    }

    private static func cpuModel() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        let line = text.split(separator: "\n").first { $0.hasPrefix("model name") }
        return line?.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
    }

    private static func system() -> String {
        guard let release = try? String(contentsOfFile: "/etc/os-release", encoding: .utf8),
            let line = release.split(separator: "\n").first(where: { $0.hasPrefix("PRETTY_NAME=") })
        else { return ProcessInfo.processInfo.operatingSystemVersionString }
        let pretty = line.dropFirst("PRETTY_NAME=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        let kernel = (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        return kernel.map { "\(pretty), Linux \($0)" } ?? pretty
    }
}
