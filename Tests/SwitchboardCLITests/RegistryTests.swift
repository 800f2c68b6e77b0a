import ArgumentParser
import Foundation
import Switchboard
import SwitchboardCommandKit
import Testing
@testable import switchboard

/// The registry: one entry per adapter, whose name is its commands' name and its gateway
/// sessions' `"backend"`.
struct RegistryTests {
    @Test func eachEntryIsNamedAsItsCommandsAndReadsItsGatewaySessions() throws {
        #expect(registry.map(\.name) == ["voximplant", "webim", "cxone", "matrix", "xmpp"])
        for entry in registry {
            #expect(entry.connect.configuration.commandName == entry.name)
            if let emulate = entry.emulate { #expect(emulate.configuration.commandName == entry.name) }
        }
        #expect(ConnectCommand.configuration.subcommands.count == registry.count, "connect lists every adapter")
        #expect(EmulateCommand.configuration.subcommands.count == registry.filter { $0.emulate != nil }.count, "emulate lists every emulator")
        for entry in registry where entry.emulate != nil {
            // An emulator that had no rig or demo part would be skipped in silence by bench, soak,
            // load and the demo.
            #expect(entry.rig != nil, "\(entry.name) has an emulator: bench, soak and load run it")
            #expect(entry.demo != nil, "\(entry.name) has an emulator: the demo shows it")
        }
        #expect(BenchCommand.rigs.map(\.name) == ["voximplant", "webim", "cxone"], "soak, load and bench's adapters, in the registry's order")
        let sessions: [String: JSONValue] = [
            "voximplant": ["url": "ws://127.0.0.1:1/ws", "user": "u1@app.acc", "token": "t"],
            "webim": ["url": "http://127.0.0.1:2", "name": "visitor-1"],
            "cxone": ["url": "http://127.0.0.1:3/chat", "socket": "ws://127.0.0.1:3/ws", "brand": 1386, "channel": "ch", "customer": "k1"],
            "matrix": ["url": "http://127.0.0.1:4", "token": "syt_x", "name": "bot"],
            "xmpp": ["url": "ws://127.0.0.1:5/xmpp-websocket", "user": "alice@localhost", "password": "p"],
        ]
        let accounts = try registry.map { entry in try entry.gatewaySession(try #require(sessions[entry.name])).account }
        #expect(accounts == ["u1@app.acc", "visitor-1", "k1", "bot", "alice@localhost"])
    }
}
