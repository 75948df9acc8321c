import Foundation

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// Element names and attributes of an XML document (an SVG timeline, say), or the parser's error.
///
/// ```swift
/// let svg = XMLShape(data)
/// #expect(svg.error == nil && svg.elements.contains { $0.name == "rect" })
/// ```
package final class XMLShape: NSObject, XMLParserDelegate {
  package private(set) var elements: [(name: String, attributes: [String: String])] = []
  package private(set) var text = ""
  package private(set) var error: (any Error)?

  package init(_ data: Data) {
    super.init()
    let parser = XMLParser(data: data)
    parser.delegate = self
    if !parser.parse() { error = parser.parserError ?? CocoaError(.coderReadCorrupt) }
  }

  /// The element names, in document order.
  package var names: [String] { elements.map(\.name) }

  package func parser(
    _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    elements.append((name, attributes))
  }

  package func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
}
