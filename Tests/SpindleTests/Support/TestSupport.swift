// The shared helpers (offPool, eventually, Counter, Gate, Stress) live in the SpindleTestSupport target; this
// re-export makes them visible to every file of SpindleTests, including those that do not import it themselves.
@_exported import SpindleTestSupport
