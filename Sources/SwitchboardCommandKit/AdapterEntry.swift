package import ArgumentParser
package import Foundation
package import Logging
package import Switchboard

/// One adapter as the command-line tool sees it: an entry of the registry that
/// `Sources/switchboard/Registry.swift` lists, one line per adapter. `connect`, `emulate`,
/// `gateway`, `soak`, `load`, `bench`'s latency rows and `demo` loop over the entries; an adapter's commands live in its own folder
/// (`Adapters/<Vendor>/Commands`), beside its emulator.
package struct AdapterEntry: Sendable {
    /// The subcommand name and the gateway's `"backend"` value.
    package var name: String
    /// `switchboard connect <name>`: a client of a real or emulated service.
    package var connect: any AsyncParsableCommand.Type
    /// `switchboard emulate <name>`, where the adapter has an emulator (Matrix runs against a
    /// real Synapse instead).
    package var emulate: (any AsyncParsableCommand.Type)?
    /// A session of this backend in a gateway's sessions file, for `gateway --help`.
    package var gatewayExample: String
    /// One session of a gateway's sessions file: its JSON object (with `"backend": name`).
    package var gatewaySession: @Sendable (_ entry: JSONValue) throws(SwitchboardError) -> GatewaySessionSetup
    /// The emulator for `soak`, `load` and `bench`, with the raw client the benchmark measures
    /// against; `nil` where the adapter has no emulator.
    package var rig: (any EmulatorRigRunner)?
    /// The adapter's part of `switchboard demo`; `nil` where it has no emulator to show.
    package var demo: DemoScript?

    package init(
        name: String,
        connect: any AsyncParsableCommand.Type,
        emulate: (any AsyncParsableCommand.Type)?,
        rig: (any EmulatorRigRunner)? = nil,
        demo: DemoScript? = nil,
        gatewayExample: String,
        gatewaySession: @escaping @Sendable (_ entry: JSONValue) throws(SwitchboardError) -> GatewaySessionSetup
    ) {
        self.name = name
        self.connect = connect
        self.emulate = emulate
        self.rig = rig
        self.demo = demo
        self.gatewayExample = gatewayExample
        self.gatewaySession = gatewaySession
    }
}

/// What a gateway needs of one session: the account its store scope names, its backend, and
/// where `--send` writes.
package struct GatewaySessionSetup: Sendable {
    package var account: String
    package var makeBackend: @Sendable (_ logger: Logger) async throws -> any ChatBackend
    /// The conversation `--send` writes into, once the session knows it; `nil` when there is none.
    package var trafficConversation: @Sendable (_ session: ChatSession, _ events: EventStream) async throws -> (any Conversation)?

    /// The account a session's store scope names, the same for every backend: its `"name"`, else
    /// its `"user"`, `"customer"`, `"visitor"` or `"url"`, the first one given.
    package static func account(of entry: JSONValue) -> String {
        for key in ["name", "user", "customer", "visitor", "url"] {
            if let value = entry[key]?.stringValue { return value }
        }
        return ""
    }

    package init(
        account: String,
        makeBackend: @escaping @Sendable (_ logger: Logger) async throws -> any ChatBackend,
        trafficConversation: @escaping @Sendable (_ session: ChatSession, _ events: EventStream) async throws -> (any Conversation)?
    ) {
        self.account = account
        self.makeBackend = makeBackend
        self.trafficConversation = trafficConversation
    }

    /// `--send` writes into `id` (a configured conversation, Webim's one chat), once the session
    /// has read it from its first link.
    package static func known(_ id: ConversationID?) -> @Sendable (ChatSession, EventStream) async throws -> (any Conversation)? {
        { session, events in
            guard let id else { return nil }
            if let chat = try? await session.conversation(id) { return chat }
            for await _ in events {
                if let chat = try? await session.conversation(id) { return chat }
            }
            return nil
        }
    }

    /// Reads an entry of the sessions file as the adapter's own configuration type.
    ///
    /// - Throws: `invalidArgument` naming the backend and what is wrong.
    package static func decode<Configuration: Decodable>(_ entry: JSONValue, as type: Configuration.Type, backend: String) throws(SwitchboardError) -> Configuration {
        do {
            return try JSONDecoder().decode(Configuration.self, from: entry.jsonData())
        } catch {
            throw SwitchboardError(.invalidArgument, "a \(backend) session is not what it takes: \(error)")
        }
    }
}
