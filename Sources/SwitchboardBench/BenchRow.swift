package import Foundation
import SwitchboardCommandKit

/// One figure: Switchboard's, the baseline's, their ratio and the goal, with the rounds it was
/// measured in (what a comparison of two runs reads as the row's noise) and, for a latency row,
/// the distribution of its samples.
///
/// Encoded as one entry of a run's `rows` in the JSON format `Docs/Benchmarks.md` documents
/// (``BenchRun/version``).
package struct BenchRow: Codable, Sendable, Hashable {
    /// Which way is better for the figure and for the ratio.
    package enum Better: String, Codable, Sendable, Hashable {
        case higher, lower
    }

    /// The same in every run of every machine and size: what `bench compare` matches rows by.
    package var id: String
    /// The group it belongs to (`Bench.Figure`'s name: `latency`, `memory`…).
    package var figure: String
    /// The adapter it measures, by registry name (`webim`, `voximplant`, `cxone`, `matrix`), or
    /// `nil` for a row of the core.
    package var adapter: String?
    package var name: String
    package var unit: String
    package var better: Better
    package var switchboard: Double
    package var baselineName: String
    package var baseline: Double
    /// Switchboard's figure over the baseline's: for a rate above 1 is faster, for a time slower.
    package var ratio: Double
    package var goal: BenchGoal
    package var met: Bool
    /// The figure of each round, Switchboard's and the baseline's, in the row's unit.
    package var rounds: BenchRounds?
    /// Percentiles of the samples, Switchboard's and the baseline's (the latency rows).
    package var distribution: BenchDistribution?

    package init(
        id: String,
        figure: String = "",
        adapter: String? = nil,
        name: String,
        unit: String,
        better: Better,
        switchboard: Double,
        baselineName: String,
        baseline: Double,
        ratio: Double? = nil,
        goal: BenchGoal,
        rounds: BenchRounds? = nil,
        distribution: BenchDistribution? = nil
    ) {
        self.id = id
        self.figure = figure
        self.adapter = adapter
        self.name = name
        self.unit = unit
        self.better = better
        self.switchboard = switchboard
        self.baselineName = baselineName
        self.baseline = baseline
        // Infinite or not a number where a side measured nothing: the JSON keeps it as a string
        // (`BenchRun`), the report shows a dash.
        self.ratio = ratio ?? switchboard / baseline
        self.goal = goal
        self.met = goal.isMet(figure: switchboard, ratio: self.ratio)
        self.rounds = rounds
        self.distribution = distribution
    }

    package static func table(_ rows: [BenchRow]) -> [String] {
        let header = ["figure", "Switchboard", "baseline", "ratio", "goal", "met"]
        let cells = rows.map { row in
            [
                row.name, "\(format(row.switchboard)) \(row.unit)", "\(format(row.baseline)) (\(row.baselineName))",
                BenchComparison.times(row.ratio), row.goal.text, row.met ? "yes" : "NO",
            ]
        }
        return TextTable.lines(header: header, rows: cells)
    }

    package static func format(_ value: Double) -> String {
        guard value.isFinite else { return "—" }
        return switch value {
        case 1_000_000...: String(format: "%.2f M", value / 1_000_000)
        case 10_000...: String(format: "%.1f K", value / 1_000)
        case 100...: String(format: "%.0f", value)
        default: String(format: "%.2f", value)
        }
    }
}

