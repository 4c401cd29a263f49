#!/bin/sh
# gpu_bundle.sh - pack what bench/gpu_checks.sh runs into one folder that runs on a GPU machine
# without this project's toolchain or Debian packages: the program, the GPU tests and benchmarks
# built here (configure found nvcc), libampdiag, every shared library they load that is not the C
# or C++ runtime, the Python package and its GPU benchmark, backend.h (t_backend_ops reads it)
# and the check script itself. Binaries are stripped. Prints the folder's size.
# Usage (from the build tree): bench/gpu_bundle.sh OUTDIR
set -eu
out=${1:?usage: gpu_bundle.sh OUTDIR}
src=$(cd "$(dirname "$0")/.." && pwd)
for f in ampdiag tests/t_backend_ops tests/t_cuda_numfmt bench/bench_gpu_stats bench/bench_gpu_kernels; do
    [ -x "$f" ] || { echo "gpu_bundle: $f is not built here (make, with configure finding nvcc)" >&2; exit 2; }
done
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/src/backend" "$out/bench"
cp ampdiag tests/t_backend_ops tests/t_cuda_numfmt bench/bench_gpu_stats bench/bench_gpu_kernels "$out/bin/"
cp -L .libs/libampdiag.so.0 "$out/lib/"
for l in $(ldd ampdiag .libs/libampdiag.so.0 | awk '/=>/ { print $3 }' | sort -u); do
    case $(basename "$l") in
    libc.so.* | libm.so.* | libgcc_s.so.* | libstdc++.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.*) ;;
    *) cp -L "$l" "$out/lib/" ;;
    esac
done
strip -s "$out"/bin/* "$out"/lib/*.so* 2>/dev/null || true
cp -r "$src/python" "$out/python"
cp "$src/src/backend/backend.h" "$out/src/backend/"
cp "$src/bench/gpu_checks.sh" "$src/bench/bench_gpu.sh" "$out/bench/"
du -sh "$out"
