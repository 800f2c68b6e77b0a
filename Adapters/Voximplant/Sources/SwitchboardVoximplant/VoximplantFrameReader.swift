public import Switchboard

/// Reads one frame from the server (Docs/Protocols/voximplant-style.md §2–§3): the envelope
/// decoded once, an event mapped to the engine's event.
///
/// The link reads every frame through it; benchmarks and fuzz targets drive the same code without
/// a connection. It never throws: a frame it cannot read is ``Frame/malformed(_:)``.
@_spi(WireReaders) public struct VoximplantFrameReader: Sendable {
    /// What one frame is.
    public enum Frame: Sendable {
        /// A pushed event.
        case event(BackendEvent)
        /// The response to request `id`; `event` is the event the request logged, when its result
        /// is one (it goes into the stream in wire order, like any other event).
        case reply(id: String, result: JSONValue, event: BackendEvent?)
        /// A protocol error (§7), for request `id` when it names one.
        case error(id: String?, code: Int, description: String)
        case pong
        /// The server's `ping`: the client answers with a `pong` of the same `id` (§2).
        case ping(id: String?)
        /// A frame of a type this client does not know: ignored, as §2 says (a newer server).
        case ignored(type: String)
        /// Not a frame of the protocol: undecodable, or an event or response it cannot read.
        case malformed(SwitchboardError)
    }

    /// The logged-in user: an event removing them from a conversation removes the conversation.
    public let user: String

    public init(user: String) {
        self.user = user
    }

    public func read(_ text: String) -> Frame {
        let frame: VoximplantWire.Incoming
        do {
            frame = try VoximplantWire.decode(VoximplantWire.Incoming.self, from: text)
        } catch {
            return .malformed(error as? SwitchboardError ?? SwitchboardError(.protocolViolation, "bad frame"))
        }
        switch frame.type {
        case "response":
            guard let id = frame.id else { return .malformed(SwitchboardError(.protocolViolation, "a response without an id")) }
            let result = frame.result ?? [:]
            var event: BackendEvent?
            if result["eventType"] != nil, result["seq"] != nil, let logged = try? VoximplantWire.decode(VoximplantWire.Event.self, from: result) {
                event = VoximplantMapping.event(logged, me: user)
            }
            return .reply(id: id, result: result, event: event)
        case "error":
            let code = frame.code ?? 0
            return .error(id: frame.id, code: code, description: frame.description ?? "error \(code)")
        case "event":
            guard let event = frame.event else { return .malformed(SwitchboardError(.protocolViolation, "bad event")) }
            return .event(VoximplantMapping.event(event, me: user))
        case "pong":
            return .pong
        case "ping":
            return .ping(id: frame.id)
        default:
            return .ignored(type: frame.type)
        }
    }
}
