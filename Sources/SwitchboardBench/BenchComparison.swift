package import Foundation
import SwitchboardCommandKit

/// What moved between two runs (`switchboard bench compare OLD NEW`), row by row, judged against
/// the noise each row showed across its rounds in either run.
///
/// A row is compared by the median of its rounds' ratios to the baseline measured beside them,
/// which stays comparable across machines and moments where times do not; its own figure, old
/// and new, is shown beside. The comparison is of logarithms, where a halving and a doubling are
/// as far. The noise is four standard errors of the difference between the two medians: each
/// run's deviation of one round (``BenchRounds/deviation``) over its rounds, `√(σ₁²/n₁ + σ₂²/n₂)`,
/// times 1.2533 (a median's standard error over a mean's). A move no larger is within noise. A
/// row either run measured in fewer than ``minimumRounds`` rounds has no noise to judge by.
package struct BenchComparison: Sendable, Hashable {
    package enum Verdict: String, Codable, Sendable, Hashable {
        case withinNoise = "within noise"
        case improved
        case regressed
        /// A run measured the row in fewer than ``BenchComparison/minimumRounds`` rounds: it has no
        /// noise to judge the move by.
        case noiseUnknown = "noise unknown"
        /// In the new run only.
        case added = "new"
        /// In the old run only.
        case removed = "gone"
    }

    package struct Entry: Sendable, Hashable, Identifiable {
        package var id: String
        package var name: String
        package var unit: String
        package var old: BenchRow?
        package var new: BenchRow?
        /// The ratio compared, each run's: the median of its rounds' ratios, or, where the noise is
        /// unknown, the row's own ratio.
        package var oldRatio: Double?
        package var newRatio: Double?
        /// The ratio's relative change, new over old minus 1 (0.05 is 5% higher).
        package var change: Double?
        /// The largest rise of the ratio, relative, that is within noise; the largest fall is
        /// ``fall``.
        package var noise: Double?

        /// The largest fall of the ratio, relative (negative), that is within noise: as far as
        /// ``noise`` in logarithms.
        package var fall: Double? { noise.map { 1 / (1 + $0) - 1 } }

        /// The noise as the tables print it: how far the ratio may fall and rise.
        package var noiseText: String {
            guard let noise, let fall else { return "" }
            return String(format: "%.1f%% +%.1f%%", fall * 100, noise * 100)
        }
        package var verdict: Verdict
    }

    /// Rounds a row needs in both runs for its move to be judged: with two, the range says too
    /// little of the spread.
    package static let minimumRounds = 3

    /// How many standard errors a move has to pass to be called one: 4, where 3 called one row of
    /// 40 moved between two runs of one build (`Docs/Benchmarks.md`).
    package static let noiseStandardErrors = 4.0

    package var old: BenchEnvironment
    package var new: BenchEnvironment
    package var entries: [Entry]

    /// The new run's rows in its order, then the rows only the old run had.
    package init(old: BenchRun, new: BenchRun) {
        self.old = old.environment
        self.new = new.environment
        let before = Dictionary(old.rows.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let now = Set(new.rows.map(\.id))
        entries = new.rows.map { row in Self.entry(old: before[row.id], new: row) }
            + old.rows.filter { !now.contains($0.id) }.map { Self.entry(old: $0, new: nil) }
    }

    /// What differs between the runs' settings that makes their rows measure other things: the
    /// sizes, the build, the compiler. Empty when they match.
    package var differences: [String] {
        [
            old.sizes == new.sizes ? nil : "sizes \(old.sizes) and \(new.sizes)",
            old.build == new.build ? nil : "builds \(old.build) and \(new.build)",
            old.swift == new.swift ? nil : "compilers \(old.swift) and \(new.swift)",
        ].compactMap { $0 }
    }

    private static func entry(old: BenchRow?, new: BenchRow?) -> Entry {
        let row = new ?? old!
        var entry = Entry(id: row.id, name: row.name, unit: row.unit, old: old, new: new, verdict: old == nil ? .added : .removed)
        guard let old, let new else { return entry }
        guard let before = old.rounds, let after = new.rounds, before.ratios.count >= minimumRounds, after.ratios.count >= minimumRounds,
            let deviationBefore = before.deviation, let deviationAfter = after.deviation
        else {
            entry.oldRatio = old.ratio
            entry.newRatio = new.ratio
            entry.change = finite(new.ratio / old.ratio - 1)
            entry.verdict = .noiseUnknown
            return entry
        }
        let logs = (median(before.logRatios), median(after.logRatios))
        let counts = (Double(before.ratios.count), Double(after.ratios.count))
        let standardError = 1.2533 * (deviationBefore * deviationBefore / counts.0 + deviationAfter * deviationAfter / counts.1).squareRoot()
        let move = logs.1 - logs.0
        entry.oldRatio = exp(logs.0)
        entry.newRatio = exp(logs.1)
        entry.change = expm1(move)
        // Rounds that all read the same (memory comes in whole pages) say nothing of the noise.
        guard standardError > 0 else {
            entry.verdict = .noiseUnknown
            return entry
        }
        entry.noise = expm1(noiseStandardErrors * standardError)
        if abs(move) <= noiseStandardErrors * standardError {
            entry.verdict = .withinNoise
        } else {
            entry.verdict = (move < 0) == (new.better == .lower) ? .improved : .regressed
        }
        return entry
    }

    /// The middle value (the upper of the two middle ones for an even count, as the rows take it).
    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[sorted.count / 2]
    }

    private static func finite(_ value: Double) -> Double? { value.isFinite ? value : nil }

    /// The comparison as a table for a terminal: each row's ratio then and now, the change, the
    /// noise and the verdict; the figures' change beside.
    package func table() -> [String] {
        let header = ["row", "ratio old → new", "change", "noise", "verdict", "figure old → new"]
        let cells = entries.map { entry in
            [
                entry.name,
                "\(Self.times(entry.oldRatio)) → \(Self.times(entry.newRatio))",
                entry.change.map(Self.percent) ?? "",
                entry.noiseText,
                entry.verdict.rawValue,
                "\(entry.old.map { BenchRow.format($0.switchboard) } ?? "—") → \(entry.new.map { BenchRow.format($0.switchboard) } ?? "—") \(entry.unit)",
            ]
        }
        let summary = Dictionary(grouping: entries, by: \.verdict).mapValues(\.count)
        let counts = [Verdict.withinNoise, .improved, .regressed, .noiseUnknown, .added, .removed].compactMap { verdict in
            summary[verdict].map { "\($0) \(verdict.rawValue)" }
        }
        let warning = differences.isEmpty ? [] : ["note: the runs differ in \(differences.joined(separator: ", ")): their rows measure other things"]
        return [
            "old: \(old.commit ?? "no commit"), \(old.date), \(old.host), \(old.build), \(old.sizes) — new: \(new.commit ?? "no commit"), \(new.date), \(new.host), \(new.build), \(new.sizes)",
        ] + warning + TextTable.lines(header: header, rows: cells) + [counts.joined(separator: ", ")]
    }

    /// A ratio as the tables print it; a dash for none or one that is not finite.
    package static func times(_ ratio: Double?) -> String {
        guard let ratio, ratio.isFinite else { return "—" }
        return String(format: "%.2f×", ratio)
    }

    /// A relative change as a signed percentage.
    package static func percent(_ change: Double) -> String {
        change.isFinite ? String(format: "%+.1f%%", change * 100) : "—"
    }
}
