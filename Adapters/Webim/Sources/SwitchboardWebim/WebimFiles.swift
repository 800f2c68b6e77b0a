public import Foundation
public import Switchboard

/// Why Webim refused a file: the SDK's `SendFileError`, under the server's error strings.
///
/// Read it from the error a send threw or the bus reported (``init(_:)-(SwitchboardError)``), or
/// from a file message that failed (``init(_:)-(Message)``).
public enum WebimSendFileError: String, Error, Sendable, Hashable, CaseIterable {
    /// Over the account's size limit (checked before uploading when the config says it).
    case fileSizeExceeded = "max_file_size_exceeded"
    /// An empty file.
    case fileSizeTooSmall = "file_size_too_small"
    /// A type the account does not take, or uploads are off (checked before uploading when the
    /// config says it).
    case fileTypeNotAllowed = "not_allowed_file_type"
    case maxFilesCountPerChatExceeded = "max_files_count_per_chat_exceeded"
    case uploadedFileNotFound = "uploaded-file-not-found"
    /// The visitor is not authorized on the server.
    case unauthorized = "unauthorized"
    case maliciousFileDetected = "malicious_file_detected"
    /// An upload error this version does not know (the SDK's `unknown`).
    case unknown

    /// The reason of an upload's failure, or `nil` when `error` is not one.
    public init?(_ error: SwitchboardError) {
        guard let reason = error.underlying as? WebimSendFileError else { return nil }
        self = reason
    }

    /// The reason a file message failed, or `nil` when it did not fail on its upload.
    public init?(_ message: Message) {
        guard case .failed(let reason) = message.deliveryState else { return nil }
        self.init(reason: reason)
    }

    /// `upload: <error string>`, the form a refused upload's reason takes: a known string is its
    /// case, a string the adapter does not classify otherwise is `unknown`, and any other reason
    /// (`upload: reinit-required`, `upload: HTTP 502`) is none.
    private init?(reason: String) {
        guard reason.hasPrefix(Self.prefix) else { return nil }
        let code = String(reason.dropFirst(Self.prefix.count))
        if let known = Self(rawValue: code) {
            self = known
        } else if code.allSatisfy({ $0.isLetter || $0 == "_" || $0 == "-" }), WebimMapping.error(code, during: "upload").code == .messageRejected {
            self = .unknown
        } else {
            return nil
        }
    }

    static let prefix = "upload: "

    /// The error an upload the server refused fails with: `payloadTooLarge` for a file too
    /// large, `messageRejected` for the rest (the message fails, the session goes on), with the
    /// message `upload: <error string>` and the reason as the underlying error.
    static func error(_ code: String) -> SwitchboardError {
        let reason = WebimSendFileError(rawValue: code) ?? .unknown
        return SwitchboardError(reason == .fileSizeExceeded ? .payloadTooLarge : .messageRejected, prefix + code, underlying: reason, vendorCode: code)
    }
}

extension WebimRequests {
    /// A link to a file of a message (`attachment.url`, or its `thumbnailURL` with `thumbnail`),
    /// signed for the page now: the SDK's `FileInfo.getURL()`. The store keeps each file's
    /// stable address; the server serves it only signed, and a signature lives 300 s, so ask for
    /// a link when the app opens the file. Computed on the device, without a request; needs the
    /// session connected (the page's credentials sign it).
    ///
    /// - Throws: `invalidArgument` for an attachment that has no Webim download address.
    public func downloadURL(for attachment: Message.Attachment, thumbnail: Bool = false) async throws -> URL {
        guard let url = thumbnail ? attachment.thumbnailURL : attachment.url else {
            throw SwitchboardError(.invalidArgument, "\(attachment.name) has no \(thumbnail ? "thumbnail" : "download") address")
        }
        return try await session.perform(WebimSignDownload(url: url))
    }
}

/// Signs a download address with the page's credentials (``WebimRequests/downloadURL(for:thumbnail:)``).
struct WebimSignDownload: VendorRequest {
    var url: URL
    var name: String { "sign-download" }

    func perform(on connection: any BackendConnection) async throws -> VendorResult<URL> {
        if let appeals = connection as? WebimAppealsLink { return VendorResult(try appeals.signedDownloadURL(url)) }
        return VendorResult(try link(connection, as: WebimLink.self).signedDownloadURL(url))
    }
}
