public import Foundation
public import Switchboard
import DequeModule

/// Reads `/sync` answers into `BackendUpdate`s, in wire order, keeping what a sync only sends when
/// it changes: each room's state (name, topic, members, power levels), who is typing, and the
/// recent messages an edit refers to.
///
/// The first sync of a link (`full_state=true`) becomes one complete snapshot of the joined and
/// invited rooms. After it, a room's timeline becomes message events, and a `limited` timeline
/// (the server skipped events: a gap) becomes a snapshot of that room whose messages are the
/// window, which the engine fills from history (`/messages`) down to what it has stored.
///
/// Pure apart from its own state: the fuzz target and the codec tests drive exactly the link's
/// reading.
@_spi(WireReaders) public struct MatrixSyncReader: Sendable {
    /// What the link does with one piece of a sync, in order.
    public enum Item: Sendable, Hashable {
        case update(BackendUpdate)
        /// An edit of a message this reader has not seen: the link fetches the original
        /// (`/rooms/{room}/event/{id}`, which the server returns with its latest edit) and
        /// reports it updated.
        case resolveEdit(ConversationID, target: MessageID)
    }

    /// One sync, read.
    public struct Batch: Sendable, Hashable {
        public var items: [Item]
        /// The cursor to ask the next sync from.
        public var nextBatch: String
    }

    /// The newest timeline window a sync gave a room: its oldest event's time and the token that
    /// pages back from it. A history page asked from that time starts there.
    public struct Window: Sendable, Hashable {
        public var oldest: Date
        public var prevBatch: String
    }

    struct Member: Sendable, Hashable {
        var membership: String
        var displayName: String?
        var avatar: String?
    }

    struct Room: Sendable, Hashable {
        var membership = "join"
        var name: String?
        var topic: String?
        var members: [String: Member] = [:]
        var powerLevels: JSONValue?
        /// Room version 12 and later: the creators outrank every power level.
        var privilegedCreators: Set<String> = []
        var createdAt: Date?
        var unread = 0
        var typing: Set<String> = []
    }

    /// The user the session is logged in as.
    public let me: String
    let homeserver: String
    var rooms: [String: Room] = [:]
    private var recent: [MessageID: Message] = [:]
    private var recentOrder: Deque<MessageID> = []
    private static let recentLimit = 4096
    /// Each room's latest timeline windows, oldest first: a gap the engine is filling starts at an
    /// older window than the newest when more syncs came meanwhile.
    public private(set) var windows: [ConversationID: [Window]] = [:]
    private static let windowLimit = 16

    public init(me: String, homeserver: String) {
        self.me = me
        self.homeserver = homeserver
    }

