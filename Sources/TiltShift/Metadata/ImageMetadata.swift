/// What a photo file says besides its pixels: colour profile, EXIF, XMP, IPTC, text, colour chunks, density.
///
/// ``ImageDecoder`` fills it from JPEG markers (APP1 EXIF and XMP with extended XMP, APP2 ICC profile in
/// as many segments as it takes, APP13 IPTC, COM comments, the JFIF density) and PNG chunks (`iCCP`,
/// `eXIf`, `tEXt`/`zTXt`/`iTXt` with XMP in `XML:com.adobe.xmp`, `gAMA`, `sRGB`, `cHRM`, `pHYs`);
/// ``ImageEncoder`` writes back whatever the output format can carry (see the README's table).
///
/// ```swift
/// var image = try ImageDecoder().decode(contentsOf: "IMG_0001.jpg")
/// print(image.metadata.iccProfile?.name ?? "untagged (sRGB)")
/// image.metadata.strip()  // what `spindle tiltshift --strip` does
/// ```
public struct ImageMetadata: Sendable, Equatable {
  /// An embedded ICC colour profile.
  public struct ICCProfile: Sendable, Equatable {
    /// The profile's name in a PNG `iCCP` chunk (JPEG has none; the encoder writes "ICC profile").
    public var name: String
    /// The whole profile, uncompressed.
    public var data: [UInt8]

    /// Creates a profile.
    public init(name: String = "ICC profile", data: [UInt8]) {
      self.name = name
      self.data = data
    }

    /// The colour space signature at bytes 16..<20 (`RGB `, `GRAY`, `CMYK`), or nil when too short.
    public var colourSpace: String? {
      guard data.count >= 20 else { return nil }
      return String(decoding: data[16..<20], as: UTF8.self)
    }
  }

  /// One PNG text chunk.
  public struct TextEntry: Sendable, Equatable {
    /// The keyword (1 to 79 Latin-1 characters): `Title`, `Author`, `Description`, `Copyright`, `Comment` ...
    public var keyword: String
    /// The text.
    public var text: String
    /// Whether the chunk was `iTXt` (UTF-8, with language) rather than `tEXt`/`zTXt` (Latin-1).
    public var isInternational: Bool
    /// Whether the text was compressed (`zTXt`, or a compressed `iTXt`).
    public var isCompressed: Bool
    /// The `iTXt` language tag (empty when none).
    public var language: String
    /// The `iTXt` translated keyword (empty when none).
    public var translatedKeyword: String

    /// Creates a text entry; plain `tEXt` unless told otherwise.
    public init(
      keyword: String, text: String, isInternational: Bool = false, isCompressed: Bool = false, language: String = "",
      translatedKeyword: String = ""
    ) {
      self.keyword = keyword
      self.text = text
      self.isInternational = isInternational
      self.isCompressed = isCompressed
      self.language = language
      self.translatedKeyword = translatedKeyword
    }
  }

  /// The intended pixel size: PNG `pHYs`, JPEG JFIF density.
  public struct PixelDensity: Sendable, Equatable {
    /// What the numbers count.
    public enum Unit: Sendable, Equatable {
      /// No unit: only the pixel aspect ratio `x : y` is meant.
      case aspectRatio
      /// Pixels per inch (JPEG only; PNG output converts to per metre).
      case perInch
      /// Pixels per centimetre (JPEG only; PNG output converts to per metre).
      case perCentimetre
      /// Pixels per metre (PNG only; JPEG output converts to per centimetre or per inch).
      case perMetre
    }
    /// Horizontal pixels per unit.
    public var x: Int
    /// Vertical pixels per unit.
    public var y: Int
    /// The unit.
    public var unit: Unit

    /// Creates a density.
    public init(x: Int, y: Int, unit: Unit) {
      self.x = x
      self.y = y
      self.unit = unit
    }
  }

  /// The colour profile (JPEG APP2 `ICC_PROFILE`, PNG `iCCP`).
  public var iccProfile: ICCProfile?
  /// The EXIF block, starting with `Exif\0\0` then the TIFF structure (JPEG APP1; PNG `eXIf` without the prefix,
  /// or a `Raw profile type exif` or `APP1` text).
  public var exif: [UInt8]?
  /// The XMP packet, UTF-8 (JPEG APP1 `http://ns.adobe.com/xap/1.0/`, PNG `iTXt` `XML:com.adobe.xmp`, or a
  /// `Raw profile type xmp` text).
  public var xmp: [UInt8]?
  /// A JPEG's extended XMP, reassembled from its APP1 segments (the part that did not fit in one marker).
  public var extendedXMP: [UInt8]?
  /// The IPTC block: Photoshop image resources (JPEG APP13 after `Photoshop 3.0\0`; PNG `zTXt` `Raw profile type 8bim`,
  /// or `Raw profile type iptc`, whose bare IPTC-IIM records are put in an IPTC resource, 0x0404).
  public var iptc: [UInt8]? {
    get { iptcBytes }
    set {
      // The PNG text it was read from no longer says what IPTC holds: PNG output writes it afresh.
      if newValue != iptcBytes { pngIPTCText = nil }
      iptcBytes = newValue
    }
  }
  var iptcBytes: [UInt8]?
  /// The PNG `Raw profile type iptc` text ``iptc`` was read from, written back as it was while ``iptc`` is unchanged.
  var pngIPTCText: TextEntry?
  /// JPEG COM comments (PNG output writes them as `Comment` text).
  ///
  /// A COM marker names no encoding: its bytes read as UTF-8 when they are valid UTF-8, else as Latin-1. The bytes
  /// themselves are kept (`commentBytes`), and a comment left as it was is written back byte for byte; a comment
  /// set or changed here is written as UTF-8. A comment over 65,533 bytes takes several COM markers, all full but
  /// the last; reading, a full COM marker is continued by the COM marker after it.
  public var comments: [String] {
    get { commentBytes.map(Self.string(fromUnknownEncoding:)) }
    set {
      // Keep the original bytes of every comment that is still there (in any position), re-encode only new text.
      var unused = commentBytes
      commentBytes = newValue.map { comment in
        if let index = unused.firstIndex(where: { Self.string(fromUnknownEncoding: $0) == comment }) {
          return unused.remove(at: index)
        }
        return Array(comment.utf8)
      }
    }
  }
  /// The COM comments as the file held them (a Latin-1 `Café` stays `43 61 66 E9`): what JPEG output writes.
  var commentBytes: [[UInt8]]
  /// PNG text chunks other than XMP and raw profiles (JPEG output keeps `Comment` entries, in any case, as COM
  /// markers). Keywords, and the text of `tEXt`/`zTXt`, are Latin-1 in the file; `iTXt` text is UTF-8.
  public var text: [TextEntry]
  /// PNG `gAMA`: the image gamma × 100000.
  public var gamma: Int?
  /// PNG `sRGB`: the rendering intent, 0...3.
  public var sRGBIntent: Int?
  /// PNG `cHRM`: white x, y, red x, y, green x, y, blue x, y, each × 100000.
  public var chromaticities: [Int]?
  /// The pixel density (PNG `pHYs`, JPEG JFIF).
  public var density: PixelDensity?

  /// Creates empty metadata.
  public init() {
    commentBytes = []
    text = []
  }

  /// Whether nothing is recorded.
  public var isEmpty: Bool { self == ImageMetadata() }

  /// Removes everything (what `--strip` does; the caller first turns the pixels upright).
  public mutating func strip() { self = ImageMetadata() }
}
