#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Assembles the node image's root file system from Debian packages, distroless-style: the
# binaries, exactly the packages that hold the shared libraries they load (and libc6, base-files,
# busybox-static for the DaemonSet's `sh -c` install step and `kubectl debug`), unpacked with
# dpkg-deb: no dpkg, apt, perl or package scripts in the image. Packages come at the versions
# installed here (the ones the binaries were built against) through this machine's own apt
# sources and proxies (apt-get download); their copyright files stay, docs and man pages go, and
# /var/lib/dpkg/status.d/ lists them for image scanners.
#
#   deploy/images/mkroot.sh ROOT DEBCACHE BINARY...    # binaries go to ROOT/usr/local/bin
#
# Run where the binaries were built (their libraries' packages must be installed here).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: mkroot.sh ROOT DEBCACHE BINARY..." >&2; exit 2; }
root=$1 cache=$2
shift 2
command -v busybox >/dev/null || { echo "mkroot.sh: needs busybox-static (apt-get install busybox-static)" >&2; exit 1; }

# The package of each library the binaries load (Debian 12 is /usr-merged: dpkg may know a file
# under /lib or under /usr/lib).
owner() {
  local p=$1 r
  r=$(readlink -f "$p")
  for q in "$p" "/usr$p" "$r" "${r#/usr}"; do
    dpkg-query -S "$q" 2>/dev/null | awk -F: 'NR == 1 {print $1}' | grep . && return 0
  done
  echo "mkroot.sh: no Debian package holds $p (a library outside apt cannot go into the image)" >&2
  return 1
}
# EXTRA_PACKAGES: packages no binary links but one loads at run time (libibverbs' providers;
# libcurl4, which rdma-device-plugin loads for the API server: deviceplugin/dra/src/curl_loader.cc).
pkgs=(base-files libc6 busybox-static ${EXTRA_PACKAGES:-})
for b in "$@"; do
  [ -x "$b" ] || { echo "mkroot.sh: $b is not an executable (build it first)" >&2; exit 1; }
  while read -r lib; do pkgs+=("$(owner "$lib")"); done < <(ldd "$b" 2>/dev/null | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)

# The installed version where the archive still has it; else (a point release replaced it) the
# archive's, said aloud: same ABI within a Debian release, but not byte for byte what was built on.
mkdir -p "$cache"
id _apt >/dev/null 2>&1 && chown _apt "$cache"  # apt-get download's sandbox user writes there
cached() {
  local f
  for f in "$cache/${1}_"*.deb; do [ -e "$f" ] && echo "$f" && break; done
  return 0
}
download() { # download PACKAGE...: into $cache, at the installed version where it can
  local want=() p v d dv pv
  for p in "$@"; do
    v=$(dpkg-query -W -f='${Version}' "$p")
    d=$(cached "$p")
    if [ -n "$d" ]; then
      dv=$(dpkg-deb -f "$d" Version)
      [ "$dv" = "$v" ] && continue
      [ "$dv" = "$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')" ] && continue
    fi
    rm -f "$cache/${p}_"*.deb
    want+=("$p=$v")
  done
  if [ ${#want[@]} -gt 0 ] && ! (cd "$cache" && apt-get download -q "${want[@]}" >/dev/null 2>&1); then
    for pv in "${want[@]}"; do
      p=${pv%%=*}
      [ -n "$(cached "$p")" ] && continue
      (cd "$cache" && apt-get download -q "$pv" >/dev/null 2>&1) && continue
      echo "mkroot.sh: $pv is no longer in the archive; taking its current version" >&2
      (cd "$cache" && apt-get download -q "$p" >/dev/null) ||
        { echo "mkroot.sh: apt-get download $p failed (are this machine's apt sources reachable?)" >&2; exit 1; }
    done
  fi
}
download "${pkgs[@]}"

rm -rf "$root"
mkdir -p "$root/var/lib/dpkg/status.d" "$root/usr/local/bin" "$root/bin" "$root/tmp" "$root/etc"
for p in "${pkgs[@]}"; do
  deb=$(cached "$p")
  dpkg-deb -x "$deb" "$root"
  dpkg-deb -f "$deb" Package Version Architecture Source Maintainer >"$root/var/lib/dpkg/status.d/$p"
done
chmod 1777 "$root/tmp"
# Copyrights stay (the licences travel with the binaries); the rest of the documentation goes.
# A library's doc directory can be a link to another package's (libgcc-s1 -> gcc-12-base): that
# package comes too, for its copyright.
for link in $(find "$root/usr/share/doc" -xtype l 2>/dev/null); do
  p=$(basename "$(readlink "$link")")
  dpkg-query -W "$p" >/dev/null 2>&1 || continue
  download "$p"
  dpkg-deb -x "$(cached "$p")" "$root"
  dpkg-deb -f "$(cached "$p")" Package Version Architecture Source Maintainer >"$root/var/lib/dpkg/status.d/$p"
done
find "$root/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
find "$root/usr/share/doc" -type d -empty -delete 2>/dev/null || true
rm -rf "$root/usr/share/man" "$root/usr/share/lintian" "$root/usr/share/info" "$root/usr/share/locale"

# busybox's applets as /bin links, where no package put a real file.
for a in $(busybox --list); do
  [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf 'include /etc/ld.so.conf.d/*.conf\n' >"$root/etc/ld.so.conf"
for b in "$@"; do
  install -m 0755 "$b" "$root/usr/local/bin/"  # modules (.so) too: rdma-validate looks beside itself
  strip --strip-debug "$root/usr/local/bin/$(basename "$b")"
done
ldconfig -r "$root"
rm -rf "$root/var/cache/ldconfig"  # inode numbers and times: not the same twice
# Every file dated by the commit (SOURCE_DATE_EPOCH): the same inputs give the same image digest.
find "$root" -exec touch -h -d "@${SOURCE_DATE_EPOCH:-0}" {} +
echo "mkroot.sh: ${#pkgs[@]} packages (${pkgs[*]}), $(du -sh "$root" | cut -f1)" >&2
