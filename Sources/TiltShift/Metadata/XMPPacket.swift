/// Text-level helpers for XMP packets: the orientation, the extended-XMP GUID, merging and splitting.
///
/// XMP is RDF/XML; these helpers read and edit it as text, which is enough for the few well-known
/// properties involved (`tiff:Orientation`, `xmpNote:HasExtendedXMP`) in both of their RDF spellings
/// (attribute and element).
enum XMPPacket {
  /// The value of `name` (`prefix:Local`), written as an attribute `name="value"` or element `<name>value</name>`.
  static func property(_ name: String, in packet: [UInt8]) -> String? {
    let text = String(decoding: packet, as: UTF8.self)
    for quote in ["\"", "'"] {
      if let range = text.firstRange(of: "\(name)=\(quote)") {
        let rest = text[range.upperBound...]
        if let end = rest.firstIndex(of: Character(quote)) { return String(rest[..<end]) }
      }
    }
    if let open = text.firstRange(of: "<\(name)>"), let close = text.firstRange(of: "</\(name)>"),
      open.upperBound <= close.lowerBound
    {
      return String(text[open.upperBound..<close.lowerBound]).trimmingWhitespace()
    }
    return nil
  }

  /// `tiff:Orientation` when it is 1...8.
  static func orientation(in packet: [UInt8]) -> Int? {
    guard let value = property("tiff:Orientation", in: packet).flatMap({ Int($0) }), (1...8).contains(value) else {
      return nil
    }
    return value
  }

  /// The GUID (32 hex digits) a main packet gives for its extended XMP.
  static func extendedGUID(in packet: [UInt8]) -> String? {
    guard let guid = property("xmpNote:HasExtendedXMP", in: packet), guid.utf8.count == 32 else { return nil }
    return guid
  }

  /// One packet holding the properties of both: the extension's `rdf:Description` elements are added to the
  /// main packet's `rdf:RDF`, and the pointer to the extension is removed (for formats with no size limit).
  static func merging(main: [UInt8], extended: [UInt8]) -> [UInt8] {
    var text = String(decoding: main, as: UTF8.self)
    let other = String(decoding: extended, as: UTF8.self)
    guard let start = other.firstRange(of: "<rdf:Description"), let end = other.ranges(of: "</rdf:RDF>").last,
      start.lowerBound < end.lowerBound, let close = text.ranges(of: "</rdf:RDF>").last
    else { return main }
    text.insert(contentsOf: other[start.lowerBound..<end.lowerBound], at: close.lowerBound)
    if let guid = extendedGUID(in: Array(text.utf8)) {
      for quote in ["\"", "'"] {
        text = text.replacing(" xmpNote:HasExtendedXMP=\(quote)\(guid)\(quote)", with: "")
      }
      text = text.replacing("<xmpNote:HasExtendedXMP>\(guid)</xmpNote:HasExtendedXMP>", with: "")
    }
    return Array(text.utf8)
  }

  /// A minimal main packet whose only property points to the extended XMP with `guid`.
  static func stub(pointingTo guid: String) -> [UInt8] {
    Array(
      ("<?xpacket begin=\"\u{FEFF}\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>"
        + "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">"
        + "<rdf:Description rdf:about=\"\" xmlns:xmpNote=\"http://ns.adobe.com/xmp/note/\" "
        + "xmpNote:HasExtendedXMP=\"\(guid)\"/></rdf:RDF></x:xmpmeta><?xpacket end=\"w\"?>").utf8)
  }
}

extension StringProtocol {
  func trimmingWhitespace() -> String {
    let scalars = unicodeScalars.drop { $0.properties.isWhitespace }
    var text = String(String.UnicodeScalarView(scalars))
    while let last = text.unicodeScalars.last, last.properties.isWhitespace { text.unicodeScalars.removeLast() }
    return text
  }
}
