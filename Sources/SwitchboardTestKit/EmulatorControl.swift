public import Switchboard

/// A fault an emulator can inject, as the conformance suite asks for it.
public enum EmulatorFault: Sendable, Hashable {
    /// Drop every connection now.
    case disconnect
    /// Drop the next N sequenced events for the customer's clients (makes a gap).
    case dropNext(Int)
    case duplicateNext(Int)
    /// Deliver the next N events out of order.
    case reorderNext(Int)
    /// Hold the next N events until ``releaseDelayed``.
    case delayNext(Int)
    case releaseDelayed
    /// Fail the next request (of that name, or any) with the error.
    case failNextRequest(SwitchboardError, named: String?)
    case rejectNextLogin(SwitchboardError)
    /// Send the customer a frame that does not decode.
    case malformedFrame
    /// Send the customer exactly this text: a WebSocket text message, or the body of the next
    /// long-poll answer. For tables of bad input.
    case rawFrame(String)
    /// End the customer's session with a fatal vendor error.
    case fatal(SwitchboardError)

    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case disconnect, dropEvents, duplicateEvents, reorderEvents, delayEvents, failRequest, rejectLogin
        case malformedFrame, rawFrame, fatal
    }

    public var kind: Kind {
        switch self {
        case .disconnect: return .disconnect
        case .dropNext: return .dropEvents
        case .duplicateNext: return .duplicateEvents
        case .reorderNext: return .reorderEvents
        case .delayNext, .releaseDelayed: return .delayEvents
        case .failNextRequest: return .failRequest
        case .rejectNextLogin: return .rejectLogin
        case .malformedFrame: return .malformedFrame
        case .rawFrame: return .rawFrame
        case .fatal: return .fatal
        }
    }
}

/// How often each kind of fault took effect: counted when the customer's client met it, not when
/// it was injected.
///
/// A fault is armed by ``EmulatorControl/inject(_:)`` and can come to nothing: events dropped
/// for a client that is not connected, a disconnect while no link is up, a failure for a request
/// that is never made. A count moves only when live traffic meets the fault, in these units:
///
/// | kind | counted |
/// |---|---|
/// | ``EmulatorFault/Kind/disconnect`` | links cut: a socket closed, or a long-poll or sync request cut (the one in flight, or the next when none is) |
/// | ``EmulatorFault/Kind/dropEvents`` | events due to the client and never sent |
/// | ``EmulatorFault/Kind/duplicateEvents`` | events (or answers) the client got a second time |
/// | ``EmulatorFault/Kind/reorderEvents`` | events the client got after a later one |
/// | ``EmulatorFault/Kind/delayEvents`` | events held back from the client |
/// | ``EmulatorFault/Kind/failRequest`` | requests that met an injected failure |
/// | ``EmulatorFault/Kind/rejectLogin`` | logins refused |
/// | ``EmulatorFault/Kind/malformedFrame``, ``EmulatorFault/Kind/rawFrame`` | frames (or answers) the client got |
/// | ``EmulatorFault/Kind/fatal`` | fatal frames or answers the client got |
///
/// Read it before and after a fault and compare (``since(_:)``): the conformance cases that inject
/// a fault require that it took effect, and print the count.
public struct AppliedFaults: Sendable, Hashable, CustomStringConvertible {
    /// The counts by kind; a kind that never took effect is absent.
    public private(set) var counts: [EmulatorFault.Kind: Int]

    public init(_ counts: [EmulatorFault.Kind: Int] = [:]) {
        self.counts = counts.filter { $0.value != 0 }
    }

    /// How often faults of `kind` took effect; 0 when never.
    public subscript(kind: EmulatorFault.Kind) -> Int {
        get { counts[kind] ?? 0 }
        set { counts[kind] = newValue == 0 ? nil : newValue }
    }

    /// Every fault that took effect, of any kind.
    public var total: Int { counts.values.reduce(0, +) }

    /// What took effect after `earlier` (an earlier reading of the same emulator).
    public func since(_ earlier: AppliedFaults) -> AppliedFaults {
        var result = self
        for (kind, count) in earlier.counts { result[kind] -= count }
        return result
    }

    /// "disconnect 2, dropEvents 5", in the order the kinds are declared; "none" when nothing took
    /// effect.
    public var description: String {
        let listed = EmulatorFault.Kind.allCases.compactMap { kind in counts[kind].map { "\(kind.rawValue) \($0)" } }
        return listed.isEmpty ? "none" : listed.joined(separator: ", ")
    }
}

/// A message as the server recorded it: the truth a test compares the client's store with.
public struct ServerMessage: Sendable, Hashable {
    public var serverID: MessageID
    public var clientID: ClientMessageID?
    public var text: String
    public var fromCustomer: Bool
    public var sequence: Int64?

    public init(serverID: MessageID, clientID: ClientMessageID?, text: String, fromCustomer: Bool, sequence: Int64?) {
        self.serverID = serverID
        self.clientID = clientID
        self.text = text
        self.fromCustomer = fromCustomer
        self.sequence = sequence
    }
}

/// What the server saw the customer do besides sending.
public struct CustomerActivity: Sendable, Hashable {
    /// Typing notifications, in order.
    public var typing: [Bool]
    /// Read markers received.
    public var readMarkers: Int

    public init(typing: [Bool], readMarkers: Int) {
        self.typing = typing
        self.readMarkers = readMarkers
    }
}

