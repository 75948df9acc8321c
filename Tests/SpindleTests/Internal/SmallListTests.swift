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
