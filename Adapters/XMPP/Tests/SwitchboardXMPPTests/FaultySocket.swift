import Foundation
import Logging
import Switchboard
import SwitchboardTestKit
import SwitchboardTransport

/// The customer's WebSocket to Prosody, through a relay in the test process that breaks what
/// passes, for the faults the server's admin shell cannot make: a request answered with an
/// error or the link cut when it goes out, a login refused, frames of the test's own handed to
/// the client, live messages delivered twice, an account disabled. The adapter sees a
/// `WebSocketTransport` (`transport`); the relay's other side is a real socket to Prosody.
///
/// Each fault is counted when it took effect: when the stanza it waits for went out, when the
/// frame reached a live link.
final class FaultySocket: Sendable {
    private struct Failure {
        var name: String?
        var error: SwitchboardError
    }

    private struct State {
        var failures: [Failure] = []
        var logins: [SwitchboardError] = []
        var disabled = false
        var duplicates = 0
        var applied: [EmulatorFault.Kind: Int] = [:]
        var live: [UUID: AsyncThrowingStream<String, any Error>.Continuation] = [:]
    }

    private let state = Locked(State())

    /// Where the customer's backend opens its sockets.
    var transport: WebSocketTransport {
        WebSocketTransport { url, configuration in self.open(url, configuration) }
    }

    var applied: [EmulatorFault.Kind: Int] { state.withLock { $0.applied } }

    /// The next outbound stanza `name` calls (`send`, `typing`, `markRead`, `history`, `edit`,
    /// `delete`; any request when `nil`) fails with `error`: the link is cut for a lost
    /// connection, else the stanza is answered with the error Prosody would send.
    func failNext(_ name: String?, with error: SwitchboardError) {
        state.withLock { $0.failures.append(Failure(name: name, error: error)) }
    }

    /// The next login fails: cut for a lost connection, else refused (`not-authorized`).
    func rejectNextLogin(_ error: SwitchboardError) {
        state.withLock { $0.logins.append(error) }
    }

    /// The next `count` live messages with a body reach the client twice.
    func duplicateNext(_ count: Int) {
        state.withLock { $0.duplicates += count }
    }

    /// The account is disabled: the live links are cut, and every login from now on is refused
    /// as Prosody refuses a disabled account's (`account-disabled`).
    func disable() {
        let live = state.withLock { state in
            state.disabled = true
            defer { state.live.removeAll() }
            return Array(state.live.values)
        }
        for link in live { link.finish(throwing: SwitchboardError(.connectionLost, "the test cut the link")) }
    }

    /// Hands `frame` to every live link as if the server had sent it; `false` when none is up.
    /// Counted when a link took it (not one cut meanwhile).
    @discardableResult
    func inject(_ frame: String, as kind: EmulatorFault.Kind) -> Bool {
        let live = state.withLock { Array($0.live.values) }
        var taken = false
        for link in live {
            if case .enqueued = link.yield(frame) { taken = true }
        }
        if taken { state.withLock { $0.applied[kind, default: 0] += 1 } }
        return taken
    }

    private enum Verdict {
        case forward
        case answer(String)
        case cut
    }

