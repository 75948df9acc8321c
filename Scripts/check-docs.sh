#!/usr/bin/env bash
# Converts the three DocC catalogs (Spindle, SpindleFoundation, TiltShift) with the toolchain's `docc` and fails on
# any warning or error it prints: a link to a symbol that does not exist (a renamed method, an overload that needs
# disambiguating, an internal name), a documented parameter that is not there, a parameter left undocumented.
#
#   Scripts/check-docs.sh
#
# Environment: SPINDLE_DOCS_SCRATCH, the build folder for the symbol graphs (default .build-docs, ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob

scratch=${SPINDLE_DOCS_SCRATCH:-.build-docs}
work=$(mktemp -d "${TMPDIR:-/tmp}/check-docs.XXXXXX")
trap 'rm -rf "$work"' EXIT
graphs="$work/graphs"
mkdir -p "$graphs"

# TiltShift and SpindleFoundation between them build every documented module (both depend on Spindle).
for target in TiltShift SpindleFoundation; do
  echo "Building $target's symbol graphs…" >&2
  swift build --target "$target" --scratch-path "$scratch" \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" > "$work/build-$target.log" 2>&1 || {
    cat "$work/build-$target.log" >&2
    exit 1
  }
done

problems=0
for module in Spindle SpindleFoundation TiltShift; do
  mkdir -p "$work/$module"
  # The module's own graph and its extensions of other modules' types (Spindle@Dispatch), not its dependencies'.
  cp "$graphs/$module.symbols.json" "$work/$module/"
  for extension in "$graphs/$module@"*.symbols.json; do cp "$extension" "$work/$module/"; done
  docc convert "Sources/$module/Documentation.docc" --additional-symbol-graph-dir "$work/$module" \
    --fallback-display-name "$module" --fallback-bundle-identifier "org.spindle.$module" \
    --output-path "$work/out-$module" --analyze > "$work/docc-$module.log" 2>&1 || {
    cat "$work/docc-$module.log" >&2
    echo "check-docs.sh: docc failed on $module's catalog" >&2
    exit 1
  }
  # docc prints each diagnostic with the source lines around it; the first line of each says what it is.
  found=$(grep -cE '^(warning|error):' "$work/docc-$module.log" || true)
  if ((found > 0)); then
    echo "$module: $found DocC problem(s):" >&2
    grep -E -A4 '^(warning|error):' "$work/docc-$module.log" >&2
    problems=$((problems + found))
  else
    echo "$module: every link resolves, every parameter is documented" >&2
  fi
done
((problems == 0)) || {
  echo "check-docs.sh: $problems DocC problem(s)" >&2
  exit 1
}
