import Foundation
import Switchboard
import Synchronization
import Testing

@testable import switchboard

@Suite(.timeLimit(.minutes(1)))
struct DemoTests {
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    @Test func theDemoEndsCleanAndPrintsATimelineAndASummary() async throws {
        let output = Lines()
        let summary = try await Demo(seed: 1, format: .timeline).run { output.append($0) }
        let text = output.all.joined(separator: "\n")
        print("demo printed \(output.all.count) lines; server messages \(summary.serverMessages)")
        #expect(summary.isClean)
        #expect(summary.sessions.map(\.backend) == ["in-memory", "in-memory", "voximplant", "webim", "cxone"])
        #expect(summary.sessions.allSatisfy { $0.storedMessages > 0 && $0.lost == 0 })
        #expect(summary.sessions[0].statistics.retransmitRequests > 0, "the scripted gap was filled by retransmit")
        #expect(text.contains("── Summary"))
        #expect(text.contains("history message"))
        #expect(text.contains("conversation active → closedByAgent"))
    }

    @Test func jsonLinesAreDecodableEvents() async throws {
        let output = Lines()
        let summary = try await Demo(seed: 2, format: .jsonLines).run { output.append($0) }
        #expect(summary.isClean)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let events = try output.all.map { try decoder.decode(ChatEvent.self, from: Data($0.utf8)) }
        #expect(events.count > 30)
        #expect(Set(events.map(\.origin.session)) == ["alice-phone", "alice-tablet", "alice-messenger", "alice-webim", "alice-cxone"])
    }
}
