@_spi(TestKit) public import Switchboard

/// A conformance or scenario check that failed; its message says what was expected.
public struct ConformanceFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Thrown by a conformance case that finds, once running, that the backend cannot show what it
/// checks (one conversation per customer, for a case about several): the case is skipped with the
/// reason, and held to the adapter's expected skips like a missing capability.
public struct ConformanceSkip: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Throws ``ConformanceFailure`` with `message` unless `condition` holds.
public func require(
    _ condition: Bool,
    _ message: @autoclosure () -> String,
    file: String = #fileID,
    line: Int = #line
) throws {
    if !condition { throw ConformanceFailure("\(message()) (\(file):\(line))") }
}

/// Waits, without sleeping, until `condition` holds, re-checking whenever `signal` fires. A
/// real-time watchdog of `timeout` turns a hang into a ``ConformanceFailure``.
@_spi(TestKit)
public func waitUntil(
    _ what: String,
    timeout: Duration,
    signal: AsyncSignal,
    _ condition: @Sendable () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        let generation = signal.generation
        if try await condition() { return }
        guard ContinuousClock.now < deadline else {
            throw ConformanceFailure("timed out after \(timeout) waiting for \(what)")
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await signal.wait(since: generation) }
            group.addTask { try? await ContinuousClock().sleep(until: deadline) }
            await group.next()
            group.cancelAll()
        }
        try Task.checkCancellation()
    }
}

/// How an emulator implements ``EmulatorControl/waitForCustomerActivity(in:timeout:until:)``:
/// re-reads its records with `read` whenever its change `signal` fires.
@_spi(TestKit)
public func waitForActivity(
    in conversation: ConversationID,
    timeout: Duration,
    signal: AsyncSignal,
    read: @escaping @Sendable () -> CustomerActivity,
    until condition: @escaping @Sendable (CustomerActivity) -> Bool
) async throws -> CustomerActivity {
    try await waitUntil("customer activity in \(conversation)", timeout: timeout, signal: signal) { condition(read()) }
    return read()
}