    private func open(_ url: String, _ configuration: WebSocketTransport.Configuration) -> WebSocketTransport.InProcessSocket {
        let id = UUID()
        let (inbound, toClient) = AsyncThrowingStream.makeStream(of: String.self)
        let (outbound, toServer) = AsyncStream.makeStream(of: String.self)
        state.withLock { $0.live[id] = toClient }
        let socket = TextWebSocket(
            messages: inbound,
            send: { text in
                switch self.verdict(on: text) {
                case .forward:
                    // Gone to a server that closed: as a real socket, the send fails.
                    if case .terminated = toServer.yield(text) { throw SwitchboardError(.connectionLost, "the WebSocket is closed") }
                case .answer(let reply):
                    toClient.yield(reply)
                case .cut:
                    let cut = SwitchboardError(.connectionLost, "the test cut the link")
                    self.state.withLock { _ = $0.live.removeValue(forKey: id) }
                    toClient.finish(throwing: cut)
                    toServer.finish()
                    throw cut
                }
            },
            close: { toServer.finish() }
        )
        return WebSocketTransport.InProcessSocket(socket: socket) {
            defer { self.state.withLock { _ = $0.live.removeValue(forKey: id) } }
            do {
                try await WebSocketTransport.network.withTextWebSocket(url: url, configuration: configuration, logger: .quiet) { server in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await text in outbound { try await server.send(text) }
                            await server.close()
                        }
                        for try await text in server.messages {
                            for frame in self.relayed(text) { toClient.yield(frame) }
                        }
                        // The server closed: the client hears it now, not after the close
                        // handshake.
                        self.state.withLock { _ = $0.live.removeValue(forKey: id) }
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

    /// What becomes of a stanza the client sends.
    private func verdict(on text: String) -> Verdict {
        state.withLock { state in
            if text.hasPrefix("<auth ") {
                if state.disabled {
                    state.applied[.fatal, default: 0] += 1
                    return .answer(Self.saslFailure("account-disabled"))
                }
                guard !state.logins.isEmpty else { return .forward }
                let error = state.logins.removeFirst()
                state.applied[.rejectLogin, default: 0] += 1
                return error.code == .authenticationFailed ? .answer(Self.saslFailure("not-authorized")) : .cut
            }
            guard let index = state.failures.firstIndex(where: { Self.isCall(text, named: $0.name) }) else { return .forward }
            let failure = state.failures.remove(at: index)
            state.applied[.failRequest, default: 0] += 1
            return Self.verdict(for: text, failing: failure.error)
        }
    }

    /// What the client gets of a frame the server sends.
    private func relayed(_ text: String) -> [String] {
        state.withLock { state in
            guard state.duplicates > 0, text.hasPrefix("<message"), text.contains("<body>"), !text.contains("urn:xmpp:mam:2") else { return [text] }
            state.duplicates -= 1
            state.applied[.duplicateEvents, default: 0] += 1
            return [text, text]
        }
    }

    /// Whether the stanza is the call `name` makes (any request: a message with a body or an
    /// iq that is not a ping, when `nil`).
    static func isCall(_ text: String, named name: String?) -> Bool {
        let message = text.hasPrefix("<message")
        switch name {
        case "send"?: return message && text.contains("<body>") && !text.contains("<replace") && !text.contains("<retract")
        case "typing"?: return message && text.contains("chatstates")
        case "markRead"?: return message && text.contains("<displayed")
        case "edit"?: return message && text.contains("<replace")
        case "delete"?: return message && text.contains("<retract")
        case "history"?: return text.hasPrefix("<iq") && text.contains("urn:xmpp:mam:2") && text.contains("var='with'")
        case nil:
            let request = text.hasPrefix("<iq") && (text.contains("type='get'") || text.contains("type='set'")) && !text.contains("urn:xmpp:ping")
            return (message && text.contains("<body>")) || request
        default: return false
        }
    }

    /// The stanza answered with the error Prosody sends for `error`'s code, or the link cut for a
    /// lost connection.
    private static func verdict(for text: String, failing error: SwitchboardError) -> Verdict {
        let condition: (type: String, name: String)
        switch error.code {
        case .connectionLost, .timedOut, .notConnected: return .cut
        case .messageRejected: condition = ("modify", "not-acceptable")
        case .permissionDenied: condition = ("auth", "forbidden")
        case .rateLimited: condition = ("wait", "resource-constraint")
        case .serverError: condition = ("wait", "internal-server-error")
        case .conversationNotFound: condition = ("cancel", "item-not-found")
        case .authenticationFailed: condition = ("auth", "not-authorized")
        default: condition = ("modify", "bad-request")
        }
        let element = text.hasPrefix("<iq") ? "iq" : "message"
        let id = text.firstMatch(of: /\bid='([^']*)'/).map { String($0.1) } ?? ""
        return .answer(
            "<\(element) xmlns='jabber:client' type='error' id='\(id)'><error type='\(condition.type)'>"
                + "<\(condition.name) xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></\(element)>"
        )
    }

    private static func saslFailure(_ condition: String) -> String {
        "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><\(condition)/></failure>"
    }
}
