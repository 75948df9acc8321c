import Spindle

/// Procedural, photo-like test scenes: sky, sun, hills, a town and a road, so the tilt-shift effect is easy to see.
///
/// Deterministic for a given size and seed, and fast (one pass over the pixels). Used by `spindle demo`, the
/// benchmarks and the tests, so none of them needs image files on disk.
///
/// ```swift
/// let photo = SamplePhoto(seed: 3).render(width: 2400, height: 1600)   // an RGB Image
/// ```
public struct SamplePhoto: Sendable {
  /// The palette of the scene.
  public enum Light: Int, Sendable, CaseIterable {
    /// Blue sky, green fields, unlit windows.
    case day
    /// A warm sky over darker ground, half the windows lit.
    case dusk
    /// A dark sky with a moon, every window lit.
    case night
    /// Grey sky, muted colours.
    case overcast
  }

  /// The scene's seed: building layout, hill shapes and light.
  public var seed: UInt64
  /// The scene's light.
  public var light: Light

  /// Creates a scene; the light follows the seed unless given.
  public init(seed: UInt64, light: Light? = nil) {
    self.seed = seed
    self.light = light ?? Light.allCases[Int(seed % UInt64(Light.allCases.count))]
  }

  private struct Random {
    var state: UInt64
    mutating func next() -> Double {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return Double(state >> 11) / Double(1 << 53)
    }
  }

  private struct Building {
    var left: Int
    var right: Int
    var top: Int
    var color: (Double, Double, Double)
  }

  /// Renders the scene as an RGB image of `width` × `height`.
  public func render(width: Int, height: Int) -> Image {
    precondition(width > 0 && height > 0, "a sample photo needs a positive size")
    var random = Random(state: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
    let (skyTop, skyBottom, ground, windowLight):
      ((Double, Double, Double), (Double, Double, Double), (Double, Double, Double), Double) =
        switch light {
        case .day: ((70, 130, 220), (190, 220, 250), (90, 140, 70), 0.2)
        case .dusk: ((60, 50, 120), (250, 150, 90), (70, 80, 60), 0.7)
        case .night: ((5, 10, 35), (30, 40, 90), (20, 30, 25), 1.0)
        case .overcast: ((150, 155, 165), (200, 200, 205), (100, 115, 90), 0.1)
        }
    let horizon = Double(height) * 0.45
    let sunX = Double(width) * (0.2 + 0.6 * random.next())
    let sunY = Double(height) * (0.12 + 0.15 * random.next())
    let sunRadius = Double(min(width, height)) * 0.06
    let hillPhase = random.next() * 6.28
    var buildings: [Building] = []
    var x = 0
    while x < width {
      let w = max(4, Int(Double(width) * (0.03 + 0.05 * random.next())))
      let h = Double(height) * (0.08 + 0.2 * random.next())
      let shade = 0.35 + 0.5 * random.next()
      buildings.append(
        Building(
          left: x, right: min(width, x + w), top: Int(horizon + Double(height) * 0.12 - h),
          color: (shade * 180, shade * 170, shade * 160))
      )
      x += w + Int(Double(width) * 0.004)
    }
    var pixels = [UInt8](repeating: 0, count: width * height * 3)
    pixels.withUnsafeMutableBufferPointer { buffer in
      let roadTop = horizon + Double(height) * 0.12
      var columnBuilding = [Int](repeating: -1, count: width)
      for (index, building) in buildings.enumerated() {
        for column in building.left..<building.right { columnBuilding[column] = index }
      }
      for row in 0..<height {
        let y = Double(row)
        for column in 0..<width {
          let xd = Double(column)
          var r: Double
          var g: Double
          var b: Double
          let hill = horizon + Double(height) * 0.05 * (1 + 0.6 * Platform.sine(xd / Double(width) * 9 + hillPhase))
          if y < hill {
            let t = y / max(1, hill)
            r = skyTop.0 + (skyBottom.0 - skyTop.0) * t
            g = skyTop.1 + (skyBottom.1 - skyTop.1) * t
            b = skyTop.2 + (skyBottom.2 - skyTop.2) * t
            let dx = xd - sunX
            let dy = y - sunY
            let d2 = (dx * dx + dy * dy) / (sunRadius * sunRadius)
            if d2 < 1 {
              r = 255
              g = light == .night ? 250 : 235
              b = light == .night ? 220 : 150
            } else if d2 < 6 {
              let glow = (6 - d2) / 5 * 0.35
              r += (255 - r) * glow
              g += (230 - g) * glow
              b += (180 - b) * glow
            }
          } else if y < roadTop {
            let t = (y - hill) / max(1, roadTop - hill)
            r = ground.0 * (0.7 + 0.3 * t)
            g = ground.1 * (0.7 + 0.3 * t)
            b = ground.2 * (0.7 + 0.3 * t)
          } else {
            // A road in perspective with dashed centre line, then fields with furrows.
            let depth = (y - roadTop) / max(1, Double(height) - roadTop)
            let halfRoad = Double(width) * (0.05 + 0.35 * depth)
            let offset = abs(xd - Double(width) / 2)
            if offset < halfRoad {
              let dash = Int((1 / (depth + 0.05)) * 8) % 2 == 0
              if offset < halfRoad * 0.03 && dash {
                r = 240
                g = 220
                b = 90
              } else {
                r = 70 + 20 * depth
                g = 70 + 20 * depth
                b = 75 + 20 * depth
              }
            } else {
              let furrow = Platform.sine(xd / (6 + 40 * depth) + y / 9) > 0.6 ? 0.8 : 1.0
              r = ground.0 * furrow * (1 + 0.3 * depth)
              g = ground.1 * furrow * (1 + 0.3 * depth)
              b = ground.2 * furrow * (1 + 0.3 * depth)
            }
          }
          let index = columnBuilding[column]
          if index >= 0, y >= Double(buildings[index].top), y < roadTop {
            let building = buildings[index]
            r = building.color.0
            g = building.color.1
            b = building.color.2
            let localX = column - building.left
            let localY = row - building.top
            let cell = max(4, (building.right - building.left) / 5)
            if localX % cell > cell / 3, localY % cell > cell / 3, localX > cell / 3,
              building.right - column > cell / 3
            {
              let lit = Double((column / cell &* 31 &+ row / cell &* 17) % 7) / 7 < windowLight
              r = lit ? 250 : 40
              g = lit ? 220 : 50
              b = lit ? 140 : 70
            }
          }
          let offset = (row * width + column) * 3
          buffer[offset] = UInt8(max(0, min(255, r)))
          buffer[offset + 1] = UInt8(max(0, min(255, g)))
          buffer[offset + 2] = UInt8(max(0, min(255, b)))
        }
      }
    }
    return Image(width: width, height: height, layout: .rgb, pixels: pixels)
  }
}
