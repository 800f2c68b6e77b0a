import Foundation
import Switchboard
import Logging
import SwitchboardTestKit
public import SwitchboardTransport

/// The WebSocket counterpart of ``FaultProxy``: a relay in the test process that a client's
/// WebSocket goes through to a real server it did not write (Prosody, a vendor's sandbox), and
/// that breaks what passes: a frame answered in the server's place, a link cut when a frame goes
/// out (before or after the server got it: a lost reply), a frame dropped or repeated, a frame of
/// the test's own handed to the client.
///
/// ```swift
/// let relay = WebSocketFaultRelay()
/// // give the client `relay.transport` as its WebSocket transport
/// relay.inject(.loseAnswer, label: "lost reply") { $0.hasPrefix("<message") }
/// relay.inject(.answer { frame in errorReply(to: frame) }) { $0.hasPrefix("<iq") }
/// relay.inject(.repeat, direction: .toClient, count: 2) { $0.contains("<body>") }
/// relay.deliver("<message …/>", label: "raw frame")
/// ```
///
/// Rules are matched in the order they were injected, per direction; each applies to a number of
/// frames and is then spent. A rule's label counts each frame it applied to in
/// ``Statistics/applied``, when it took effect (the frame went out, reached a live link, or the
/// link was cut), not when it was injected or matched. The
/// relay's other side is ``WebSocketTransport/network``: a real socket to the URL the client
/// asked for.
///
/// The lock guards the rules, the live links and the counters.
public final class WebSocketFaultRelay: Sendable {
    /// Which way a frame goes.
    public enum Direction: Sendable, Hashable {
        /// From the client to the server.
        case toServer
        /// From the server to the client.
        case toClient
    }

    /// What to do with a matching frame.
    public enum Action: Sendable {
        /// Not forwarded; the client gets what `reply` makes of the frame instead (for a frame
        /// to the server: an answer in the server's place, naming the frame's id).
        case answer(_ reply: @Sendable (_ frame: String) -> String)
        /// Not forwarded; the link is cut. For a frame to the server, the client's send fails as
        /// over a broken socket; for a frame to the client, the client's reads end without it.
        case cut
        /// For a frame to the server: forwarded, then the link is cut before anything more reaches
        /// the client (the server did it, the client never hears: a lost reply). For a frame to
        /// the client, which is itself the answer: the same as ``cut``.
        case loseAnswer
        /// Not forwarded, and the link stays.
        case drop
        /// Forwarded twice.
        case `repeat`
    }

    private struct Rule {
        var action: Action
        var direction: Direction
        var remaining: Int
        var label: String?
        var matches: @Sendable (String) -> Bool
    }

    /// What went through the relay, and what its rules did.
    public struct Statistics: Sendable, Hashable {
        /// Frames relayed unchanged to the server and to the client (a repeat counts twice).
        public var toServer = 0
        public var toClient = 0
        /// The frames each labelled rule applied to, the ``WebSocketFaultRelay/deliver(_:label:)``
        /// frames a live link took, and the links ``WebSocketFaultRelay/disconnectAll(label:)``
        /// cut, by label.
        public var applied: [String: Int] = [:]
    }

    private struct State {
        var rules: [Rule] = []
        var statistics = Statistics()
        var live: [UUID: Link] = [:]
    }

    private struct Link {
        var toClient: AsyncThrowingStream<String, any Error>.Continuation
        var toServer: AsyncStream<Outbound>.Continuation
    }

    /// A frame on its way to the server, and whether the link is cut once it was written.
    private struct Outbound: Sendable {
        var text: String
        var cutAfter = false
        /// The rule's label, counted once the frame is written.
        var label: String?
    }

    private let state = Locked(State())

    public init() {}

