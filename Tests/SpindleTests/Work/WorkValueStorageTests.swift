import SpindleTestSupport
import Testing

@testable import Spindle

/// A finished item keeps its value in a type-erased slot (no `Value?` field; see `Work.storedValue`). These tests try
/// to break that: values that are optional themselves, values too big for the existential's inline buffer, values
/// with references, and every way a value leaves an item (wait, await, a typed dependent, fan-in, a callback).
@Suite struct WorkValueStorageTests {
  /// Five words: too big to sit inline in an existential, so the slot boxes it.
  struct Large: Equatable, Sendable {
    var a: Int
    var b: Int
    var c: Int
    var d: Int
    var text: String
  }

  final class Reference: Sendable {}

  @Test func anOptionalValueThatIsNilStaysNilAndDoesNotLookUnfinished() throws {
    let queue = WorkQueue(name: "values", maxConcurrent: 2)
    let none = queue.add { () -> Int? in nil }
    let some = queue.add { () -> Int? in 7 }
    let nested = queue.add { () -> Int?? in .some(nil) }
    #expect(try none.wait() == nil)
    #expect(try some.wait() == 7)
    let nestedValue = try nested.wait()
    #expect(nestedValue != nil)
    #expect(nestedValue! == nil)
    #expect(try none.result?.get() == nil)
    #expect(none.state == .finished)
    // A dependent receives the nil as a value, not as a missing one.
    let described = queue.add(after: none) { (value: Int?) in value.map(String.init) ?? "nil" }
    #expect(try described.wait() == "nil")
  }

  @Test func anOptionalNilArrivesThroughAwait() async throws {
    let queue = WorkQueue(name: "values", maxConcurrent: 2)
    let none = queue.add { () -> String? in nil }
    #expect(try await none.value == nil)
  }

  @Test func largeValuesSurviveEveryWayOut() throws {
    let queue = WorkQueue(name: "values", maxConcurrent: 2)
    let parts = (0..<8).map { index in
      queue.add { Large(a: index, b: index * 2, c: index * 3, d: index * 4, text: "part \(index)") }
    }
    let combined = queue.add(afterAll: parts) { (values: [Large]) in values.map(\.text).joined(separator: ",") }
    let doubled = queue.add(after: parts[3]) { (value: Large) in value.d * 2 }
    let called = queue.addCallback { (finish: WorkFinish<Large>) in
      finish(.success(Large(a: 1, b: 2, c: 3, d: 4, text: "from a callback")))
    }
    #expect(try combined.wait() == (0..<8).map { "part \($0)" }.joined(separator: ","))
    #expect(try doubled.wait() == 24)
    #expect(try parts[5].wait() == Large(a: 5, b: 10, c: 15, d: 20, text: "part 5"))
    #expect(try called.wait().text == "from a callback")
  }

  @Test func aValueThatHoldsAReferenceIsReleasedWithItsWork() throws {
    weak var held: Reference?
    do {
      let queue = WorkQueue(name: "values", maxConcurrent: 2)
      let work = queue.add { () -> (Reference, Int) in (Reference(), 1) }
      let (reference, number) = try work.wait()
      held = reference
      #expect(number == 1)
      #expect(try work.wait().0 === reference)
    }
    // A worker that ran the item may hold it for a moment while it looks for more work.
    #expect(eventually { held == nil })
  }
}
