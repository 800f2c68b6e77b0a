package import Foundation
package import Switchboard
@_spi(WireReaders) import SwitchboardCXone
@_spi(WireReaders) import SwitchboardVoximplant
@_spi(WireReaders) import SwitchboardWebim

/// Recorded inbound frames per adapter, read from the repository: the vendors' SDK fixtures
/// (`Tests/Fixtures/`) and the Voximplant-style golden frames (the protocol spec's §9).
package struct RecordedFrames: Sendable {
    package var webim: [Data]
    package var voximplant: [String]
    package var cxone: [String]

    /// The repository this binary was built from; `bench` is a tool for a clone.
    package static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    package static func load(from repository: URL = repository) throws -> RecordedFrames {
        let fixtures = repository.appendingPathComponent("Tests/Fixtures")
        guard FileManager.default.fileExists(atPath: fixtures.path) else {
            throw SwitchboardError(.invalidArgument, "bench reads recorded frames from a clone of the repository; none at \(fixtures.path)")
        }
        return RecordedFrames(
            webim: try webimAnswers(fixtures.appendingPathComponent("webim")),
            voximplant: try goldenFrames(repository.appendingPathComponent("Docs/Protocols/voximplant-style.md")),
            cxone: try cxoneFrames(fixtures.appendingPathComponent("cxone"))
        )
    }

    /// Webim answers as the delta long-poll returns them: the SDK's delta response as it is, its
    /// full update, and its message, chat and delta items each in the `deltaList` of an answer.
    package static func webimAnswers(_ folder: URL) throws -> [Data] {
        var answers: [JSONValue] = []
        var revision: Int64 = 1
        func answer(_ items: [JSONValue]) -> JSONValue {
            revision += 1
            return ["revision": .int(revision), "deltaList": .array(items)]
        }
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() where name.hasSuffix(".json") {
            let json = try JSONValue(parsing: Data(contentsOf: folder.appendingPathComponent(name)))
            switch name.components(separatedBy: "__").first {
            case "DeltaResponseTests":
                answers.append(json)
            case "FullUpdateTests" where json["pageId"] != nil:
                answers.append(["revision": 1, "fullUpdate": json])
            case "DeltaItemTests" where json["objectType"] != nil:
                answers.append(answer([json]))
            case "ChatItemTests" where json["state"] != nil:
                answers.append(answer([["objectType": "CHAT", "event": "upd", "id": "chat", "data": json]]))
            case "MessageItemTests", "MessageFactoriesTests", "ChatItemTests":
                guard let id = json["id"]?.stringValue ?? json["clientSideId"]?.stringValue, json["kind"] != nil else { continue }
                answers.append(answer([["objectType": "CHAT_MESSAGE", "event": "add", "id": .string(id), "data": json]]))
            default:
                continue
            }
        }
        return answers.map { Data($0.jsonString.utf8) }
    }

    /// The server's frames among the golden frames (requests are the client's).
    package static func goldenFrames(_ spec: URL) throws -> [String] {
        let text = try String(contentsOf: spec, encoding: .utf8)
        guard let section = text.range(of: "## 9. Golden frames") else {
            throw SwitchboardError(.invalidArgument, "no golden frames in \(spec.path)")
        }
        var frames: [String] = []
        var rest = text[section.upperBound...]
        while let open = rest.range(of: "```json\n"), let close = rest[open.upperBound...].range(of: "\n```") {
            let frame = String(rest[open.upperBound..<close.lowerBound])
            if !frame.contains("\"type\":\"request\"") { frames.append(frame) }
            rest = rest[close.upperBound...]
        }
        return frames
    }

    /// The CXone fixtures that are WebSocket event frames.
    package static func cxoneFrames(_ folder: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().compactMap { name in
            guard name.hasSuffix(".json") else { return nil }
            let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            guard case .event(_, let type?, _) = CXoneWire.classify(text), type != "EventInS3" else { return nil }
            return text
        }
    }
}

extension Bench {
    /// Frames per second each adapter decodes and maps to the engine's updates, against
    /// `JSONSerialization` parsing the same bytes.
    package func decodeRows(_ frames: RecordedFrames) -> [BenchRow] {
        var rows: [BenchRow] = []
        let webim = frames.webim
        if runs("webim") {
            rows.append(decodeRow(adapter: "webim", title: "Webim", frames: webim.count, bytes: webim) {
                var reader = WebimDeltaReader(baseURL: "https://bench.example")
                var updates = 0
                for body in webim {
                    if case .changed(_, _, let mapped) = reader.read(body, credentials: Credentials(), now: Date(timeIntervalSince1970: 0)) {
                        updates += mapped.count
                    }
                }
                return updates
            })
        }
        let voximplant = frames.voximplant
        let reader = VoximplantFrameReader(user: "alice@app.acc")
        if runs("voximplant") {
            rows.append(decodeRow(adapter: "voximplant", title: "Voximplant-style", frames: voximplant.count, bytes: voximplant.map { Data($0.utf8) }) {
                // The reader maps as it parses: an event frame comes out as the engine's update,
                // as the link reads it.
                var updates = 0
                for text in voximplant {
                    switch reader.read(text) {
                    case .event, .reply(_, _, .some): updates += 1
                    default: break
                    }
                }
                return updates
            })
        }
        let cxone = frames.cxone
        if runs("cxone") {
            rows.append(decodeRow(adapter: "cxone", title: "CXone", frames: cxone.count, bytes: cxone.map { Data($0.utf8) }) {
                var updates = 0
                for text in cxone {
                    guard case .event(_, let type, let frame) = CXoneWire.classify(text) else { continue }
                    if case .updates(let mapped)? = try? CXoneMapping.outcome(of: frame, type: type) { updates += mapped.count }
                }
                return updates
            })
        }
        return rows
    }

    /// Runs `decode` (one pass over the frames, returning a count so nothing is optimized away)
    /// and the `JSONSerialization` parse of `bytes` alternately.
    private func decodeRow(adapter: String, title: String, frames: Int, bytes: [Data], decode: () -> Int) -> BenchRow {
        let passes = max(1, sizes.decodedFrames / max(frames, 1))
        var ours: [Double] = []
        var raw: [Double] = []
        var sink = 0
        for round in 1...sizes.rounds {
            progress.say("decode \(title): round \(round) of \(sizes.rounds)")
            ours.append(Self.syncSeconds { for _ in 0..<passes { sink &+= decode() } })
            raw.append(Self.syncSeconds {
                for _ in 0..<passes {
                    for body in bytes { sink &+= (try? JSONSerialization.jsonObject(with: body)) == nil ? 0 : 1 }
                }
            })
        }
        Self.keep(sink)
        let perFrame = 1e6 / Double(passes * frames)
        return BenchRow(
            id: "decode.\(adapter)", adapter: adapter, name: "decode + normalize, \(title) (\(frames) recorded frames)", unit: "µs/frame",
            better: .lower, switchboard: median(ours) * perFrame, baselineName: "JSONSerialization parse", baseline: median(raw) * perFrame,
            goal: .ratio(.atMost, 2, "≤ 2× the time"),
            rounds: BenchRounds(switchboard: ours.map { $0 * perFrame }, baseline: raw.map { $0 * perFrame })
        )
    }

    /// Keeps a result alive so the optimizer cannot drop the work that made it.
    @inline(never) static func keep(_ value: Int) {}

    package static func syncSeconds(_ body: () -> Void) -> Double {
        let start = ContinuousClock.now
        body()
        return seconds(since: start)
    }
}
