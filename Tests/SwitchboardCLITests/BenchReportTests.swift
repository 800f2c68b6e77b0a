import Foundation
import Testing

@testable import switchboard
import SwitchboardBench
import SwitchboardTestKit

/// The bench's report and comparison, read from runs recorded on this project's machine
/// (`Tests/Fixtures/bench/`, two full runs of one commit): the page drawn from a run holds every
/// row, chart and skip; two runs of one commit compare as within noise; a move past a row's noise
/// is named by its direction; files that are not runs are refused with the reason.
@Suite(.timeLimit(.minutes(2)))
struct BenchReportTests {
    static let fixtures = repositoryRoot.appendingPathComponent("Tests/Fixtures/bench")

    static func recorded(_ name: String) throws -> BenchRun {
        try BenchRun.read(path: fixtures.appendingPathComponent(name).path)
    }

    @Test func theReportDrawsEveryRowOfARecordedRun() throws {
        let run = try Self.recorded("run-1.json")
        let page = BenchReport.html(run)
        try Self.expectWellFormed(page)
        // Self-contained: no script, nothing fetched, the one link the JSON beside it.
        #expect(!page.contains("<script"))
        #expect(!page.contains("http://") && !page.contains("https://") && !page.contains("src="))
        #expect(Self.count("href=", in: page) == 1 && page.contains("<a href=\"bench.json\">"))

        // Where it ran.
        let environment = run.environment
        for value in [environment.commit ?? "", environment.cpu, environment.swift, environment.build, environment.date, environment.system] {
            #expect(page.contains(BenchReport.escape(value)), "the page names \(value)")
        }

        // Every row in the table, marked met, missed or reported as the run says.
        for row in run.rows {
            let status = row.goal.measure == .none ? "reported" : row.met ? "met" : "missed"
            #expect(page.contains("<tr data-row=\"\(row.id)\" class=\"\(status)\">"), "the table's row \(row.id)")
        }

        // A percentile chart for each distribution, with both curves at every fraction.
        let curves = run.rows.filter { $0.distribution != nil }
        #expect(curves.count == 3 * 2 * 2 + (run.rows.contains { $0.figure == "peer" } ? 1 : 0), "send and agent, two stores, three adapters, the peer's echo")
        #expect(Self.count("<figure class=\"curve\"", in: page) == curves.count)
        #expect(Self.count("<polyline class=\"series", in: page) == 2 * curves.count)
        for row in curves {
            let chart = try Self.element("figure", marked: row.id, in: page)
            for polyline in Self.all("points=\"", in: chart) {
                #expect(polyline.split(separator: " ").count == BenchDistribution.fractions.count, "\(row.id): a point per fraction")
            }
            // Its own goal (p50) and its p99 sibling's where it has one (a send's 2 ms, the
            // peer's ratio; an agent message's p99 is reported): marked on the curve.
            let marks = Self.count("<g class=\"goal\">", in: chart)
            #expect(marks == (row.id.contains(".send.") || row.id.hasPrefix("peer.") ? 2 : 1), "\(row.id): \(marks) goal marks")
        }

        // Bars for every other row that is not a latency percentile, each with its goal.
        let barred = run.rows.filter { $0.distribution == nil && !$0.id.hasPrefix("latency.") }
        #expect(Self.count("<g class=\"bar-row", in: page) == barred.count)
        for row in barred {
            let bars = try Self.element("g", marked: row.id, in: page)
            #expect(Self.count("<rect class=\"bar", in: bars) == (row.baselineName == "goal" ? 1 : 2), "\(row.id): Switchboard's bar and the baseline's")
            #expect(bars.contains("<g class=\"goal\">") == (row.goal.measure != .none), "\(row.id): its goal marked")
        }

        // What was skipped, with the reason.
        #expect(!run.skipped.isEmpty, "the recorded run skipped the PostgreSQL rows")
        for skip in run.skipped {
            #expect(page.contains("<li data-figure=\"\(skip.figure)\">") && page.contains(BenchReport.escape(skip.reason)))
        }
        print("bench report from run-1.json: \(run.rows.count) rows, \(curves.count) percentile charts, \(barred.count) bar rows, \(run.skipped.count) skipped")
    }

