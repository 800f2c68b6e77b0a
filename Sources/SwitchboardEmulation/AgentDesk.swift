public import Foundation

/// A line for whoever drives the emulator: what a command did, or why it could not.
public struct DeskError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    public static func notOffered(_ what: String, by vendor: String, _ why: String) -> DeskError {
        DeskError("\(what) is not offered by the \(vendor) emulator: \(why)")
    }
}

/// The agent's desk at one emulator: what `switchboard emulate` commands do there. Each acts in
/// the conversation the customer wrote in last; what the vendor's protocol lacks throws
/// ``DeskError/notOffered(_:by:_:)``.
public protocol AgentDesk: Sendable {
    var vendor: String { get }
    /// The conversation the agent acts in, described.
    func current() throws -> String
    func say(_ text: String) throws -> String
    /// Starts typing, or stops when the agent is typing.
    func typing() throws -> String
    func read() throws -> String
    func close() throws -> String
    func transfer() throws -> String
    /// Takes the agents offline, or back online.
    func offline() throws -> String

    // Faults, in every mode.
    func disconnect() -> String
    func drop(_ count: Int) throws -> String
    /// Delays what the app receives by `milliseconds`; a release to run afterwards, if any.
    func delay(milliseconds: Int) throws -> (line: String, release: (@Sendable () -> String)?)
    func reinit() throws -> String
}
