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
    /// Answers nothing by itself: a person plays the agent in the browser, on the console the
    /// emulator serves at the URL it prints (standard input takes commands too).
    case web
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
        agent commands: /say TEXT (or just TEXT) · /accept · /typing · /read · /file PATH · /close · /transfer · /offline
                        /move ID (the vendor's own: /where lists them) · /where
        faults:         /disconnect · /drop N · /duplicate N · /delay MS · /reinit · /help
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
        let name = trimmed.hasPrefix("/") ? words[0] : "/say"
        let argument = trimmed.hasPrefix("/") ? (words.count > 1 ? words[1] : "") : trimmed
        if name == "/help" { return Reply(lines: [Self.help]) }
        do {
            guard let command = try Self.command(name, argument) else {
                return Reply(lines: [Self.usage[name] ?? "unknown command \(name); /help lists them"])
            }
            let outcome = try desk.perform(command)
            var lines = [outcome.line]
            if command == .current {
                let moves = desk.snapshot().moves
                if !moves.isEmpty { lines.append("moves: " + moves.map { "/move \($0.id) (\($0.title))" }.joined(separator: " · ")) }
            }
            return Reply(lines: lines, later: outcome.later)
        } catch let error as DeskError {
            return Reply(lines: [error.description])
        } catch {
            return Reply(lines: ["error: \(error)"])
        }
    }

    private static let usage = [
        "/say": "usage: /say TEXT",
        "/drop": "usage: /drop N (1 to \(DeskCommand.maxCount))",
        "/duplicate": "usage: /duplicate N (1 to \(DeskCommand.maxCount))",
        "/delay": "usage: /delay MS (1 to \(DeskCommand.maxDelayMilliseconds))",
        "/file": "usage: /file PATH",
        "/move": "usage: /move ID (/where lists them)",
    ]

    /// The command a line names; `nil` when its argument is missing or not a number in range.
    ///
    /// - Throws: ``DeskError`` when `/file`'s file cannot be read.
    private static func command(_ name: String, _ argument: String) throws -> DeskCommand? {
        func count(_ limit: Int) -> Int? { Int(argument).flatMap { (1...limit).contains($0) ? $0 : nil } }
        switch name {
        case "/where": return .current
        case "/say": return argument.isEmpty ? nil : .say(argument)
        case "/accept": return .accept
        case "/typing": return .typing(nil)
        case "/read": return .read
        case "/close": return .close
        case "/transfer": return .transfer
        case "/offline": return .offline
        case "/move": return argument.isEmpty ? nil : .move(argument)
        case "/file":
            guard !argument.isEmpty else { return nil }
            let url = URL(fileURLWithPath: argument)
            guard let data = FileManager.default.contents(atPath: url.path) else { throw DeskError("/file \(argument): cannot be read") }
            return .file(name: url.lastPathComponent, contentType: Self.contentType(of: url.lastPathComponent), data: data)
        case "/disconnect": return .disconnect
        case "/drop": return count(DeskCommand.maxCount).map(DeskCommand.drop)
        case "/duplicate": return count(DeskCommand.maxCount).map(DeskCommand.duplicate)
        case "/delay": return count(DeskCommand.maxDelayMilliseconds).map { .delay(milliseconds: $0) }
        case "/reinit": return .reinit
        default: return nil
        }
    }

    /// The media type a file's extension names, for `/file` (the page sends the browser's).
    package static func contentType(of name: String) -> String {
        switch (name as NSString).pathExtension.lowercased() {
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "pdf": "application/pdf"
        case "txt": "text/plain"
        default: "application/octet-stream"
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
