import Switchboard
import Foundation

/// Plain `http://` and `ws://` carry tokens and messages anyone on the way can read. The
/// transports refuse them unless the host is loopback (an emulator, a local proxy) or the
/// adapter's configuration allows plain text explicitly.
public enum PlainTextPolicy {
    /// - Throws: ``SwitchboardError/Code/fatal`` (retrying cannot help) when `url` is plain text to
    ///   a host that is not loopback and `allowed` is false; ``SwitchboardError/Code/invalidArgument``
    ///   when it is not a URL with a host.
    public static func check(_ url: String, allowed: Bool) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else {
            throw SwitchboardError(.invalidArgument, "not a URL with a host: \(url.prefix(200))")
        }
        guard !allowed, !isEncryptedOrLoopback(scheme: scheme, host: host) else { return }
        throw SwitchboardError(
            .fatal,
            "plain \(scheme):// to \(host) is refused (tokens and messages would travel unencrypted): use \(scheme == "ws" ? "wss" : "https")://, or allow plain text in the adapter's configuration"
        )
    }

    /// Whether `url` is encrypted (not `http://` or `ws://`) or goes to a loopback host: what may
    /// carry a secret whatever the configuration allows (an XMPP PLAIN login, for one). `false`
    /// for what is not a URL with a host.
    public static func isEncryptedOrLoopback(_ url: String) -> Bool {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else { return false }
        return isEncryptedOrLoopback(scheme: scheme, host: host)
    }

    private static func isEncryptedOrLoopback(scheme: String, host: String) -> Bool {
        !(scheme == "http" || scheme == "ws") || isLoopback(host)
    }

    /// `localhost`, `127.0.0.0/8` and `::1`.
    static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
