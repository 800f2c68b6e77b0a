import Foundation

// swift run SupportChat --url ws://127.0.0.1:8080/ws --user alice@app.acc --token secret-a [--conversation conv-1]
//
// Against the emulator: `swift run switchboard emulate voximplant --port 8080 --agent manual` in
// another terminal, where you type the agent's side.

var arguments = CommandLine.arguments.dropFirst()
var values: [String: String] = [:]
while let name = arguments.popFirst() {
    guard name.hasPrefix("--"), let value = arguments.popFirst() else {
        FileHandle.standardError.write(Data("usage: SupportChat --url URL --user USER --token TOKEN [--conversation ID]\n".utf8))
        exit(2)
    }
    values[String(name.dropFirst(2))] = value
}
guard let url = values["url"], let user = values["user"], let token = values["token"] else {
    FileHandle.standardError.write(Data("usage: SupportChat --url URL --user USER --token TOKEN [--conversation ID]\n".utf8))
    exit(2)
}

let app = SupportChatApp(
    options: SupportChatApp.Options(url: url, user: user, token: token, conversation: values["conversation"]),
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
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