    /// Where the client opens its sockets.
    public var transport: WebSocketTransport {
        WebSocketTransport { url, configuration in self.open(url, configuration) }
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Applies `action` to the next `count` frames going `direction` that `matches` accepts.
    public func inject(
        _ action: Action,
        direction: Direction = .toServer,
        count: Int = 1,
        label: String? = nil,
        where matches: @escaping @Sendable (String) -> Bool
    ) {
        state.withLock { $0.rules.append(Rule(action: action, direction: direction, remaining: count, label: label, matches: matches)) }
    }

    /// Hands `frame` to every live link as if the server had sent it; `false` when no link took
    /// it (none is up, or each was cut meanwhile). Counted under `label` when one did.
    @discardableResult
    public func deliver(_ frame: String, label: String? = nil) -> Bool {
        let live = state.withLock { $0.live.values.map(\.toClient) }
        var taken = false
        for link in live {
            if case .enqueued = link.yield(frame) { taken = true }
        }
        if taken { count(label) }
        return taken
    }

    /// Cuts every live link: the client's reads end with `connectionLost`. Returns how many.
    @discardableResult
    public func disconnectAll(label: String? = nil) -> Int {
        let live = state.withLock { state in
            defer { state.live.removeAll() }
            if let label, !state.live.isEmpty { state.statistics.applied[label, default: 0] += state.live.count }
            return Array(state.live.values)
        }
        for link in live { Self.cut(link) }
        return live.count
    }

    private static func cut(_ link: Link) {
        link.toClient.finish(throwing: SwitchboardError(.connectionLost, "the test cut the link"))
        link.toServer.finish()
    }

    /// The action for a frame going `direction` on link `id`, and its rule's label, spending the
    /// rule; the caller counts the label once the action took effect. A link already cut spends
    /// nothing: a fault there would take no effect.
    private func action(on frame: String, going direction: Direction, link id: UUID) -> (action: Action, label: String?)? {
        state.withLock { state in
            guard state.live[id] != nil else { return nil }
            guard let index = state.rules.firstIndex(where: { $0.direction == direction && $0.matches(frame) }) else { return nil }
            let rule = state.rules[index]
            state.rules[index].remaining -= 1
            if state.rules[index].remaining <= 0 { state.rules.remove(at: index) }
            return (rule.action, rule.label)
        }
    }

    private func count(_ label: String?) {
        guard let label else { return }
        state.withLock { $0.statistics.applied[label, default: 0] += 1 }
    }

    private func relayed(_ direction: Direction, frames: Int = 1) {
        state.withLock { state in
            switch direction {
            case .toServer: state.statistics.toServer += frames
            case .toClient: state.statistics.toClient += frames
            }
        }
    }

    private func open(_ url: String, _ configuration: WebSocketTransport.Configuration) -> WebSocketTransport.InProcessSocket {
        let id = UUID()
        let (inbound, toClient) = AsyncThrowingStream.makeStream(of: String.self)
        let (outbound, toServer) = AsyncStream.makeStream(of: Outbound.self)
        let link = Link(toClient: toClient, toServer: toServer)
        state.withLock { $0.live[id] = link }
        let forget = { @Sendable in self.state.withLock { _ = $0.live.removeValue(forKey: id) } }
        // Set once a frame whose answer is lost is written: the server's frames are not relayed.
        let answersLost = Locked(false)
        let socket = TextWebSocket(
            messages: inbound,
            send: { text in
                func forward(cutAfter: Bool = false, label: String? = nil) throws {
                    // Gone to a server that closed: as a real socket, the send fails.
                    if case .terminated = toServer.yield(Outbound(text: text, cutAfter: cutAfter, label: label)) {
                        throw SwitchboardError(.connectionLost, "the WebSocket is closed")
                    }
                }
                let rule = self.action(on: text, going: .toServer, link: id)
                switch rule?.action {
                case nil:
                    try forward()
                case .answer(let reply):
                    if case .enqueued = toClient.yield(reply(text)) { self.count(rule?.label) }
                case .drop:
                    self.count(rule?.label)
                case .repeat:
                    try forward()
                    try forward(label: rule?.label)
                case .cut:
                    forget()
                    Self.cut(link)
                    self.count(rule?.label)
                    throw SwitchboardError(.connectionLost, "the test cut the link")
                case .loseAnswer:
                    // Sent as a real socket sends: the cut comes once the server has it.
                    try forward(cutAfter: true, label: rule?.label)
                }
            },
            close: { toServer.finish() }
        )
        return WebSocketTransport.InProcessSocket(socket: socket) {
            defer { forget() }
            do {
                try await WebSocketTransport.network.withTextWebSocket(url: url, configuration: configuration, logger: .quiet) { server in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in outbound {
                                // Cut: what the client queued before the cut never leaves.
                                guard self.state.withLock({ $0.live[id] != nil }) else { break }
                                if frame.cutAfter { answersLost.withLock { $0 = true } }
                                try await server.send(frame.text)
                                self.relayed(.toServer)
                                if frame.cutAfter {
                                    forget()
                                    Self.cut(link)
                                    self.count(frame.label)
                                    // What the client queued behind it never leaves.
                                    break
                                }
                                self.count(frame.label)
                            }
                            await server.close()
                        }
                        for try await text in server.messages {
                            // Cut: nothing more reaches the client, and no rule is spent on it.
                            guard self.state.withLock({ $0.live[id] != nil }) else { break }
                            // A lost answer's frame is on its way out: the cut follows.
                            if answersLost.withLock({ $0 }) { continue }
                            let rule = self.action(on: text, going: .toClient, link: id)
                            switch rule?.action {
                            case nil:
                                if case .enqueued = toClient.yield(text) { self.relayed(.toClient) }
                                continue
                            case .answer(let replace):
                                guard case .enqueued = toClient.yield(replace(text)) else { continue }
                            case .drop:
                                break
                            case .repeat:
                                toClient.yield(text)
                                guard case .enqueued = toClient.yield(text) else { continue }
                                self.relayed(.toClient, frames: 2)
                            case .cut, .loseAnswer:
                                forget()
                                Self.cut(link)
                            }
                            self.count(rule?.label)
                        }
                        // The server closed: the client hears it now, not after the close
                        // handshake.
                        forget()
                        toServer.finish()
                        toClient.finish()
                        group.cancelAll()
                    }
                }
                toClient.finish()
            } catch {
                toClient.finish(throwing: error)
            }
        }
    }
}
