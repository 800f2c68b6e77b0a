import CXoneCommands
import MatrixCommands
import SwitchboardCommandKit
import VoximplantCommands
import WebimCommands

/// The adapters this tool knows, one line each: `connect`, `emulate` and `gateway` loop over
/// them. A new adapter adds its entry here (and its targets to the manifest), nothing else.
let registry: [AdapterEntry] = [
    VoximplantCommands.entry,
    WebimCommands.entry,
    CXoneCommands.entry,
    MatrixCommands.entry,
]