    /// Two full runs of one commit, one after the other on one machine: every row within noise.
    @Test func twoRunsOfOneCommitAreWithinNoise() throws {
        let first = try Self.recorded("run-1.json")
        let second = try Self.recorded("run-2.json")
        #expect(first.environment.commit == second.environment.commit)
        let comparison = BenchComparison(old: first, new: second)
        print(comparison.table().joined(separator: "\n"))
        #expect(comparison.entries.count == first.rows.count)
        let moved = comparison.entries.filter { $0.verdict != .withinNoise }.map { "\($0.id) \(BenchComparison.percent($0.change ?? 0)) ±\($0.noise ?? 0)" }
        let allWithinNoise = moved.isEmpty
        #expect(allWithinNoise, "moved beyond their noise: \(moved)")
    }

    /// A move past a row's noise is named by which way is better for the row; a move inside it is
    /// not; rows in one run only are new or gone.
    @Test func aMovePastTheNoiseIsNamedByItsDirection() throws {
        let old = try Self.recorded("run-1.json")
        var new = old
        func scale(_ id: String, by factor: Double) throws {
            let index = try #require(new.rows.firstIndex { $0.id == id }, "a row \(id)")
            new.rows[index] = try Self.scaled(new.rows[index], by: factor)
        }
        let slower = "latency.webim.sqlite.send.p50"
        let faster = "bus.8.bare-channel"
        let inside = "decode.cxone"
        // Each row's noise against a run like the old one.
        let itself = BenchComparison(old: old, new: old)
        func noise(_ id: String) throws -> Double { try #require(itself.entries.first { $0.id == id }?.noise, "\(id)'s noise") }
        try scale(slower, by: 1.5 + noise(slower))
        try scale(faster, by: 1.5 + noise(faster))
        try scale(inside, by: 1 + noise(inside) / 2)
        new.rows.removeAll { $0.id == "history.sqlite" }
        var added = old.rows[0]
        added.id = "bus.64.bare-channel"
        new.rows.append(added)

        let comparison = BenchComparison(old: old, new: new)
        func verdict(_ id: String) -> BenchComparison.Verdict? { comparison.entries.first { $0.id == id }?.verdict }
        #expect(verdict(slower) == .regressed, "a time that rose")
        #expect(verdict(faster) == .improved, "a rate that rose")
        #expect(verdict(inside) == .withinNoise, "half its noise")
        #expect(verdict("history.sqlite") == .removed)
        #expect(verdict("bus.64.bare-channel") == .added)
        #expect(comparison.entries.filter { $0.verdict != .withinNoise }.count == 4)
        // The page draws the comparison: a dot per compared row, its verdict as its class.
        let page = BenchReport.html(new, comparison: comparison)
        try Self.expectWellFormed(page)
        #expect(page.contains("<g class=\"moved regressed\" data-row=\"\(slower)\">"))
        #expect(page.contains("<g class=\"moved improved\" data-row=\"\(faster)\">"))
        #expect(page.contains("<g class=\"moved within-noise\" data-row=\"\(inside)\">"))
        #expect(Self.count("<circle class=\"change\"", in: page) == comparison.entries.filter { $0.noise != nil }.count)
    }

    /// The JSON round-trips, and what is not a run of this version is refused with the reason.
    @Test func whatIsNotARunIsRefusedWithTheReason() throws {
        let run = try Self.recorded("run-1.json")
        #expect(try BenchRun.read(run.json(), from: "again.json") == run)
        let refusals: [(String, String)] = [
            (#"[{"name": "bus fan-out"}]"#, "not a switchboard bench run"),
            (#"{"format": "switchboard-bench", "version": 2}"#, "format version 2, and this build reads version 1"),
            (#"{"format": "switchboard-bench", "version": 1, "rows": 7}"#, "does not decode as a version 1 run"),
            ("not json", "not a switchboard bench run"),
        ]
        for (text, reason) in refusals {
            let error = #expect(throws: BenchFileError.self) { try BenchRun.read(Data(text.utf8), from: "file.json") }
            #expect(error?.path == "file.json" && error?.reason.contains(reason) == true, "\(text): \(error?.reason ?? "accepted")")
        }
    }

    /// `switchboard bench compare` as a person runs it: the table and exit 0; with
    /// `--fail-on-regression` exit 1 when a row regressed; a file that is not a run, exit 64 with
    /// the reason; `--report` writes the page beside both runs' JSON.
    @Test func compareOnTheCommandLine() async throws {
        let executable = try Self.executable()
        let first = Self.fixtures.appendingPathComponent("run-1.json").path
        let second = Self.fixtures.appendingPathComponent("run-2.json").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-compare-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let same = try await Bench.runInAProcessOfItsOwn([executable, "bench", "compare", first, second, "--report", directory.path], within: .seconds(60))
        #expect(same.status == 0, "\(same.printed)")
        #expect(same.printed.contains("within noise") && same.printed.contains("ratio old → new"))
        for file in ["index.html", "bench.json", "old.json"] {
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent(file).path), "the report's \(file)")
        }
        #expect(try BenchRun.read(path: directory.appendingPathComponent("bench.json").path) == (try Self.recorded("run-2.json")))

        var slower = try Self.recorded("run-2.json")
        let index = try #require(slower.rows.firstIndex { $0.id == "latency.cxone.memory.send.p50" })
        slower.rows[index] = try Self.scaled(slower.rows[index], by: 3)
        let doctored = directory.appendingPathComponent("slower.json")
        try slower.json().write(to: doctored)
        let regressed = try await Bench.runInAProcessOfItsOwn(
            [executable, "bench", "compare", first, doctored.path, "--fail-on-regression"], within: .seconds(60)
        )
        #expect(regressed.status == 1 && regressed.printed.contains("regressed"), "\(regressed.printed)")

        // A row that stopped being measured fails it too.
        var fewer = try Self.recorded("run-2.json")
        fewer.rows.removeAll { $0.id == "peer.catch-up" }
        let shorter = directory.appendingPathComponent("fewer.json")
        try fewer.json().write(to: shorter)
        let gone = try await Bench.runInAProcessOfItsOwn([executable, "bench", "compare", first, shorter.path, "--fail-on-regression"], within: .seconds(60))
        #expect(gone.status == 1 && gone.printed.contains("gone") && !gone.printed.contains("regressed"), "\(gone.printed)")
        let without = try await Bench.runInAProcessOfItsOwn([executable, "bench", "compare", first, shorter.path], within: .seconds(60))
        #expect(without.status == 0, "without --fail-on-regression: \(without.printed)")

        let notARun = directory.appendingPathComponent("rows.json")
        try Data("[]".utf8).write(to: notARun)
        let refused = try await Bench.runInAProcessOfItsOwn([executable, "bench", "compare", notARun.path, second], within: .seconds(60))
        #expect(refused.status == 64 && refused.printed.contains("not a switchboard bench run"), "\(refused.printed)")
    }

    /// The noise on rounds made by hand, against the formula worked out by hand: log ratios
    /// [0, ln 1.1, ln 1.2] and [ln 1.6, ln 1.7, ln 1.8], each run's deviation its range over
    /// d2(3) = 1.693, the standard error 1.2533 · √(σ₁²/3 + σ₂²/3), the noise e^(4 SE) − 1.
    @Test func theNoiseIsFourStandardErrorsOfTheMedians() throws {
        func run(_ ratios: [Double], id: String = "row", better: BenchRow.Better = .lower) -> BenchRun {
            let row = BenchRow(
                id: id, name: id, unit: "ms", better: better, switchboard: ratios.sorted()[1], baselineName: "raw", baseline: 1, goal: .reported,
                rounds: BenchRounds(switchboard: ratios, baseline: ratios.map { _ in 1 })
            )
            return BenchRun(environment: Self.environment(), rows: [row], skipped: [])
        }
        let slower = BenchComparison(old: run([1.0, 1.1, 1.2]), new: run([1.6, 1.7, 1.8])).entries[0]
        #expect(abs(try #require(slower.noise) - 0.449_305_03) < 1e-6, "\(slower.noise ?? 0)")
        #expect(abs(try #require(slower.change) - (1.7 / 1.1 - 1)) < 1e-9)
        #expect(slower.verdict == .regressed)
        // The same move on a rate is better; a smaller one is within noise.
        #expect(BenchComparison(old: run([1.0, 1.1, 1.2], better: .higher), new: run([1.6, 1.7, 1.8], better: .higher)).entries[0].verdict == .improved)
        #expect(BenchComparison(old: run([1.0, 1.1, 1.2]), new: run([1.2, 1.3, 1.4])).entries[0].verdict == .withinNoise)
        // A fall as far as a rise (in logarithms) is as far past the noise.
        #expect(BenchComparison(old: run([1.6, 1.7, 1.8]), new: run([1.0, 1.1, 1.2])).entries[0].verdict == .improved)
        // Rounds that all read the same say nothing of the noise.
        #expect(BenchComparison(old: run([1.1, 1.1, 1.1]), new: run([1.2, 1.2, 1.2])).entries[0].verdict == .noiseUnknown)
        // Two rounds, or a round whose baseline measured nothing, leave too few to judge by.
        #expect(BenchComparison(old: run([1.0, 1.1]), new: run([1.6, 1.7])).entries[0].verdict == .noiseUnknown)
        var empty = run([1.0, 1.1, 1.2])
        empty.rows[0].rounds?.baseline[0] = 0
        #expect(BenchComparison(old: empty, new: run([1.6, 1.7, 1.8])).entries[0].verdict == .noiseUnknown)
    }

    /// A side that measured nothing (a baseline of 0: an infinite ratio), and text with markup in
    /// it: the JSON keeps them, the page stays well-formed and escapes every one, and a password
    /// in the arguments is left out.
    @Test func oddValuesAndTextAreKeptAndEscaped() throws {
        let odd = "<b id=\"x\">&'"
        var environment = BenchEnvironment.current(sizes: "full", arguments: ["--postgres", "postgres://bench:s3cret@127.0.0.1:5432/db"], commit: nil)
        environment.host = odd
        environment.cpu = odd
        let rows = [
            BenchRow(
                id: "latency.\(odd).memory.send.p50", adapter: odd, name: odd, unit: "ms", better: .lower, switchboard: 1, baselineName: odd, baseline: 0,
                goal: .ratio(.atMost, 1.3, odd), rounds: BenchRounds(switchboard: [1, 1, 1], baseline: [0, 0, 0]),
                distribution: BenchDistribution([0.001, 0.002], baseline: [], scale: 1000)
            ),
            BenchRow(id: "bus.\(odd)", figure: odd, name: odd, unit: "events/s", better: .higher, switchboard: .infinity, baselineName: odd, baseline: 0, goal: .reported),
        ]
        let run = BenchRun(environment: environment, rows: rows, skipped: [BenchSkip(figure: odd, reason: odd)])
        #expect(environment.arguments == ["--postgres", "postgres://…@127.0.0.1:5432/db"])
        let json = try run.json()
        #expect(String(decoding: json, as: UTF8.self).contains("\"inf\""))
        #expect(try BenchRun.read(json, from: "odd.json") == run)
        let page = BenchReport.html(run, comparison: BenchComparison(old: run, new: run))
        try Self.expectWellFormed(page)
        #expect(!page.contains(odd) && page.contains(BenchReport.escape(odd)))
        #expect(!page.contains("nan") && !page.contains("NaN") && !page.contains("s3cret"))
        #expect(Self.count("<polyline", in: page) == 1, "the side without samples draws no curve")
    }

    /// Runs of two sizes are compared, with a warning that their rows measure other things.
    @Test func runsOfOtherSizesAreComparedWithAWarning() throws {
        let full = try Self.recorded("run-1.json")
        var quick = full
        quick.environment.sizes = "quick"
        let comparison = BenchComparison(old: quick, new: full)
        #expect(comparison.differences == ["sizes quick and full"])
        #expect(comparison.table().contains { $0.hasPrefix("note: the runs differ in sizes quick and full") })
        #expect(BenchReport.html(full, comparison: comparison).contains("id=\"differences\""))
    }

    /// A copy of `row` whose figure and every round of Switchboard's are `factor` times.
    static func scaled(_ row: BenchRow, by factor: Double) throws -> BenchRow {
        var row = row
        row.switchboard *= factor
        row.ratio *= factor
        let rounds = try #require(row.rounds, "\(row.id) has rounds")
        row.rounds = BenchRounds(switchboard: rounds.switchboard.map { $0 * factor }, baseline: rounds.baseline)
        return row
    }

    static func environment() -> BenchEnvironment {
        BenchEnvironment(
            date: "2026-11-29T00:00:00Z", host: "test", cpu: "cpu", cores: 2, memoryBytes: 1 << 30, system: "Linux", swift: "Swift 6.3", build: "release",
            commit: "0123456789ab", sizes: "full", arguments: []
        )
    }

    // MARK: Reading the page

    static func executable() throws -> String {
        let directory = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0]).deletingLastPathComponent()
        let executable = directory.appendingPathComponent("switchboard").path
        try #require(FileManager.default.isExecutableFile(atPath: executable), "the switchboard executable beside the tests, at \(executable)")
        return executable
    }

