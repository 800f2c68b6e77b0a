package import Foundation

/// A run drawn as one self-contained HTML page (`switchboard bench --report DIR`): inline SVG
/// charts and an inline style sheet, no script, nothing fetched. What it shows:
///
/// - where and when the run ran (machine, toolchain, build, commit, date);
/// - every row as the terminal table has it, met or missed;
/// - per adapter, the latency distributions as percentile curves, Switchboard beside the raw
///   client (or the peer), with the goals marked;
/// - every other row as bars, Switchboard beside its baseline, with its goal marked;
/// - the rows the run skipped, and why;
/// - with a comparison, what moved since the old run against each row's noise.
///
/// The page is well-formed XML (every element closed, no named entities), so a test can read it
/// with any parser.
package enum BenchReport {
    /// Writes `index.html` and the JSON it was drawn from (`bench.json`; with a comparison, the old
    /// run beside it as `old.json`) into `directory`, made if missing. Returns the page's path.
    @discardableResult
    package static func write(_ run: BenchRun, comparedWith old: BenchRun? = nil, to directory: String) throws -> String {
        let folder = URL(fileURLWithPath: directory)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try run.json().write(to: folder.appendingPathComponent("bench.json"))
        if let old { try old.json().write(to: folder.appendingPathComponent("old.json")) }
        let page = folder.appendingPathComponent("index.html")
        try Data(html(run, comparison: old.map { BenchComparison(old: $0, new: run) }).utf8).write(to: page)
        return page.path
    }

    /// The page.
    package static func html(_ run: BenchRun, comparison: BenchComparison? = nil) -> String {
        var page = HTMLText()
        let environment = run.environment
        let title = "switchboard bench, \(environment.commit ?? "no commit"), \(environment.date)"
        page.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>")
        page.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>")
        page.raw("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"/>")
        page.element("title", title)
        page.raw("<style>\(style)</style></head><body><main>")
        page.raw("<header><h1>switchboard bench</h1>")
        environmentList(environment, into: &page)
        let met = run.rows.filter { $0.met && $0.goal.measure != .none }.count
        let missed = run.rows.filter { !$0.met }.count
        page.raw("<p class=\"totals\" id=\"totals\">")
        page.text("\(run.rows.count) rows: \(met) met their goal, \(missed) missed, \(run.rows.count - met - missed) reported; \(run.skipped.count) group\(run.skipped.count == 1 ? "" : "s") skipped. Drawn from ")
        page.raw("<a href=\"bench.json\">bench.json</a>")
        page.text(" (format \(run.format), version \(run.version)).")
        page.raw("</p></header>")
        if let comparison { comparisonSection(comparison, into: &page) }
        tableSection(run.rows, into: &page)
        latencySection(run.rows, into: &page)
        barsSection(run.rows, into: &page)
        skippedSection(run.skipped, into: &page)
        page.raw("</main></body></html>\n")
        return page.markup
    }

    // MARK: Sections

    private static func environmentList(_ environment: BenchEnvironment, into page: inout HTMLText) {
        let memory = String(format: "%.1f GiB", Double(environment.memoryBytes) / 1_073_741_824)
        let entries: [(String, String)] = [
            ("date", environment.date), ("commit", environment.commit ?? "not in a git working copy"), ("machine", environment.host),
            ("processor", "\(environment.cpu), \(environment.cores) cores"), ("memory", memory), ("system", environment.system),
            ("toolchain", environment.swift), ("build", environment.build), ("sizes", environment.sizes),
            ("arguments", environment.arguments.isEmpty ? "none" : environment.arguments.joined(separator: " ")),
        ]
        page.raw("<dl class=\"environment\" id=\"environment\">")
        for (term, value) in entries {
            page.element("dt", term)
            page.element("dd", value, attributes: ["data-key": term])
        }
        page.raw("</dl>")
    }

    private static func tableSection(_ rows: [BenchRow], into page: inout HTMLText) {
        page.raw("<section id=\"rows\"><h2>Every row</h2><div class=\"scroll\"><table><caption>")
        page.text("Each row beside its baseline, measured in the same run; the ratio is Switchboard's figure over the baseline's.")
        page.raw("</caption><thead><tr><th scope=\"col\">figure</th><th scope=\"col\">Switchboard</th><th scope=\"col\">baseline</th>")
        page.raw("<th scope=\"col\">ratio</th><th scope=\"col\">spread of rounds</th><th scope=\"col\">goal</th><th scope=\"col\">met</th></tr></thead><tbody>")
        for row in rows {
            page.raw("<tr data-row=\"\(escape(row.id))\" class=\"\(status(row))\">")
            page.element("th", row.name, attributes: ["scope": "row"])
            page.element("td", "\(BenchRow.format(row.switchboard)) \(row.unit)", attributes: ["class": "number"])
            page.element("td", "\(BenchRow.format(row.baseline)) (\(row.baselineName))")
            page.element("td", BenchComparison.times(row.ratio), attributes: ["class": "number"])
            page.element("td", row.rounds.map { String(format: "%.1f%%", $0.spread * 100) } ?? "", attributes: ["class": "number"])
            page.element("td", row.goal.text)
            page.element("td", row.goal.measure == .none ? "reported" : row.met ? "yes" : "no")
            page.raw("</tr>")
        }
        page.raw("</tbody></table></div></section>")
    }

    /// The latency curves, grouped by adapter: each row with a distribution is one chart.
    private static func latencySection(_ rows: [BenchRow], into page: inout HTMLText) {
        let curves = rows.filter { $0.distribution != nil }
        guard !curves.isEmpty else { return }
        page.raw("<section id=\"latency\"><h2>Latency distributions</h2><p>")
        page.text(
            "Each curve is the samples' percentiles: the body on the left, the tail on the right (the horizontal axis stretches toward p99). "
                + "Milliseconds on a logarithmic scale. A goal on the ratio is marked at its percentile as the time it allows; a goal on the time, as that time."
        )
        page.raw("</p>")
        var adapters: [String] = []
        for row in curves where !adapters.contains(row.adapter ?? "") { adapters.append(row.adapter ?? "") }
        for adapter in adapters {
            page.raw("<h3>")
            page.text(adapterTitle(adapter))
            page.raw("</h3><div class=\"charts\">")
            for (index, row) in curves.enumerated() where (row.adapter ?? "") == adapter {
                percentileChart(row, number: index, goals: goalMarks(for: row, among: rows), into: &page)
            }
            page.raw("</div>")
        }
        page.raw("</section>")
    }

    /// Every row without a distribution, group by group, as bars.
    private static func barsSection(_ rows: [BenchRow], into page: inout HTMLText) {
        let barred = rows.filter { $0.distribution == nil && !$0.id.hasPrefix("latency.") }
        guard !barred.isEmpty else { return }
        page.raw("<section id=\"bars\"><h2>Throughput, memory and the other rows</h2><p>")
        page.text("Switchboard's figure beside its baseline's, each row on its own scale; the dashed line is the goal in the row's unit.")
        page.raw("</p>")
        var figures: [String] = []
        for row in barred where !figures.contains(row.figure) { figures.append(row.figure) }
        for (index, figure) in figures.enumerated() {
            page.raw("<h3>")
            page.text(figureTitle(figure))
            page.raw("</h3>")
            barChart(barred.filter { $0.figure == figure }, title: figureTitle(figure), id: "bars-\(index)", into: &page)
        }
        page.raw("</section>")
    }

    private static func skippedSection(_ skipped: [BenchSkip], into page: inout HTMLText) {
        page.raw("<section id=\"skipped\"><h2>Skipped</h2>")
        if skipped.isEmpty {
            page.element("p", "Nothing: every group chosen was measured.")
        } else {
            page.raw("<ul>")
            for skip in skipped {
                page.raw("<li data-figure=\"\(escape(skip.figure))\"><strong>")
                page.text(figureTitle(skip.figure))
                page.raw("</strong>: ")
                page.text(skip.reason)
                page.raw("</li>")
            }
            page.raw("</ul>")
        }
        page.raw("</section>")
    }

    private static func comparisonSection(_ comparison: BenchComparison, into page: inout HTMLText) {
        page.raw("<section id=\"comparison\"><h2>What moved since the old run</h2><p>")
        page.text(
            "Old: \(comparison.old.commit ?? "no commit"), \(comparison.old.date), \(comparison.old.host) (\(comparison.old.build)). "
                + "New: \(comparison.new.commit ?? "no commit"), \(comparison.new.date), \(comparison.new.host) (\(comparison.new.build)). "
                + "Each row's ratio to its baseline (the median of its rounds'), new against old. The grey band is the row's noise: four "
                + "standard errors of the difference between the two runs' medians, estimated from their rounds. A move inside it is within noise."
        )
        page.raw("</p>")
        if !comparison.differences.isEmpty {
            page.raw("<p class=\"warning\" id=\"differences\">")
            page.text("The runs differ in \(comparison.differences.joined(separator: ", ")): their rows measure other things.")
            page.raw("</p>")
        }
        let judged = comparison.entries.filter { $0.noise != nil }
        // Rows of one name against two baselines (the bus's) say which.
        let shared = Dictionary(grouping: judged, by: \.name).filter { $0.value.count > 1 }.keys
        func label(_ entry: BenchComparison.Entry) -> String {
            compact(entry.name) + (shared.contains(entry.name) ? ", against \((entry.new ?? entry.old)?.baselineName ?? "")" : "")
        }
        let width = 760.0
        let rowHeight = 22.0
        let labelWidth = 420.0
        let limit = max(0.1, min(1, judged.map { max(abs($0.change ?? 0), $0.noise ?? 0) }.filter(\.isFinite).max() ?? 0.1))
        page.raw("<div class=\"scroll\">")
        let plot = (from: labelWidth + 10, to: width - 60)
        func x(_ change: Double) -> Double {
            let clamped = max(-limit, min(limit, change))
            return plot.from + (clamped + limit) / (2 * limit) * (plot.to - plot.from)
        }
        if !judged.isEmpty {
            let height = Double(judged.count) * rowHeight + 30
            page.raw("<svg class=\"chart moved\" viewBox=\"0 0 \(n(width)) \(n(height))\" role=\"img\" aria-labelledby=\"moved-title\">")
            page.raw("<title id=\"moved-title\">Change of each row's ratio against its noise</title>")
            page.raw(line(x(0), 0, x(0), height - 24, class: "axis"))
            for tick in [-limit, -limit / 2, limit / 2, limit] {
                page.raw(text(x(tick), height - 8, BenchComparison.percent(tick), anchor: "middle", class: "tick"))
            }
            for (index, entry) in judged.enumerated() {
                let y = Double(index) * rowHeight + 4
                let noise = entry.noise ?? 0
                let change = entry.change ?? 0
                page.raw("<g class=\"moved \(verdictClass(entry.verdict))\" data-row=\"\(escape(entry.id))\">")
                page.raw("<title>\(escape("\(entry.name): \(BenchComparison.percent(change)), noise \(entry.noiseText), \(entry.verdict.rawValue)"))</title>")
                page.raw(text(labelWidth, y + 14, short(label(entry), 62), anchor: "end", class: "label small"))
                let fall = entry.fall ?? 0
                page.raw("<rect class=\"noise\" x=\"\(n(x(fall)))\" y=\"\(n(y + 3))\" width=\"\(n(x(noise) - x(fall)))\" height=\"\(n(rowHeight - 8))\"/>")
                page.raw("<circle class=\"change\" cx=\"\(n(x(change)))\" cy=\"\(n(y + rowHeight / 2 - 1))\" r=\"5\"/>")
                page.raw(text(width - 4, y + 14, BenchComparison.percent(change), anchor: "end", class: "value"))
                page.raw("</g>")
            }
            page.raw("</svg>")
        }
        page.raw("</div>")
        page.raw("<div class=\"scroll\"><table><caption>")
        page.text("Row by row: the ratio then and now, its change, the noise, and the verdict.")
        page.raw("</caption><thead><tr><th scope=\"col\">row</th><th scope=\"col\">ratio old → new</th><th scope=\"col\">change</th>")
        page.raw("<th scope=\"col\">noise</th><th scope=\"col\">verdict</th><th scope=\"col\">figure old → new</th></tr></thead><tbody>")
        for entry in comparison.entries {
            page.raw("<tr data-row=\"\(escape(entry.id))\" class=\"\(verdictClass(entry.verdict))\">")
            page.element("th", entry.name, attributes: ["scope": "row"])
            page.element("td", "\(BenchComparison.times(entry.oldRatio)) → \(BenchComparison.times(entry.newRatio))")
            page.element("td", entry.change.map(BenchComparison.percent) ?? "", attributes: ["class": "number"])
            page.element("td", entry.noiseText, attributes: ["class": "number"])
            page.element("td", entry.verdict.rawValue, attributes: ["class": "verdict"])
            page.element(
                "td",
                "\(entry.old.map { BenchRow.format($0.switchboard) } ?? "—") → \(entry.new.map { BenchRow.format($0.switchboard) } ?? "—") \(entry.unit)"
            )
            page.raw("</tr>")
        }
        page.raw("</tbody></table></div></section>")
    }

    // MARK: Charts

    /// A goal drawn on a percentile chart: at `fraction`, the time `milliseconds`.
    struct GoalMark {
        var fraction: Double
        var milliseconds: Double
        var label: String
    }

    /// The goals of a distribution's row and of its sibling rows (the same way measured at
    /// another percentile, `…p99` beside `…p50`), in milliseconds at their percentile.
    private static func goalMarks(for row: BenchRow, among rows: [BenchRow]) -> [GoalMark] {
        let stem = row.id.split(separator: ".").dropLast().joined(separator: ".")
        let siblings = rows.filter { $0.id == row.id || $0.id.split(separator: ".").dropLast().joined(separator: ".") == stem }
        return siblings.compactMap { sibling in
            guard let mark = sibling.goal.mark(baseline: sibling.baseline), let last = sibling.id.split(separator: ".").last else { return nil }
            let fraction: Double =
                switch last {
                case "p99": 0.99
                default: 0.5
                }
            return GoalMark(fraction: fraction, milliseconds: mark, label: "goal \(last): \(sibling.goal.text)")
        }
    }

    /// Where a fraction sits on the horizontal axis: `log10(1 / (1 - p))`, so p50 is 0.3, p90 1,
    /// p99 2; the most (p100) is drawn at 2.5.
    static func tailPosition(_ fraction: Double) -> Double {
        fraction >= 1 ? 2.5 : log10(1 / (1 - fraction))
    }

    private static func percentileChart(_ row: BenchRow, number: Int, goals: [GoalMark], into page: inout HTMLText) {
        guard let distribution = row.distribution else { return }
        let width = 460.0
        let height = 280.0
        let left = 56.0
        let right = 12.0
        let top = 28.0
        let bottom = 40.0
        let values = (distribution.switchboard + distribution.baseline + goals.map(\.milliseconds)).filter { $0 > 0 && $0.isFinite }
        let low = pow(10, floor(log10(values.min() ?? 0.1)))
        let high = pow(10, ceil(log10(values.max() ?? 1)))
        let span = max(log10(high / low), 1)
        func x(_ fraction: Double) -> Double { left + tailPosition(fraction) / 2.5 * (width - left - right) }
        func y(_ milliseconds: Double) -> Double {
            let value = max(milliseconds, low)
            return top + (1 - log10(value / low) / span) * (height - top - bottom)
        }
        let id = "curve-\(number)"
        let caption = chartCaption(row)
        page.raw("<figure class=\"curve\" data-row=\"\(escape(row.id))\">")
        page.raw("<svg class=\"chart\" viewBox=\"0 0 \(n(width)) \(n(height))\" role=\"img\" aria-labelledby=\"\(id)\">")
        page.raw(
            "<title id=\"\(id)\">\(escape(caption)): percentiles of \(distribution.switchboardSamples) samples of Switchboard and "
                + "\(distribution.baselineSamples) of \(escape(row.baselineName))</title>"
        )
        // The grid: decades on the vertical axis, p0 p50 p90 p99 max on the horizontal.
        var decade = low
        while decade <= high * 1.0001 {
            page.raw(line(left, y(decade), width - right, y(decade), class: "grid"))
            page.raw(text(left - 6, y(decade) + 4, milliseconds(decade), anchor: "end", class: "tick"))
            decade *= 10
        }
        for (fraction, label) in [(0.0, "p0"), (0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (1.0, "max")] {
            page.raw(line(x(fraction), top, x(fraction), height - bottom, class: "grid"))
            page.raw(text(x(fraction), height - bottom + 16, label, anchor: "middle", class: "tick"))
        }
        page.raw(text(left, 16, "ms", anchor: "end", class: "tick"))
        for (side, series) in [("baseline", distribution.baseline), ("switchboard", distribution.switchboard)] {
            // A side without samples (its percentiles 0) draws nothing: no logarithm of 0.
            let points = zip(distribution.fractions, series).filter { $1 > 0 && $1.isFinite }.map { "\(n(x($0))),\(n(y($1)))" }
            guard points.count > 1 else { continue }
            page.raw("<polyline class=\"series \(side)\" points=\"\(points.joined(separator: " "))\"/>")
        }
        for goal in goals where goal.milliseconds > 0 && goal.milliseconds.isFinite {
            let at = x(goal.fraction)
            page.raw("<g class=\"goal\"><title>\(escape(goal.label))</title>")
            page.raw(line(at - 14, y(goal.milliseconds), at + 14, y(goal.milliseconds), class: "goal-line"))
            page.raw("</g>")
        }
        // The legend.
        page.raw(line(left + 8, height - 10, left + 28, height - 10, class: "series switchboard"))
        page.raw(text(left + 32, height - 6, "Switchboard", anchor: "start", class: "legend"))
        page.raw(line(left + 128, height - 10, left + 148, height - 10, class: "series baseline"))
        page.raw(text(left + 152, height - 6, short(row.baselineName, 24), anchor: "start", class: "legend"))
        page.raw(line(width - 110, height - 10, width - 90, height - 10, class: "goal-line"))
        page.raw(text(width - 86, height - 6, "goal", anchor: "start", class: "legend"))
        page.raw("</svg><figcaption>")
        page.text(caption)
        page.raw("</figcaption></figure>")
    }

    private static func barChart(_ rows: [BenchRow], title: String, id: String, into page: inout HTMLText) {
        let width = 640.0
        let rowHeight = 64.0
        let label = 18.0
        let barHeight = 16.0
        let right = 120.0
        let height = Double(rows.count) * rowHeight + 8
        page.raw("<svg class=\"chart bars\" viewBox=\"0 0 \(n(width)) \(n(height))\" role=\"img\" aria-labelledby=\"\(escape(id))\">")
        page.raw("<title id=\"\(escape(id))\">\(escape(title)): Switchboard beside its baseline, with the goal</title>")
        for (index, row) in rows.enumerated() {
            let y = Double(index) * rowHeight + 4
            // A figure that is not finite or not positive (a side that measured nothing) draws no bar.
            func drawn(_ value: Double?) -> Double? { value.flatMap { $0 > 0 && $0.isFinite ? $0 : nil } }
            let mark = drawn(row.goal.mark(baseline: row.baseline))
            let showsBaseline = row.baselineName != "goal"
            let scale = max(drawn(row.switchboard) ?? 0, showsBaseline ? drawn(row.baseline) ?? 0 : 0, mark ?? 0) * 1.1
            func w(_ value: Double) -> Double { scale > 0 ? max(1, (drawn(value) ?? 0) / scale * (width - right)) : 1 }
            page.raw("<g class=\"bar-row \(status(row))\" data-row=\"\(escape(row.id))\">")
            page.raw(text(0, y + 12, short(row.name, 96), anchor: "start", class: "label"))
            page.raw("<rect class=\"bar switchboard\" x=\"0\" y=\"\(n(y + label))\" width=\"\(n(w(row.switchboard)))\" height=\"\(n(barHeight))\"/>")
            page.raw(text(w(row.switchboard) + 6, y + label + 12, "\(BenchRow.format(row.switchboard)) \(row.unit)", anchor: "start", class: "value"))
            if showsBaseline {
                page.raw("<rect class=\"bar baseline\" x=\"0\" y=\"\(n(y + label + barHeight + 4))\" width=\"\(n(w(row.baseline)))\" height=\"\(n(barHeight))\"/>")
                page.raw(
                    text(w(row.baseline) + 6, y + label + barHeight + 16, short("\(BenchRow.format(row.baseline)) \(row.baselineName)", 40), anchor: "start", class: "value")
                )
            }
            if let mark {
                page.raw("<g class=\"goal\"><title>\(escape("goal: \(row.goal.text) (\(BenchRow.format(mark)) \(row.unit))"))</title>")
                page.raw(line(w(mark), y + label - 3, w(mark), y + label + 2 * barHeight + 7, class: "goal-line"))
                page.raw("</g>")
            }
            page.raw("</g>")
        }
        page.raw("</svg>")
    }

    // MARK: Words

    private static func status(_ row: BenchRow) -> String {
        row.goal.measure == .none ? "reported" : row.met ? "met" : "missed"
    }

    private static func verdictClass(_ verdict: BenchComparison.Verdict) -> String {
        switch verdict {
        case .withinNoise: "within-noise"
        case .improved: "improved"
        case .regressed: "regressed"
        case .added: "added"
        case .removed: "removed"
        case .noiseUnknown: "noise-unknown"
        }
    }

    private static func chartCaption(_ row: BenchRow) -> String {
        // The row's name without its percentile and sample count: "send → confirmed, Webim, SQLite file".
        var name = row.name
        if let cut = name.range(of: ", p50 of ") { name = String(name[..<cut.lowerBound]) }
        if let cut = name.range(of: " p50") { name = String(name[..<cut.lowerBound]) + name[cut.upperBound...] }
        return name
    }

    /// A row's name without its sample count: "send → confirmed, Webim, SQLite file, p50".
    private static func compact(_ name: String) -> String {
        name.replacing(/, (p\d+) of \d+/) { ", \($0.output.1)" }
    }

    private static func adapterTitle(_ adapter: String) -> String {
        switch adapter {
        case "webim": "Webim"
        case "voximplant": "Voximplant-style"
        case "cxone": "CXone"
        case "matrix": "Matrix on Synapse, beside matrix-nio"
        case "": "Core"
        default: adapter
        }
    }

    private static func figureTitle(_ figure: String) -> String {
        switch figure {
        case "bus": "The event bus"
        case "history": "History page"
        case "decode": "Decode and normalize"
        case "catch-up": "Catch-up"
        case "memory": "Memory per idle session"
        case "postgres": "PostgreSQL"
        case "peer": "The peer: matrix-nio"
        case "latency": "Latency"
        default: figure
        }
    }

    private static func milliseconds(_ value: Double) -> String {
        value >= 1 ? String(format: "%.0f", value) : String(format: "%g", value)
    }

    private static func short(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }

    /// A coordinate, to a tenth.
    private static func n(_ value: Double) -> String { String(format: "%.1f", value) }

    private static func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, class name: String) -> String {
        "<line class=\"\(name)\" x1=\"\(n(x1))\" y1=\"\(n(y1))\" x2=\"\(n(x2))\" y2=\"\(n(y2))\"/>"
    }

    private static func text(_ x: Double, _ y: Double, _ content: String, anchor: String, class name: String) -> String {
        "<text class=\"\(name)\" x=\"\(n(x))\" y=\"\(n(y))\" text-anchor=\"\(anchor)\">\(escape(content))</text>"
    }

    /// Text for an element or an attribute: the five XML specials escaped.
    package static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// The page as it is built: markup added as it is, text escaped.
    struct HTMLText {
        var markup = ""
        mutating func raw(_ piece: String) { markup += piece }
        mutating func text(_ content: String) { markup += BenchReport.escape(content) }
        mutating func element(_ name: String, _ content: String, attributes: KeyValuePairs<String, String> = [:]) {
            markup += "<\(name)"
            for (key, value) in attributes { markup += " \(key)=\"\(BenchReport.escape(value))\"" }
            markup += ">\(BenchReport.escape(content))</\(name)>"
        }
    }

    static let style = """
        :root{color-scheme:light;--ours:#1d4ed8;--base:#6b7280;--met:#15803d;--miss:#b91c1c;--goal:#b45309;--ink:#111827;--soft:#f3f4f6}
        body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;color:var(--ink);background:#fff}
        main{max-width:1180px;margin:0 auto;padding:16px 20px 40px}
        h1{font-size:1.6rem;margin:.2em 0}h2{font-size:1.25rem;margin:1.6em 0 .4em;border-bottom:1px solid #e5e7eb}h3{font-size:1.05rem;margin:1.2em 0 .3em}
        dl.environment{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:.5em 0;font-size:.9rem}
        dl.environment dt{color:#4b5563}dl.environment dd{margin:0;overflow-wrap:anywhere}
        .scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.86rem;width:100%}
        caption{text-align:left;color:#4b5563;padding:4px 0}
        th,td{padding:3px 8px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
        td.number{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
        tbody th{font-weight:normal}
        tr.missed td:last-child,tr.regressed td.verdict{color:var(--miss);font-weight:600}
        tr.met td:last-child,tr.improved td.verdict{color:var(--met)}
        .charts{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:12px 20px}
        figure{margin:0}figcaption{font-size:.85rem;color:#374151;text-align:center}
        svg.chart{width:100%;height:auto;display:block;background:#fff}
        svg.bars{max-width:760px}svg.moved{max-width:900px;min-width:620px}
        p.warning{color:var(--miss);font-weight:600}.label.small{font-size:11px}
        .grid{stroke:#e5e7eb;stroke-width:1}.axis{stroke:#9ca3af;stroke-width:1}
        .tick,.legend,.value{font-size:11px;fill:#4b5563}.label{font-size:12px;fill:var(--ink)}
        .series{fill:none;stroke-width:2.2}.series.switchboard{stroke:var(--ours)}.series.baseline{stroke:var(--base);stroke-dasharray:5 3}
        .goal-line{stroke:var(--goal);stroke-width:2.5;stroke-dasharray:4 2}
        rect.bar.switchboard{fill:var(--ours)}.missed rect.bar.switchboard{fill:var(--miss)}rect.bar.baseline{fill:#d1d5db}
        rect.noise{fill:#e5e7eb}circle.change{fill:var(--base)}
        .improved circle.change{fill:var(--met)}.regressed circle.change{fill:var(--miss)}
        #skipped li{margin:.2em 0}
        @media (max-width:700px){main{padding:10px}.charts{grid-template-columns:1fr}}
        """
}
