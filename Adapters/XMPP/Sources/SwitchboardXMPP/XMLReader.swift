public import Switchboard

/// One XML element of a stanza, its namespaces resolved.
///
/// XMPP over WebSocket (RFC 7395) puts one whole element in each frame, in the restricted XML of
/// RFC 6120 §11: no DTD, no comments, no processing instructions, only the five predefined
/// entities and character references. ``XMLReader`` reads exactly that; anything else is a
/// protocol violation, never a crash.
@_spi(WireReaders) public struct XMPPElement: Sendable, Hashable {
    /// The local name (`message`, `features`).
    public var name: String
    /// The namespace URI the element's prefix or default namespace resolves to.
    public var namespace: String
    /// Attributes by name: unprefixed ones by their local name, prefixed ones as written
    /// (`xml:lang`). Namespace declarations are not attributes.
    public var attributes: [String: String]
    public var children: [XMPPElement]
    /// The character data directly inside the element, entities replaced.
    public var text: String

    public init(name: String, namespace: String, attributes: [String: String] = [:], children: [XMPPElement] = [], text: String = "") {
        self.name = name
        self.namespace = namespace
        self.attributes = attributes
        self.children = children
        self.text = text
    }

    public subscript(attribute: String) -> String? { attributes[attribute] }

    /// The first child with this name, in `namespace` when one is given.
    public func child(_ name: String, _ namespace: String? = nil) -> XMPPElement? {
        children.first { $0.name == name && (namespace == nil || $0.namespace == namespace) }
    }

    public func children(_ name: String, _ namespace: String? = nil) -> [XMPPElement] {
        children.filter { $0.name == name && (namespace == nil || $0.namespace == namespace) }
    }

    /// Whether the element is `name` in `namespace`.
    public func `is`(_ name: String, _ namespace: String) -> Bool {
        self.name == name && self.namespace == namespace
    }
}

/// Reads one frame (one element) of restricted XML.
@_spi(WireReaders) public enum XMLReader {
    /// Deeper nesting is refused: no stanza XMPP defines needs more than a dozen levels.
    public static let maxDepth = 64
    /// More elements in one frame are refused (a frame is at most the transport's 1 MiB).
    public static let maxElements = 50_000
    /// More namespace declarations on one element are refused (each is copied into the scope of
    /// the element's children).
    public static let maxDeclarations = 32

    /// The element `text` holds.
    ///
    /// - Throws: ``SwitchboardError/Code/protocolViolation`` for what is not one well-formed
    ///   element of restricted XML, with undeclared prefixes, too deep or too many elements.
    public static func read(_ text: String) throws(SwitchboardError) -> XMPPElement {
        var parser = Parser(bytes: Array(text.utf8))
        return try parser.document()
    }

    /// Whether every character of `text` is one XML allows (no control characters but tab and
    /// line ends, no U+FFFE or U+FFFF): a server ends the stream of a client that sends others.
    public static func isAllowed(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy(Parser.isXMLCharacter)
    }

