import Foundation
public import Switchboard

/// A `WelcomeMessage` proactive action (protocols/cxone.md §2.4, `FireProactiveAction`): the text a
/// new thread opens with, as if the agent had written it, and the custom fields it hands over.
///
/// The link keeps the last one (credential `welcome-message`), puts it into each new local thread
/// as an agent message, and sends it with `SendOutbound` just before the customer's first message
/// of that thread, so the agent sees the conversation the customer saw.
public struct CXoneWelcomeMessage: Sendable, Hashable {
    public var actionID: String
    public var actionName: String
    /// The text with its variables (`{{customer.firstName|there}}`) as the server sent it.
    public var bodyText: String
    /// `handover.customFields`: merged into the customer's custom fields.
    public var handoverFields: [String: String]

    /// The welcome message of a `FireProactiveAction` event's `data`, or `nil` when the action is
    /// of another type (`CustomPopupBox`, which the SDK ignores, stays a `cxone.FireProactiveAction`
    /// event).
    /// - Throws: `SwitchboardError.Code.protocolViolation` (vendor code `invalidData`, as the SDK)
    ///   for a welcome message without `bodyText`.
    public init?(proactiveActionData data: JSONValue) throws {
        guard let action = data["proactiveAction"]?["action"], action["actionType"]?.stringValue == "WelcomeMessage" else { return nil }
        guard let body = action["data"]?["content"]?["bodyText"]?.stringValue else {
            throw SwitchboardError(.protocolViolation, "a WelcomeMessage without data.content.bodyText", vendorCode: "invalidData")
        }
        self.actionID = action["actionId"]?.stringValue ?? ""
        self.actionName = action["actionName"]?.stringValue ?? ""
        self.bodyText = body
        var fields: [String: String] = [:]
        for field in action["data"]?["handover"]?["customFields"]?.arrayValue ?? [] {
            if let ident = field["ident"]?.stringValue, let value = field["value"]?.stringValue { fields[ident] = value }
        }
        self.handoverFields = fields
    }

    /// `bodyText` with its variables filled in: `{{customer.firstName|fallback}}`,
    /// `customer.lastName`, `customer.fullName`, `customer.customFields.<ident>`. A variable without
    /// a value takes its fallback (after `|`), or nothing when it has none.
    public func text(firstName: String?, lastName: String?, customerFields: [String: String]) -> String {
        Self.fill(bodyText, firstName: firstName, lastName: lastName, customerFields: customerFields)
    }

    static func fill(_ text: String, firstName: String?, lastName: String?, customerFields: [String: String]) -> String {
        var result = ""
        var rest = Substring(text)
        while let open = rest.range(of: "{{"), let close = rest[open.upperBound...].range(of: "}}") {
            result += rest[..<open.lowerBound]
            let variable = rest[open.upperBound..<close.lowerBound]
            let parts = variable.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            let fallback = parts.count > 1 ? String(parts[1]) : ""
            result += value(of: name, firstName: firstName, lastName: lastName, customerFields: customerFields).flatMap { $0.isEmpty ? nil : $0 } ?? fallback
            rest = rest[close.upperBound...]
        }
        return result + rest
    }

    private static func value(of name: String, firstName: String?, lastName: String?, customerFields: [String: String]) -> String? {
        switch name {
        case "customer.firstName": return firstName
        case "customer.lastName": return lastName
        case "customer.fullName":
            let full = [firstName, lastName].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
            return full.isEmpty ? nil : full
        default:
            let prefix = "customer.customFields."
            guard name.hasPrefix(prefix) else { return nil }
            let ident = String(name.dropFirst(prefix.count))
            return customerFields[ident] ?? customerFields[name]
        }
    }
}
