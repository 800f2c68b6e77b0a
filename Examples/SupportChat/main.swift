import Foundation
import Logging
import Switchboard

// swift run SupportChat --url ws://127.0.0.1:8080/ws --user alice@app.acc --token secret-a [--conversation conv-1] [--log /tmp/chat.log]
//
// Against the emulator: `swift run switchboard emulate voximplant --port 8080 --agent manual` in
// another terminal, where you type the agent's side. `SupportChat --help` explains each option.

func standardError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

let options: SupportChatApp.Options
switch SupportChatApp.parse(Array(CommandLine.arguments.dropFirst())) {
case .run(let parsed):
    options = parsed
case .help:
    print(SupportChatApp.usage)
    exit(0)
case .usageError(let problem):
    standardError("SupportChat: \(problem)\n\(SupportChatApp.usageLine)\n(SupportChat --help explains each option)")
    exit(2)
}

// The library logs through swift-log; the terminal is the chat's screen, so its records go to
// the file `--log` names, or nowhere: never swift-log's default handler on standard error.
let logger: @Sendable (String) -> Logger
do {
    logger = try options.log.map { try SupportChatApp.logs(appendingTo: $0) } ?? SupportChatApp.discardingLogs
} catch {
    standardError("SupportChat: cannot write the log to \(options.log ?? ""): \(error)")
    exit(2)
}

let app = SupportChatApp(
    options: options,
    logger: logger,
    screen: { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
)
let (input, lines) = AsyncStream.makeStream(of: String.self)
let reader = Thread {
    while let line = readLine() { lines.yield(line) }
    lines.finish()
}
reader.start()
do {
    try await app.run(input: input)
} catch is SupportChatApp.Failure {
    exit(1)   // the screen showed why, in one line
} catch let error as SwitchboardError {
    standardError("error: \(error.message)")
    exit(1)
} catch {
    standardError("error: \(error)")
    exit(1)
}
