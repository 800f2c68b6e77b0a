/// The one error type of the Switchboard core.
///
/// An error has a ``code`` (an open set: new codes are not a breaking change), a one-line
/// ``message``, an optional underlying error and the place it was made. Equality compares what
/// the error says — code, message, retry delay, vendor code and the underlying error — but not
/// the place it was made. The engine's retry logic reads only the classification properties
/// (``isTransient``, ``isAuthenticationFailure``, ``retryAfter``, ``isFatal``), so an adapter maps its
/// native failures onto codes once and every guarantee follows.
///
/// Messages never contain message bodies, tokens or other personal data.
public struct SwitchboardError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Code
    public var message: String
    public var underlying: (any Error)?
    /// For ``Code/rateLimited``: how long the server asked to wait.
    public var retryAfter: Duration?
    /// A vendor error code (Voximplant's numeric code, a CXone `OperationError` code, a Webim
    /// error string), kept for the app and for typed vendor extensions.
    public var vendorCode: String?
    public var file: String
    public var line: Int

    public init(
        _ code: Code,
        _ message: String,
        underlying: (any Error)? = nil,
        retryAfter: Duration? = nil,
        vendorCode: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.retryAfter = retryAfter
        self.vendorCode = vendorCode
        self.file = file
        self.line = line
    }

    public static func == (lhs: SwitchboardError, rhs: SwitchboardError) -> Bool {
        guard lhs.code == rhs.code, lhs.message == rhs.message, lhs.retryAfter == rhs.retryAfter,
            lhs.vendorCode == rhs.vendorCode
        else { return false }
        switch (lhs.underlying, rhs.underlying) {
        case (nil, nil):
            return true
        case (let left?, let right?):
            if let left = left as? SwitchboardError, let right = right as? SwitchboardError { return left == right }
            return String(reflecting: left) == String(reflecting: right)
        default:
            return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(vendorCode)
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let vendorCode { text += " [vendor code \(vendorCode)]" }
        return text
    }

    /// The error with its chain of causes and where each was made.
    public func detailedDescription() -> String {
        var lines = ["\(description) (at \(file):\(line))"]
        var cause = underlying
        var depth = 1
        while let current = cause {
            let indent = String(repeating: "  ", count: depth)
            if let inner = current as? SwitchboardError {
                lines.append("\(indent)caused by \(inner.description) (at \(inner.file):\(inner.line))")
                cause = inner.underlying
            } else {
                lines.append("\(indent)caused by \(String(describing: current))")
                cause = nil
            }
            depth += 1
        }
        return lines.joined(separator: "\n")
    }
}

extension SwitchboardError {
    /// A kind of failure. Wraps a private enum so that adding codes is not a breaking change.
    public struct Code: Hashable, Sendable, CustomStringConvertible, Codable {
        private enum Base: String, Codable {
            case notConnected, connectionLost, timedOut, authenticationFailed, rateLimited
            case conversationNotFound, messageNotFound, messageRejected, permissionDenied
            case invalidArgument, sequenceGap, protocolViolation, unsupported, storageFailure
            case sessionClosed, fatal, payloadTooLarge, serverError, cancelled, invalidState
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// No connection to the backend right now. Transient.
        public static var notConnected: Code { Code(.notConnected) }
        /// The link dropped (socket closed, long-poll failed). Transient.
        public static var connectionLost: Code { Code(.connectionLost) }
        /// A request or a reply took too long. Transient.
        public static var timedOut: Code { Code(.timedOut) }
        /// Credentials were refused. The engine retries once with fresh credentials, then ends
        /// the session.
        public static var authenticationFailed: Code { Code(.authenticationFailed) }
        /// The server asks the client to slow down; see ``SwitchboardError/retryAfter``.
        public static var rateLimited: Code { Code(.rateLimited) }
        public static var conversationNotFound: Code { Code(.conversationNotFound) }
        public static var messageNotFound: Code { Code(.messageNotFound) }
        /// The server refused a message for good (content, size, closed chat).
        public static var messageRejected: Code { Code(.messageRejected) }
        public static var permissionDenied: Code { Code(.permissionDenied) }
        public static var invalidArgument: Code { Code(.invalidArgument) }
        public static var sequenceGap: Code { Code(.sequenceGap) }
        /// The peer sent something that does not follow the protocol (malformed frame, unknown
        /// reply). Never fatal on its own.
        public static var protocolViolation: Code { Code(.protocolViolation) }
        /// The backend lacks the capability a call needs.
        public static var unsupported: Code { Code(.unsupported) }
        public static var storageFailure: Code { Code(.storageFailure) }
        /// The session was closed; no call succeeds after that.
        public static var sessionClosed: Code { Code(.sessionClosed) }
        /// The backend ended the session for good (account blocked, visitor banned).
        public static var fatal: Code { Code(.fatal) }
        public static var payloadTooLarge: Code { Code(.payloadTooLarge) }
        /// The server failed (5xx, internal error). Transient.
        public static var serverError: Code { Code(.serverError) }
        public static var cancelled: Code { Code(.cancelled) }
        /// The call does not fit the object's state (a session's ``ChatSession/run()`` called a
        /// second time). A programming error, never retried.
        public static var invalidState: Code { Code(.invalidState) }

        public var description: String { base.rawValue }
    }

    /// Worth retrying after a delay: the link, a timeout, a server failure, a rate limit.
    public var isTransient: Bool {
        [.notConnected, .connectionLost, .timedOut, .rateLimited, .serverError, .cancelled].contains(code)
    }

    public var isAuthenticationFailure: Bool { code == .authenticationFailed }
    public var isRateLimited: Bool { code == .rateLimited }
    public var isConnectionLost: Bool { code == .connectionLost || code == .notConnected }
    /// Ends the session: nothing the client can do will make the backend accept it again.
    public var isFatal: Bool { code == .fatal || code == .sessionClosed }

    /// Maps any error onto a ``SwitchboardError``; unknown errors count as a lost connection,
    /// so the engine's backoff handles them.
    public static func classify(_ error: any Error) -> SwitchboardError {
        if let error = error as? SwitchboardError { return error }
        if error is CancellationError { return SwitchboardError(.cancelled, "cancelled", underlying: error) }
        return SwitchboardError(.connectionLost, "backend failed: \(type(of: error))", underlying: error)
    }

    /// The error a call raises when the backend lacks `capability`.
    public static func unsupported(_ capability: BackendCapabilities, backend: BackendName) -> SwitchboardError {
        SwitchboardError(.unsupported, "\(backend) does not support \(capability)")
    }
}

extension SwitchboardError: Codable {
    private enum CodingKeys: String, CodingKey { case code, message, vendorCode, retryAfterSeconds }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try container.decode(Code.self, forKey: .code),
            try container.decode(String.self, forKey: .message),
            retryAfter: try container.decodeIfPresent(Double.self, forKey: .retryAfterSeconds)
                .map { Duration.milliseconds(Int64($0 * 1000)) },
            vendorCode: try container.decodeIfPresent(String.self, forKey: .vendorCode)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encodeIfPresent(vendorCode, forKey: .vendorCode)
        try container.encodeIfPresent(retryAfter?.seconds, forKey: .retryAfterSeconds)
    }
}

extension Duration {
    /// The duration in seconds as a floating-point number.
    @_spi(TestKit) public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
