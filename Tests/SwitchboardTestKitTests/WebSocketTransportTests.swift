import Foundation
import Logging
import NIOCore
import NIOWebSocket
import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
import Testing

/// The WebSocket transport when the server is not there: a classified error, never a crash. (The
/// client's handler used to capture the link's body through `withoutActuallyEscaping`; a refused
/// connection left the handler alive inside WSClient, and the runtime trapped.)
@Suite(.timeLimit(.minutes(1)))
struct WebSocketTransportTests {
    @Test func aRefusedConnectionIsALostLinkAndTheProcessGoesOn() async throws {
        for attempt in 1...3 {
            do {
                _ = try await WebSocketTransport.network.withTextWebSocket(url: "ws://127.0.0.1:1/ws", logger: .quiet) { _ in
                    Issue.record("attempt \(attempt): a socket to a port nothing listens on")
                }
            } catch let error as SwitchboardError {
                #expect(error.code == .connectionLost, "\(error)")
                #expect(error.message.contains("connection refused"), "a reason a person reads: \(error.message)")
            }
        }
    }
}

/// The transport's own client (on SwiftNIO's handlers, no task of its own) against a server that
/// scripts each frame, and against canned bytes: what the emulators never send.
@Suite(.timeLimit(.minutes(1)))
struct NetworkWebSocketTests {
    typealias Server = ScriptedWebSocketServer

