#!/usr/bin/env bash
# Benchmarks the tilt-shift job on 8 procedurally made 12-megapixel JPEGs against libvips and ImageMagick.
#
# Usage: Scripts/bench-images.sh [--quick] [--no-install]
#
# Installs the peers with apt when they are missing (never on CI: set CI=1 or pass --no-install to skip),
# builds `spindle` in release mode and runs its `tiltshift` benchmark suite, which makes the images in a
# temporary folder, measures decode / filter (1 band vs all cores) / encode / the whole job, then runs
#   libvips: gaussblur + ifthenelse blend through the mask, in one Python process when `import pyvips`
#            works (pip install pyvips), else `vips gaussblur` then `vips ifthenelse --blend` per file
#   ImageMagick: convert IN ( +clone -blur 0xSIGMA ) MASK.png -composite -quality 90 OUT.jpg
# on the same files in the same run. A peer that is not installed is skipped with a note.
set -euo pipefail

cd "$(dirname "$0")/.."

quick=""
install=1
for argument in "$@"; do
  case "$argument" in
    --quick) quick="--quick" ;;
    --no-install) install=0 ;;
    -h | --help)
      sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "bench-images.sh: unknown argument '$argument'" >&2
      exit 2
      ;;
  esac
done

if [[ -n "${CI:-}" ]]; then install=0; fi

have_real_imagemagick() {
  # A stand-in `convert` may come first on the PATH; only a real ImageMagick counts.
  for tool in magick convert /usr/bin/convert; do
    if command -v "$tool" > /dev/null 2>&1 && "$tool" -version 2> /dev/null | grep -q ImageMagick; then
      return 0
    fi
  done
  return 1
}

missing=()
command -v vips > /dev/null 2>&1 || missing+=(libvips-tools)
have_real_imagemagick || missing+=(imagemagick)

if ((${#missing[@]} > 0)); then
  if ((install)) && command -v apt-get > /dev/null 2>&1; then
    sudo=""
    if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    echo "Installing ${missing[*]} with apt-get…" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" > /dev/null
  else
    echo "Not installing ${missing[*]}: those peers will be skipped." >&2
  fi
fi

swift build -c release --product spindle
.build/release/spindle bench tiltshift $quick
