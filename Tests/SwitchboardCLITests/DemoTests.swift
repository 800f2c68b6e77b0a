import Foundation
import Switchboard
import Testing

@testable import switchboard
import SwitchboardCommandKit

// Four minutes: the demo runs its three emulators beside every other suite; it took 31 s of a
// one-minute limit in CI, and 60 s with eight busy loops beside a full run.
@Suite(.timeLimit(.minutes(4)))
struct DemoTests {
    final class Lines: Sendable {
        let lines = Locked<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    @Test func theDemoEndsCleanAndPrintsATimelineAndASummary() async throws {
        let output = Lines()
        let summary = try await Demo(seed: 1, format: .timeline).run { output.append($0) }
        let text = output.all.joined(separator: "\n")
        print("demo printed \(output.all.count) lines; server messages \(summary.serverMessages)")
        #expect(summary.isClean)
        #expect(summary.sessions.map(\.backend) == ["in-memory", "in-memory", "voximplant", "webim", "webim-appeals", "cxone"])
        #expect(summary.sessions.allSatisfy { $0.storedMessages > 0 && $0.lost == 0 })
        #expect(summary.sessions[0].statistics.retransmitRequests > 0, "the scripted gap was filled by retransmit")
        #expect(text.contains("── Summary"))
        #expect(text.contains("history message"))
        #expect(text.contains("conversation active → closedByAgent"))
    }

    /// `demo --console`: each emulator serves its agent console while its part runs, and the
    /// console shows the part's conversation, read while the emulator is held open.
    @Test func theDemoServesEachEmulatorsAgentConsoleWhenAsked() async throws {
        let output = Lines()
        let held = Locked<[(vendor: String, state: UInt, messages: Int)]>([])
        let console = DemoConsole(key: "demo-test-key") { vendor, url in
            let state = try? await CrashTests.get(url.replacingOccurrences(of: "/agent?", with: "/agent/state?"))
            let desk = state.flatMap { try? JSONValue(parsing: Data($0.body.utf8))["desk"] }
            let messages = desk?["conversations"]?.arrayValue?.reduce(0) { $0 + ($1["messages"]?.arrayValue?.count ?? 0) } ?? 0
            held.withLock { $0.append((vendor, state?.status ?? 0, messages)) }
        }
        let summary = try await Demo(seed: 3, format: .timeline, console: console).run { output.append($0) }
        let parts = held.withLock { $0 }
        print("demo --console: \(parts.map { "\($0.vendor): HTTP \($0.state), \($0.messages) messages" }.joined(separator: "; "))")
        #expect(summary.isClean)
        #expect(parts.map(\.vendor) == ["Voximplant-style", "Webim", "CXone"])
        #expect(parts.allSatisfy { $0.state == 200 && $0.messages > 0 }, "each console showed its part's messages")
        #expect(output.all.filter { $0.contains("agent console: http://127.0.0.1:") && $0.contains("key=demo-test-key") }.count == 3)
    }

    @Test func jsonLinesAreDecodableEvents() async throws {
        let output = Lines()
        let summary = try await Demo(seed: 2, format: .jsonLines).run { output.append($0) }
        #expect(summary.isClean)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let lines = try output.all.map { try JSONValue(parsing: Data($0.utf8)) }
        let events = try lines.map { try decoder.decode(ChatEvent.self, from: try #require($0["event"]).jsonData()) }
        #expect(events.count > 30)
        // The flat fields Docs/CLI.md promises.
        #expect(lines.allSatisfy { $0["kind"]?.stringValue != nil && $0["backend"]?.stringValue != nil && $0["session"]?.stringValue != nil })
        let added = lines.filter { $0["kind"]?.stringValue == "messageAdded" }
        #expect(!added.isEmpty)
        for line in added {
            let message = try #require(line["message"])
            #expect(line["conversation"]?.stringValue != nil)
            #expect(message["text"]?.stringValue != nil && message["kind"]?.stringValue != nil && message["deliveryState"]?.stringValue != nil)
            #expect(message["id"] != nil && message["clientId"] != nil && message["sender"]?["role"] != nil)
        }
        #expect(added.contains { $0["message"]?["sender"]?["role"]?.stringValue == "agent" })
        #expect(added.contains { $0["message"]?["kind"]?.stringValue == "rich" && $0["message"]?["richType"]?.stringValue == "QUICK_REPLIES" })
        #expect(Set(events.map(\.origin.session)) == ["alice-phone", "alice-tablet", "alice-messenger", "alice-webim", "alice-appeals", "alice-cxone"])
    }
}