    /// Every element closed in order, every `&` an entity: the page reads as XML.
    static func expectWellFormed(_ page: String) throws {
        let tag = try Regex(#"<(/?)([A-Za-z][A-Za-z0-9-]*)[^>]*?(/?)>"#)
        var open: [String] = []
        for match in page.matches(of: tag) {
            let closing = match.output[1].substring == "/"
            let name = String(match.output[2].substring ?? "")
            let selfClosing = match.output[3].substring == "/"
            if closing {
                let expected = open.popLast()
                try #require(expected == name, "</\(name)> closes <\(expected ?? "nothing")>")
            } else if !selfClosing {
                open.append(name)
            }
        }
        #expect(open.isEmpty, "left open: \(open)")
        let loose = try Regex(#"&(?!(amp|lt|gt|quot|#[0-9]+);)"#)
        #expect(page.firstMatch(of: loose) == nil, "a bare &")
    }

    static func count(_ needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }

    /// The values of every attribute that starts with `prefix` (`points="`).
    static func all(_ prefix: String, in text: String) -> [Substring] {
        text.components(separatedBy: prefix).dropFirst().compactMap { $0.split(separator: "\"", maxSplits: 1).first }
    }

    /// The element `name` whose `data-row` is `id`, up to its closing tag (not nested in itself).
    static func element(_ name: String, marked id: String, in page: String) throws -> String {
        // The first `<name …data-row="id"…>`: the table's row for the same id comes first.
        let tag = try Regex("<\(name) [^>]*data-row=\"\(id)\"")
        let opening = try #require(page.firstMatch(of: tag)?.range, "a <\(name)> for \(id)")
        var depth = 0
        var index = opening.lowerBound
        while index < page.endIndex {
            if page[index...].hasPrefix("<\(name) ") || page[index...].hasPrefix("<\(name)>") {
                depth += 1
            } else if page[index...].hasPrefix("</\(name)>") {
                depth -= 1
                if depth == 0 { return String(page[opening.lowerBound..<page.index(index, offsetBy: name.count + 3)]) }
            }
            index = page.index(after: index)
        }
        throw BenchFileError(path: id, reason: "unclosed <\(name)>")
    }
}

/// The report as a reader sees it: the page drawn from the recorded runs (the second, compared
/// with the first) opened from its file in headless Chromium. Every chart is laid out at a
/// readable size with its curves drawn, the page is no wider than a 1280 px or a 390 px window,
/// and nothing was fetched. The screenshots it takes are the ones `Docs/Benchmarks.md` shows.
@Suite(.timeLimit(.minutes(3)), .serialized, .enabled(if: agentBrowser.runsTests, Comment(rawValue: agentBrowser.skipNote)))
struct BenchReportBrowserTests {
    @Test func theReportOpensInChromium() async throws {
        let python = try agentBrowser.require()
        let old = try BenchReportTests.recorded("run-1.json")
        let new = try BenchReportTests.recorded("run-2.json")
        let directory = repositoryRoot.appendingPathComponent(".build/bench-report")
        try? FileManager.default.removeItem(at: directory)
        let page = try BenchReport.write(new, comparedWith: old, to: directory.path)
        let script = repositoryRoot.appendingPathComponent("Tests/Python/bench_report_browser.py").path
        let (status, printed) = try await Bench.runInAProcessOfItsOwn([python, script, page, directory.path], within: .seconds(120))
        print(printed.split(separator: "\n").filter { !$0.hasPrefix("RESULT ") }.joined(separator: "\n"))
        try #require(status == 0, "the browser: \(printed.suffix(600))")
        let line = try #require(printed.split(separator: "\n").last { $0.hasPrefix("RESULT ") })
        let read = try JSONDecoder().decode(Read.self, from: Data(line.dropFirst("RESULT ".count).utf8))

        let curves = new.rows.filter { $0.distribution != nil }.count
        let bars = new.rows.filter { $0.distribution == nil && !$0.id.hasPrefix("latency.") }.count
        let figures = Set(new.rows.filter { $0.distribution == nil && !$0.id.hasPrefix("latency.") }.map(\.figure)).count
        #expect(read.tableRows == new.rows.count, "every row in the table")
        #expect(read.curves == curves && read.barRows == bars)
        #expect(read.moved == BenchComparison(old: old, new: new).entries.filter { $0.noise != nil }.count)
        #expect(read.charts.count == curves + figures + 1, "a chart per curve, per group of bars, and the comparison's")
        #expect(read.charts.allSatisfy { $0[0] >= 300 && $0[1] >= 60 }, "every chart laid out readable: \(read.charts)")
        #expect(read.curveLengths.count == 2 * curves && read.curveLengths.allSatisfy { $0 > 50 }, "every curve drawn: \(read.curveLengths)")
        #expect(read.skipped.count == new.skipped.count)
        #expect(read.fetched.isEmpty, "fetched: \(read.fetched)")
        #expect(read.overflow1280 <= 0 && read.overflow390 <= 0, "wider than the window: \(read.overflow1280) at 1280, \(read.overflow390) at 390")
        print(
            "bench report in Chromium: \(read.tableRows) table rows, \(read.curves) percentile charts, \(read.barRows) bar rows, \(read.goalMarks) goal marks, "
                + "\(read.moved) compared rows; overflow \(read.overflow1280) px at 1280, \(read.overflow390) px at 390; \(read.totals)"
        )
    }

    struct Read: Decodable {
        var charts: [[Int]]
        var curveLengths: [Int]
        var tableRows: Int
        var curves: Int
        var barRows: Int
        var goalMarks: Int
        var moved: Int
        var skipped: [String]
        var totals: String
        var fetched: [String]
        var overflow1280: Int
        var overflow390: Int
    }
}
