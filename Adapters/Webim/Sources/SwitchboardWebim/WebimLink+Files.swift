import Foundation
import Switchboard
import SwitchboardTransport

// Files: the upload, and the resend of an upload whose answer was lost.
extension WebimLink {
    /// Before a resend of an upload whose answer was lost: waits until its echo has come, or until
    /// a delta answer requested after the loss has been read (the answer in flight then may have
    /// been asked for before the server made the message; the next one was asked for after it).
    /// A file the server has is not uploaded twice; one it never got is, one long-poll later at
    /// most. Ends early when the request is cancelled (the link closing).
    func waitForEchoOfLostUpload(_ clientSideID: String) async {
        while !Task.isCancelled {
            let generation = deltaRead.generation
            let settled = state.withLock { state -> Bool in
                guard let lost = state.lostUploads[clientSideID] else { return true }
                guard state.reader.clientSideIDs.values.contains(clientSideID) || state.deltaAnswers >= lost + 2 else { return false }
                state.lostUploads[clientSideID] = nil
                return true
            }
            if settled { return }
            await deltaRead.wait(since: generation)
        }
    }

    /// `POST /l/v/m/upload` after the account's limits are checked locally. A refusal is a
    /// ``WebimSendFileError``; `reinit-required`, `chat-required` and the like are the link's.
    func upload(_ attachment: Message.Attachment, clientSideID: String) async throws {
        let (maxBytes, allowed, uploadAllowed) = state.withLock { ($0.maxUploadBytes, $0.allowedFileTypes, $0.uploadAllowed) }
        guard uploadAllowed else { throw WebimSendFileError.error(WebimSendFileError.fileTypeNotAllowed.rawValue) }
        let data = try attachment.contents()
        guard data.count <= maxBytes else { throw WebimSendFileError.error(WebimSendFileError.fileSizeExceeded.rawValue) }
        guard !data.isEmpty else { throw WebimSendFileError.error(WebimSendFileError.fileSizeTooSmall.rawValue) }
        let ext = (attachment.name as NSString).pathExtension.lowercased()
        guard allowed.isEmpty || allowed.contains(ext) else { throw WebimSendFileError.error(WebimSendFileError.fileTypeNotAllowed.rawValue) }
        try await actions.withGate {
            let (page, token) = state.withLock { ($0.credentials["page-id"] ?? "", $0.credentials["auth-token"] ?? "") }
            let response = try await transport.postMultipart(
                "\(base)/l/v/m/upload",
                fields: [("chat-mode", "online"), ("client-side-id", clientSideID), ("page-id", page), ("auth-token", token)],
                file: HTTPTransport.FilePart(field: "webim_upload_file", filename: attachment.name, contentType: attachment.mimeType ?? "application/octet-stream", data: data),
                headers: headers,
                timeout: configuration.requestTimeout
            )
            try Self.checkStatus(response.status, during: "upload")
            do {
                _ = try WebimDeltaReader.readUploadAnswer(response.body)
            } catch let error as SwitchboardError {
                // The SDK's file errors, and what the mapping leaves unclassified, are the file's
                // refusal; the rest (re-init, authentication, no chat, the server failing) stay
                // the link's, retried as any request's.
                guard let code = error.vendorCode, WebimSendFileError(rawValue: code) != nil || error.code == .messageRejected else { throw error }
                throw WebimSendFileError.error(code)
            }
        }
    }
}
