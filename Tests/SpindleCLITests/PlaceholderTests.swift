import Testing

import TiltShift

@Test func spindleFoundationLinks() { #expect(Bool(true)) }
