import Switchboard
package import SwitchboardGateway

/// `gateway --send`: the messages each session sends into its conversation (`"ACCOUNT 1"`,
/// `"ACCOUNT 2"`, …) for load and failover runs.
package struct GatewayTraffic: Sendable {
    package var messages: Int
    package var interval: Duration

    package init(messages: Int, interval: Duration) {
        self.messages = messages
        self.interval = interval
    }
}

extension AdapterEntry {
    /// How the gateway reads this backend's sessions, each sending `traffic` once it runs.
    package func gatewayKind(traffic: GatewayTraffic? = nil) -> GatewaySessionKind {
        let (name, read) = (self.name, self.gatewaySession)
        return GatewaySessionKind(name: name) { entry in
            let setup = try read(entry)
            return GatewaySession(backend: name, account: setup.account, makeBackend: setup.makeBackend, onRunning: traffic.map(setup.sending))
        }
    }
}

extension GatewaySessionSetup {
    /// Sends what the store does not have yet: a process that took the session over does not
    /// send again what the last one stored (its outbox sends that).
    func sending(_ traffic: GatewayTraffic) -> @Sendable (ChatSession, EventStream) async throws -> Void {
        let (account, conversation) = (self.account, self.trafficConversation)
        return { session, events in
            guard traffic.messages > 0, let chat = try await conversation(session, events) else { return }
            let stored = Set(try await chat.storedMessages(before: nil, limit: .max).map(\.text))
            for index in 1...traffic.messages where !stored.contains("\(account) \(index)") {
                _ = try await chat.send(text: "\(account) \(index)")
                try await Task.sleep(for: traffic.interval)
            }
        }
    }
}