    /// Reads one `/sync` answer. `first`: the link's first sync (`full_state=true`), read as a
    /// complete snapshot. `since`: the cursor it was asked from, where the gap of a `limited`
    /// timeline starts.
    public mutating func read(_ body: Data, first: Bool, since: String? = nil) throws(SwitchboardError) -> Batch {
        let json: JSONValue
        do {
            json = try JSONValue(parsing: body)
        } catch {
            throw SwitchboardError(.protocolViolation, "sync: the answer is not JSON", underlying: error)
        }
        guard case .object = json, let nextBatch = json["next_batch"]?.stringValue else {
            throw SwitchboardError(.protocolViolation, "sync: no next_batch")
        }
        var items: [Item] = []
        var snapshot: [ConversationSnapshot] = []
        var after: [Item] = []
        let rooms = json["rooms"]

        for (roomID, room) in (rooms?["join"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard case .object = room else { continue }
            let read = readJoined(roomID, room, first: first, since: since, snapshot: &snapshot)
            if first { after += read } else { items += read }
        }
        for (roomID, room) in (rooms?["invite"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            var state = self.rooms[roomID] ?? Room()
            state.membership = "invite"
            for event in room["invite_state"]?["events"]?.arrayValue ?? [] { apply(stateEvent: event, to: &state) }
            let known = self.rooms[roomID] != nil
            self.rooms[roomID] = state
            let info = conversation(roomID, state)
            if first {
                snapshot.append(ConversationSnapshot(conversation: info))
            } else {
                items.append(.update(.event(BackendEvent(known ? .conversationUpdated(info) : .conversationAdded(info), conversation: info.id))))
            }
        }
        for (roomID, _) in (rooms?["leave"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            let wasKnown = self.rooms.removeValue(forKey: roomID) != nil
            windows[ConversationID(roomID)] = nil
            // The first sync's snapshot is complete: what it does not list is removed anyway.
            guard wasKnown, !first else { continue }
            items.append(.update(.event(BackendEvent(.conversationRemoved, conversation: ConversationID(roomID)))))
        }
        if first {
            // Rooms the first sync does not list are not joined any more.
            let listed = Set(snapshot.map(\.conversation.id.rawValue))
            for roomID in self.rooms.keys where !listed.contains(roomID) { self.rooms[roomID] = nil }
            items.insert(.update(.snapshot(BackendSnapshot(conversations: snapshot, isComplete: true))), at: 0)
            items.append(contentsOf: after)
        }
        items.append(.update(.cursor(.token(nextBatch))))
        return Batch(items: items, nextBatch: nextBatch)
    }

    private mutating func readJoined(
        _ roomID: String,
        _ room: JSONValue,
        first: Bool,
        since: String?,
        snapshot: inout [ConversationSnapshot]
    ) -> [Item] {
        var items: [Item] = []
        let id = ConversationID(roomID)
        let known = rooms[roomID] != nil
        var state = rooms[roomID] ?? Room()
        let before = state
        state.membership = "join"
        for event in room["state"]?["events"]?.arrayValue ?? [] { apply(stateEvent: event, to: &state) }
        if let unread = room["unread_notifications"]?["notification_count"]?.intValue { state.unread = Int(unread) }

        // The timeline: state changes apply in place; messages, edits and redactions in order.
        let timeline = room["timeline"]
        let limited = timeline?["limited"]?.boolValue ?? false
        var window: [Message] = []
        var changes: [Item] = []
        for event in timeline?["events"]?.arrayValue ?? [] {
            switch MatrixMapping.item(event, room: id, me: me, homeserver: homeserver) {
            case .message(var message):
                message.senderName = state.members[message.sender?.rawValue ?? ""]?.displayName
                remember(message)
                window.append(message)
            case .edit(let target, let text, _):
                if let index = window.lastIndex(where: { $0.serverID == target }) {
                    window[index].text = text
                    window[index].isEdited = true
                    remember(window[index])
                } else if var original = recent[target] {
                    original.text = text
                    original.isEdited = true
                    remember(original)
                    changes.append(.update(.event(BackendEvent(.messageUpdated(original), conversation: id, time: original.time))))
                } else {
                    changes.append(.resolveEdit(id, target: target))
                }
            case .redaction(let target):
                window.removeAll { $0.serverID == target }
                forget(target)
                changes.append(.update(.event(BackendEvent(.messageRemoved(target), conversation: id))))
            case .state(_, _, _, _):
                apply(stateEvent: event, to: &state)
            case .custom(let type, let event):
                changes.append(.update(.event(BackendEvent(.custom(name: "matrix.\(type)", payload: event), conversation: id))))
            case .ignored:
                break
            }
        }
        if let oldest = window.first?.time, let prevBatch = timeline?["prev_batch"]?.stringValue {
            windows[id, default: []].append(Window(oldest: oldest, prevBatch: prevBatch))
            if windows[id]!.count > Self.windowLimit { windows[id]!.removeFirst() }
        }

        // Ephemeral: typing (the whole set each time) and read receipts.
        var ephemeral: [Item] = []
        for event in room["ephemeral"]?["events"]?.arrayValue ?? [] {
            switch event["type"]?.stringValue {
            case "m.typing":
                let now = Set((event["content"]?["user_ids"]?.arrayValue ?? []).compactMap(\.stringValue)).subtracting([me])
                for user in now.subtracting(state.typing).sorted() {
                    ephemeral.append(.update(.event(BackendEvent(.typing(ParticipantID(user), isTyping: true, draft: nil), conversation: id))))
                }
                for user in state.typing.subtracting(now).sorted() {
                    ephemeral.append(.update(.event(BackendEvent(.typing(ParticipantID(user), isTyping: false, draft: nil), conversation: id))))
                }
                state.typing = now
            case "m.receipt":
                for (eventID, receipts) in (event["content"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
                    // The user's own receipt too: read on another device, which lowers the count here.
                    for (user, receipt) in (receipts["m.read"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
                        let time = receipt["ts"].map { MatrixMapping.date($0) }
                        ephemeral.append(.update(.event(BackendEvent(.readMarker(ParticipantID(user), .message(MessageID(eventID))), conversation: id, time: time))))
                    }
                }
            default:
                break
            }
        }
        rooms[roomID] = state

        let info = conversation(roomID, state)
        if first || !known || limited {
            // A room's full state; with its window when the server skipped events before it,
            // and where they start (the sync's `since`), so the engine fills exactly the gap.
            let item = ConversationSnapshot(
                conversation: info, messages: limited ? window : [], skippedAfter: limited ? since.map { .token($0) } : nil
            )
            if first {
                snapshot.append(item)
            } else {
                items.append(.update(.snapshot(BackendSnapshot(conversations: [item], isComplete: false))))
            }
            if !limited { items.append(contentsOf: window.map { Self.added($0) }) }
        } else {
            if before != state, conversation(roomID, before) != info {
                items.append(.update(.event(BackendEvent(.conversationUpdated(info), conversation: id))))
            }
            items.append(contentsOf: window.map { Self.added($0) })
        }
        items.append(contentsOf: changes)
        items.append(contentsOf: ephemeral)
        return items
    }

    private static func added(_ message: Message) -> Item {
        .update(.event(BackendEvent(.messageAdded(message, position: .newest), conversation: message.conversationID, time: message.time)))
    }

    private func apply(stateEvent event: JSONValue, to room: inout Room) {
        guard let type = event["type"]?.stringValue, let key = event["state_key"]?.stringValue else { return }
        let content = event["content"] ?? .object([:])
        switch type {
        case "m.room.name": room.name = content["name"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        case "m.room.topic": room.topic = content["topic"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        case "m.room.power_levels": room.powerLevels = content
        case "m.room.create":
            let version = Int(content["room_version"]?.stringValue ?? "1") ?? 1
            if version >= 12, let sender = event["sender"]?.stringValue {
                room.privilegedCreators = Set([sender] + (content["additional_creators"]?.arrayValue ?? []).compactMap(\.stringValue))
            }
            room.createdAt = MatrixMapping.date(event["origin_server_ts"])
        case "m.room.member":
            let membership = content["membership"]?.stringValue ?? "leave"
            if membership == "leave" || membership == "ban" {
                room.members[key] = nil
            } else {
                room.members[key] = Member(membership: membership, displayName: content["displayname"]?.stringValue, avatar: content["avatar_url"]?.stringValue)
            }
        default:
            break
        }
    }

    /// The room as a conversation: its joined members as participants, with what their power
    /// level lets them do.
    func conversation(_ roomID: String, _ room: Room) -> ConversationInfo {
        let levels = room.powerLevels
        let usersDefault = levels?["users_default"]?.intValue ?? 0
        func level(_ user: String) -> Int64 {
            if room.privilegedCreators.contains(user) { return .max }
            return levels?["users"]?[user]?.intValue ?? usersDefault
        }
        let kick = levels?["kick"]?.intValue ?? 50
        let redact = levels?["redact"]?.intValue ?? 50
        let send = levels?["events_default"]?.intValue ?? 0
        let participants = room.members.filter { $0.value.membership == "join" }.sorted { $0.key < $1.key }.map { user, member in
            let power = level(user)
            return Participant(
                id: ParticipantID(user),
                role: .user,
                displayName: member.displayName,
                permissions: Participant.Permissions(
                    canWrite: power >= send, canEditOwn: true, canEditAll: false, canRemoveOwn: true,
                    canRemoveAll: power >= redact, canManageParticipants: power >= kick, isOwner: power >= 100
                ),
                payload: ["powerLevel": .int(power)]
            )
        }
        var custom: [String: JSONValue] = [:]
        if let topic = room.topic { custom["topic"] = .string(topic) }
        return ConversationInfo(
            id: ConversationID(roomID),
            kind: .group,
            title: room.name,
            state: room.membership == "invite" ? .invitation : .active,
            participants: participants,
            unreadCount: room.unread,
            customData: custom.isEmpty ? nil : .object(custom),
            createdAt: room.createdAt
        )
    }

    /// The token that pages back from the window of `room` whose oldest message is at `time`.
    public func prevBatch(in room: ConversationID, before time: Date) -> String? {
        windows[room]?.last { abs($0.oldest.timeIntervalSince(time)) < 0.001 }?.prevBatch
    }

    // MARK: Recent messages

    /// A message seen lately (by sync, history or a fetch), for edits that name it.
    public func recentMessage(_ id: MessageID) -> Message? { recent[id] }

    /// Keeps `message` among the recent ones (the oldest is forgotten past 4,096).
    public mutating func remember(_ message: Message) {
        guard let id = message.serverID else { return }
        if recent.updateValue(message, forKey: id) == nil {
            recentOrder.append(id)
            if recentOrder.count > Self.recentLimit, let oldest = recentOrder.popFirst() { recent[oldest] = nil }
        }
    }

    private mutating func forget(_ id: MessageID) {
        recent[id] = nil
    }

    /// The newest message known in `room` at or before `time`, for a read marker given as a time.
    public func newestMessage(in room: ConversationID, atOrBefore time: Date) -> Message? {
        recent.values.filter { $0.conversationID == room && $0.time <= time }.max { $0.orderKey < $1.orderKey }
    }
}
