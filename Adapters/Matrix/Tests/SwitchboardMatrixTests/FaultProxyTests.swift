import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The fault proxy on its own, in front of a small upstream that counts what reaches it: every
/// action does what it says, with no homeserver needed.
@Suite(.timeLimit(.minutes(1)))
struct FaultProxyTests {
    /// Runs an upstream on 127.0.0.1 (`/count` answers how many requests reached it; `/hold`
    /// answers only when cancelled) and a proxy in front of it.
    func withProxy(_ body: @Sendable (FaultProxy, String, Locked<Int>, AsyncStream<Void>) async throws -> Void) async throws {
        let hits = Locked(0)
        let (held, heldContinuation) = AsyncStream.makeStream(of: Void.self)
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.get("/count") { _, _ in
            let count = hits.withLock { value in
                value += 1
                return value
            }
            return #"{"n":\#(count)}"#
        }
        router.get("/hold") { _, _ -> String in
            heldContinuation.yield()
            // A server that never answers: held until the proxy's cut cancels the handler.
            let (never, _) = AsyncStream.makeStream(of: Void.self)
            for await _ in never {}
            return "{}"
        }
        try await EmulatorHost.withRunning(router: router, webSocketRoutes: [], logger: .quiet) { port in
            try await FaultProxy.withRunning(upstream: "http://127.0.0.1:\(port)", logger: .quiet) { proxy, url in
                try await body(proxy, url, hits, held)
            }
        }
    }

    static let transport = HTTPTransport(allowsPlainText: true)

    func get(_ url: String) async throws -> (status: Int, text: String) {
        let response = try await Self.transport.get(url, timeout: .seconds(10))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test func eachActionDoesWhatItSays() async throws {
        try await withProxy { proxy, url, hits, _ in
            let forwarded = try await get(url + "/count")
            #expect(forwarded.text == #"{"n":1}"#, "forwarded")

            proxy.inject(.answer(status: 503, body: "busy"), where: { $0.path == "/count" })
            let answered = try await get(url + "/count")
            #expect(answered.status == 503 && answered.text == "busy")
            #expect(hits.withLock { $0 } == 1, "an answered request never reaches the server")

            proxy.inject(.cut, label: "cut")
            await #expect(throws: SwitchboardError.self) { try await get(url + "/count") }
            #expect(hits.withLock { $0 } == 1, "a cut request never reaches the server")

            proxy.inject(.loseAnswer)
            await #expect(throws: SwitchboardError.self) { try await get(url + "/count") }
            #expect(hits.withLock { $0 } == 2, "a lost answer was served")

            proxy.inject(.replaceAnswer("replaced"))
            let replaced = try await get(url + "/count")
            #expect(replaced.text == "replaced")
            proxy.inject(.rewriteAnswer({ request, answer in Data((request.path + " " + String(decoding: answer, as: UTF8.self)).utf8) }))
            let rewritten = try await get(url + "/count?x=1")
            #expect(rewritten.text == #"/count {"n":4}"#)

            proxy.inject(.repeatAnswer, count: 1, answerMatches: { String(decoding: $0, as: UTF8.self).contains("5") })
            let original = try await get(url + "/count")
            #expect(original.text == #"{"n":5}"#)
            let repeated = try await get(url + "/count")
            #expect(repeated.text == #"{"n":5}"#, "the previous answer, again")
            let later = try await get(url + "/count")
            #expect(later.text == #"{"n":6}"#, "then the server's again")

            let figures = proxy.statistics
            print("fault proxy: forwarded \(figures.forwarded), faults \(figures.faults), every action as specified")
            #expect(figures.faults == 6)
            #expect(figures.applied == ["cut": 1], "a labelled rule counts the requests it applied to, under its label")
        }
    }

    @Test func disconnectingEndsARequestInFlight() async throws {
        try await withProxy { proxy, url, _, held in
            var cut = 0
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    await #expect(throws: SwitchboardError.self) { try await get(url + "/hold") }
                }
                // Once the server holds the request, the link is dropped under it.
                for await _ in held { break }
                cut = proxy.disconnectAll(label: "disconnect")
                try await group.waitForAll()
            }
            // A kept-alive connection with nothing in flight: closing it cuts no request. (Last:
            // a request right after it could go out on the closed connection and fail.)
            _ = try await get(url + "/count")
            let idle = proxy.disconnectAll(label: "disconnect")
            let figures = proxy.statistics
            print("fault proxy: a disconnect with nothing in flight cut \(idle), with a held request \(cut); applied \(figures.applied)")
            #expect(idle == 0, "closing an idle connection cuts no request")
            #expect(cut == 1, "the held request was cut")
            #expect(figures.disconnects == 2 && figures.requestsCut == 1 && figures.applied == ["disconnect": 1])
        }
    }

    @Test func cuttingRequestsInFlightLeavesIdleConnections() async throws {
        try await withProxy { proxy, url, hits, held in
            _ = try await get(url + "/count")
            #expect(proxy.cutRequestsInFlight(label: "cut") == 0, "nothing in flight, nothing cut")
            var cut = 0
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    await #expect(throws: SwitchboardError.self) { try await get(url + "/hold") }
                }
                for await _ in held { break }
                cut = proxy.cutRequestsInFlight(label: "cut")
                try await group.waitForAll()
            }
            // The idle connection of the first request was left open, so this goes through.
            let after = try await get(url + "/count")
            let figures = proxy.statistics
            print("fault proxy: cut \(cut) request in flight, the idle connection left; applied \(figures.applied)")
            #expect(cut == 1 && after.status == 200 && hits.withLock { $0 } == 2)
            #expect(figures.requestsCut == 1 && figures.applied == ["cut": 1] && figures.disconnects == 0)
        }
    }
}
