import Testing

@testable import TiltShift

/// ``VerticalCascade`` walked in random steps (stopped after any row and resumed, in place as the whole-image filter
/// runs it and into another buffer), against three whole-image column passes: boxes with the fused steady state
/// (``BoxKernel/narrow``) and one without it, runs that start and end anywhere, strips of 64 bytes and wider.
struct VerticalCascadeWalkTests {
  @Test func cascadeWalkedInRandomStepsIsThreeColumnPasses() {
    var random = FilterKernelTests.Generator(state: 99)
    func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(random.next() % UInt64(range.count)) }
    for trial in 0..<400 {
      let width = [1, 3, 5, 7, 9, 11, 21, 41, 61, 301][trial % 10]
      let kernel = BoxKernel(width: width)
      let rowBytes = int(1...150)
      let height = int(1...120)
      let image = (0..<(rowBytes * height)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
      // Reference: three whole-image passes.
      var a = image
      var b = [UInt8](repeating: 0, count: image.count)
      let sums = UnsafeMutableRawPointer.allocate(byteCount: rowBytes * 4, alignment: 64)
      defer { sums.deallocate() }
      for _ in 0..<3 {
        a.withUnsafeBufferPointer { source in
          b.withUnsafeMutableBufferPointer { destination in
            kernel.blurColumns(
              source.baseAddress!, destination.baseAddress!, rowBytes: rowBytes, height: height,
              columns: 0..<rowBytes, rows: 0..<height, sums: sums)
          }
        }
        swap(&a, &b)
      }
      let expected = a
      let lower = int(0...(height - 1))
      let upper = int((lower + 1)...height)
      let run = lower..<upper
      let inPlace = trial % 2 == 0
      let cascade = VerticalCascade(
        kernel: kernel, rowBytes: rowBytes, height: height, stripBytes: trial % 3 == 0 ? 64 : nil)
      defer { cascade.deallocate() }
      var work = image
      var output = [UInt8](repeating: 0, count: image.count)
      var strip = 0
      while strip < rowBytes {
        let columns = strip..<min(rowBytes, strip + cascade.stripBytes)
        var walk = VerticalCascade.Walk(columns: columns, rows: run, radius: kernel.radius, last: height - 1)
        work.withUnsafeMutableBufferPointer { work in
          output.withUnsafeMutableBufferPointer { output in
            let source = work.baseAddress!
            let target = inPlace ? work.baseAddress! : output.baseAddress!
            while !walk.isFinished {
              let through = walk.next3 + int(0...12) - 1
              cascade.advance(
                &walk, through: through, sourceRow: { UnsafePointer(source + $0 * rowBytes + columns.lowerBound) },
                outputRow: { target + $0 * rowBytes + columns.lowerBound }, finished: { _ in })
            }
          }
        }
        strip = columns.upperBound
      }
      let actual = inPlace ? work : output
      for y in run {
        let range = (y * rowBytes)..<((y + 1) * rowBytes)
        guard actual[range] == expected[range] else {
          Issue.record(
            "trial \(trial): box \(width), \(rowBytes) x \(height), run \(run), row \(y), in place \(inPlace)")
          break
        }
      }
    }
  }
}
