import Testing

@testable import SpindleFoundation

@Test func spindleFoundationLinks() { #expect(Bool(true)) }
