package import Foundation

/// What moved between two runs (`switchboard bench compare OLD NEW`), row by row, judged against
/// the noise each row showed across its rounds in either run.
///
/// A row is compared by its ratio to the baseline measured in the same run, which is what stays
/// comparable across machines and moments; its own figure's change is shown beside. The noise is
/// three standard errors of the difference between the two runs' medians: a round's deviation
/// estimated from each run's rounds (``BenchRounds/deviation``, the wider of the two), times
/// `√(π/2 · (1/n₁ + 1/n₂))` for a median of `n₁` and one of `n₂` rounds. A move no larger is within
/// noise. Were the rounds normal, two runs of one build would cross it in about one row in 370.
package struct BenchComparison: Sendable, Hashable {
    package enum Verdict: String, Codable, Sendable, Hashable {
        case withinNoise = "within noise"
        case improved
        case regressed
        /// A run measured the row in one round: it has no noise to judge the move by.
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
        /// The ratio's relative change, new over old minus 1 (0.05 is 5% higher).
        package var change: Double?
        /// The figure's relative change.
        package var figureChange: Double?
        /// The largest change of the ratio, relative, that is within noise.
        package var noise: Double?
        package var verdict: Verdict
    }

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

    private static func entry(old: BenchRow?, new: BenchRow?) -> Entry {
        let row = new ?? old!
        var entry = Entry(id: row.id, name: row.name, unit: row.unit, old: old, new: new, verdict: old == nil ? .added : .removed)
        guard let old, let new else { return entry }
        let change = relative(new.ratio, old.ratio)
        entry.change = change
        entry.figureChange = relative(new.switchboard, old.switchboard)
        guard let before = old.rounds, let after = new.rounds, let deviationBefore = before.deviation, let deviationAfter = after.deviation else {
            entry.verdict = .noiseUnknown
            return entry
        }
        let rounds = (Double(before.ratios.count), Double(after.ratios.count))
        let noise = 3 * max(deviationBefore, deviationAfter) * (Double.pi / 2 * (1 / rounds.0 + 1 / rounds.1)).squareRoot()
        entry.noise = noise
        if abs(change) <= noise {
            entry.verdict = .withinNoise
        } else {
            entry.verdict = (change < 0) == (new.better == .lower) ? .improved : .regressed
        }
        return entry
    }

    private static func relative(_ new: Double, _ old: Double) -> Double {
        old == 0 ? (new == 0 ? 0 : .infinity) : new / old - 1
    }

    /// The comparison as a table for a terminal: each row's ratio then and now, the change, the
    /// noise and the verdict; the figures' change beside.
    package func table() -> [String] {
        let header = ["row", "ratio old → new", "change", "noise ±", "verdict", "figure old → new"]
        let cells = entries.map { entry in
            [
                entry.name,
                "\(entry.old.map { String(format: "%.2f×", $0.ratio) } ?? "—") → \(entry.new.map { String(format: "%.2f×", $0.ratio) } ?? "—")",
                entry.change.map(Self.percent) ?? "",
                entry.noise.map { String(format: "%.1f%%", $0 * 100) } ?? "",
                entry.verdict.rawValue,
                "\(entry.old.map { BenchRow.format($0.switchboard) } ?? "—") → \(entry.new.map { BenchRow.format($0.switchboard) } ?? "—") \(entry.unit)",
            ]
        }
        let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
        func line(_ values: [String]) -> String {
            zip(values, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }
        let summary = Dictionary(grouping: entries, by: \.verdict).mapValues(\.count)
        let counts = [Verdict.withinNoise, .improved, .regressed, .noiseUnknown, .added, .removed].compactMap { verdict in
            summary[verdict].map { "\($0) \(verdict.rawValue)" }
        }
        return [
            "old: \(old.commit ?? "no commit"), \(old.date), \(old.host), \(old.build) — new: \(new.commit ?? "no commit"), \(new.date), \(new.host), \(new.build)",
            line(header),
        ] + cells.map(line) + [counts.joined(separator: ", ")]
    }

    /// A relative change as a signed percentage.
    package static func percent(_ change: Double) -> String {
        change.isFinite ? String(format: "%+.1f%%", change * 100) : "—"
    }
}
