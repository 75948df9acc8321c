import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// How a batch runs: the filter, the codecs, and how much runs at once.
public struct BatchConfiguration: Sendable {
  /// The filter applied to every photo.
  public var filter: TiltShiftFilter
  /// The decoder, with its pixel limit (decompression bombs are refused before allocating).
  public var decoder: ImageDecoder
  /// The output format for items that name none, or nil to keep each input's format.
  public var outputFormat: ImageFormat?
  /// JPEG quality, 1...100.
  public var jpegQuality: Int
  /// How many decodes, filters and encodes run at once, all stages together (the width of the batch's work queue).
  public var jobs: Int
  /// Bands each image's filter is split into at most (1 = the filter runs on one thread): a filter that starts
  /// while other decodes, filters or encodes of the batch run gets its share, `bandsPerImage / bodies running`
  /// (at least 1), so that bands fill the cores files leave idle instead of adding threads that compete for busy
  /// ones. The output is the same for any number of bands.
  public var bandsPerImage: Int
  /// At most this many decoded images are held in memory at once, whatever the batch size.
  public var maxImagesInMemory: Int
  /// Whether an existing output file may be replaced.
  public var replaceExisting: Bool
  /// Whether outputs are written without metadata (profile, EXIF, XMP, IPTC, text); the pixels are turned
  /// upright first, so the output still displays as the input did.
  public var stripsMetadata: Bool
  /// What transparent pixels are composited on when the output is JPEG.
  public var background: BackgroundColour
  /// The most memory, in bytes, the files in flight may take by their estimate (nil: no limit but
  /// ``maxImagesInMemory``). A file is admitted when its estimate, from its header, fits in what is left: for an
  /// 8-bit file, which the filter streams in place, `9/8 × decoded size + the filter's ring + 2 × file size`;
  /// for a 16-bit file, or one that the filter does not stream (see `TiltShiftPlan.streams`),
  /// `3 × decoded size + 2 × file size`. One whose estimate is over the whole budget is refused with
  /// ``ImageError/Kind/exceedsMemoryBudget(width:height:bytes:budget:)`` before its pixels are read.
  ///
  /// The 8-bit pixel buffers of finished files are kept for the next files to decode and filter into (no fresh
  /// pages to clear), and they count against this budget: before a file is admitted, held buffers are freed, the
  /// largest first, until they fit beside the estimates of the files in flight. A file only takes a buffer at most
  /// an eighth larger than its pixels, so it never holds more than its estimate counts. At most two buffers per
  /// image of ``maxImagesInMemory`` are kept, and none once the batch ends.
  public var memoryBudget: Int?
  /// Records every decode, filter and encode item of the batch (see `WorkTrace`); nil records nothing.
  public var trace: WorkTrace?

  /// The default ``memoryBudget``: half the physical memory, at most 4 GiB (2 GiB when it cannot be read).
  public static var defaultMemoryBudget: Int {
    let pages = sysconf(Int32(_SC_PHYS_PAGES))
    let size = sysconf(Int32(_SC_PAGESIZE))
    guard pages > 0, size > 0 else { return 2 << 30 }
    return min(4 << 30, pages / 2 * size)
  }

  /// Creates a configuration; the defaults use every core and keep `jobs + 1` images in memory.
  public init(
    filter: TiltShiftFilter = TiltShiftFilter(),
    decoder: ImageDecoder = ImageDecoder(),
    outputFormat: ImageFormat? = nil,
    jpegQuality: Int = 90,
    jobs: Int = WorkQueue.activeProcessorCount,
    bandsPerImage: Int = WorkQueue.activeProcessorCount,
    maxImagesInMemory: Int? = nil,
    replaceExisting: Bool = false,
    stripsMetadata: Bool = false,
    background: BackgroundColour = .white,
    memoryBudget: Int? = BatchConfiguration.defaultMemoryBudget,
    trace: WorkTrace? = nil
  ) {
    self.filter = filter
    self.decoder = decoder
    self.outputFormat = outputFormat
    self.jpegQuality = jpegQuality
    self.jobs = max(1, jobs)
    self.bandsPerImage = max(1, bandsPerImage)
    self.maxImagesInMemory = max(1, maxImagesInMemory ?? (max(1, jobs) + 1))
    self.replaceExisting = replaceExisting
    self.stripsMetadata = stripsMetadata
    self.background = background
    self.memoryBudget = memoryBudget.map { max(1, $0) }
    self.trace = trace
  }

  /// One file at a time, one thread per filter: the baseline the demo compares against.
  public static func serial(filter: TiltShiftFilter = TiltShiftFilter()) -> BatchConfiguration {
    BatchConfiguration(filter: filter, jobs: 1, bandsPerImage: 1, maxImagesInMemory: 1)
  }
}
