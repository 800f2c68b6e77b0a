// swift-tools-version: 6.1
// Benchmarks live in their own package so `swift build` and `swift test` of Switchboard never
// build package-benchmark. Run: `cd Benchmarks && swift package benchmark`.
import Foundation
import PackageDescription

/// A path dependency's identity is its directory's name, which depends on where the repository
/// was cloned.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "SwitchboardBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        benchmarkTarget("CoreBenchmarks", products: ["Switchboard", "SwitchboardTestKit"]),
        benchmarkTarget("StoreBenchmarks", products: ["Switchboard", "SwitchboardSQLite"]),
    ]
)

/// A package-benchmark executable in `Benchmarks/<name>` on the given Switchboard products.
func benchmarkTarget(_ name: String, products: [String]) -> Target {
    .executableTarget(
        name: name,
        dependencies: products.map { .product(name: $0, package: root) } + [.product(name: "Benchmark", package: "benchmark")],
        path: "Benchmarks/\(name)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}
