import CFilterKernels

/// The instruction set of the filter's innermost loops (the running sums' slide and the blend), chosen once per
/// process: the widest the processor supports. The loops are C (the `CFilterKernels` target) compiled once for the
/// baseline and once for AVX2, because Swift cannot compile one function for a wider instruction set than the rest
/// of the module, and the package must run on every x86-64 processor. Both compute the same bytes.
package enum FilterKernelVariant: Int32, CaseIterable, Sendable, CustomStringConvertible {
  /// The compiler's baseline: SSE2 on x86-64, NEON on arm64.
  case baseline = 0
  /// 256-bit integer vectors (x86-64 processors since about 2013).
  case avx2 = 1

  /// The variant in use.
  package static var current: FilterKernelVariant {
    FilterKernelVariant(rawValue: spindle_kernels_variant()) ?? .baseline
  }

  /// Whether this processor can run the variant.
  package var isSupported: Bool { spindle_kernels_supports(rawValue) != 0 }

  /// Makes every later kernel call use `variant` (nil: the automatic choice); false when the processor cannot run
  /// it. For tests that compare the variants' output.
  @discardableResult
  package static func force(_ variant: FilterKernelVariant?) -> Bool {
    spindle_kernels_force_variant(variant?.rawValue ?? -1) != 0
  }

  package var description: String {
    switch self {
    case .baseline: "baseline"
    case .avx2: "AVX2"
    }
  }
}
