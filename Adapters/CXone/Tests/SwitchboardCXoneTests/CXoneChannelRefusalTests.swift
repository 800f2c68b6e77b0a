import Switchboard
import SwitchboardCXone
import SwitchboardTestKit
import SwitchboardTransport
import SwitchboardEmulation
import Testing
import CXoneEmulator

/// The emulator serves only the brand and channel it was started with, as the real service
/// serves only a brand's configured channels: a typo in either fails locally, with a typed
/// error naming what was asked for, instead of working here and failing in production.
@Suite(.timeLimit(.minutes(1)))
struct CXoneChannelRefusalTests {
    @Test(arguments: [(1387, "chat_emulator"), (1386, "chat_emulatr")])
    func aWrongBrandOrChannelIsRefusedWhenTheConfigurationIsRead(_ brand: Int, _ channel: String) async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let environment = control.environment
            let error = try await #require(throws: SwitchboardError.self) {
                try await CXoneBackend.make(configuration: CXoneConfiguration(environment: environment, brandID: brand, channelID: channel), transport: control.transport)
            }
            print("cxone brand \(brand), channel \(channel): \(error.code), \(error.message) (vendor code \(error.vendorCode ?? "none"))")
            #expect(error.code == .invalidArgument)
            #expect(error.message.hasPrefix("brand \(brand) has no channel \(channel) (HTTP 404)"))
            #expect(!error.isTransient)
            // The served one still is.
            _ = try await CXoneBackend.make(configuration: CXoneConfiguration(environment: environment, brandID: 1386, channelID: "chat_emulator"), transport: control.transport)
        }
    }

    /// An app built with a configuration in hand and a wrong channel: every connect reads the
    /// channel configuration again, so every attempt fails with the same typed error, which the
    /// session publishes with each link loss.
    /// Retrying cannot make the channel exist: the session ends with the typed error.
    @Test func aWrongChannelEndsTheSessionWithTheTypedError() async throws {
        try await withCXoneEmulator(.init(mode: .multi)) { control in
            let backend = CXoneBackend(
                configuration: CXoneConfiguration(
                    environment: control.environment,
                    brandID: 1386, channelID: "chat_typo", customerID: "customer-1"
                ),
                channel: try CXoneChannelConfiguration(json: control.server.channelConfiguration),
                transport: control.transport,
                webSockets: control.webSockets
            )
            let context = ConformanceContext(emulator: control)
            let session = ChatSession(backend: backend, configuration: context.configuration, clock: context.makeClock(), logger: .quiet)
            let refusal = try await withRecording(session) { recorder in
                try await session.resume()
                let event = try await recorder.first("the connect refused") { event in
                    if case .connection(.disconnected, .fatal(let error)?) = event.kind, error.code == .invalidArgument { return true }
                    return false
                }
                await session.close()
                guard case .connection(_, let reason?) = event.kind else { return nil as SwitchboardError? }
                return Self.error(of: reason)
            }
            let error = try #require(refusal)
            print("cxone connect with channel chat_typo: \(error.code), \(error.message)")
            #expect(error.message.hasPrefix("brand 1386 has no channel chat_typo (HTTP 404)"))
            #expect(control.server.socketsAccepted == 0, "no socket for a channel that is not served")
        }
    }

    static func error(of reason: DisconnectReason) -> SwitchboardError? {
        switch reason {
        case .userInitiated: return nil
        case .connectionLost(let error), .serverInitiated(let error), .fatal(let error): return error
        }
    }
}
