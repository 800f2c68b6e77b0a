package import Foundation
import Logging
package import NIOWebSocket
package import Switchboard
package import SwitchboardTestKit
package import WSClient

/// One adapter's emulator, running for a harness that measures or loads it: `switchboard bench`'s
/// latency rows, `soak` and `load`. An adapter's registry entry says how to start it
/// (``EmulatorRigRunner``), so the harnesses loop over the registry.
package struct EmulatorRig: Sendable {
    /// The control the conformance suite drives the emulator with, for its first customer.
    package var control: any EmulatorControl
    /// A control of the same emulator for another customer, by number (a load run's).
    package var customer: @Sendable (Int) -> any EmulatorControl
    /// The raw client of the vendor's protocol for `conversation` (known once a session has
    /// prepared it): the benchmark's baseline.
    package var raw: @Sendable (ConversationID) -> any RawChatClient

    package init(
        control: any EmulatorControl,
        raw: @escaping @Sendable (ConversationID) -> any RawChatClient,
        customer: @escaping @Sendable (Int) -> any EmulatorControl
    ) {
        self.control = control
        self.raw = raw
        self.customer = customer
    }
}

/// Starts an adapter's emulator on 127.0.0.1 (real sockets: the harnesses measure the wire) for
/// the duration of a body.
package protocol EmulatorRigRunner: Sendable {
    /// The adapter as the benchmark's rows name it ("Voximplant-style").
    var title: String { get }
    func withRig<T: Sendable>(_ body: @Sendable (EmulatorRig) async throws -> T) async throws -> T
}

/// Seconds as a `Double`, for the raw clients' samples.
package enum RawTiming {
    package static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = start.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}

/// The baseline: the least a client of the vendor's protocol does for the same exchanges, with
/// no Switchboard code in between (its own JSON, parsed with `JSONSerialization`).
package protocol RawChatClient: Sendable {
    /// Connects as the customer, then `exchanges` times: sends a message and waits for the
    /// server's confirmation, and has the agent send one (`agentSend`) and waits for it to arrive.
    func measure(round: Int, exchanges: Int, agentSend: @Sendable (String) async throws -> Void) async throws -> (sends: [Double], agents: [Double])
}

/// Parses one JSON object the way a raw client would.
package func rawObject(_ text: some StringProtocol) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}

/// A WebSocket of WSClient's, read inline one text message at a time (no reader task). The
/// functions are `@concurrent`, as WSClient's iterator is: reading it is no isolation hop.
package enum RawSocket {
    package typealias Inbound = WebSocketInboundMessageStream.AsyncIterator

    /// Reads until a text message whose parsed object satisfies `predicate`.
    @concurrent package static func next(_ inbound: inout Inbound, where predicate: ([String: Any]) -> Bool) async throws {
        while let message = try await inbound.next() {
            if case .text(let text) = message, let object = rawObject(text), predicate(object) { return }
        }
        throw SwitchboardError(.connectionLost, "bench: the raw client's socket closed")
    }

    /// One measured exchange each way: `message` sent until a frame satisfies `confirmed`, then
    /// the agent's `answer` (`agentSend`) until a frame satisfies `arrived`; the two times.
    @concurrent package static func exchange(
        _ inbound: inout Inbound,
        send message: [String: Any],
        on outbound: WebSocketOutboundWriter,
        confirmed: ([String: Any]) -> Bool,
        answer: String,
        agentSend: @Sendable (String) async throws -> Void,
        arrived: ([String: Any]) -> Bool
    ) async throws -> (sent: Double, received: Double) {
        let started = ContinuousClock.now
        try await send(message, on: outbound)
        try await next(&inbound, where: confirmed)
        let sent = RawTiming.seconds(since: started)
        let asked = ContinuousClock.now
        try await agentSend(answer)
        try await next(&inbound, where: arrived)
        return (sent, RawTiming.seconds(since: asked))
    }

    package static func send(_ object: [String: Any], on outbound: WebSocketOutboundWriter) async throws {
        let data = try JSONSerialization.data(withJSONObject: object)
        try await outbound.write(.text(String(decoding: data, as: UTF8.self)))
    }

    package static func connect(_ url: String, _ body: @concurrent @Sendable (inout Inbound, WebSocketOutboundWriter) async throws -> Void) async throws {
        try await withoutActuallyEscaping(body) { body in
            // Frames as large as a client of the protocols accepts (a retransmit page is ~0.5 MB in
            // one frame; WSClient's default is 16 KiB).
            var configuration = WebSocketClientConfiguration()
            configuration.maxFrameSize = 1 << 24
            _ = try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger.quiet) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 24).makeAsyncIterator()
                try await body(&messages, outbound)
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
    }
}
