/// The tilt-shift filter on 16-bit images: the same blur, mask and blend as the 8-bit filter, with every pass
/// rounded to 16 bits instead of 8, so a 16-bit PNG keeps its depth.
///
/// Three horizontal then three vertical box passes (``BoxKernel16``) over the whole image, then each sample
/// blended as `(original · (255 − w) + blurred · w) / 255`, rounded, with the 8-bit mask weight `w` of its row
/// (or column, for photos shown turned a quarter); alpha is copied from the original.
struct TiltShiftPlan16 {
  let width: Int
  let height: Int
  let channels: Int
  let hasAlpha: Bool
  let kernel: BoxKernel16
  /// Mask weight per row, or per pixel column for orientations 5...8.
  let weights: [UInt8]
  let weightsPerColumn: Bool

  init(image: Image, parameters: TiltShiftParameters) {
    width = image.width
    height = image.height
    channels = image.layout.channels
    hasAlpha = image.layout.hasAlpha
    kernel = BoxKernel16(width: parameters.boxWidth)
    let orientation = image.orientation
    weightsPerColumn = orientation >= 5
    weights =
      weightsPerColumn
      ? GradientMask(count: width, parameters: parameters, reversed: orientation >= 7).weights
      : GradientMask(count: height, parameters: parameters, reversed: orientation == 3 || orientation == 4).weights
  }

  /// Filters `original` (16-bit samples in host byte order, as ``Image/pixels`` holds them) and returns the
  /// output in the same form. Holds three images at once: the original, one work buffer and the output.
  func run(_ original: [UInt8], bands: Int) -> [UInt8] {
    let rowSamples = width * channels
    let count = original.count / 2
    var work = [UInt16](repeating: 0, count: count)
    var output = [UInt8](repeating: 0, count: count * 2)
    original.withUnsafeBytes { original in
      work.withUnsafeMutableBufferPointer { work in
        output.withUnsafeMutableBytes { output in
          let shared = (
            SharedPointer(UnsafeMutablePointer(mutating: original.bindMemory(to: UInt16.self).baseAddress!)),
            SharedPointer(work.baseAddress!),
            SharedPointer(output.bindMemory(to: UInt16.self).baseAddress!)
          )
          let rowPieces = min(max(1, bands), height)
          // Horizontal: original → output → work → output, row bands.
          parallelBands(count: rowPieces) { piece in
            let (source, first, second) = (UnsafePointer(shared.0.pointer), shared.1.pointer, shared.2.pointer)
            for y in height * piece / rowPieces..<height * (piece + 1) / rowPieces {
              let offset = y * rowSamples
              kernel.blurRow(source + offset, second + offset, count: width, channels: channels)
              kernel.blurRow(second + offset, first + offset, count: width, channels: channels)
              kernel.blurRow(first + offset, second + offset, count: width, channels: channels)
            }
          }
          // Vertical: output → work → output → work, column strips; then blend into output.
          let columnPieces = min(max(1, bands), rowSamples)
          parallelBands(count: columnPieces) { piece in
            let (source, first, second) = (UnsafePointer(shared.0.pointer), shared.1.pointer, shared.2.pointer)
            let columns = rowSamples * piece / columnPieces..<rowSamples * (piece + 1) / columnPieces
            guard !columns.isEmpty else { return }
            let sums = UnsafeMutablePointer<UInt32>.allocate(capacity: columns.count)
            defer { sums.deallocate() }
            kernel.blurColumns(second, first, rowSamples: rowSamples, height: height, columns: columns, sums: sums)
            kernel.blurColumns(first, second, rowSamples: rowSamples, height: height, columns: columns, sums: sums)
            kernel.blurColumns(second, first, rowSamples: rowSamples, height: height, columns: columns, sums: sums)
            for y in 0..<height {
              let offset = y * rowSamples
              for index in columns {
                let pixel = index / channels
                if hasAlpha && index % channels == channels - 1 {
                  second[offset + index] = source[offset + index]
                  continue
                }
                let weight = UInt32(weights[weightsPerColumn ? pixel : y])
                second[offset + index] = Self.mix(source[offset + index], first[offset + index], weight)
              }
            }
          }
        }
      }
    }
    return output
  }

  /// `(original · (255 − weight) + blurred · weight) / 255`, rounded half up.
  @inline(__always)
  static func mix(_ original: UInt16, _ blurred: UInt16, _ weight: UInt32) -> UInt16 {
    UInt16((UInt32(original) * (255 - weight) + UInt32(blurred) * weight + 127) / 255)
  }
}

extension TiltShiftFilter {
  /// ``apply(to:bands:)`` for 16-bit images: same size, layout, depth and metadata.
  func apply16(to image: Image, bands: Int) -> Image {
    let plan = TiltShiftPlan16(image: image, parameters: parameters)
    return image.replacingPixels(plan.run(image.pixels, bands: bands))
  }
}
