import Crypto
import CryptoExtras
import Foundation
import Switchboard

/// A SASL SCRAM login (RFC 5802; SHA-256 from RFC 7677), without channel binding: the password
/// never crosses the wire, and the server proves it holds the account's keys before the link goes
/// on.
///
/// Pure: the client nonce is given, so the exchange replays from a test vector.
///
/// ```swift
/// var scram = XMPPSCRAM(mechanism: .sha1, user: "alice", password: "…", clientNonce: nonce)
/// // <auth mechanism='SCRAM-SHA-1'> base64(scram.clientFirst)
/// let final = try scram.clientFinal(serverFirst: challenge)   // <response>
/// try scram.verify(serverFinal: success)                      // the server's signature
/// ```
@_spi(WireReaders) public struct XMPPSCRAM: Sendable {
    /// The mechanisms, strongest first.
    public enum Mechanism: String, Sendable, CaseIterable {
        case sha256 = "SCRAM-SHA-256"
        case sha1 = "SCRAM-SHA-1"
    }

    /// More iterations than this are refused: a server (or someone in its place) could make the
    /// client hash for minutes. Servers use 4,096 to 10,000.
    public static let maxIterations = 100_000

    public let mechanism: Mechanism
    private let password: String
    /// `n=<user>,r=<client nonce>`.
    private let clientFirstBare: String
    private let clientNonce: String
    private var serverSignature: Data?

    public init(mechanism: Mechanism, user: String, password: String, clientNonce: String) {
        self.mechanism = mechanism
        self.password = Self.prepared(password)
        self.clientNonce = clientNonce
        // RFC 5802 §5.1: `=` and `,` in a name are escaped.
        let name = user.replacingOccurrences(of: "=", with: "=3D").replacingOccurrences(of: ",", with: "=2C")
        self.clientFirstBare = "n=\(name),r=\(clientNonce)"
    }

    /// A client nonce: 24 random bytes, base64 (printable, no comma).
    public static func nonce<Generator: RandomNumberGenerator>(using generator: inout Generator) -> String {
        Data((0..<24).map { _ in UInt8.random(in: .min ... .max, using: &generator) }).base64EncodedString()
    }

    /// The `<auth>` payload: no channel binding (`n,,`), then the bare message.
    public var clientFirst: String { "n,,\(clientFirstBare)" }

    /// The `<response>` to the server's first message (`r=…,s=…,i=…`): the proof that the client
    /// knows the password.
    ///
    /// - Throws: `authenticationFailed` for a nonce that does not extend the client's, a salt or an
    ///   iteration count missing or out of range.
    public mutating func clientFinal(serverFirst: String) throws -> String {
        let fields = Self.fields(serverFirst)
        guard fields["m"] == nil else { throw Self.refusal("the server asks for a SCRAM extension") }
        guard let nonce = fields["r"], nonce.hasPrefix(clientNonce), nonce.count > clientNonce.count else {
            throw Self.refusal("the server's nonce does not extend the client's")
        }
        guard let saltText = fields["s"], let salt = Data(base64Encoded: saltText), !salt.isEmpty else {
            throw Self.refusal("the server sent no salt")
        }
        guard let iterations = fields["i"].flatMap({ Int($0) }), (1...Self.maxIterations).contains(iterations) else {
            throw Self.refusal("the server's iteration count is missing or above \(Self.maxIterations)")
        }
        let withoutProof = "c=biws,r=\(nonce)"
        let authMessage = Data("\(clientFirstBare),\(serverFirst),\(withoutProof)".utf8)
        let proof: Data
        switch mechanism {
        case .sha1:
            (proof, serverSignature) = try Self.keys(Insecure.SHA1.self, .insecureSHA1, password: password, salt: salt, iterations: iterations, authMessage: authMessage)
        case .sha256:
            (proof, serverSignature) = try Self.keys(SHA256.self, .sha256, password: password, salt: salt, iterations: iterations, authMessage: authMessage)
        }
        return "\(withoutProof),p=\(proof.base64EncodedString())"
    }

