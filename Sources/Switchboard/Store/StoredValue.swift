package import Foundation

/// The JSON of a model value as a durable store keeps it, beside the columns its queries need:
/// shared by the SQLite and PostgreSQL stores so both write the same bytes, and both report a
/// value that does not encode or decode as `storageFailure`.
package enum StoredValue {
    package static func encode(_ value: some Encodable) throws -> Data {
        do {
            return try JSONEncoder().encode(value)
        } catch {
            throw SwitchboardError(.storageFailure, "cannot encode \(type(of: value)) for the store", underlying: error)
        }
    }

    package static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw SwitchboardError(.storageFailure, "a stored \(type) does not decode", underlying: error)
        }
    }
}
