enum TourCommand {
  static func run(_ arguments: [String]) throws -> Int32 {
    Terminal.out("spindle tour: not yet")
    return 0
  }
}
