import Foundation
import Switchboard
@_spi(TestKit) import SwitchboardTestKit
import SwitchboardWebim
import Testing
@_spi(TestKit) import WebimEmulator

/// `Timeline` (what replaces the SDK's message tracker) against the Webim emulator (#30): a
/// window over a fresh store, history paged in from the server, an operator's file, and a
/// `reinit-required` the link recovers from, with a list built from the diffs alone matching the
/// timeline, each message once.
@Suite(.timeLimit(.minutes(2)))
struct WebimTimelineTests {
    @Test func aTimelinePagesHistoryAndFollowsAFileAndAReinit() async throws {
        try await withWebimEmulator(configuration: .init(deltaHold: .seconds(2), historyPageSize: 4)) { control in
            let harness = ConformanceHarness(context: ConformanceContext(emulator: control))
            // A first chat, closed, then a new question: history on the server for a new store.
            try await harness.withSession { probe in
                let chat = try await probe.openConversation()
                for index in 1...6 { _ = try control.agent.send("old \(index)", to: control.visitorID) }
                try control.agent.close(visitor: control.visitorID)
                try await probe.recorder.first("closed") {
                    if case .conversationStateChanged(.closedByAgent, _) = $0.kind { return true } else { return false }
                }
                try await chat.send(text: "a new question")
                try await probe.recorder.first("sent") { $0.updatedMessage?.text == "a new question" && $0.updatedMessage?.serverID != nil }
            }
            try await harness.withSession { probe in
                let id = WebimBackend.conversationID
                try await probe.recorder.first("the chat") { $0.conversationID == id && $0.kind.category == .conversation }
                let chat = try await probe.session.conversation(id)
                let timeline = try await chat.timeline(limit: 2)
                var updates = timeline.makeAsyncIterator()
                var list: [Message] = []
                func next(until done: ([Message]) -> Bool) async throws {
                    while !done(list) {
                        let update = try #require(await updates.next())
                        list.apply(update.diffs)
                    }
                }
                try await next { !$0.isEmpty }
                try control.agent.join(visitor: control.visitorID)
                _ = try control.agent.sendFile(named: "label.pdf", contentType: "application/pdf", data: Data("%PDF label".utf8), to: control.visitorID)
                try await next { $0.contains { $0.kind == .file } }
                control.server.inject(.reinitRequired, on: .delta)
                _ = try control.agent.send("after the re-init", to: control.visitorID)
                try await next { $0.contains { $0.text == "after the re-init" } }
                // Each page's rows come through the same sequence, after what was on its way.
                var paged = 0
                while true {
                    let before = list.count
                    let loaded = try await timeline.loadOlder(limit: 4)
                    if loaded == 0 { break }
                    paged += loaded
                    try await next { $0.count >= before + loaded }
                }
                let truth = try await control.serverMessages(in: id).map(\.serverID)
                let shown = list.compactMap(\.serverID)
                let file = list.first { $0.kind == .file }
                print(
                    "webim timeline: \(list.count) rows (\(paged) paged in), server \(truth.count) messages, "
                        + "file \(file?.attachments.first?.name ?? "none"), duplicated \(shown.count - Set(shown).count)"
                )
                #expect(list == timeline.items, "the diffs alone build what the timeline holds")
                #expect(Set(shown).count == shown.count, "each message once")
                #expect(Set(shown).isSubset(of: Set(truth)), "nothing the server does not have")
                #expect(shown == truth.filter(Set(shown).contains), "in the server's order")
                #expect(Array(list.map(\.text).prefix(6)) == (1...6).map { "old \($0)" }, "history paged back to the first message")
                #expect(file?.attachments.first?.name == "label.pdf")
            }
        }
    }
}
