import Foundation
import Switchboard
import SwitchboardEmulation
import SwitchboardTestKit
import SwitchboardTransport

/// The faults the server's admin shell cannot make, as XMPP has them, on `SwitchboardEmulation`'s
/// ``WebSocketFaultRelay`` that the customer's socket goes through: a request answered with the
/// stanza error Prosody would send, or the link cut when it goes out (before the server got it, or
/// after: a lost reply); a login refused; frames of the test's own handed to the client; live
/// messages delivered twice; an account disabled. The adapter sees a `WebSocketTransport`
/// (`transport`); the relay's other side is a real socket to Prosody.
///
/// Each fault is counted when it took effect (the relay counts by the fault's kind): when the
/// stanza it waits for went out, when the frame reached a live link.
struct XMPPFaults: Sendable {
    let relay = WebSocketFaultRelay()
    /// Set by `disable()`: a login refusal queued before it does not answer in its place.
    private let disabled = Locked(false)

    /// Where the customer's backend opens its sockets.
    var transport: WebSocketTransport { relay.transport }

    var applied: [EmulatorFault.Kind: Int] {
        Dictionary(relay.statistics.applied.compactMap { label, count in EmulatorFault.Kind(rawValue: label).map { ($0, count) } }, uniquingKeysWith: +)
    }

    /// The next outbound stanza `name` calls (`send`, `typing`, `markRead`, `history`, `edit`,
    /// `delete`; any request when `nil`) fails with `error`: the link is cut for a lost
    /// connection, else the stanza is answered with the error Prosody would send.
    func failNext(_ name: String?, with error: SwitchboardError) {
        let action: WebSocketFaultRelay.Action
        switch Self.condition(for: error) {
        case nil: action = .cut
        case let condition?: action = .answer { Self.errorAnswer(to: $0, condition) }
        }
        relay.inject(action, label: EmulatorFault.Kind.failRequest.rawValue) { Self.isCall($0, named: name) }
    }

    /// The next outbound stanza `name` calls reaches the server, and the link is cut before its
    /// answer comes back: the server did it, the client never heard.
    func loseNextAnswer(to name: String) {
        relay.inject(.loseAnswer, label: "lostAnswer") { Self.isCall($0, named: name) }
    }

    /// How many answers were lost.
    var lostAnswers: Int { relay.statistics.applied["lostAnswer"] ?? 0 }

    /// The next login fails: cut for a lost connection, else refused (`not-authorized`).
    func rejectNextLogin(_ error: SwitchboardError) {
        let action: WebSocketFaultRelay.Action = error.code == .authenticationFailed ? .answer { _ in Self.saslFailure("not-authorized") } : .cut
        let disabled = self.disabled
        relay.inject(action, label: EmulatorFault.Kind.rejectLogin.rawValue) { $0.hasPrefix("<auth ") && !disabled.withLock { $0 } }
    }

    /// The next `count` live messages with a body reach the client twice.
    func duplicateNext(_ count: Int) {
        relay.inject(.repeat, direction: .toClient, count: count, label: EmulatorFault.Kind.duplicateEvents.rawValue) { text in
            text.hasPrefix("<message") && text.contains("<body>") && !text.contains("urn:xmpp:mam:2")
        }
    }

    /// The account is disabled: the live links are cut, and every login from now on is refused
    /// as Prosody refuses a disabled account's (`account-disabled`).
    func disable() {
        disabled.withLock { $0 = true }
        relay.inject(.answer { _ in Self.saslFailure("account-disabled") }, count: .max, label: EmulatorFault.Kind.fatal.rawValue) { $0.hasPrefix("<auth ") }
        relay.disconnectAll()
    }

    /// Hands `frame` to every live link as if the server had sent it; `false` when none is up.
    /// Counted when a link took it (not one cut meanwhile).
    @discardableResult
    func inject(_ frame: String, as kind: EmulatorFault.Kind) -> Bool {
        relay.deliver(frame, label: kind.rawValue)
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

    /// The stanza error Prosody sends for `error`'s code; `nil` for a lost connection (the link
    /// is cut instead).
    private static func condition(for error: SwitchboardError) -> (type: String, name: String)? {
        switch error.code {
        case .connectionLost, .timedOut, .notConnected: return nil
        case .messageRejected: return ("modify", "not-acceptable")
        case .permissionDenied: return ("auth", "forbidden")
        case .rateLimited: return ("wait", "resource-constraint")
        case .serverError: return ("wait", "internal-server-error")
        case .conversationNotFound: return ("cancel", "item-not-found")
        case .authenticationFailed: return ("auth", "not-authorized")
        default: return ("modify", "bad-request")
        }
    }

    /// The error answer to the stanza the rule matched, naming its id.
    private static func errorAnswer(to text: String, _ condition: (type: String, name: String)) -> String {
        let element = text.hasPrefix("<iq") ? "iq" : "message"
        let id = text.firstMatch(of: /\bid='([^']*)'/).map { String($0.1) } ?? ""
        return "<\(element) xmlns='jabber:client' type='error' id='\(id)'><error type='\(condition.type)'>"
            + "<\(condition.name) xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></\(element)>"
    }

    static func saslFailure(_ condition: String) -> String {
        "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><\(condition)/></failure>"
    }
}
