package import ArgumentParser
package import Foundation
package import Logging
package import Switchboard
package import SwitchboardCommandKit
package import SwitchboardMatrix

/// The Matrix adapter's entry in the command-line tool's registry: no emulator (its tests run a
/// real Synapse).
package enum MatrixCommands {
    package static let entry = AdapterEntry(
        name: "matrix", connect: ConnectMatrix.self, emulate: nil,
        gatewayExample: #"{"backend": "matrix", "url": "https://homeserver", "user": …, "password": … (or "token": …), "conversation": "!room"}"#
    ) { json throws(SwitchboardError) in
        let session = try GatewaySessionSetup.decode(json, as: GatewaySession.self, backend: "matrix")
        guard session.user != nil || session.token != nil, (session.password == nil) != (session.token == nil) else {
            throw SwitchboardError(.invalidArgument, "a matrix session needs user with password, or token (\(session.url))")
        }
        let login: MatrixConfiguration.Login = session.token.map { .accessToken($0) } ?? .password(user: session.user ?? "", password: session.password ?? "")
        return GatewaySessionSetup(
            account: GatewaySessionSetup.account(of: json),
            makeBackend: { _ in try MatrixBackend(configuration: MatrixConfiguration(homeserver: session.url, login: login)) },
            trafficConversation: GatewaySessionSetup.known(session.conversation.map(ConversationID.init))
        )
    }

    /// `{"backend": "matrix", "url": "https://homeserver", "user": …, "password": …}` (or
    /// `"token": …`), `"conversation": "!room"`.
    struct GatewaySession: Decodable {
        var url: String
        var user: String?
        var password: String?
        var token: String?
        var conversation: String?
    }
}

package struct ConnectMatrix: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "matrix",
        abstract: "Connect to a Matrix homeserver (Synapse, or any other) as a user: joined rooms are conversations."
    )

    @Option(help: "The homeserver's base URL, such as https://matrix.example.org or http://127.0.0.1:8008.") package var homeserver: String
    @Option(help: "The user: a local part (alice) or a user id (@alice:example.org).") package var user: String?
    @Option(help: "The user's password (a login whose token is kept with --store).") package var password: String?
    @Option(help: "An access token instead of a password.") package var token: String?
    @Option(name: .customLong("device-id"), help: "The device to log in as; keep it stable with --store.") package var deviceID: String?
    @OptionGroup package var options: ConnectOptions

    package func validate() throws {
        try validateURL(homeserver, option: "--homeserver", schemes: ["http", "https"], allowsPlainText: options.allowPlainText)
        switch (password, token) {
        case (_?, _?): throw ValidationError("give either --password or --token, not both")
        case (_?, nil): if user == nil { throw ValidationError("--password needs --user") }
        case (nil, nil): throw ValidationError("give --user with --password, or --token")
        case (nil, _?): break
        }
    }

    package func run() async throws {
        let login: MatrixConfiguration.Login
        if let token { login = .accessToken(token) } else { login = .password(user: user ?? "", password: password ?? "") }
        let backend = try MatrixBackend(
            configuration: MatrixConfiguration(homeserver: homeserver, login: login, deviceID: deviceID, allowsPlainText: options.allowPlainText)
        )
        // Messages of the logged-in user are `"mine": true` in JSON lines when the user id is given.
        let me = user.flatMap { $0.hasPrefix("@") ? ParticipantID($0) : nil }
        var runner = try options.runner(backend: backend, target: homeserver, me: me)
        runner.commands = Console.Commands(start: .group, ending: .leave) { session, room in try await MatrixRequests(session: session).join(room) }
        try await runner.run().exit()
    }
}