    /// Checks the server's last message (`v=<signature>`, or `e=<error>`).
    ///
    /// - Throws: `authenticationFailed` for an error or a signature other than the one the
    ///   account's keys give: a server that does not hold them is not the account's.
    public func verify(serverFinal: String) throws {
        let fields = Self.fields(serverFinal)
        if let error = fields["e"] { throw Self.refusal("the server refused the proof: \(error)") }
        guard let expected = serverSignature else { throw Self.refusal("the server ended the exchange before its first message") }
        guard let signature = fields["v"].flatMap({ Data(base64Encoded: $0) }) else {
            throw Self.refusal("the server sent no signature: it did not prove it holds the account's keys")
        }
        // Compared in full whatever differs first.
        guard signature.count == expected.count, zip(signature, expected).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw Self.refusal("the server did not prove it holds the account's keys (a wrong SCRAM signature)")
        }
    }

    /// The password as SASLprep (RFC 4013) gives it for the usual cases: characters commonly
    /// mapped to nothing dropped, non-ASCII spaces made spaces, then NFKC. (Prohibited and
    /// bidirectional characters are not refused here: the server refuses such a password.)
    public static func prepared(_ password: String) -> String {
        let mappedToNothing: Set<UInt32> = [0x00AD, 0x034F, 0x1806, 0x180B, 0x180C, 0x180D, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF]
        let spaces: Set<UInt32> = [0x00A0, 0x1680, 0x202F, 0x205F, 0x3000]
        var mapped = String.UnicodeScalarView()
        for scalar in password.unicodeScalars {
            let value = scalar.value
            if mappedToNothing.contains(value) || (0xFE00...0xFE0F).contains(value) { continue }
            if spaces.contains(value) || (0x2000...0x200A).contains(value) {
                mapped.append(" ")
            } else {
                mapped.append(scalar)
            }
        }
        return String(mapped).precomposedStringWithCompatibilityMapping
    }

    /// The client proof and the server signature the exchange must end with.
    ///
    /// `Hi` (RFC 5802 §2.2) is PBKDF2 with HMAC over `H`, one block; the iteration count is the
    /// server's, bounded by ``maxIterations`` (PBKDF2's own floor is for storing passwords, not
    /// for answering a server).
    private static func keys<H: HashFunction>(
        _: H.Type, _ kdf: KDF.Insecure.PBKDF2.HashFunction, password: String, salt: Data, iterations: Int, authMessage: Data
    ) throws -> (proof: Data, serverSignature: Data) {
        let salted: SymmetricKey
        do {
            salted = try KDF.Insecure.PBKDF2.deriveKey(
                from: Data(password.utf8), salt: salt, using: kdf, outputByteCount: H.Digest.byteCount, unsafeUncheckedRounds: iterations
            )
        } catch {
            throw refusal("the salted password could not be derived (\(error))")
        }
        let clientKey = Data(HMAC<H>.authenticationCode(for: Data("Client Key".utf8), using: salted))
        let storedKey = SymmetricKey(data: Data(H.hash(data: clientKey)))
        let clientSignature = Data(HMAC<H>.authenticationCode(for: authMessage, using: storedKey))
        let serverKey = SymmetricKey(data: Data(HMAC<H>.authenticationCode(for: Data("Server Key".utf8), using: salted)))
        let serverSignature = Data(HMAC<H>.authenticationCode(for: authMessage, using: serverKey))
        return (Data(zip(clientKey, clientSignature).map { $0 ^ $1 }), serverSignature)
    }

    /// `k=v` fields, comma-separated; a value keeps any `=` after the first.
    private static func fields(_ message: String) -> [String: String] {
        var fields: [String: String] = [:]
        for part in message.split(separator: ",") {
            guard let equals = part.firstIndex(of: "="), part.distance(from: part.startIndex, to: equals) == 1 else { continue }
            fields[String(part[..<equals])] = String(part[part.index(after: equals)...])
        }
        return fields
    }

    private static func refusal(_ message: String) -> SwitchboardError {
        SwitchboardError(.authenticationFailed, "SCRAM login: \(message)", vendorCode: "scram")
    }
}

/// The password stays out of dumps and debugger descriptions.
extension XMPPSCRAM: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: ["mechanism": mechanism], displayStyle: .struct)
    }
}
