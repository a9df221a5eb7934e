#!/usr/bin/env bash
# Build the Debian package of hetraid from this workspace: the binary, its
# manual page, shell completions, the systemd units, an example
# configuration and alert program — nothing else. dpkg-deb alone (no
# cargo-deb to install): the tree is six directories.
#
#   bash scripts/build-deb.sh            # -> target/debian/hetraid_VERSION_ARCH.deb
#   dpkg -i target/debian/hetraid_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -q -p hetraid
bin=target/release/hetraid
version=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
root=target/debian/root
rm -rf "$root"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" \
    "$root/usr/share/bash-completion/completions" \
    "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d" \
    "$root/lib/systemd/system" "$root/usr/share/doc/hetraid/examples"
install -m 0755 "$bin" "$root/usr/bin/hetraid"
strip --strip-debug "$root/usr/bin/hetraid" 2>/dev/null || true
"$bin" man | gzip -9n > "$root/usr/share/man/man1/hetraid.1.gz"
"$bin" completions bash > "$root/usr/share/bash-completion/completions/hetraid"
"$bin" completions zsh > "$root/usr/share/zsh/vendor-completions/_hetraid"
"$bin" completions fish > "$root/usr/share/fish/vendor_completions.d/hetraid.fish"
install -m 0644 dist/systemd/hetraid@.service dist/systemd/hetraid-monitor.service \
    "$root/lib/systemd/system/"
install -m 0644 dist/hetraid.conf.example "$root/usr/share/doc/hetraid/examples/hetraid.conf"
install -m 0755 dist/raid-alert.example "$root/usr/share/doc/hetraid/examples/raid-alert"
cat > "$root/usr/share/doc/hetraid/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: hetraid
Files: *
License: $(grep -m1 '^license' Cargo.toml | sed 's/.*= *"\(.*\)"/\1/')
COPY
size=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: hetraid
Version: $version
Architecture: $arch
Maintainer: hetraid developers <hetraid@localhost>
Installed-Size: $size
Depends: libc6 (>= 2.34)
Recommends: nbd-client
Suggests: mailutils | bsd-mailx, prometheus
Section: admin
Priority: optional
Description: software RAID for heterogeneous arrays
 Disks and SSDs mixed in one array, members of different sizes and speeds
 (RAID4S, RAIDH, S2-RAID, HPDA, RAIDX and the classic levels), served over
 NBD, with a trace-driven simulator running the same controller logic.
CONTROL
mkdir -p target/debian
out="target/debian/hetraid_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "$out"
