import Testing

@testable import TiltShift

@Test func spindleFoundationLinks() { #expect(Bool(true)) }
