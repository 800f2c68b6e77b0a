import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The WebSocket fault relay between a client and a real server on a loopback socket (an echo
/// server that keeps what it got): each action as the client and the server see it, counted when
/// it took effect.
@Suite(.timeLimit(.minutes(1)))
struct WebSocketFaultRelayTests {
    /// Runs an echo server ("echo <frame>") around `body`, which gets its URL and the frames it
    /// got, as they come.
    func withEchoServer(_ body: @Sendable (String, AsyncStream<String>) async throws -> Void) async throws {
        let (received, got) = AsyncStream.makeStream(of: String.self)
        let route = WebSocketRoute(path: "/ws") { _, socket in
            EmulatedSocket.Handlers(
                receive: { inbound in
                    guard case .text(let text) = inbound else { return }
                    got.yield(text)
                    socket.send("echo \(text)")
                },
                closed: {}
            )
        }
        try await EmulatorHost.withRunning(router: .init(context: BasicWebSocketRequestContext.self), webSocketRoutes: [route], logger: .quiet) { port in
            try await body("ws://127.0.0.1:\(port)/ws", received)
        }
    }

    @Test func answersRepeatsAndFramesOfItsOwn() async throws {
        try await withEchoServer { url, received in
            let relay = WebSocketFaultRelay()
            relay.inject(.answer { "answered \($0)" }, label: "answer") { $0 == "q1" }
            relay.inject(.repeat, direction: .toClient, label: "repeat") { $0 == "echo e1" }
            let frames = try await relay.transport.withTextWebSocket(url: url, logger: .quiet) { socket in
                var frames: [String] = []
                var iterator = socket.messages.makeAsyncIterator()
                try await socket.send("q1")
                frames.append(try await iterator.next() ?? "")
                try await socket.send("e1")
                frames.append(try await iterator.next() ?? "")
                frames.append(try await iterator.next() ?? "")
                #expect(relay.deliver("of its own", label: "deliver"))
                frames.append(try await iterator.next() ?? "")
                // Spent: the next q1 goes through.
                try await socket.send("q1")
                frames.append(try await iterator.next() ?? "")
                return frames
            }
            let server = Array(await received.prefix(2).reduce(into: []) { $0.append($1) })
            print("fault relay: frames the client got \(frames), the server got \(server), applied \(relay.statistics.applied)")
            #expect(frames == ["answered q1", "echo e1", "echo e1", "of its own", "echo q1"])
            // The first q1 never reached it.
            #expect(server == ["e1", "q1"])
            #expect(relay.statistics.applied == ["answer": 1, "repeat": 1, "deliver": 1])
            // Unchanged: e1 and q1 to the server; echo q1 to the client (the repeat's two are the
            // rule's).
            #expect(relay.statistics.toServer == 2)
            #expect(relay.statistics.toClient == 3)
        }
    }

    @Test func aCutBeforeTheServerAndALostAnswerAfterIt() async throws {
        try await withEchoServer { url, received in
            let relay = WebSocketFaultRelay()
            relay.inject(.cut, label: "cut") { $0 == "never" }
            relay.inject(.loseAnswer, label: "lost") { $0 == "lost answer" }
            relay.inject(.cut, direction: .toClient, label: "cut reply") { $0 == "echo reply lost" }
            // A cut: the send fails, the server never gets it, the client's reads end.
            try await relay.transport.withTextWebSocket(url: url, logger: .quiet) { socket in
                await #expect(throws: SwitchboardError.self) { try await socket.send("never") }
                await #expect(throws: SwitchboardError.self) { for try await _ in socket.messages {} }
            }
            // A lost answer: the send goes through, the server gets it, the client hears nothing
            // more and its reads end with a lost connection.
            try await relay.transport.withTextWebSocket(url: url, logger: .quiet) { socket in
                try await socket.send("lost answer")
                var heard: [String] = []
                do {
                    for try await frame in socket.messages { heard.append(frame) }
                    Issue.record("the reads end with an error")
                } catch let error as SwitchboardError {
                    #expect(error.code == .connectionLost)
                }
                #expect(heard.isEmpty)
            }
            // A reply cut on its way to the client: the server got the frame, the client's reads
            // end without the reply.
            try await relay.transport.withTextWebSocket(url: url, logger: .quiet) { socket in
                try await socket.send("reply lost")
                var heard: [String] = []
                await #expect(throws: SwitchboardError.self) { for try await frame in socket.messages { heard.append(frame) } }
                #expect(heard.isEmpty)
            }
            // The frames the server got: "never" did not reach it.
            let frames = await received.prefix(2).reduce(into: [String]()) { $0.append($1) }
            print("fault relay: the server's frames \(frames), applied \(relay.statistics.applied)")
            #expect(frames == ["lost answer", "reply lost"])
            #expect(relay.statistics.applied == ["cut": 1, "lost": 1, "cut reply": 1])
        }
    }
}
