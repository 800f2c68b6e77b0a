public import Switchboard

/// Every row a client stored for one conversation, compared with the server's own log of it.
///
/// The soak, load, chaos and long-life runs end with this comparison. It looks at every stored
/// row, not only those that carry a server id, so each way a store can be wrong is counted:
/// - a server message no row confirms is **lost**; so is a send the client made that never
///   reached the server while no row of it is left to tell the app;
/// - a server message two rows confirm, or one send the server took twice, is **duplicated**;
/// - a row under a server id the server never issued, or one that claims to be sent when the
///   server has no such send, is a **phantom**;
/// - a pending or failed row (or one claiming to be sent without the server's id) beside a send
///   the server did accept is a **leftover** copy;
/// - confirmed rows in another order than the server's are **out of order**.
///
/// A pending or failed row is allowed only for a send the server never accepted: it is counted
/// as **unsent**, with its state, and does not make the comparison fail.
///
/// A send is known on the server by its client id or, where a vendor's log does not keep the
/// client's id, by its text from the customer: the runs it is for send each text once.
public struct StoreAudit: Sendable, Hashable, CustomStringConvertible {
    /// Messages in the server's log.
    public var messages = 0
    /// Rows in the client's store, of every state.
    public var rows = 0
    public var lost = 0
    public var duplicated = 0
    public var phantoms = 0
    public var leftovers = 0
    public var outOfOrder = 0
    /// Pending or failed rows of sends the server never accepted: allowed, reported.
    public var unsent = 0
    /// A few rows or messages of each kind counted above, saying what each is.
    public var examples: [String] = []

    public init() {}

    /// Nothing lost, duplicated, phantom, left over or out of order.
    public var isClean: Bool { lost == 0 && duplicated == 0 && phantoms == 0 && leftovers == 0 && outOfOrder == 0 }

    public var description: String {
        """
        messages \(messages), rows \(rows), lost \(lost), duplicated \(duplicated), phantom \(phantoms), \
        leftover pending \(leftovers), out of order \(outOfOrder), unsent \(unsent)\
        \(examples.isEmpty ? "" : "; for example: " + examples.joined(separator: "; "))
        """
    }

    /// Adds another conversation's audit to this one (a load run's many sessions).
    public mutating func add(_ other: StoreAudit) {
        messages += other.messages
        rows += other.rows
        lost += other.lost
        duplicated += other.duplicated
        phantoms += other.phantoms
        leftovers += other.leftovers
        outOfOrder += other.outOfOrder
        unsent += other.unsent
        for example in other.examples where examples.count < Self.maxExamples { examples.append(example) }
    }

    static let maxExamples = 6

    /// Compares the rows a client stored for one conversation with the server's log of it.
    ///
    /// - Parameters:
    ///   - server: the server's log of the conversation, in its order.
    ///   - stored: every row the client's store holds for the conversation, of every state, oldest
    ///     first (as `fetchMessages(in:before:limit:scope:)` of a `ChatStore` returns them).
    ///   - sent: the texts of the messages the client sent in the conversation, when the caller
    ///     knows them (each text once): each must be on the server exactly once, or be held by a
    ///     pending or failed row.
    public static func compare(server: [ServerMessage], stored: [Message], sent: [String]? = nil) -> StoreAudit {
        var audit = StoreAudit()
        audit.messages = server.count
        audit.rows = stored.count
        func example(_ text: String) {
            if audit.examples.count < maxExamples { audit.examples.append(text) }
        }
        func describe(_ row: Message) -> String {
            "\"\(row.text)\" (\(row.deliveryState)\(row.serverID.map { ", id \($0.rawValue)" } ?? ""))"
        }

        let serverIDs = Set(server.map(\.serverID))
        // A send is known on the server by its client id (compared as UUIDs are, without case: a
        // vendor may lower it on the wire) or, where the log keeps no client id, by its text.
        let customerMessages = server.filter(\.fromCustomer)
        let acceptedClientIDs = Set(customerMessages.compactMap { $0.clientID?.rawValue.lowercased() })
        let textsWithoutClientID = Set(customerMessages.filter { $0.clientID == nil }.map(\.text))
        func isOnServer(_ row: Message) -> Bool {
            row.serverID.map(serverIDs.contains) ?? false
                || row.clientID.map { acceptedClientIDs.contains($0.rawValue.lowercased()) } ?? false
                || textsWithoutClientID.contains(row.text)
        }
        var confirmations: [MessageID: Int] = [:]
        var confirmedOrder: [MessageID] = []
        var unsentTexts: Set<String> = []
        for row in stored {
            if let id = row.serverID, !serverIDs.contains(id) {
                audit.phantoms += 1
                example("phantom row \(describe(row)): the server never issued that id")
                continue
            }
            let waiting = row.deliveryState == .pending || row.deliveryState.isFailed
            if let id = row.serverID, !waiting {
                confirmations[id, default: 0] += 1
                if confirmations[id] == 1 { confirmedOrder.append(id) }
                continue
            }
            if isOnServer(row) {
                // A copy beside a send the server has: pending or failed, or claiming to be sent
                // without the server's id.
                audit.leftovers += 1
                example("leftover \(describe(row)): the server has this send")
            } else if waiting {
                // Allowed: a send the server never accepted, and the row says so.
                audit.unsent += 1
                unsentTexts.insert(row.text)
                example("unsent \(describe(row))")
            } else {
                audit.phantoms += 1
                example("phantom row \(describe(row)): it claims to be sent, and the server has no such send")
            }
        }
        for message in server {
            switch confirmations[message.serverID] ?? 0 {
            case 0:
                audit.lost += 1
                example("lost \"\(message.text)\" (id \(message.serverID.rawValue)): no row confirms it")
            case let count where count > 1:
                audit.duplicated += count - 1
                example("duplicated \"\(message.text)\" (id \(message.serverID.rawValue)): \(count) rows")
            default:
                break
            }
        }
        // One send the server took twice: two messages under one client id, or (for the texts the
        // caller sent, each once) one text under two.
        var copies: [String: [ServerMessage]] = [:]
        for message in customerMessages {
            if let id = message.clientID { copies[id.rawValue.lowercased(), default: []].append(message) }
        }
        for (_, messages) in copies where messages.count > 1 {
            audit.duplicated += messages.count - 1
            example("duplicated send \"\(messages[0].text)\": the server took one client id \(messages.count) times")
        }
        if let sent {
            var sends: [String: Set<String>] = [:]
            for message in customerMessages {
                sends[message.text, default: []].insert(message.clientID?.rawValue.lowercased() ?? message.serverID.rawValue)
            }
            for text in sent {
                let count = sends[text]?.count ?? 0
                if count == 0, !unsentTexts.contains(text) {
                    audit.lost += 1
                    example("lost send \"\(text)\": not on the server and no row of it is left")
                } else if count > 1 {
                    audit.duplicated += count - 1
                    example("duplicated send \"\(text)\": the server took it \(count) times")
                }
            }
        }
        // Order over the messages both sides have, so a lost one does not count as misordered too.
        let confirmed = Set(confirmedOrder)
        let serverOrder = server.map(\.serverID).filter(confirmed.contains)
        var seen: Set<MessageID> = []
        let serverOrderOnce = serverOrder.filter { seen.insert($0).inserted }
        for (index, (stored, expected)) in zip(confirmedOrder, serverOrderOnce).enumerated() where stored != expected {
            if audit.outOfOrder == 0 { example("out of order from position \(index): stored \(stored.rawValue) where the server has \(expected.rawValue)") }
            audit.outOfOrder += 1
        }
        return audit
    }
}
