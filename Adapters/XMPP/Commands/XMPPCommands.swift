package import ArgumentParser
package import Foundation
package import Logging
package import Switchboard
package import SwitchboardCommandKit

package import SwitchboardXMPP

/// The XMPP adapter's entry in the command-line tool's registry: no emulator (its tests run a
/// real Prosody).
package enum XMPPCommands {
    package static let entry = AdapterEntry(
        name: "xmpp", connect: ConnectXMPP.self, emulate: nil,
        gatewayExample: #"{"backend": "xmpp", "url": "wss://example.org:5281/xmpp-websocket", "user": "alice@example.org", "password": …, "conversation": "bob@example.org"}"#
    ) { json throws(SwitchboardError) in
        let session = try GatewaySessionSetup.decode(json, as: GatewaySession.self, backend: "xmpp")
        let configuration = XMPPConfiguration(jid: session.user, password: session.password, url: session.url, resource: session.resource)
        try configuration.validate()
        return GatewaySessionSetup(
            account: GatewaySessionSetup.account(of: json),
            makeBackend: { logger in try XMPPBackend(configuration: configuration, logger: logger) },
            trafficConversation: GatewaySessionSetup.known(session.conversation.map(ConversationID.init))
        )
    }

    /// `{"backend": "xmpp", "url": "wss://…/xmpp-websocket", "user": "alice@example.org",
    /// "password": …}`, `"resource"`, `"conversation": "bob@example.org"`: the JID is the
    /// `"user"`, as every backend's account is.
    struct GatewaySession: Decodable {
        var url: String
        var user: String
        var password: String
        var resource: String?
        var conversation: String?
    }
}

package struct ConnectXMPP: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "xmpp",
        abstract: "Connect to an XMPP server over WebSocket (Prosody's mod_websocket, or any other) as a user: contacts are conversations."
    )

    @Option(help: "The server's XMPP-over-WebSocket endpoint, such as wss://example.org:5281/xmpp-websocket.") package var url: String
    @Option(help: "The account's bare JID, such as alice@example.org.") package var jid: String
    @Option(help: "The account's password: a SCRAM proof where the server offers SCRAM; otherwise SASL PLAIN, over wss:// or to loopback only.") package var password: String
    @Option(help: "The resource to bind; the server makes one up when not given.") package var resource: String?
    @OptionGroup package var options: ConnectOptions

    package func validate() throws {
        try validateURL(url, option: "--url", schemes: ["ws", "wss"], allowsPlainText: options.allowPlainText)
        do {
            try XMPPConfiguration(jid: jid, password: password, url: url).validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    package func run() async throws {
        var runner = try options.runner(backend: try makeBackend(), target: url, me: ParticipantID(jid.lowercased()))
        runner.commands = Self.consoleCommands
        try await runner.run().exit()
    }

    /// Rooms in the console: `/create TITLE [JID…]`, `/join room@service`, `/leave`.
    package static var consoleCommands: Console.Commands {
        Console.Commands(start: .group, ending: .leave) { session, room in try await XMPPRequests(session: session).join(room) }
    }

    /// The backend the options describe.
    package func makeBackend() throws -> XMPPBackend {
        try XMPPBackend(configuration: XMPPConfiguration(jid: jid, password: password, url: url, resource: resource, allowsPlainText: options.allowPlainText))
    }
}
