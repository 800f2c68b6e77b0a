#if canImport(Glibc)
public import Glibc

/// Starts a child process with `posix_spawn`, for tests that run executables (the CLI, a server).
///
/// Not Foundation's `Process`: on Linux its `run()` reads `/proc/self/fd` past the end of glibc's
/// buffer and, now and then, crashes the whole test process with signal 11 in `memcpy`
/// (swift-corelibs-foundation #5472, not fixed in Swift 6.3.1). The child starts with no signal
/// blocked and `defaultSignals` at their default disposition, whatever the test process does
/// (tests ignore SIGPIPE, for one). Descriptors the test process opened without close-on-exec are
/// inherited: make the ones the child must not hold close-on-exec.
///
/// - Parameters:
///   - path: the executable.
///   - arguments: its arguments, after the path.
///   - flags: more `posix_spawnattr` flags (`0x80`, glibc's `POSIX_SPAWN_SETSID`, for a session
///     of its own).
///   - defaultSignals: the signals the child starts with at their default disposition.
///   - environment: variables set in the child over this process's environment.
///   - fileActions: what the child's descriptors are.
/// - Returns: the child's process id.
@_spi(TestKit) public func spawnProcess(
    _ path: String,
    arguments: [String],
    flags: Int32 = 0,
    defaultSignals: [Int32] = [],
    environment: [String: String] = [:],
    fileActions: (inout posix_spawn_file_actions_t) -> Void
) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    fileActions(&actions)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in defaultSignals { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(flags | Int32(POSIX_SPAWN_SETSIGMASK) | Int32(POSIX_SPAWN_SETSIGDEF)))
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    // This process's environment, with `environment`'s variables set over it.
    var variables: [String] = []
    var index = 0
    while let entry = environ[index] {
        let text = String(cString: entry)
        if !environment.keys.contains(where: { text.hasPrefix($0 + "=") }) { variables.append(text) }
        index += 1
    }
    variables += environment.map { "\($0.key)=\($0.value)" }
    let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
    defer { for pointer in envp { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
    guard result == 0 else { throw ConformanceFailure("could not start \(path): error \(result)") }
    return pid
}
#endif
