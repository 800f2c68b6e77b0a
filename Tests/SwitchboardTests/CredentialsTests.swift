import Switchboard
import Testing

/// Credentials printed, debug-printed, dumped or interpolated show their keys, never a value.
@Suite struct CredentialsTests {
    @Test func printingRedactsTheValues() {
        var credentials = Credentials()
        credentials["auth-token"] = "tok-3f9a77c1e2"
        credentials["page-id"] = "page-8812aa"
        var dumped = ""
        dump(credentials, to: &dumped)
        for text in ["\(credentials)", String(describing: credentials), String(reflecting: credentials), dumped, "\([credentials])"] {
            #expect(!text.contains("tok-3f9a77c1e2") && !text.contains("page-8812aa"), "\(text)")
            #expect(text.contains("auth-token"), "the keys stay: \(text)")
        }
    }
}
