#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Bionic)
import Bionic
#else
#error("Locked needs os_unfair_lock or pthread_mutex_t")
#endif

/// A value behind a lock: the package's replacement for the standard library's `Mutex`, which
/// needs macOS 15 / iOS 18 while the package supports macOS 13 / iOS 16 (`Docs/Platforms.md`).
///
/// The lock is `os_unfair_lock` on Apple platforms and a `pthread_mutex_t` elsewhere, allocated
/// once beside the value. As with `Mutex`, the body must not suspend or call back into code that
/// takes the same lock; the value it mutates is sent in and out, so a non-`Sendable` value stays
/// inside the lock.
package final class Locked<Value>: @unchecked Sendable {
    #if canImport(Darwin)
    private typealias Primitive = os_unfair_lock
    #else
    private typealias Primitive = pthread_mutex_t
    #endif

    private let lock: UnsafeMutablePointer<Primitive>
    private var value: Value

    package init(_ initialValue: sending Value) {
        value = initialValue
        lock = .allocate(capacity: 1)
        #if canImport(Darwin)
        lock.initialize(to: os_unfair_lock())
        #else
        lock.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(lock, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
        #endif
    }

    deinit {
        #if !canImport(Darwin)
        pthread_mutex_destroy(lock)
        #endif
        lock.deinitialize(count: 1)
        lock.deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    package func withLock<Result, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        acquire()
        defer { release() }
        return try body(&value)
    }

    private func acquire() {
        #if canImport(Darwin)
        os_unfair_lock_lock(lock)
        #else
        let result = pthread_mutex_lock(lock)
        precondition(result == 0, "pthread_mutex_lock failed: \(result)")
        #endif
    }

    private func release() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(lock)
        #else
        let result = pthread_mutex_unlock(lock)
        precondition(result == 0, "pthread_mutex_unlock failed: \(result)")
        #endif
    }
}