    /// `text` as character data.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        var elements = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func document() throws(SwitchboardError) -> XMPPElement {
            skipSpace()
            guard peek() == UInt8(ascii: "<") else { throw failure("a frame must be one element") }
            let root = try element(scope: ["xml": "http://www.w3.org/XML/1998/namespace"], depth: 1)
            skipSpace()
            guard index == bytes.count else { throw failure("text after the element") }
            return root
        }

        mutating func element(scope parentScope: [String: String], depth: Int) throws(SwitchboardError) -> XMPPElement {
            guard depth <= XMLReader.maxDepth else { throw failure("elements nested deeper than \(XMLReader.maxDepth)") }
            elements += 1
            guard elements <= XMLReader.maxElements else { throw failure("more than \(XMLReader.maxElements) elements") }
            try expect(UInt8(ascii: "<"))
            switch peek() {
            case UInt8(ascii: "!"): throw failure("comments, CDATA and DTDs are not allowed in XMPP")
            case UInt8(ascii: "?"): throw failure("processing instructions are not allowed in XMPP")
            default: break
            }
            let qualified = try name()
            var raw: [(String, String)] = []
            var names = Set<String>()
            var declarations = 0
            var scope = parentScope
            var closed = false
            while true {
                let spaced = skipSpace()
                guard let byte = peek() else { throw failure("the frame ends inside <\(qualified)>") }
                if byte == UInt8(ascii: "/") {
                    index += 1
                    try expect(UInt8(ascii: ">"))
                    closed = true
                    break
                }
                if byte == UInt8(ascii: ">") {
                    index += 1
                    break
                }
                guard spaced else { throw failure("attributes of <\(qualified)> must be separated by space") }
                let attribute = try name()
                skipSpace()
                try expect(UInt8(ascii: "="))
                skipSpace()
                let value = try quoted()
                if attribute == "xmlns" || attribute.hasPrefix("xmlns:") {
                    declarations += 1
                    guard declarations <= XMLReader.maxDeclarations else { throw failure("more than \(XMLReader.maxDeclarations) namespace declarations") }
                }
                if attribute == "xmlns" {
                    scope[""] = value
                } else if attribute.hasPrefix("xmlns:") {
                    let prefix = String(attribute.dropFirst(6))
                    guard !prefix.isEmpty, !value.isEmpty else { throw failure("an empty namespace prefix or URI") }
                    scope[prefix] = value
                } else {
                    guard names.insert(attribute).inserted else { throw failure("attribute \(attribute) given twice") }
                    raw.append((attribute, value))
                }
            }
            let (prefix, local) = split(qualified)
            guard let namespace = scope[prefix ?? ""] ?? (prefix == nil ? "" : nil) else {
                throw failure("the prefix \(prefix ?? "") is not declared")
            }
            var attributes: [String: String] = [:]
            for (key, value) in raw {
                let (attributePrefix, _) = split(key)
                if let attributePrefix, scope[attributePrefix] == nil { throw failure("the prefix \(attributePrefix) is not declared") }
                attributes[key] = value
            }
            var result = XMPPElement(name: local, namespace: namespace, attributes: attributes)
            if closed { return result }
            while true {
                guard let byte = peek() else { throw failure("the frame ends inside <\(qualified)>") }
                if byte == UInt8(ascii: "<") {
                    if peek(1) == UInt8(ascii: "/") {
                        index += 2
                        let end = try name()
                        skipSpace()
                        try expect(UInt8(ascii: ">"))
                        guard end == qualified else { throw failure("</\(end)> closes <\(qualified)>") }
                        return result
                    }
                    result.children.append(try element(scope: scope, depth: depth + 1))
                } else {
                    result.text += try characters()
                }
            }
        }

        /// Character data up to the next `<`, entities and references replaced.
        mutating func characters() throws(SwitchboardError) -> String {
            var scalars: [UInt8] = []
            while let byte = peek(), byte != UInt8(ascii: "<") {
                if byte == UInt8(ascii: "&") {
                    scalars.append(contentsOf: try reference())
                } else if byte == UInt8(ascii: ">") && index >= 2 && bytes[index - 1] == UInt8(ascii: "]") && bytes[index - 2] == UInt8(ascii: "]") {
                    throw failure("]]> in character data")
                } else {
                    scalars.append(byte)
                    index += 1
                }
            }
            return try decode(scalars)
        }

        mutating func quoted() throws(SwitchboardError) -> String {
            guard let quote = peek(), quote == UInt8(ascii: "'") || quote == UInt8(ascii: "\"") else {
                throw failure("an attribute value must be quoted")
            }
            index += 1
            var scalars: [UInt8] = []
            while true {
                guard let byte = peek() else { throw failure("the frame ends inside an attribute value") }
                if byte == quote {
                    index += 1
                    return try decode(scalars)
                }
                if byte == UInt8(ascii: "<") { throw failure("< in an attribute value") }
                if byte == UInt8(ascii: "&") {
                    scalars.append(contentsOf: try reference())
                } else {
                    scalars.append(byte)
                    index += 1
                }
            }
        }

        /// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&#N;` or `&#xH;` as UTF-8.
        mutating func reference() throws(SwitchboardError) -> [UInt8] {
            index += 1
            let start = index
            while let byte = peek(), byte != UInt8(ascii: ";") {
                guard index - start < 10 else { throw failure("an entity reference that does not end") }
                index += 1
            }
            guard peek() == UInt8(ascii: ";") else { throw failure("an entity reference that does not end") }
            let entity = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 1
            switch entity {
            case "amp": return [UInt8(ascii: "&")]
            case "lt": return [UInt8(ascii: "<")]
            case "gt": return [UInt8(ascii: ">")]
            case "quot": return [UInt8(ascii: "\"")]
            case "apos": return [UInt8(ascii: "'")]
            default:
                guard entity.hasPrefix("#") else { throw failure("the entity &\(entity); is not one XMPP allows") }
                let digits = entity.dropFirst()
                let value = digits.hasPrefix("x") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
                guard let value, let scalar = Unicode.Scalar(value), Self.isXMLCharacter(scalar) else {
                    throw failure("the character reference &\(entity); is not a character XML allows")
                }
                return Array(String(scalar).utf8)
            }
        }

        /// An element or attribute name: letters, digits and `_-.:` (XML allows more; nothing
        /// XMPP defines uses it, and a stranger name is refused rather than guessed at).
        mutating func name() throws(SwitchboardError) -> String {
            let start = index
            while let byte = peek(), Self.isNameByte(byte) { index += 1 }
            guard index > start else { throw failure("a name was expected") }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let first = text.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first), first != UInt8(ascii: "-"), first != UInt8(ascii: ".") else {
                throw failure("\(text) is not a name")
            }
            return text
        }

        static func isNameByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"):
                true
            default:
                byte >= 0x80
            }
        }

        static func isXMLCharacter(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: true
            default: false
            }
        }

        func split(_ qualified: String) -> (prefix: String?, local: String) {
            guard let colon = qualified.firstIndex(of: ":") else { return (nil, qualified) }
            return (String(qualified[..<colon]), String(qualified[qualified.index(after: colon)...]))
        }

        func decode(_ scalars: [UInt8]) throws(SwitchboardError) -> String {
            guard let text = String(validating: scalars, as: UTF8.self) else { throw failure("text that is not UTF-8") }
            for scalar in text.unicodeScalars where !Self.isXMLCharacter(scalar) {
                throw failure("a control character XML does not allow")
            }
            return text
        }

        @discardableResult
        mutating func skipSpace() -> Bool {
            let start = index
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
            return index > start
        }

        func peek(_ offset: Int = 0) -> UInt8? {
            index + offset < bytes.count ? bytes[index + offset] : nil
        }

        mutating func expect(_ byte: UInt8) throws(SwitchboardError) {
            guard peek() == byte else { throw failure("expected \(Character(Unicode.Scalar(byte)))") }
            index += 1
        }

        func failure(_ what: String) -> SwitchboardError {
            SwitchboardError(.protocolViolation, "XML: \(what) (at byte \(index))")
        }
    }
}