    /// A ping is answered with its data, a fragmented message arrives whole, the client's frames
    /// are masked, and the server's close is echoed with its code and ends `messages` without an
    /// error.
    @Test func pingsFragmentsAndTheServersClose() async throws {
        let seen = Locked<[String]>([])
        let received = try await Server.withServer { frames, outbound in
            try await outbound.write(Server.text("first"))
            let hello = try #require(try await frames.next())
            seen.withLock { $0.append("\(Server.name(hello.opcode)) \(String(buffer: hello.unmaskedData)) masked \(hello.maskKey != nil)") }
            try await outbound.write(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "are you there")))
            let pong = try #require(try await frames.next())
            seen.withLock { $0.append("\(Server.name(pong.opcode)) \(String(buffer: pong.unmaskedData)) masked \(pong.maskKey != nil)") }
            try await outbound.write(Server.text("frag", fin: false))
            try await outbound.write(Server.text("men", fin: false, opcode: .continuation))
            try await outbound.write(Server.text("ted", opcode: .continuation))
            try await outbound.write(Server.close(.goingAway))
            let echo = try #require(try await frames.next())
            var code = echo.unmaskedData
            seen.withLock { $0.append("\(Server.name(echo.opcode)) \(code.readWebSocketErrorCode().map { "\($0)" } ?? "none")") }
        } _: { url in
            try await WebSocketTransport.network.withTextWebSocket(url: url, logger: .quiet) { socket in
                var received: [String] = []
                var messages = socket.messages.makeAsyncIterator()
                received.append(try #require(try await messages.next()))
                try await socket.send("hello")
                while let text = try await messages.next() { received.append(text) }
                return received
            }
        }
        print("websocket: received \(received); the server saw \(seen.withLock { $0 })")
        #expect(received == ["first", "fragmented"])
        #expect(seen.withLock { $0 } == [
            "text hello masked true",
            "pong are you there masked true",
            "connectionClose \(WebSocketErrorCode.goingAway)",
        ])
    }

    /// A message over the limit fails the link as too large, in one frame or in fragments, and a
    /// binary message or text that is not UTF-8 as a protocol violation; the close says why, and
    /// nothing hangs.
    @Test(arguments: ["one frame", "fragments", "binary", "not UTF-8"])
    func whatTheClientRefuses(_ shape: String) async throws {
        let closed = Locked<String?>(nil)
        let error = try await Server.withServer { frames, outbound in
            switch shape {
            case "one frame":
                try await outbound.write(Server.text(String(repeating: "x", count: 200)))
            case "fragments":
                try await outbound.write(Server.text(String(repeating: "x", count: 90), fin: false))
                try await outbound.write(Server.text(String(repeating: "x", count: 90), opcode: .continuation))
            case "binary":
                try await outbound.write(Server.text("bytes", opcode: .binary))
            default:
                try await outbound.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: [0x68, 0xFF, 0xFE])))
            }
            while let frame = try await frames.next() {
                guard frame.opcode == .connectionClose else { continue }
                var code = frame.unmaskedData
                closed.withLock { $0 = code.readWebSocketErrorCode().map { "\($0)" } }
            }
        } _: { url in
            try await WebSocketTransport.network.withTextWebSocket(
                url: url, configuration: .init(maxMessageSize: 128), logger: .quiet
            ) { socket -> SwitchboardError? in
                do {
                    for try await text in socket.messages { Issue.record("\(shape): got \(text.count) characters") }
                    return nil
                } catch {
                    return error as? SwitchboardError
                }
            }
        }
        print("websocket, \(shape): \(String(describing: error)); the server saw a close with \(closed.withLock { $0 } ?? "no code")")
        let tooLarge = shape == "one frame" || shape == "fragments"
        #expect(error?.code == (tooLarge ? .payloadTooLarge : .protocolViolation), "\(String(describing: error))")
        // A frame refused by its header leaves its payload unread, and the kernel answers the
        // close with a reset that can drop the close frame on the server's side: not checked.
        let codes: [String: WebSocketErrorCode] = ["fragments": .messageTooLarge, "binary": .unacceptableData, "not UTF-8": .dataInconsistentWithMessage]
        if let code = codes[shape] {
            #expect(closed.withLock { $0 } == "\(code)", "the close says why")
        }
    }

    /// `close()` sends a close frame, and the server's answer ends `messages`: the server keeps
    /// its side open, and the client's wait for the answer is longer than the test may take, so
    /// only the answer can end it.
    @Test func aCloseOfTheClientsOwnEndsWhenTheServerAnswers() async throws {
        let seen = Locked<String?>(nil)
        let ended = try await Server.withServer { frames, outbound in
            let close = try #require(try await frames.next())
            var code = close.unmaskedData
            seen.withLock { $0 = "\(Server.name(close.opcode)) \(code.readWebSocketErrorCode().map { "\($0)" } ?? "none") masked \(close.maskKey != nil)" }
            try await outbound.write(Server.close(.normalClosure))
            while try await frames.next() != nil {}
        } _: { url in
            try await WebSocketTransport.network.withTextWebSocket(
                url: url, configuration: .init(closeTimeout: .seconds(600)), logger: .quiet
            ) { socket in
                await socket.close()
                var count = 0
                for try await _ in socket.messages { count += 1 }
                return count
            }
        }
        #expect(ended == 0)
        #expect(seen.withLock { $0 } == "connectionClose \(WebSocketErrorCode.normalClosure) masked true")
    }

    /// A cancelled read ends the messages (as an `AsyncThrowingStream`'s does) rather than
    /// failing them: an adapter tells a link it stopped from one that broke.
    @Test func aCancelledReadEndsTheMessages() async throws {
        let outcome = try await Server.withServer { frames, outbound in
            while let frame = try await frames.next(), frame.opcode != .connectionClose {}
            try await outbound.write(Server.close(.normalClosure))
        } _: { url in
            try await WebSocketTransport.network.withTextWebSocket(url: url, logger: .quiet) { socket in
                let (started, start) = AsyncStream.makeStream(of: Void.self)
                let reading = Task {
                    start.yield()
                    var count = 0
                    for try await _ in socket.messages { count += 1 }
                    return "ended after \(count)"
                }
                for await _ in started { break }
                reading.cancel()
                do {
                    return try await reading.value
                } catch {
                    return "threw \(error)"
                }
            }
        }
        #expect(outcome == "ended after 0")
    }

    /// The server's first frame in the same packet as its 101 is the first message.
    @Test func aFrameBehindTheSwitchInOnePacket() async throws {
        try await CannedTCPServer.withServer(answer: { key in
            CannedTCPServer.switching(key: key, then: CannedTCPServer.textFrame("first"))
        }) { server in
            let first = try await WebSocketTransport.network.withTextWebSocket(
                url: "ws://127.0.0.1:\(server.port)/ws", configuration: .init(closeTimeout: .milliseconds(100)), logger: .quiet
            ) { socket in
                var messages = socket.messages.makeAsyncIterator()
                return try await messages.next()
            }
            #expect(first == "first")
        }
    }

    /// A 101 with the wrong accept key is refused, and the connection it came on is closed.
    @Test func aWrongAcceptKeyIsRefusedAndItsConnectionClosed() async throws {
        try await CannedTCPServer.withServer(answer: { key in
            CannedTCPServer.switching(key: key, accept: "d3Jvbmc=")
        }) { server in
            let error = await #expect(throws: SwitchboardError.self) {
                try await WebSocketTransport.network.withTextWebSocket(url: "ws://127.0.0.1:\(server.port)/ws", logger: .quiet) { _ in
                    Issue.record("a socket from a wrong accept key")
                }
            }
            print("websocket, wrong accept key: \(String(describing: error))")
            #expect(error?.code == .connectionLost)
            await server.clientClosed()
        }
    }

    /// A server that accepts and never answers: the open fails as timed out once the
    /// configuration's connect timeout has passed, over `ws://` and over `wss://` (where the TLS
    /// handshake hangs), and a cancelled open ends at once.
    @Test func anOpenThatHangsTimesOut() async throws {
        try await CannedTCPServer.withServer(answer: nil) { server in
            for url in ["ws://127.0.0.1:\(server.port)/ws", "wss://localhost:\(server.port)/ws"] {
                let error = await #expect(throws: SwitchboardError.self) {
                    try await WebSocketTransport.network.withTextWebSocket(
                        url: url, configuration: .init(connectTimeout: .milliseconds(200)), logger: .quiet
                    ) { _ in Issue.record("a socket from a server that never answered") }
                }
                print("websocket, silent server, \(url): \(String(describing: error))")
                #expect(error?.code == .timedOut, "\(url)")
                #expect(error?.message.contains("in time") == true)
            }

            let opening = Task {
                try await WebSocketTransport.network.withTextWebSocket(url: "ws://127.0.0.1:\(server.port)/ws", logger: .quiet) { _ in }
            }
            opening.cancel()
            let cancelled = await #expect(throws: SwitchboardError.self) { try await opening.value }
            #expect(cancelled?.code == .cancelled, "\(String(describing: cancelled))")
        }
    }
}
