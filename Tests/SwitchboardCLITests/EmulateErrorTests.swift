import ArgumentParser
import Foundation
import SwitchboardEmulation
import SwitchboardTestKit
import Testing
import VoximplantEmulator

@testable import switchboard
import SwitchboardCommandKit
import CXoneCommands
import MatrixCommands
import VoximplantCommands
import WebimCommands

#if canImport(Glibc)
import Glibc
#endif

/// What `switchboard emulate` says when it cannot start: an impossible port is a validation
/// error naming `--port`; a busy port and a missing `--script` file are one line each, exit
/// status 1 (the transcripts are in Docs/CLI.md).
@Suite(.timeLimit(.minutes(2)))
struct EmulateErrorTests {
    @Test(arguments: ["99999", "65536", "-1"])
    func aPortOutsideTheRangeIsRefused(_ port: String) throws {
        for command in [EmulateVoximplant.self, EmulateWebim.self, EmulateCXone.self] as [any ParsableCommand.Type] {
            do {
                _ = try command.parse(["--port=\(port)"])
                Issue.record("\(command) accepted --port \(port)")
            } catch {
                let message = command.message(for: error)
                #expect(message == "--port must be between 0 and 65535 (0 picks a free one), not \(port)")
                #expect(command.exitCode(for: error) == .validationFailure)
            }
        }
        _ = try EmulateVoximplant.parse(["--port", "65535"])
        _ = try EmulateVoximplant.parse(["--port", "0"])
    }

    @Test func aScriptThatIsNotThereIsNamed() throws {
        let path = "/nonexistent-\(UInt32.random(in: 0...UInt32.max))/replies.txt"
        #expect(throws: OptionError.self) { try AgentScript(contentsOf: path) }
        do {
            _ = try AgentScript(contentsOf: path)
        } catch {
            #expect("\(error)" == "--script \(path): no such file")
        }
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("empty-script-\(UUID().uuidString).txt")
        try Data("\n  \n".utf8).write(to: empty)
        defer { try? FileManager.default.removeItem(at: empty) }
        do {
            _ = try AgentScript(contentsOf: empty.path)
            Issue.record("an empty script was accepted")
        } catch {
            #expect("\(error)" == "--script \(empty.path): the file has no lines")
        }
    }

    #if canImport(Glibc)
    /// The executable as a person runs it: one line, status 1.
    @Test func aMissingScriptFileIsOneLine() async throws {
        let path = "/nonexistent/replies.txt"
        let (lines, ending) = try await Self.run(["emulate", "webim", "--agent", "scripted", "--script", path])
        print("emulate webim --script \(path): \(ending), wrote \(lines)")
        #expect(lines == ["Error: --script \(path): no such file"])
        #expect(ending == .exited(1))
    }

    @Test func aBusyPortIsOneLine() async throws {
        try await VoximplantEmulator(server: VoximplantServer(), logger: .quiet).withRunning { url in
            let port = try #require(URLComponents(string: url)?.port)
            let (lines, ending) = try await Self.run(["emulate", "voximplant", "--port", String(port)])
            print("emulate voximplant --port \(port) (taken): \(ending), wrote \(lines)")
            #expect(lines.count == 1)
            #expect(lines.first?.hasPrefix("Error: port \(port) is in use: ") == true)
            #expect(ending == .exited(1))
        }
    }

    /// Runs the executable in a terminal until it ends (60 s at most); the lines it wrote.
    static func run(_ arguments: [String]) async throws -> (lines: [String], ending: TerminalChild.Ending) {
        let child = try TerminalChild(arguments)
        child.closeOwnSlave()
        let output = await child.read(until: nil, within: .seconds(60))
        let ending = await child.reap(killingFirst: !output.closed)
        let lines = output.text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return (lines, ending)
    }
    #endif
}
