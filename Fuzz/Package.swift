// swift-tools-version: 6.1
// libFuzzer targets for every wire decoder, in their own package so `swift build` of Switchboard
// never builds them (they link only with `-sanitize=fuzzer`, which provides `main`).
// Run one: `Fuzz/run.sh FuzzJSON 1000000` (Docs/Reliability.md). CI builds them all and runs each
// on its seed corpus: `Fuzz/ci.sh`.
import Foundation
import PackageDescription

/// A path dependency's identity is its directory's name, which depends on where the repository
/// was cloned.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "SwitchboardFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        fuzzTarget("FuzzJSON", products: ["Switchboard"]),
        fuzzTarget("FuzzWebim", products: ["Switchboard", "SwitchboardWebim"]),
        fuzzTarget("FuzzVoximplant", products: ["Switchboard", "SwitchboardVoximplant"]),
        fuzzTarget("FuzzCXone", products: ["Switchboard", "SwitchboardCXone"]),
        fuzzTarget("FuzzMatrix", products: ["Switchboard", "SwitchboardMatrix"]),
        fuzzTarget("FuzzXMPP", products: ["Switchboard", "SwitchboardXMPP"]),
        .target(name: "FuzzDriver", path: "Targets/FuzzDriver"),
    ]
)

/// A fuzz target in `Targets/<name>`: a `main.swift` that hands libFuzzer's driver the function
/// under test, over the given products.
func fuzzTarget(_ name: String, products: [String]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzDriver"] + products.map { .product(name: $0, package: root) },
        path: "Targets/\(name)",
        swiftSettings: [.swiftLanguageMode(.v6)]
    )
}
