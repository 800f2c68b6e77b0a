package import ArgumentParser
package import Foundation
package import SwitchboardEmulation

/// The options every `emulate` command shares: the port, and how the agent answers.
package struct AgentOptions: ParsableArguments {
    package init() {}

    @Option(help: "The port to listen on (0 picks a free one).") package var port: Int = 0

    @Option(help: "How the agent answers: echo, scripted, manual (you type the agent's side on standard input) or web (you play the agent in the browser, at the URL printed).")
    package var agent: AgentMode = .echo
    @Option(help: "With --agent scripted: a file with one reply per line ({text} is what the customer wrote).")
    package var script: String?

    /// What the agent answers to `text`: nothing in manual mode. Prints what the customer wrote.
    package func replies(output: StandardOutput) throws -> @Sendable (String) -> String? {
        let script = try script.map(AgentScript.init(contentsOf:)) ?? AgentScript()
        let mode = agent
        return { text in
            output.write("customer: \(text)")
            switch mode {
            case .echo: return "You wrote: \(text)"
            case .scripted: return script.reply(to: text)
            case .manual, .web: return nil
            }
        }
    }

    /// Serves `emulator` on `--port` (with the agent console in the browser beside its routes
    /// for `--agent web`) and, beside it, the agent's console on standard input (in every mode:
    /// the fault commands work with a robot agent too). `banner` says what the emulator serves;
    /// the console's URL follows it. The console on standard input ends with its input and the
    /// emulator runs on; when the emulator ends (SIGINT or SIGTERM stop it, or it fails), the
    /// console ends with it, so the process exits at once instead of waiting for a line that
    /// will never come.
    package func run<Emulator: HostedEmulator>(
        _ emulator: Emulator,
        desk: any AgentDesk,
        output: StandardOutput,
        banner: @escaping @Sendable (Emulator.Endpoints) -> String
    ) async throws {
        let (port, web) = (port, agent == .web)
        let console: @Sendable () async -> Void = { await AgentConsole(desk: desk).run(lines: StandardInput.lines(), output: output) }
        guard web else {
            return try await Self.run(console: console) { try await emulator.run(port: port) { output.write(banner($0)) } }
        }
        var random = SystemRandomNumberGenerator()
        let withConsole = AgentWebConsole(emulator, desk: desk, key: AgentConsoleKey.random(using: &random))
        try await Self.run(console: console) {
            try await withConsole.run(port: port) { endpoints in
                output.write(banner(endpoints.emulator))
                output.write("agent console: \(endpoints.console)")
            }
        }
    }

    /// The two sides of ``run(_:desk:output:banner:)``: `serve` ending cancels `console` (its
    /// `for await` over standard input is the cancellation point); `console` ending leaves
    /// `serve` running.
    package static func run(console: @escaping @Sendable () async -> Void, serve: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await serve()
                return true
            }
            group.addTask {
                await console()
                return false
            }
            while let serverEnded = try await group.next() {
                if serverEnded { group.cancelAll() }
            }
        }
    }

    /// Refuses a port no socket can have (ArgumentParser would let 99999 through, and the
    /// kernel would wrap it into another port).
    package func validate() throws { try Self.validate(port: port) }

    package static func validate(port: Int) throws {
        guard (0...65_535).contains(port) else {
            throw ValidationError("--port must be between 0 and 65535 (0 picks a free one), not \(port)")
        }
    }

    /// Whether a robot answers (`echo`, `scripted`): the banners say the robot takes the chats.
    package var robotAnswers: Bool { agent == .echo || agent == .scripted }

    package var banner: String {
        switch agent {
        case .echo: return "the agent answers every message (--agent echo); type /help for agent and fault commands"
        case .scripted: return "the agent answers from a script (--agent scripted); type /help for agent and fault commands"
        case .manual: return "you are the agent (--agent manual): type what it says; /help lists the commands"
        case .web: return "you are the agent (--agent web): open the agent console below in a browser (commands typed here work too; /help lists them)"
        }
    }
}
