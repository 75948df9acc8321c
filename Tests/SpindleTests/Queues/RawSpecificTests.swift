import Dispatch
import Testing

@testable import Spindle

/// The direct `dispatch_get_specific` fast path is found, verified, and agrees with the overlay.
@Suite struct RawSpecificTests {
  @Test func fastPathIsAvailableAndAgreesWithTheOverlay() throws {
    let get = try #require(RawSpecific.get, "dispatch_get_specific was not found or failed its self-test")
    let queue = IDQ(label: "raw-specific.a")
    let address = queue.identity.markerAddress
    #expect(get(address) == nil)
    let inside = queue.queue.sync { (get(address) != nil, DispatchQueue.getSpecific(key: queue.identity.marker)) }
    #expect(inside.0)
    #expect(inside.1 == true)
  }
}
