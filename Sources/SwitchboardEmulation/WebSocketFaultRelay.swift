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
/// relay.inject(.forwardThenCut, label: "lost reply") { $0.hasPrefix("<message") }
/// relay.inject(.answer { frame in errorReply(to: frame) }) { $0.hasPrefix("<iq") }
/// relay.inject(.repeat, direction: .toClient, times: 2) { $0.contains("<body>") }
/// relay.deliver("<message …/>", label: "raw frame")
/// ```
///
/// Rules are matched in the order they were injected, per direction; each applies to a number of
/// frames and is then spent. A rule's label counts each frame it applied to in ``applied``, when
/// it took effect (the frame went out, or reached a live link), not when it was injected. The
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
        /// Not forwarded; the link is cut (the client's send fails as over a broken socket).
        case cut
        /// Forwarded, then the link is cut before anything more reaches the client: the server
        /// did it, the client never hears (a lost reply).
        case forwardThenCut
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

    private struct State {
        var rules: [Rule] = []
        var applied: [String: Int] = [:]
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

    /// The number of frames each labelled rule applied to (and of ``deliver(_:label:)`` frames a
    /// live link took, and of links ``disconnectAll(label:)`` cut), by label.
    public var applied: [String: Int] { state.withLock { $0.applied } }

    /// Applies `action` to the next `times` frames going `direction` that `matches` accepts.
    public func inject(
        _ action: Action,
        direction: Direction = .toServer,
        times: Int = 1,
        label: String? = nil,
        where matches: @escaping @Sendable (String) -> Bool
    ) {
        state.withLock { $0.rules.append(Rule(action: action, direction: direction, remaining: times, label: label, matches: matches)) }
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
        if taken, let label { state.withLock { $0.applied[label, default: 0] += 1 } }
        return taken
    }

    /// Cuts every live link: the client's reads end with `connectionLost`. Returns how many.
    @discardableResult
    public func disconnectAll(label: String? = nil) -> Int {
        let live = state.withLock { state in
            defer { state.live.removeAll() }
            if let label, !state.live.isEmpty { state.applied[label, default: 0] += state.live.count }
            return Array(state.live.values)
        }
        for link in live { Self.cut(link) }
        return live.count
    }

    private static func cut(_ link: Link) {
        link.toClient.finish(throwing: SwitchboardError(.connectionLost, "the test cut the link"))
        link.toServer.finish()
    }

    /// The action for a frame going `direction` on link `id`, spending the rule and counting it
    /// (a lost answer is counted once its frame is written: the caller counts it). A link already
    /// cut spends nothing: a fault there would take no effect.
    private func action(on frame: String, going direction: Direction, link id: UUID) -> (action: Action, label: String?)? {
        state.withLock { state in
            guard state.live[id] != nil else { return nil }
            guard let index = state.rules.firstIndex(where: { $0.direction == direction && $0.matches(frame) }) else { return nil }
            let rule = state.rules[index]
            state.rules[index].remaining -= 1
            if state.rules[index].remaining <= 0 { state.rules.remove(at: index) }
            if case .forwardThenCut = rule.action, direction == .toServer { return (rule.action, rule.label) }
            if let label = rule.label { state.applied[label, default: 0] += 1 }
            return (rule.action, nil)
        }
    }

    private func count(_ label: String?) {
        guard let label else { return }
        state.withLock { $0.applied[label, default: 0] += 1 }
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
                    toClient.yield(reply(text))
                case .drop:
                    break
                case .repeat:
                    try forward()
                    try forward()
                case .cut:
                    forget()
                    Self.cut(link)
                    throw SwitchboardError(.connectionLost, "the test cut the link")
                case .forwardThenCut:
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
                                if frame.cutAfter {
                                    self.count(frame.label)
                                    forget()
                                    Self.cut(link)
                                    // What the client queued behind it never leaves.
                                    break
                                }
                            }
                            await server.close()
                        }
                        for try await text in server.messages {
                            // Cut: nothing more reaches the client, and no rule is spent on it.
                            guard self.state.withLock({ $0.live[id] != nil }) else { break }
                            // A lost answer's frame is on its way out: the cut follows.
                            if answersLost.withLock({ $0 }) { continue }
                            switch self.action(on: text, going: .toClient, link: id)?.action {
                            case nil: toClient.yield(text)
                            case .answer(let replace): toClient.yield(replace(text))
                            case .drop: break
                            case .repeat:
                                toClient.yield(text)
                                toClient.yield(text)
                            case .cut:
                                forget()
                                Self.cut(link)
                            case .forwardThenCut:
                                toClient.yield(text)
                                forget()
                                Self.cut(link)
                            }
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
