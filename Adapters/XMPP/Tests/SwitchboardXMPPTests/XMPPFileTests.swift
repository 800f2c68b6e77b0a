import Foundation
import Switchboard
import SwitchboardTestKit
import SwitchboardTransport
@_spi(WireReaders) import SwitchboardXMPP
import Testing

/// Files (XEP-0363 uploads, XEP-0066 addresses) against a real Prosody, whose upload service
/// takes 1 MiB at most.
@Suite(.serialized, Prosody.needed, .timeLimit(.minutes(3)))
struct XMPPFileTests {
    let live = XMPPLiveTests()

    /// Files both ways: the session's goes up to the server's upload service (found among its
    /// services, XEP-0363) and reaches the agent as an address it fetches the same bytes from;
    /// the agent's (an address as out-of-band data) arrives as a file message. A file over the
    /// service's limit fails `payloadTooLarge`, and nothing is archived for it.
    @Test func filesBothWays() async throws {
        try await Prosody.withServer { server in
            let session = live.session(try live.backend(server))
            try await withConnectedRecording(session) { recorder in
                try await server.send(["hello"], from: "agent1", to: XMPPLiveTests.customer)
                try await recorder.first("the agent's hello") { $0.addedMessage?.text == "hello" }
                let chat = try await session.conversation(ConversationID(XMPPLiveTests.agent))
                let bytes = Data((0..<100_000).map { UInt8($0 % 251) })
                let sent = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "report 1.bin", mimeType: "application/octet-stream", data: bytes)]))
                let confirmed = try await recorder.first("the file sent") { $0.updatedMessage.map { $0.clientID == sent.clientID && $0.serverID != nil } ?? false }
                let url = try #require(confirmed.updatedMessage?.attachments.first?.url)
                let fetched = try await Prosody.transport.get(url.absoluteString, timeout: .seconds(10))

                let agentFile = "\(server.httpURL)/files/elsewhere/photo.jpg"
                try await server.asUser("agent1") { agent in
                    try await agent.write(
                        "<message xmlns='jabber:client' type='chat' to='\(XMPPLiveTests.customer)' id='\(UUID().uuidString)'><body>\(agentFile)</body>"
                            + "<x xmlns='jabber:x:oob'><url>\(agentFile)</url></x></message>"
                    )
                }
                let received = try await recorder.first("the agent's file") { $0.addedMessage?.attachments.first?.url?.absoluteString == agentFile }

                let big = try await chat.send(MessageDraft(text: "", attachments: [Message.Attachment(name: "big.bin", mimeType: "application/octet-stream", data: Data(count: 1_048_577))]))
                let refused = try await recorder.first("the big file refused") { event in
                    guard let message = event.updatedMessage, message.clientID == big.clientID, case .failed = message.deliveryState else { return false }
                    return true
                }
                let archive = try await server.archive(of: "customer", with: XMPPLiveTests.agent).filter(\.isMessage)
                print(
                    "xmpp live: files — sent \(bytes.count) bytes, fetched \(fetched.body.count) (equal \(fetched.body == bytes)) from \(url.lastPathComponent); "
                        + "the agent's arrived as \(received.addedMessage?.kind == .file ? "a file" : "text") named \(received.addedMessage?.attachments.first?.name ?? ""); "
                        + "the big one \(refused.updatedMessage?.deliveryState ?? .pending); \(archive.count) archived"
                )
                #expect(fetched.status == 200 && fetched.body == bytes)
                #expect(confirmed.updatedMessage?.kind == .file && confirmed.updatedMessage?.attachments.first?.name == "report 1.bin")
                #expect(confirmed.updatedMessage?.attachments.first?.mimeType == "application/octet-stream" && confirmed.updatedMessage?.attachments.first?.size == 100_000)
                #expect(archive.last(where: { $0.from == XMPPLiveTests.customer })?.body == url.absoluteString)
                #expect(received.addedMessage?.kind == .file && received.addedMessage?.attachments.first?.name == "photo.jpg")
                // hello, the file, the agent's file: the big one never went out.
                #expect(archive.count == 3)
            }
        }
    }
}