/// What a row has to reach: a bound on its ratio to the baseline or on its own figure, or
/// nothing (the row is reported).
package struct BenchGoal: Codable, Sendable, Hashable {
    package enum Measure: String, Codable, Sendable, Hashable {
        /// Switchboard's figure over the baseline's.
        case ratio
        /// Switchboard's figure, in the row's unit.
        case figure
        /// No goal: the row is reported.
        case none
    }

    package enum Comparison: String, Codable, Sendable, Hashable {
        case atMost, atLeast, below
    }

    /// As the table prints it: `≤ 1.3× the time`, `≤ 32 KB`.
    package var text: String
    package var measure: Measure
    package var comparison: Comparison
    package var bound: Double

    package static func ratio(_ comparison: Comparison, _ bound: Double, _ text: String) -> BenchGoal {
        BenchGoal(text: text, measure: .ratio, comparison: comparison, bound: bound)
    }

    package static func figure(_ comparison: Comparison, _ bound: Double, _ text: String) -> BenchGoal {
        BenchGoal(text: text, measure: .figure, comparison: comparison, bound: bound)
    }

    package static let reported = BenchGoal(text: "reported", measure: .none, comparison: .atMost, bound: 0)

    /// Whether the goal is met; a figure or ratio that is not finite (a side that measured
    /// nothing) meets none.
    package func isMet(figure: Double, ratio: Double) -> Bool {
        let value: Double
        switch measure {
        case .none: return true
        case .ratio: value = ratio
        case .figure: value = figure
        }
        guard value.isFinite else { return false }
        switch comparison {
        case .atMost: return value <= bound
        case .atLeast: return value >= bound
        case .below: return value < bound
        }
    }

    /// The goal in the row's unit, given its baseline: what a chart marks.
    package func mark(baseline: Double) -> Double? {
        switch measure {
        case .none: nil
        case .ratio: bound * baseline
        case .figure: bound
        }
    }
}

/// A row's figure in each round it was measured in: Switchboard's and the baseline's, pairwise.
package struct BenchRounds: Codable, Sendable, Hashable {
    package var switchboard: [Double]
    package var baseline: [Double]

    package init(switchboard: [Double], baseline: [Double]) {
        self.switchboard = switchboard
        self.baseline = baseline
    }

    /// Each round's ratio, Switchboard's figure over the baseline's: the rounds where both are
    /// positive and the ratio finite (a round that measured nothing has no ratio).
    package var ratios: [Double] {
        zip(switchboard, baseline).compactMap { ours, base in
            guard ours > 0, base > 0, (ours / base).isFinite else { return nil }
            return ours / base
        }
    }

    /// The rounds' ratios as logarithms: where a halving and a doubling are the same distance.
    package var logRatios: [Double] { ratios.map { log($0) } }

    /// How far the rounds' ratios spread, from the least to the most, over their median. 0 for
    /// fewer than two rounds.
    package var spread: Double {
        let ratios = self.ratios.sorted()
        guard ratios.count > 1 else { return 0 }
        return (ratios[ratios.count - 1] - ratios[0]) / ratios[ratios.count / 2]
    }

    /// The standard deviation of one round's log ratio, estimated from the rounds' range as
    /// control charts do: the range over `d2(n)`, the expected range of `n` normal draws in
    /// standard deviations. `nil` for fewer than two rounds.
    package var deviation: Double? {
        let logs = logRatios
        guard logs.count > 1, let least = logs.min(), let most = logs.max() else { return nil }
        return (most - least) / Self.expectedRange[min(logs.count, Self.expectedRange.count - 1)]
    }

    /// `d2(n)` for n = 0 … 10 (the first two unused); past 10 rounds the estimate uses `d2(10)`,
    /// which overstates the deviation a little: on the safe side.
    private static let expectedRange: [Double] = [1, 1, 1.128, 1.693, 2.059, 2.326, 2.534, 2.704, 2.847, 2.970, 3.078]
}

/// Percentiles of a row's samples: the curve a report draws.
package struct BenchDistribution: Codable, Sendable, Hashable {
    /// The fractions the percentiles are taken at, 0 (the least) to 1 (the most).
    package var fractions: [Double]
    package var switchboard: [Double]
    package var baseline: [Double]
    /// How many samples each side had.
    package var switchboardSamples: Int
    package var baselineSamples: Int

    /// The fractions every distribution is taken at: the body by tenths, then the tail.
    package static let fractions: [Double] = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 1]

    /// The percentiles of `ours` and `baseline` (nearest rank) at ``fractions``, each times
    /// `scale` (1000: seconds to milliseconds).
    package init(_ ours: [Double], baseline: [Double], scale: Double = 1) {
        let ours = ours.sorted()
        let base = baseline.sorted()
        self.fractions = Self.fractions
        self.switchboard = Self.fractions.map { Self.percentile(sorted: ours, $0) * scale }
        self.baseline = Self.fractions.map { Self.percentile(sorted: base, $0) * scale }
        self.switchboardSamples = ours.count
        self.baselineSamples = base.count
    }

    /// The nearest-rank percentile of sorted values; the least for 0.
    package static func percentile(sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((Double(sorted.count) * fraction).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}
