import ArgumentParser

struct EmulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulate",
        abstract: "Run a service emulator standalone on 127.0.0.1.",
        subcommands: registry.compactMap(\.emulate)
    )
}
