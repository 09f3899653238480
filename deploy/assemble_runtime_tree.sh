#!/usr/bin/env bash
# Assembles the runtime image's file tree: what deploy/Dockerfile's runtime
# stage copies into an empty (scratch) image, and what the test suite runs in
# an isolated root (tests/integration/test_deploy_runtime_tree.py) to prove
# that the image holds everything ortserve needs.
#
#   deploy/assemble_runtime_tree.sh <ortserve binary> <output dir>
#
# The tree holds:
#   /usr/local/bin/ortserve
#   every shared library `ldd` resolves for it, at the same path (glibc, the
#     dynamic loader, libstdc++, Boost/gRPC/protobuf/OpenSSL/...), except ONNX
#     Runtime's, which go to /opt/onnxruntime/lib with the provider libraries
#     ONNX Runtime opens itself (libonnxruntime_providers_*.so, not in ldd's list)
#   /etc/ssl/certs/ca-certificates.crt (HTTPS to an OTLP collector, TLS clients)
#   /etc/passwd, /etc/group with the non-root user ortserve (uid/gid 65532)
#   /models (the default repository; a volume is mounted there), /tmp (mode
#     1777: the default TensorRT cache), and empty /proc /sys /dev mount points.
# The Dockerfile sets LD_LIBRARY_PATH=/opt/onnxruntime/lib; so do the tests.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 <ortserve binary> <output dir>" >&2; exit 2; }
BIN=$1
OUT=$2
ORT_LIB_DIR=/opt/onnxruntime/lib
RUNTIME_UID=65532

[ -x "$BIN" ] || { echo "$0: $BIN is not an executable" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT/usr/local/bin" "$OUT$ORT_LIB_DIR" "$OUT/etc/ssl/certs" "$OUT/models" "$OUT/tmp" \
  "$OUT/proc" "$OUT/sys" "$OUT/dev"
chmod 1777 "$OUT/tmp"
cp -L "$BIN" "$OUT/usr/local/bin/ortserve"

# ldd prints "name => /path (addr)" per library and "/path (addr)" for the loader.
libs=$(ldd "$BIN" | awk '/=> not found/ { print "MISSING " $1; next }
                          $2 == "=>" && $3 ~ /^\// { print $3; next }
                          $1 ~ /^\// { print $1 }')
if grep -q '^MISSING' <<<"$libs"; then
  echo "$0: ldd cannot resolve: $(grep '^MISSING' <<<"$libs" | cut -d' ' -f2 | tr '\n' ' ')" >&2; exit 1
fi
ort_src=""
for lib in $libs; do
  case $(basename "$lib") in
    libonnxruntime.so*)
      ort_src=$(dirname "$(readlink -f "$lib")")
      cp -L "$lib" "$OUT$ORT_LIB_DIR/$(basename "$lib")" ;;
    *)
      mkdir -p "$OUT$(dirname "$lib")"
      cp -L "$lib" "$OUT$lib" ;;
  esac
done
[ -n "$ort_src" ] || { echo "$0: $BIN does not link libonnxruntime" >&2; exit 1; }
# ONNX Runtime opens its provider libraries from its own directory at run time.
for p in "$ort_src"/libonnxruntime_providers_*.so; do
  [ -e "$p" ] && cp -L "$p" "$OUT$ORT_LIB_DIR/"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$OUT/etc/ssl/certs/ca-certificates.crt"
cat > "$OUT/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/sbin/nologin
ortserve:x:$RUNTIME_UID:$RUNTIME_UID:ortserve:/tmp:/sbin/nologin
PASSWD
cat > "$OUT/etc/group" <<GROUP
root:x:0:
ortserve:x:$RUNTIME_UID:
GROUP
echo "assembled $(find "$OUT" -type f | wc -l) files ($(du -sh "$OUT" | cut -f1)) into $OUT"
