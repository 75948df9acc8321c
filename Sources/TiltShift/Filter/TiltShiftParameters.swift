/// The settings of the tilt-shift filter: blur strength, the clear band and the gradient's depth.
///
/// The mask is the playground's `topAndBottomGradient`: a vertical gray gradient with five stops —
/// opaque (fully blurred) at the top, `innerIntensity` at the start of the clear band, clear (the
/// original) at the band's middle, `innerIntensity` at the band's end, opaque at the bottom — linearly
/// interpolated between stops. "Top" and "bottom" follow the photo as displayed: an EXIF orientation
/// that rotates the picture turns the band with it.
///
/// ```swift
/// let strong = try TiltShiftParameters(radius: 30, clearBand: 0.4...0.6, innerIntensity: 0.7)
/// let output = try TiltShiftFilter(parameters: strong).apply(to: image)
/// ```
public struct TiltShiftParameters: Sendable, Equatable, CustomStringConvertible {
  /// The default blur radius in pixels: 18, the playground's 6 points at a 3× screen scale.
  ///
  /// The playground blurred screen-sized images; on a 12-megapixel photo (4000 × 3000) a radius of 18
  /// is a clearly visible but still photographic blur (a box width of 45 pixels).
  public static let defaultRadius = 18.0

  /// The largest accepted radius, 2000 pixels.
  public static let maximumRadius = 2000.0

  /// The playground's settings with ``defaultRadius``: band 0.35–0.65, inner intensity 0.5.
  public static let standard = TiltShiftParameters(uncheckedRadius: defaultRadius, clearBand: 0.35...0.65, inner: 0.5)

  /// The blur's standard deviation in pixels (0 means no blur), at most ``maximumRadius``.
  ///
  /// The blur is three box blurs of width `d = floor(radius · 3·√(2π)/4 + 0.5)`, made odd, which
  /// approximates a Gaussian of this standard deviation to within about 3 %.
  public let radius: Double
  /// Where the clear band starts and ends, as fractions of the displayed height (0 = top).
  public let clearBand: ClosedRange<Double>
  /// The mask's gray level at the band's edges, 0 (clear) to 1 (fully blurred).
  public let innerIntensity: Double

  /// Creates parameters, checking their ranges.
  ///
  /// - Throws: ``ImageError/Kind/invalidParameters(message:)`` when `radius` is not in
  ///   `0...maximumRadius`, `clearBand` is not inside `0...1`, or `innerIntensity` is not in `0...1`.
  public init(
    radius: Double = TiltShiftParameters.defaultRadius,
    clearBand: ClosedRange<Double> = 0.35...0.65,
    innerIntensity: Double = 0.5
  ) throws(ImageError) {
    guard radius.isFinite, radius >= 0, radius <= Self.maximumRadius else {
      throw ImageError(.invalidParameters(message: "radius \(radius) is not in 0...\(Int(Self.maximumRadius))"))
    }
    guard clearBand.lowerBound.isFinite, clearBand.upperBound.isFinite, clearBand.lowerBound >= 0,
      clearBand.upperBound <= 1
    else {
      throw ImageError(.invalidParameters(message: "clear band \(clearBand) is not inside 0...1"))
    }
    guard innerIntensity.isFinite, innerIntensity >= 0, innerIntensity <= 1 else {
      throw ImageError(.invalidParameters(message: "inner intensity \(innerIntensity) is not in 0...1"))
    }
    self.init(uncheckedRadius: radius, clearBand: clearBand, inner: innerIntensity)
  }

  private init(uncheckedRadius: Double, clearBand: ClosedRange<Double>, inner: Double) {
    self.radius = uncheckedRadius
    self.clearBand = clearBand
    self.innerIntensity = inner
  }

  /// The odd box width of each of the three box blurs (1 means no blur).
  public var boxWidth: Int {
    let d = Int((radius * 3 * (2 * Double.pi).squareRoot() / 4 + 0.5).rounded(.down))
    return d % 2 == 1 ? d : d + 1
  }

  /// The three settings in words, for logs and `--help` output.
  public var description: String {
    "radius \(radius), clear band \(clearBand.lowerBound)–\(clearBand.upperBound), inner intensity \(innerIntensity)"
  }
}
