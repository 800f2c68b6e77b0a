// Instruction-count probes: each runs one hot path of the core a fixed number of times inside
// `switchboard_probe_body`, the only function callgrind counts in (`--toggle-collect`), after one
// uncounted pass that fills the caches and metadata the first call would pay for. The count
// repeats from run to run on a shared machine where wall time does not; scripts/instruction-counts.sh
// builds this (release, no debug info, which callgrind could not read) and compares the counts
// with Benchmarks/InstructionCounts.txt.
//
//     switchboard-probes PROBE REPOSITORY     PROBE: decode, bus, tracker, projection
//     switchboard-probes layout                the sizes of the values the paths copy
import Foundation
@_spi(Benchmarks) import Switchboard

/// One probe's work, set up before anything is counted.
struct Probe {
    let run: () -> Int
}

/// The vendors' recorded payloads in the repository (Tests/Fixtures/webim and cxone), parsed as
/// every adapter parses a frame: `JSONValue(parsing:)`, 20 passes.
func decodeProbe(repository: URL) throws -> Probe {
    var payloads: [Data] = []
    for vendor in ["webim", "cxone"] {
        let folder = repository.appendingPathComponent("Tests/Fixtures/\(vendor)")
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() where name.hasSuffix(".json") {
            payloads.append(try Data(contentsOf: folder.appendingPathComponent(name)))
        }
    }
    guard !payloads.isEmpty else { throw SwitchboardError(.invalidArgument, "no fixtures under \(repository.path)/Tests/Fixtures") }
    return Probe {
        var parsed = 0
        for _ in 0..<20 {
            for payload in payloads where (try? JSONValue(parsing: payload)) != nil { parsed += 1 }
        }
        return parsed
    }
}

/// 10,000 messages published on a bus with 8 subscribers (the bench's bus row).
func busProbe() -> Probe {
    let bus = EventBus()
    let streams = (0..<8).map { _ in bus.subscribe(buffering: .bounded(1 << 20)) }
    let events = (0..<10_000).map { index in
        ChatEvent(
            origin: .init(session: "s", backend: "b"),
            conversationID: "c",
            time: Date(timeIntervalSince1970: 1_700_000_000 + Double(index)),
            kind: .messageAdded(Message(serverID: MessageID("m\(index)"), conversationID: "c", senderRole: .agent, text: "message \(index)", time: Date(timeIntervalSince1970: 1_700_000_000)), position: .newest)
        )
    }
    return Probe {
        for event in events { bus.publish(event) }
        return streams.count
    }
}

/// 100,000 sequenced events in order, then a 1,000-event gap filled by retransmit.
func trackerProbe() -> Probe {
    Probe {
        var delivered = 0
        var tracker = SequenceTrackerStateMachine<Int>(delivered: 0, batchLimit: 100)
        for sequence in 1...Int64(100_000) { delivered += tracker.receive(sequence: sequence, event: 0).deliver.count }
        var gap = SequenceTrackerStateMachine<Int>(delivered: 0, batchLimit: 100)
        for range in gap.receive(sequence: 1001, event: 0).retransmit {
            for sequence in range { delivered += gap.receive(sequence: sequence, event: 0).deliver.count }
            delivered += gap.retransmitCompleted(range).deliver.count
        }
        return delivered
    }
}

/// A conversation, 2,000 agent messages, 200 edits and 50 read markers, projected onto an empty
/// store as the engine projects them.
func projectionProbe() -> Probe {
    let time = Date(timeIntervalSince1970: 1_700_000_000)
    let conversation: ConversationID = "c"
    var events = [BackendEvent(.conversationAdded(ConversationInfo(id: conversation, kind: .supportChat, state: .active)), conversation: conversation)]
    func message(_ index: Int, text: String) -> Message {
        Message(serverID: MessageID("m\(index)"), conversationID: conversation, sequence: Int64(index), sender: "agent", senderRole: .agent, text: text, time: time + Double(index))
    }
    for index in 1...2_000 {
        events.append(BackendEvent(.messageAdded(message(index, text: "message \(index)"), position: .newest), conversation: conversation, sequence: Int64(index)))
    }
    for index in stride(from: 10, through: 2_000, by: 10) {
        var edited = message(index, text: "edited \(index)")
        edited.isEdited = true
        events.append(BackendEvent(.messageUpdated(edited), conversation: conversation))
    }
    for index in stride(from: 40, through: 2_000, by: 40) {
        events.append(BackendEvent(.readMarker("agent", .sequence(Int64(index))), conversation: conversation))
    }
    return Probe { ProjectionProbe.project(events, now: time) }
}

/// The counted call: callgrind collects inside this function only.
@inline(never) @_silgen_name("switchboard_probe_body")
func probeBody(_ probe: Probe) -> Int {
    probe.run()
}

let arguments = CommandLine.arguments
// The sizes of the values the hot paths copy (no probe: printed, not counted).
if arguments.count == 2, arguments[1] == "layout" {
    print("ChatEvent \(MemoryLayout<ChatEvent>.size) bytes, ChatEvent.Kind \(MemoryLayout<ChatEvent.Kind>.size), Message \(MemoryLayout<Message>.size), ConversationInfo \(MemoryLayout<ConversationInfo>.size), BackendEvent \(MemoryLayout<BackendEvent>.size)")
    exit(0)
}
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: switchboard-probes decode|bus|tracker|projection REPOSITORY\n".utf8))
    exit(2)
}
let probe: Probe
do {
    switch arguments[1] {
    case "decode": probe = try decodeProbe(repository: URL(fileURLWithPath: arguments[2]))
    case "bus": probe = busProbe()
    case "tracker": probe = trackerProbe()
    case "projection": probe = projectionProbe()
    default:
        FileHandle.standardError.write(Data("switchboard-probes: no probe \(arguments[1])\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("switchboard-probes: \(error)\n".utf8))
    exit(1)
}
let warm = probe.run()
let counted = probeBody(probe)
guard warm == counted, counted > 0 else {
    FileHandle.standardError.write(Data("switchboard-probes: \(arguments[1]) did \(counted) units, the warm-up \(warm)\n".utf8))
    exit(1)
}
print("\(arguments[1]): \(counted) units")
