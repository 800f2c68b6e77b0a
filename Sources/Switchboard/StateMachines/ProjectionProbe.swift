public import Foundation

/// The projection's path with no store behind it, for instruction counts
/// (`scripts/instruction-counts.sh`): what the engine does to the rows for each inbound event,
/// without the store's cost, so a change to the projection shows in the count alone.
@_spi(Benchmarks) public enum ProjectionProbe {
    /// Projects `events` in order as the engine does onto a store that starts empty (every read
    /// answered "not stored", then from what the run itself wrote): the writes and publications
    /// it made.
    public static func project(_ events: [BackendEvent], now: Date) -> Int {
        var rows = EventProjection.Rows()
        var output = EventProjection.Output()
        for event in events {
            while case .needs(let reads) = EventProjection.project(event, rows: &rows, into: &output, now: now) {
                rows.add(reads, conversations: [:], messages: [], newest: Dictionary(uniqueKeysWithValues: reads.newest.map { ($0, []) }))
            }
        }
        return output.writes.count + output.publications.count
    }
}
