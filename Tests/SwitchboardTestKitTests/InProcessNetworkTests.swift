import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The in-process network carries what a socket would: HTTP requests to the emulator's router,
/// WebSocket frames both ways in order, the emulator's pauses on its clock, each side's frame limit
/// and close, a refused handshake.
@Suite(.timeLimit(.minutes(1)))
struct InProcessNetworkTests {
    /// A small emulator: `GET /echo?x=…` answers `x`, `POST /echo` its body with 201 and a header;
    /// `/ws` echoes, answers "bye" by closing, "slow" with "a", a 5 s pause, "b", and "big" with a
    /// frame of 2 KiB; a handshake with `refuse` in its query is refused.
    struct Echo: HostedEmulator {
        let logger = Logger.quiet
        let clock: TestClock
        let opened = Locked<[String]>([])
        let received = Locked<[String]>([])
        let closed = Locked(0)

        func endpoints(host: String, port: Int) -> String { "http://\(host):\(port)" }

        func httpRouter() -> Router<BasicWebSocketRequestContext> {
            let router = Router(context: BasicWebSocketRequestContext.self)
            router.get("/echo") { request, _ in request.uri.queryParameters.get("x") ?? "" }
            router.get("/broken") { _, _ -> String in throw CocoaError(.fileReadUnknown) }
            router.post("/echo") { request, _ in
                let body = try await request.body.collect(upTo: 1 << 20)
                return Response(status: .created, headers: [.contentType: "text/plain", .init("X-Seen")!: request.headers[.contentType] ?? "-"], body: .init(byteBuffer: body))
            }
            return router
        }

        func webSocketRoutes() -> [WebSocketRoute] {
            [
                WebSocketRoute(path: "/ws", maxFrameSize: 1024, clock: SessionClock(clock), refuses: { WebSocketRoute.query(of: $0)["refuse"] != nil }) { uri, socket in
                    opened.withLock { $0.append(uri) }
                    return EmulatedSocket.Handlers(
                        receive: { frame in
                            switch frame {
                            case .text("bye"): socket.close()
                            case .text("slow"):
                                socket.send("a")
                                socket.pause(for: .seconds(5))
                                socket.send("b")
                            case .text("big"): socket.send(String(repeating: "x", count: 2048))
                            case .text("states"):
                                // Held by a pause: the newest state replaces the ones queued before it.
                                socket.pause(for: .seconds(1))
                                for state in ["state 1", "state 2"] { socket.sendNewest(state) }
                                socket.send("result")
                                socket.sendNewest("state 3")
                            case .text(let text):
                                received.withLock { $0.append(text) }
                                socket.send("echo: \(text)")
                            case .binary, .failed:
                                received.withLock { $0.append("<failed>") }
                                socket.close()
                            }
                        },
                        closed: { closed.withLock { $0 += 1 } }
                    )
                }
            ]
        }
    }

    @Test func httpRequestsReachTheRouter() async throws {
        let (base, network) = Echo(clock: TestClock()).inProcess()
        let got = try await network.http.get(base + "/echo", query: [("x", "a b&c")], timeout: .seconds(1))
        #expect(got.status == 200 && String(decoding: got.body, as: UTF8.self) == "a b&c")
        let posted = try await network.http.postData(base + "/echo", data: Data("payload".utf8), contentType: "application/x-test", timeout: .seconds(1))
        #expect(posted.status == 201 && String(decoding: posted.body, as: UTF8.self) == "payload")
        #expect(posted.headers.contains { $0.0.lowercased() == "x-seen" && $0.1 == "application/x-test" }, "the request's headers reach the route")
        let missing = try await network.http.get(base + "/nowhere", timeout: .seconds(1))
        #expect(missing.status == 404)
        let broken = try await network.http.get(base + "/broken", timeout: .seconds(1))
        #expect(broken.status == 500, "an error a route throws is a 500, as the host answers it")
        for elsewhere in ["http://127.0.0.1:8080/echo", "http://example.com:9/echo", "ws://127.0.0.1:9/echo"] {
            let refused = await #expect(throws: SwitchboardError.self) { try await network.http.get(elsewhere, timeout: .seconds(1)) }
            #expect(refused?.code == .connectionLost, "nothing listens at \(elsewhere)")
        }
        var small = network.http
        small.maxBodySize = 3
        await #expect(throws: SwitchboardError.self) { try await small.postData(base + "/echo", data: Data("four".utf8), contentType: "text/plain", timeout: .seconds(1)) }
    }

