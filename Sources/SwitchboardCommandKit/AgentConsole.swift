package import ArgumentParser
package import Foundation
package import Switchboard
package import SwitchboardEmulation

/// How the agent of `switchboard emulate` answers.
package enum AgentMode: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Answers every customer message with "You wrote: …".
    case echo
    /// Answers with the lines of a script in order (`--script FILE`, or a short built-in one), then
    /// stops answering.
    case scripted
    /// Answers nothing by itself: a person types the agent's side on standard input.
    case manual
}

/// The replies of `--agent scripted`: one per customer message, in order; `{text}` is replaced by
/// what the customer wrote.
package struct AgentScript: Sendable {
    package static let builtIn = [
        "Hello, I am the scripted agent. How can I help?",
        "Let me look into \"{text}\" for you.",
        "Thanks for waiting: that is sorted now.",
        "Is there anything else I can do?",
    ]

    private let lines: [String]
    private let next = Locked(0)

    package init(lines: [String] = Self.builtIn) { self.lines = lines }

    /// - Throws: ``OptionError`` naming `--script` and `path` when the file cannot be read or
    ///   has no lines.
    package init(contentsOf path: String) throws {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile || error.code == .fileNoSuchFile {
            throw OptionError("--script \(path): no such file")
        } catch let error as CocoaError where error.code == .fileReadNoPermission {
            throw OptionError("--script \(path): permission denied")
        } catch let error as CocoaError where error.code == .fileReadInapplicableStringEncoding {
            throw OptionError("--script \(path): not UTF-8 text")
        } catch {
            throw OptionError("--script \(path): cannot be read (\(error.localizedDescription))")
        }
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw OptionError("--script \(path): the file has no lines") }
        self.init(lines: lines)
    }

    /// The next reply, or `nil` once the script is done.
    package func reply(to text: String) -> String? {
        let index = next.withLock { next in
            defer { next += 1 }
            return next
        }
        guard index < lines.count else { return nil }
        return lines[index].replacingOccurrences(of: "{text}", with: text)
    }
}

/// An option's value the command cannot use, said in one line that names the option (where a
/// `ValidationError` would add the usage: the value parsed, the problem is what it points to).
package struct OptionError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// One command line typed at `switchboard emulate`; what to print back, and work to do later.
package struct AgentConsole: Sendable {
    package let desk: any AgentDesk

    package init(desk: any AgentDesk) { self.desk = desk }

    package static let help = """
        agent commands: /say TEXT (or just TEXT) · /typing · /read · /close · /transfer · /offline · /where
        faults:         /disconnect · /drop N · /delay MS · /reinit · /help
        """

    package struct Reply: Sendable {
        package var lines: [String]
        /// Something to do after a delay (releasing what `/delay` held), and the line it prints.
        package var later: (after: Duration, run: @Sendable () -> String)?
    }

    package func handle(_ line: String) -> Reply {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return Reply(lines: []) }
        let words = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        let command = trimmed.hasPrefix("/") ? words[0] : "/say"
        let argument = trimmed.hasPrefix("/") ? (words.count > 1 ? words[1] : "") : trimmed
        do {
            switch command {
            case "/help": return Reply(lines: [Self.help])
            case "/where": return Reply(lines: [try desk.current()])
            case "/say":
                guard !argument.isEmpty else { return Reply(lines: ["usage: /say TEXT"]) }
                return Reply(lines: [try desk.say(argument)])
            case "/typing": return Reply(lines: [try desk.typing()])
            case "/read": return Reply(lines: [try desk.read()])
            case "/close": return Reply(lines: [try desk.close()])
            case "/transfer": return Reply(lines: [try desk.transfer()])
            case "/offline": return Reply(lines: [try desk.offline()])
            case "/disconnect": return Reply(lines: [desk.disconnect()])
            case "/drop":
                guard let count = Int(argument), (1...1_000).contains(count) else { return Reply(lines: ["usage: /drop N (1 to 1000)"]) }
                return Reply(lines: [try desk.drop(count)])
            case "/delay":
                guard let milliseconds = Int(argument), (1...600_000).contains(milliseconds) else {
                    return Reply(lines: ["usage: /delay MS (1 to 600000)"])
                }
                let (text, release) = try desk.delay(milliseconds: milliseconds)
                return Reply(lines: [text], later: release.map { (.milliseconds(milliseconds), $0) })
            case "/reinit": return Reply(lines: [try desk.reinit()])
            default: return Reply(lines: ["unknown command \(command); /help lists them"])
            }
        } catch let error as DeskError {
            return Reply(lines: [error.description])
        } catch {
            return Reply(lines: ["error: \(error)"])
        }
    }

    /// Reads commands from standard input until it ends, printing each reply; the releases of
    /// `/delay` run as child tasks, so the scope ends only when they have.
    package func run(lines: AsyncStream<String>, output: StandardOutput) async {
        await withTaskGroup(of: Void.self) { group in
            for await line in lines {
                let reply = handle(line)
                for text in reply.lines { output.write(text) }
                if let later = reply.later {
                    group.addTask {
                        try? await Task.sleep(for: later.after)
                        output.write(later.run())
                    }
                }
            }
        }
    }
}

// MARK: Voximplant-style
