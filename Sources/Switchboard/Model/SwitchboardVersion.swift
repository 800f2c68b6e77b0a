/// The version of this library (the package's; not any vendor SDK's wire version an adapter
/// speaks, such as `CXoneRequests.sdkVersion`). Until the first tag it is a pre-release.
public enum SwitchboardVersion {
    public static let string = "0.1.0-dev"
}
