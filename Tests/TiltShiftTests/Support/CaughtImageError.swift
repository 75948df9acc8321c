@testable import TiltShift

/// The `ImageError` that `body` throws; nil when it throws nothing or another error.
func caught(_ body: () throws -> Void) -> ImageError? {
  do {
    try body()
    return nil
  } catch let error as ImageError {
    return error
  } catch {
    return nil
  }
}