/// What every emulator offers the conformance suite: an agent robot, fault injection and a log
/// of what the server accepted. Each emulator implements it over its own server model.
public protocol EmulatorControl: Sendable {
    /// The faults this emulator can inject; cases needing others are skipped.
    var supportedFaults: Set<EmulatorFault.Kind> { get }

    /// A new backend acting as the test's customer (each call is another client of the same
    /// customer).
    func makeCustomerBackend() async throws -> any ChatBackend

    /// Gets a conversation between the customer and an agent ready for messages both ways.
    /// The session may be used (to start a chat); the harness then waits until the session
    /// knows the conversation.
    func prepareConversation(using session: ChatSession) async throws -> ConversationID

    /// Adds `count` agent messages to the conversation's server history.
    func seedHistory(_ count: Int, in conversation: ConversationID) async throws

    func agentSend(_ text: String, in conversation: ConversationID) async throws
    func agentTyping(_ isTyping: Bool, in conversation: ConversationID) async throws
    func agentMarkRead(in conversation: ConversationID) async throws
    /// The agent ends the chat: closes it where the backend has chats that end (Webim, CXone, the
    /// in-memory server), leaves it where a conversation outlives its members (Voximplant-style,
    /// Matrix).
    func agentEnd(_ conversation: ConversationID) async throws

    /// Arms `fault` (or applies it at once, as a disconnect does). Whether it took effect shows in
    /// ``appliedFaults``.
    func inject(_ fault: EmulatorFault) async throws

    /// The faults that took effect so far, counted when the customer's client met them (see
    /// ``AppliedFaults`` for the unit of each kind). It never goes down. Count every kind in
    /// ``supportedFaults``: a conformance case that injects a fault fails when its count does
    /// not move.
    ///
    /// - Throws: when the emulator cannot be asked.
    var appliedFaults: AppliedFaults { get async throws }

    /// The conversation's messages as the server has them, in server order.
    func serverMessages(in conversation: ConversationID) async throws -> [ServerMessage]

    /// Waits until the server's view of the customer's activity satisfies `condition`.
    func waitForCustomerActivity(
        in conversation: ConversationID,
        timeout: Duration,
        until condition: @escaping @Sendable (CustomerActivity) -> Bool
    ) async throws -> CustomerActivity

    /// What the customer's backend is configured with that must never reach a log: tokens,
    /// visitor fields. (Credentials the session stores are checked besides these.)
    var customerSecrets: [String] { get }

    /// Frames in this vendor's own shapes, broken (wrong types, missing keys, unknown event types,
    /// numbers out of range, other conversations' ids, over the receive limit), each sent to the
    /// customer as ``EmulatorFault/rawFrame(_:)`` by the conformance case "the vendor's own
    /// shapes, broken". None may add a message to `conversation`.
    func vendorBadInput(in conversation: ConversationID) async throws -> [VendorBadInput]

    /// The clock of an emulator reached in the same process (no socket) whose time moves only
    /// when the test moves it; `nil` for one on a socket, on real time. Sessions a
    /// ``ConformanceHarness`` opens on such an emulator run on the same clock with
    /// `SessionConfiguration.virtualTime`.
    var virtualClock: TestClock? { get }
}

/// One frame of ``EmulatorControl/vendorBadInput(in:)``.
public struct VendorBadInput: Sendable {
    public enum Expectation: Sendable, Hashable {
        /// Reported as an `.error` event before the next message.
        case reported
        /// Either reported, or passed to the app whole as a vendor event (`.custom`), as an event
        /// type the adapter does not map is: visible and typed, never dropped in silence.
        case surfaced
        /// Need not be reported (an event of a conversation the customer is not in may be taken
        /// for a new one); it must only leave the conversation under test alone.
        case tolerated
        /// Over the receive limit: the link is refused with `payloadTooLarge` and comes back.
        case dropsTheLink
    }

    public var name: String
    public var text: String
    public var expectation: Expectation

    public init(_ name: String, _ text: String, _ expectation: Expectation) {
        self.name = name
        self.text = text
        self.expectation = expectation
    }

    public init(_ name: String, _ frame: JSONValue, _ expectation: Expectation) {
        self.init(name, frame.jsonString, expectation)
    }

    /// A frame of `size` bytes: `prefix`, padding, `suffix`.
    public static func oversized(_ name: String, prefix: String, suffix: String, size: Int) -> VendorBadInput {
        VendorBadInput(name, prefix + String(repeating: "a", count: max(0, size - prefix.utf8.count - suffix.utf8.count)) + suffix, .dropsTheLink)
    }
}

extension EmulatorControl {
    public var customerSecrets: [String] { [] }
    public var virtualClock: TestClock? { nil }
}

extension JSONValue {
    /// A copy with the value at `path` (object keys) replaced, or removed for `nil`; for breaking a
    /// good frame in one place.
    public func setting(_ path: String..., to value: JSONValue?) -> JSONValue {
        setting(path[...], to: value)
    }

    private func setting(_ path: ArraySlice<String>, to value: JSONValue?) -> JSONValue {
        guard let key = path.first, case .object(var object) = self else { return value ?? .null }
        if path.count == 1 {
            object[key] = value
        } else {
            object[key] = (object[key] ?? .object([:])).setting(path.dropFirst(), to: value)
        }
        return .object(object)
    }
}
