extension Image {
  /// How the stored pixels are shown (1...8, EXIF's numbering): the EXIF tag, else XMP's `tiff:Orientation`, else 1.
  ///
  /// EXIF wins when both are present, as in the viewers that read both.
  public var orientation: Int {
    if let exif = metadata.exif, let value = EXIFReader(exif).orientation { return value }
    if let xmp = metadata.xmp, let value = XMPPacket.orientation(in: xmp) { return value }
    return 1
  }

  /// The pixels turned and flipped as a viewer shows them, so that orientation 1 shows the same picture.
  ///
  /// The metadata is kept as is (the caller strips or rewrites it); orientations 5 to 8 swap width and height.
  ///
  /// ```swift
  /// var upright = image.orientedUpright()
  /// upright.metadata.strip()  // no orientation tag left to apply twice
  /// ```
  public func orientedUpright() -> Image {
    let orientation = orientation
    guard orientation != 1 else { return self }
    let transposed = orientation >= 5
    let outWidth = transposed ? height : width
    let outHeight = transposed ? width : height
    let size = layout.channels * (bitDepth / 8)
    var output = [UInt8](repeating: 0, count: pixels.count)
    pixels.withUnsafeBufferPointer { input in
      output.withUnsafeMutableBufferPointer { out in
        for y in 0..<outHeight {
          for x in 0..<outWidth {
            // The stored pixel shown at (x, y).
            let (sx, sy): (Int, Int)
            switch orientation {
            case 2: (sx, sy) = (width - 1 - x, y)
            case 3: (sx, sy) = (width - 1 - x, height - 1 - y)
            case 4: (sx, sy) = (x, height - 1 - y)
            case 5: (sx, sy) = (y, x)
            case 6: (sx, sy) = (y, height - 1 - x)
            case 7: (sx, sy) = (width - 1 - y, height - 1 - x)
            default: (sx, sy) = (width - 1 - y, x)
            }
            let from = (sy * width + sx) * size
            let to = (y * outWidth + x) * size
            for byte in 0..<size { out[to + byte] = input[from + byte] }
          }
        }
      }
    }
    return Image(
      width: outWidth, height: outHeight, layout: layout, bitDepth: bitDepth, bytes: output, metadata: metadata)
  }
}
