#!/usr/bin/env bash
# devkit-pack.sh: make the device kit (`make devkit`): everything a GPU
# machine without Go needs to run optlab's GPU checks, but gotch's C++
# wrapper, which scripts/devkit-run.sh compiles there into lib/libtch.so
# against that machine's libtorch (docs/BENCHMARKS.md, "GPU").
#
# Usage: scripts/devkit-pack.sh [-n]   (from the repository root, after `make gotch`)
#   -n   pack only: reuse the binaries already in the staging folder (the
#        cheap check of `make test`: the packing and the size limit)
#
# Writes build/devkit/optlab-devkit.tar.xz (the only file in build/devkit,
# so that the device tool can carry that folder) from the staging folder
# build/devkit-stage/optlab-devkit:
#   bin/host, bin/optlabstep   built with -tags optlab_extlibtch (they link
#                              libtch.so from $ORIGIN/../lib) and -s -w (no
#                              -trimpath: the build then reuses the packages
#                              that `make build` compiled)
#   bin/optlab-plugins         every built-in plugin in one binary
#                              (plugins/builtin/multicall); devkit-run.sh makes
#                              bin/plugins/<name> links to it
#   tests/*.test               `go test -c` of the packages with CUDA tests;
#   tests/faultplugin          the misbehaving test plugin that host/cli's
#                              tests launch
#   libtch/                    the prepared gotch's C++ wrapper sources,
#                              SYMBOLS.txt (what libtch.so must export),
#                              USED_OPS.txt (the ops optlab calls: none may be
#                              stubbed), STUBBED_OPS.txt and PREPARED (this
#                              machine's, for reference)
#   bench/                     torch_step.py, torch_models.py, torch_bf16.py,
#                              compare.sh
#   MANIFEST.txt               commit, date, Go version, file sizes
# It fails when the packed kit exceeds DEVKIT_LIMIT_MIB (56), printing the size.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
limit_mib=${DEVKIT_LIMIT_MIB:-56}
packonly=0
[ "${1:-}" = -n ] && packonly=1
gotch=build/gotch/libtch
out=build/devkit
stage=build/devkit-stage/optlab-devkit
# The packages whose tests touch CUDA (device "cuda", OPTLAB_BENCH_DEVICE).
test_pkgs="host/tensor host/cli host/checkpoint/statedict bench"

[ -f $gotch/lib_ext.go ] || { echo "devkit-pack.sh: $gotch has no optlab_extlibtch mode: run \`make gotch\` first" >&2; exit 1; }
t0=$(date +%s)
if [ $packonly = 0 ]; then
	rm -rf "$stage"
	mkdir -p "$stage"/bin "$stage"/tests "$stage"/lib "$stage"/libtch "$stage"/bench
	flags=(-tags optlab_extlibtch "-ldflags=-s -w")
	"$GO" build "${flags[@]}" -o "$stage"/bin/host ./host
	"$GO" build "${flags[@]}" -o "$stage"/bin/optlabstep ./bench/cmd/optlabstep
	"$GO" build "${flags[@]}" -o "$stage"/bin/optlab-plugins ./plugins/builtin/multicall
	"$GO" build "${flags[@]}" -o "$stage"/tests/faultplugin ./internal/testplugin/faultplugin
	for p in $test_pkgs; do
		"$GO" test -c "${flags[@]}" -o "$stage/tests/$(basename "$p").test" "./$p"
	done
	echo "built the binaries in $(($(date +%s) - t0)) s"
else
	[ -x "$stage"/bin/host ] || { echo "devkit-pack.sh -n: no binaries in $stage (run it once without -n)" >&2; exit 1; }
	rm -rf "$stage"/libtch "$stage"/bench
	mkdir -p "$stage"/libtch "$stage"/bench
fi
# The generated wrappers as gotch ships them, not as gotchprep stubbed them
# for this machine's libtorch: devkit-libtch.py stubs what does not compile
# against the device's.
gotch_version=$(awk '$1 == "github.com/sugarme/gotch" {print $2; exit}' go.mod)
pristine=$("$GO" env GOMODCACHE)/github.com/sugarme/gotch@$gotch_version/libtch/torch_api_generated.cpp.h
[ -f "$pristine" ] || { echo "devkit-pack.sh: $pristine missing (make gotch downloads it)" >&2; exit 1; }
cp "$pristine" "$stage"/libtch/torch_api_generated.cpp.h
cp $gotch/torch_api.cpp $gotch/torch_api.h $gotch/torch_api_generated.h \
	$gotch/stb_image.h $gotch/stb_image_write.h $gotch/stb_image_resize.h \
	$gotch/SYMBOLS.txt $gotch/USED_OPS.txt $gotch/STUBBED_OPS.txt "$stage"/libtch/
sed -n 2p build/gotch/.optlab-prepared >"$stage"/libtch/PREPARED
cp bench/torch_step.py bench/torch_models.py bench/torch_bf16.py bench/compare.sh "$stage"/bench/

# Every symbol a binary takes from libtch.so must be one that libtch exports
# (the stand-in it was linked against defines exactly SYMBOLS.txt).
for b in "$stage"/bin/host "$stage"/bin/optlabstep "$stage"/tests/*.test; do
	missing=$(nm -D --undefined-only "$b" | awk '$2 !~ /@/ && $2 != "__gmon_start__" {print $2}' | sort | comm -23 - "$stage"/libtch/SYMBOLS.txt)
	[ -z "$missing" ] || { echo "devkit-pack.sh: $b needs symbols that libtch does not export: $missing" >&2; exit 1; }
done

{
	echo "optlab device kit"
	echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) with $("$GO" version)"
	echo "gotch prepared here for: $(cat "$stage"/libtch/PREPARED)"
	echo "used ops: $(wc -l <"$stage"/libtch/USED_OPS.txt), exported C functions: $(wc -l <"$stage"/libtch/SYMBOLS.txt)"
	echo "the binaries need glibc $(objdump -T "$stage"/bin/* "$stage"/tests/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | sed 's/GLIBC_//') or newer"
	(cd "$stage" && find . -type f ! -name MANIFEST.txt -printf '%s\t%p\n' | sort -k2)
} >"$stage"/MANIFEST.txt

mkdir -p "$out"
rm -f "$out"/*
# One xz stream with a dictionary larger than the binaries together: the
# binaries share most of their code (gotch, the host packages), which the
# dictionary then stores once. Preset 1 (DEVKIT_XZ_PRESET): 18.8 MB in 24 s
# on 2 cores on 2026-11-28, against 16.3 MB in 92 s for presets 6 to 9.
tar -C "$(dirname "$stage")" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$(basename "$stage")" |
	xz --lzma2=preset=${DEVKIT_XZ_PRESET:-1},dict=192MiB -T1 >"$out"/optlab-devkit.tar.xz.tmp
mv "$out"/optlab-devkit.tar.xz.tmp "$out"/optlab-devkit.tar.xz
size=$(stat -c %s "$out"/optlab-devkit.tar.xz)
raw=$(du -sb "$stage" | cut -f1)
mib=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')
echo "device kit: $out/optlab-devkit.tar.xz $mib MiB ($size bytes; $(awk -v s="$raw" 'BEGIN { printf "%.0f", s / 1048576 }') MiB unpacked; limit $limit_mib MiB) in $(($(date +%s) - t0)) s"
if [ "$size" -gt $((limit_mib * 1048576)) ]; then
	echo "devkit-pack.sh: the kit is $mib MiB, over the limit of $limit_mib MiB" >&2
	exit 1
fi
