import CXoneCommands
import MatrixCommands
import SwitchboardCommandKit
import VoximplantCommands
import WebimCommands
import XMPPCommands

/// The adapters this tool knows, one line each: `connect`, `emulate`, `gateway`, `soak`, `load`,
/// `bench`'s latency rows and `demo` loop over them, in this order (the demo's parts and `soak
/// all` run in it). A new adapter adds its entry here (and its targets to the manifest), nothing
/// else.
let registry: [AdapterEntry] = [
    VoximplantCommands.entry,
    WebimCommands.entry,
    CXoneCommands.entry,
    MatrixCommands.entry,
    XMPPCommands.entry,
]
