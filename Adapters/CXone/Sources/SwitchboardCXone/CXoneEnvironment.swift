import Foundation
import Switchboard

/// Where a CXone brand lives: one of NICE's regions, or custom URLs (an emulator, a private
/// deployment). protocols/cxone.md §1.1, §1.4.
public struct CXoneEnvironment: Sendable, Hashable {
    public var chatURL: String
    public var socketURL: String
    public var loggerURL: String
    public var tokenURL: String

    public static let na1 = region("na1")
    public static let eu1 = region("eu1")
    public static let au1 = region("au1")
    public static let ca1 = region("ca1")
    public static let uk1 = region("uk1")
    public static let jp1 = region("jp1")

    static func region(_ name: String) -> CXoneEnvironment {
        CXoneEnvironment(
            chatURL: "https://channels-de-\(name).niceincontact.com/chat",
            socketURL: "wss://chat-gateway-de-\(name).niceincontact.com",
            loggerURL: "https://app-de-\(name).niceincontact.com/logger-public",
            tokenURL: "https://digital-oauth-de-\(name).niceincontact.com/"
        )
    }

    /// Custom URLs. An empty logger URL or a `nil` token URL is derived from the chat URL as the SDK
    /// derives it (`channels` → `app` / `digital-oauth`); when that does not give a NICE-shaped URL
    /// (an emulator on `http://127.0.0.1`), it stays empty.
    public init(chatURL: String, socketURL: String, loggerURL: String = "", tokenURL: String? = nil) {
        self.chatURL = chatURL
        self.socketURL = socketURL
        let parent = URL(string: chatURL)?.deletingLastPathComponent().absoluteString ?? ""
        if loggerURL.isEmpty {
            let derived = parent.replacingOccurrences(of: "channels", with: "app") + "logger-public"
            self.loggerURL = derived.range(of: #"^https://app[^/]+/logger-public$"#, options: .regularExpression) != nil ? derived : ""
        } else {
            self.loggerURL = loggerURL
        }
        if let tokenURL {
            self.tokenURL = tokenURL
        } else {
            let trimmed = parent.replacingOccurrences(of: "channels", with: "digital-oauth").trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            let derived = trimmed + "/"
            self.tokenURL = derived.range(of: #"^https://digital-oauth[^/]+/$"#, options: .regularExpression) != nil ? derived : ""
        }
    }

    /// `{chatURL}/1.0/brand/{brandId}/channel/{channelId}` (H1).
    public func channelConfigurationURL(brandID: Int, channelID: String) -> String {
        "\(chatURL)/1.0/brand/\(brandID)/channel/\(channelID)"
    }

    /// The WebSocket URL: the socket URL with its query replaced by the SDK's items.
    public func webSocketURL(brandID: Int, channelID: String, visitorID: String, transactionToken: String? = nil) throws -> String {
        guard var components = URLComponents(string: socketURL) else {
            throw SwitchboardError(.invalidArgument, "invalid websocket URL \(socketURL)")
        }
        var items = [
            URLQueryItem(name: "brandId", value: String(brandID)), URLQueryItem(name: "channelId", value: channelID),
            URLQueryItem(name: "visitorId", value: visitorID), URLQueryItem(name: "sdkPlatform", value: "ios"),
            URLQueryItem(name: "sdkVersion", value: CXoneWire.sdkVersion),
        ]
        if let transactionToken { items.append(URLQueryItem(name: "transactionToken", value: transactionToken)) }
        components.queryItems = items
        guard let url = components.string else { throw SwitchboardError(.invalidArgument, "invalid websocket URL \(socketURL)") }
        return url
    }
}
