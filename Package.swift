// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "switchboard",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Switchboard", targets: ["Switchboard"]),
        .library(name: "SwitchboardTestKit", targets: ["SwitchboardTestKit"]),
        .executable(name: "switchboard", targets: ["switchboard"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // The core: value types, the backend seam, the session engine, the event bus, the pure
        // sync state machines and the in-memory store. No networking, no SQLite.
        .target(
            name: "Switchboard",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // What adapter authors and app tests use: the reference in-memory backend, test clocks,
        // the emulator-control protocol and the conformance suite.
        .target(
            name: "SwitchboardTestKit",
            dependencies: [
                "Switchboard",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        .executableTarget(
            name: "switchboard",
            dependencies: [
                "Switchboard",
                "SwitchboardTestKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "SwitchboardTests",
            dependencies: ["Switchboard", "SwitchboardTestKit"]
        ),
        .testTarget(
            name: "SwitchboardTestKitTests",
            dependencies: ["Switchboard", "SwitchboardTestKit"]
        ),
        .testTarget(
            name: "SwitchboardCLITests",
            dependencies: ["switchboard"]
        ),
    ]
)

// Language settings for every target (the swift-log pattern): Swift 6 mode plus the upcoming
// features that make API boundaries and isolation explicit.
for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(contentsOf: [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
        .enableUpcomingFeature("InternalImportsByDefault"),
        .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
    ])
    target.swiftSettings = settings
}