    @Test func framesGoBothWaysInOrderAndACloseEndsBothSides() async throws {
        let echo = Echo(clock: TestClock())
        let network = echo.inProcess().network
        let heard = try await network.webSockets.withTextWebSocket(url: "ws://127.0.0.1:9/ws?visitor=v-1", logger: .quiet) { socket in
            var messages = socket.messages.makeAsyncIterator()
            var heard: [String] = []
            for text in ["one", "two", "three"] { try await socket.send(text) }
            for _ in 0..<3 { heard.append(try await messages.next() ?? "<end>") }
            try await socket.send("bye")
            heard.append(try await messages.next() ?? "<end>")
            await #expect(throws: SwitchboardError.self) { try await socket.send("after the close") }
            return heard
        }
        #expect(heard == ["echo: one", "echo: two", "echo: three", "<end>"])
        #expect(echo.opened.withLock { $0 } == ["/ws?visitor=v-1"], "the route gets the path and query")
        #expect(echo.received.withLock { $0 } == ["one", "two", "three"])
        #expect(echo.closed.withLock { $0 } == 1, "the model hears the close once")
    }

    @Test func theClientsCloseReachesTheModel() async throws {
        let echo = Echo(clock: TestClock())
        try await echo.inProcess().network.webSockets.withTextWebSocket(url: "ws://127.0.0.1:9/ws", logger: .quiet) { socket in
            try await socket.send("hello")
        }
        #expect(echo.closed.withLock { $0 } == 1)
    }

    @Test func theEmulatorsPauseWaitsForItsClock() async throws {
        let clock = TestClock()
        let network = Echo(clock: clock).inProcess().network
        try await network.webSockets.withTextWebSocket(url: "ws://127.0.0.1:9/ws", logger: .quiet) { socket in
            var messages = socket.messages.makeAsyncIterator()
            try await socket.send("slow")
            #expect(try await messages.next() == "a")
            #expect(await clock.waitForSleepers(1), "the pause sleeps on the emulator's clock")
            clock.advance(by: .seconds(4))
            #expect(clock.sleeperCount == 1, "not yet: 4 of 5 seconds")
            clock.advance(by: .seconds(1))
            #expect(try await messages.next() == "b")
        }
    }

    /// What `sendNewest` queues while the writer is held goes out once, as the newest.
    @Test func aStalledSocketGetsTheNewestStateOnce() async throws {
        let clock = TestClock()
        let network = Echo(clock: clock).inProcess().network
        try await network.webSockets.withTextWebSocket(url: "ws://127.0.0.1:9/ws", logger: .quiet) { socket in
            var messages = socket.messages.makeAsyncIterator()
            try await socket.send("states")
            #expect(await clock.waitForSleepers(1))
            clock.advance(by: .seconds(1))
            try await socket.send("after")
            var heard: [String] = []
            for _ in 0..<3 { heard.append(try await messages.next() ?? "<end>") }
            #expect(heard == ["state 3", "result", "echo: after"], "one state, the newest, where the first was queued, and once")
        }
    }

    @Test func eachSidesFrameLimitEndsTheSocketAsOnTheNetwork() async throws {
        let echo = Echo(clock: TestClock())
        let network = echo.inProcess().network
        // The client's limit: a message over it fails the link with payloadTooLarge.
        let failure = await #expect(throws: SwitchboardError.self) {
            try await network.webSockets.withTextWebSocket(url: "ws://127.0.0.1:9/ws", configuration: .init(maxMessageSize: 1000), logger: .quiet) { socket in
                try await socket.send("big")
                for try await _ in socket.messages {}
            }
        }
        #expect(failure?.code == .payloadTooLarge)
        // The emulator's limit: a frame over its 1 KiB reaches it as a failed read.
        try await network.webSockets.withTextWebSocket(url: "ws://127.0.0.1:9/ws", logger: .quiet) { socket in
            try await socket.send(String(repeating: "y", count: 1025))
            for try await _ in socket.messages {}
        }
        #expect(echo.received.withLock { $0 } == ["<failed>"])
    }

    @Test func aRefusedHandshakeOrAnUnknownPathIsALostLink() async throws {
        let network = Echo(clock: TestClock()).inProcess().network
        for url in ["ws://127.0.0.1:9/ws?refuse=1", "ws://127.0.0.1:9/elsewhere"] {
            let error = await #expect(throws: SwitchboardError.self) {
                try await network.webSockets.withTextWebSocket(url: url, logger: .quiet) { _ in Issue.record("opened \(url)") }
            }
            #expect(error?.code == .connectionLost, "\(url)")
        }
    }
}
