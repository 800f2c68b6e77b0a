import ArgumentParser

struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a real or emulated service: commands on stdin, normalized events on stdout.",
        subcommands: registry.map(\.connect)
    )
}
