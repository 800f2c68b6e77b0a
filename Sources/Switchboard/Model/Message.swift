public import Foundation

/// A message in a conversation, from the server or waiting in the outbox.
public struct Message: Sendable, Hashable, Codable, Identifiable {
    public enum Kind: Sendable, Hashable, Codable {
        case text
        case file
        /// A notice from the system ("chat closed", "agent joined").
        case system
        /// A request for an action (Webim keyboard, action request).
        case actionRequest
        /// The agent is busy (Webim `operator_busy`).
        case agentBusy
        /// Rich content of a vendor type (CXone quick replies, list picker, rich link, plugins);
        /// the content is in ``Message/payload``.
        case rich(String)
        /// A vendor message kind the model does not know; the raw type is kept.
        case custom(String)
    }

    /// Where a message is on its way to the server and to the other side.
    public enum DeliveryState: Sendable, Hashable, Codable {
        /// Stored locally, waiting in the outbox.
        case pending
        /// Accepted by the server.
        case sent
        case delivered
        case read
        /// Refused for good; the reason is the server's.
        case failed(String)

        public var isFailed: Bool {
            if case .failed = self { return true }
            return false
        }
    }

    /// A file attached to a message.
    public struct Attachment: Sendable, Hashable, Codable {
        public struct ImageSize: Sendable, Hashable, Codable {
            public var width: Int
            public var height: Int
            public init(width: Int, height: Int) {
                self.width = width
                self.height = height
            }
        }

        public var name: String
        public var mimeType: String?
        public var size: Int64?
        public var url: URL?
        public var imageSize: ImageSize?
        public var thumbnailURL: URL?
        /// The bytes to upload, for a file sent from memory rather than from a local file `url`.
        /// Kept with the outbox entry until the file is sent; the message the app sees does not
        /// carry them.
        public var data: Data?

        public init(
            name: String,
            mimeType: String? = nil,
            size: Int64? = nil,
            url: URL? = nil,
            imageSize: ImageSize? = nil,
            thumbnailURL: URL? = nil
        ) {
            self.name = name
            self.mimeType = mimeType
            self.size = size
            self.url = url
            self.imageSize = imageSize
            self.thumbnailURL = thumbnailURL
        }

        /// A file to send from memory: its bytes, the name the far side sees and its MIME type.
        public init(name: String, mimeType: String, data: Data) {
            self.init(name: name, mimeType: mimeType, size: Int64(data.count))
            self.data = data
        }
    }

    /// The message this one replies to.
    public struct Quote: Sendable, Hashable, Codable {
        public var messageID: MessageID?
        public var senderName: String?
        public var text: String?
        public init(messageID: MessageID? = nil, senderName: String? = nil, text: String? = nil) {
            self.messageID = messageID
            self.senderName = senderName
            self.text = text
        }
    }

    /// The server's id; `nil` while the message is only in the outbox.
    public var serverID: MessageID?
    /// The id the client gave the message when sending; echoed by the server.
    public var clientID: ClientMessageID?
    public var conversationID: ConversationID
    /// The conversation event sequence of the message, where the backend has sequences.
    public var sequence: Int64?
    public var sender: ParticipantID?
    public var senderRole: Participant.Role?
    public var senderName: String?
    public var kind: Kind
    public var text: String
    public var attachments: [Attachment]
    /// Vendor content the model does not cover (rich message bodies, keyboard, custom data).
    public var payload: JSONValue?
    /// When the server accepted the message, or when the client created it while pending.
    public var time: Date
    public var isEdited: Bool
    public var isDeleted: Bool
    public var quote: Quote?
    public var deliveryState: DeliveryState

    public init(
        serverID: MessageID? = nil,
        clientID: ClientMessageID? = nil,
        conversationID: ConversationID,
        sequence: Int64? = nil,
        sender: ParticipantID? = nil,
        senderRole: Participant.Role? = nil,
        senderName: String? = nil,
        kind: Kind = .text,
        text: String,
        attachments: [Attachment] = [],
        payload: JSONValue? = nil,
        time: Date,
        isEdited: Bool = false,
        isDeleted: Bool = false,
        quote: Quote? = nil,
        deliveryState: DeliveryState = .sent
    ) {
        self.serverID = serverID
        self.clientID = clientID
        self.conversationID = conversationID
        self.sequence = sequence
        self.sender = sender
        self.senderRole = senderRole
        self.senderName = senderName
        self.kind = kind
        self.text = text
        self.attachments = attachments
        self.payload = payload
        self.time = time
        self.isEdited = isEdited
        self.isDeleted = isDeleted
        self.quote = quote
        self.deliveryState = deliveryState
    }

    /// A stable identity: the server id once known, else the client id.
    public var id: String {
        if let serverID { return "s:\(serverID.rawValue)" }
        if let clientID { return "c:\(clientID.rawValue)" }
        return "t:\(time.timeIntervalSince1970)"
    }

