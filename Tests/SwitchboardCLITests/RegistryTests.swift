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
        #expect(registry.map(\.name) == ["voximplant", "webim", "cxone", "matrix"])
        for entry in registry {
            #expect(entry.connect.configuration.commandName == entry.name)
            if let emulate = entry.emulate { #expect(emulate.configuration.commandName == entry.name) }
        }
        #expect(ConnectCommand.configuration.subcommands.count == registry.count, "connect lists every adapter")
        #expect(EmulateCommand.configuration.subcommands.count == registry.filter { $0.emulate != nil }.count, "emulate lists every emulator")
        let sessions: [String: JSONValue] = [
            "voximplant": ["url": "ws://127.0.0.1:1/ws", "user": "u1@app.acc", "token": "t"],
            "webim": ["url": "http://127.0.0.1:2", "name": "visitor-1"],
            "cxone": ["url": "http://127.0.0.1:3/chat", "socket": "ws://127.0.0.1:3/ws", "brand": 1386, "channel": "ch", "customer": "k1"],
            "matrix": ["url": "http://127.0.0.1:4", "token": "syt_x", "name": "bot"],
        ]
        let accounts = try registry.map { entry in try entry.gatewaySession(try #require(sessions[entry.name])).account }
        #expect(accounts == ["u1@app.acc", "visitor-1", "k1", "bot"])
    }
}
