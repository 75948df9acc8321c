import Testing

@testable import Spindle

@Suite struct SmallListTests {
  @Test(arguments: [0, 1, 2, 3, 17])
  func keepsOrderWhateverTheCount(count: Int) {
    var list = SmallList<Int>()
    for value in 0..<count { list.append(value) }
    #expect(list.isEmpty == (count == 0))
    #expect(Array(list) == Array(0..<count))
    var visited: [Int] = []
    list.forEachElement { visited.append($0) }
    #expect(visited == Array(0..<count))
    // A copy iterated after more appends to the original still sees only its own elements.
    let copy = list
    list.append(100)
    #expect(Array(copy) == Array(0..<count))
    #expect(Array(list) == Array(0..<count) + [100])
  }

  @Test(arguments: [0, 1, 2, 3, 17])
  func popFirstTakesTheElementsInOrderAndLeavesAnEmptyList(count: Int) {
    var list = SmallList<Int>()
    for value in 0..<count { list.append(value) }
    var popped: [Int] = []
    while let value = list.popFirst() {
      popped.append(value)
      // What is left is still in order, and appending after a pop keeps it so.
      #expect(Array(list) == Array(popped.count..<count))
    }
    #expect(popped == Array(0..<count))
    #expect(list.isEmpty)
    list.append(7)
    list.append(8)
    #expect(list.popFirst() == 7)
    #expect(Array(list) == [8])
  }

  @Test(arguments: [0, 1, 2, 3])
  func popOnlyTakesTheElementOfAListOfOneAndLeavesLongerListsAlone(count: Int) {
    var list = SmallList<Int>()
    for value in 0..<count { list.append(value) }
    let popped = list.popOnly()
    #expect(popped == (count == 1 ? 0 : nil))
    #expect(Array(list) == (count == 1 ? [] : Array(0..<count)))
  }

  @Test(arguments: [0, 1, 2, 3, 17])
  func removeAllHandsOverEveryElementInOrderAndEmptiesTheList(count: Int) {
    var list = SmallList<Int>()
    for value in 0..<count { list.append(value) }
    var handed: [Int] = []
    list.removeAll { handed.append($0) }
    #expect(handed == Array(0..<count))
    #expect(list.isEmpty)
    #expect(Array(list).isEmpty)
  }

  @Test(arguments: [1, 2, 3])
  func listsEmptiedByPopOrRemoveAllHoldNoReference(count: Int) {
    final class Deaths { var count = 0 }
    final class Token {
      let deaths: Deaths
      init(_ deaths: Deaths) { self.deaths = deaths }
      deinit { deaths.count += 1 }
    }
    let deaths = Deaths()
    var popping = SmallList<Token>()
    var removing = SmallList<Token>()
    for _ in 0..<count {
      popping.append(Token(deaths))
      removing.append(Token(deaths))
    }
    while popping.popFirst() != nil {}
    removing.removeAll { _ in }
    // Both lists are still alive here: had either kept a reference, a token would be alive too.
    #expect(deaths.count == 2 * count)
    #expect(popping.isEmpty && removing.isEmpty)
  }

  @Test func releasesWhatItHeldWhenDestroyed() {
    final class Token {}
    weak var first: Token?
    weak var third: Token?
    do {
      var list = SmallList<Token>()
      let tokens = [Token(), Token(), Token()]
      first = tokens[0]
      third = tokens[2]
      for token in tokens { list.append(token) }
      #expect(list.map { ObjectIdentifier($0) } == tokens.map { ObjectIdentifier($0) })
    }
    #expect(first == nil)
    #expect(third == nil)
  }
}