    /// Where the message sorts in its conversation: by sequence where there is one, then by
    /// time; messages still in the outbox sort after everything the server has accepted.
    public var orderKey: MessageOrderKey {
        MessageOrderKey(
            isPending: serverID == nil,
            sequence: sequence ?? .max,
            time: time,
            tieBreaker: id
        )
    }
}

/// The sort order of messages in a conversation. See ``Message/orderKey``.
public struct MessageOrderKey: Sendable, Hashable, Comparable, Codable {
    public var isPending: Bool
    public var sequence: Int64
    public var time: Date
    public var tieBreaker: String

    public init(isPending: Bool, sequence: Int64, time: Date, tieBreaker: String) {
        self.isPending = isPending
        self.sequence = sequence
        self.time = time
        self.tieBreaker = tieBreaker
    }

    public static func < (lhs: MessageOrderKey, rhs: MessageOrderKey) -> Bool {
        if lhs.isPending != rhs.isPending { return !lhs.isPending }
        if lhs.sequence != rhs.sequence { return lhs.sequence < rhs.sequence }
        if lhs.time != rhs.time { return lhs.time < rhs.time }
        return lhs.tieBreaker < rhs.tieBreaker
    }
}

extension RandomAccessCollection where Index == Int {
    /// The first index whose element's order key is not below `key`, in a collection sorted by
    /// order key (a binary search).
    func lowerBound(of key: MessageOrderKey, orderKey: (Element) -> MessageOrderKey) -> Int {
        var low = startIndex
        var high = endIndex
        while low < high {
            let middle = (low + high) / 2
            if orderKey(self[middle]) < key { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// A send as it goes to the backend: the app's draft with the client id the engine gave it and
/// the conversation. It is stored in the outbox before anything goes on the wire.
public struct OutgoingMessage: Sendable, Hashable, Codable {
    public var clientID: ClientMessageID
    public var conversationID: ConversationID
    public var content: MessageDraft

    public init(clientID: ClientMessageID, conversationID: ConversationID, content: MessageDraft) {
        self.clientID = clientID
        self.conversationID = conversationID
        self.content = content
    }
}

/// What the app passes to ``Conversation/send(_:)``.
public struct MessageDraft: Sendable, Hashable, Codable {
    public var kind: Message.Kind
    public var text: String
    public var attachments: [Message.Attachment]
    public var payload: JSONValue?
    public var quote: Message.Quote?
    /// Send options only one backend understands, under the keys its adapter documents (Webim:
    /// `hint_question` = `1` for a question the visitor picked from the hints); other adapters
    /// ignore them. Kept with the outbox entry, so a resend carries them.
    public var vendorOptions: [String: String]?

    public init(
        text: String,
        kind: Message.Kind = .text,
        attachments: [Message.Attachment] = [],
        payload: JSONValue? = nil,
        quote: Message.Quote? = nil,
        vendorOptions: [String: String]? = nil
    ) {
        self.kind = kind
        self.text = text
        self.attachments = attachments
        self.payload = payload
        self.quote = quote
        self.vendorOptions = vendorOptions
    }
}

extension MessageDraft {
    /// The messages this draft goes as on a backend that takes `attachmentsPerMessage` files per
    /// message (``BackendLimits/attachmentsPerMessage``): itself when within the limit;
    /// otherwise — more files than the limit, or text beside a file where the limit is one — its
    /// text (with its payload, quote and vendor options) first as a message of its own, then its
    /// files in groups of the limit, each a ``Message/Kind/file`` message.
    public func parts(attachmentsPerMessage limit: Int?) -> [MessageDraft] {
        guard let limit, limit > 0, !attachments.isEmpty else { return [self] }
        let textBesideAFile = limit == 1 && !(text.isEmpty && payload == nil)
        guard attachments.count > limit || textBesideAFile else { return [self] }
        var parts: [MessageDraft] = []
        if !text.isEmpty || payload != nil {
            parts.append(MessageDraft(text: text, kind: kind == .file ? .text : kind, payload: payload, quote: quote, vendorOptions: vendorOptions))
        }
        for start in stride(from: 0, to: attachments.count, by: limit) {
            let files = Array(attachments[start..<min(start + limit, attachments.count)])
            parts.append(MessageDraft(text: "", kind: .file, attachments: files, vendorOptions: parts.isEmpty ? vendorOptions : nil))
        }
        return parts
    }
}

extension Message.Attachment {
    /// This attachment as a message carries it: without the bytes it was sent from (``data``).
    public var withoutData: Message.Attachment {
        var shown = self
        shown.data = nil
        return shown
    }

    /// The bytes to upload: ``data``, or else the file at the local file ``url``.
    ///
    /// - Throws: ``SwitchboardError/Code/invalidArgument`` when the attachment has neither, or
    ///   the file cannot be read.
    public func contents() throws(SwitchboardError) -> Data {
        if let data { return data }
        guard let url, url.isFileURL else {
            throw SwitchboardError(.invalidArgument, "an attachment to upload needs its bytes (data) or a local file URL")
        }
        do { return try Data(contentsOf: url) } catch {
            throw SwitchboardError(.invalidArgument, "cannot read \(url.lastPathComponent)", underlying: error)
        }
    }
}
