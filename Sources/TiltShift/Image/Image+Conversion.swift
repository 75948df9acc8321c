extension Image {
  /// This image with 8-bit samples: 16-bit samples are scaled (`v · 255 / 65535`, rounded); 8-bit is returned as is.
  public func convertedTo8Bit() -> Image {
    guard bitDepth == 16 else { return self }
    let bytes = pixels.withUnsafeBytes { raw in
      raw.bindMemory(to: UInt16.self).map { UInt8((UInt32($0) &* 255 &+ 32767) / 65535) }
    }
    return Image(width: width, height: height, layout: layout, bitDepth: 8, bytes: bytes, metadata: metadata)
  }

  /// This image without alpha: each pixel composited on `background` (8-bit result).
  ///
  /// Gray+alpha stays gray on a gray background and becomes RGB on a coloured one. Images without alpha
  /// are only converted to 8 bits.
  ///
  /// ```swift
  /// let opaque = logo.compositedOn(.white)   // what JPEG output does by default
  /// ```
  public func compositedOn(_ background: BackgroundColour) -> Image {
    let source = convertedTo8Bit()
    guard layout.hasAlpha else { return source }
    let grayOutput = layout == .grayAlpha && background.isGray
    let outLayout: Layout = grayOutput ? .gray : .rgb
    let back = [UInt16(background.red), UInt16(background.green), UInt16(background.blue)]
    var output = [UInt8](repeating: 0, count: pixelCount * outLayout.channels)
    source.pixels.withUnsafeBufferPointer { input in
      output.withUnsafeMutableBufferPointer { out in
        let channels = layout.channels
        for index in 0..<pixelCount {
          let pixel = index * channels
          let alpha = UInt16(input[pixel + channels - 1])
          for c in 0..<outLayout.channels {
            let value = UInt16(input[pixel + (layout == .rgba ? c : 0)])
            out[index * outLayout.channels + c] = Self.blend(value, alpha, back[c])
          }
        }
      }
    }
    return Image(width: width, height: height, layout: outLayout, bitDepth: 8, bytes: output, metadata: metadata)
  }

  /// `(value · alpha + background · (255 − alpha)) / 255`, rounded.
  static func blend(_ value: UInt16, _ alpha: UInt16, _ background: UInt16) -> UInt8 {
    let sum = UInt32(value) * UInt32(alpha) + UInt32(background) * UInt32(255 - alpha) + 127
    return UInt8(sum / 255)
  }
}
