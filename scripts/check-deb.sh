#!/usr/bin/env bash
# Install the Debian package into a scratch root (dpkg -x: no root needed,
# nothing of the system touched) and use what it installed: --version, the
# manual page, the units (systemd-analyze verify, where present), and a
# status of a test array made by the installed binary.
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:-$(bash scripts/build-deb.sh)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
info=$(dpkg-deb --info "$deb")
case "$info" in *" Package: hetraid"*) ;; *) echo "$deb is not the hetraid package" >&2; exit 1 ;; esac
dpkg -x "$deb" "$scratch/root"
bin="$scratch/root/usr/bin/hetraid"
"$bin" --version
page=$(man -l "$scratch/root/usr/share/man/man1/hetraid.1.gz" 2>/dev/null)
case "$page" in
    *"hetraid serve"*) ;;
    *) echo "the manual page does not document serve" >&2; exit 1 ;;
esac
echo "man page: $(printf '%s\n' "$page" | wc -l) lines"
for f in usr/share/bash-completion/completions/hetraid lib/systemd/system/hetraid@.service \
    lib/systemd/system/hetraid-monitor.service usr/share/doc/hetraid/examples/hetraid.conf; do
    test -s "$scratch/root/$f" || { echo "missing from the package: $f" >&2; exit 1; }
done
if command -v systemd-analyze >/dev/null 2>&1; then
    # The units as systemd reads them, run by the package's own binary and
    # documented by its own manual page (the template instantiated for an
    # array named tank).
    mkdir "$scratch/units"
    sed "s|/usr/bin/hetraid|$bin|" "$scratch/root/lib/systemd/system/hetraid@.service" \
        > "$scratch/units/hetraid@tank.service"
    sed "s|/usr/bin/hetraid|$bin|" "$scratch/root/lib/systemd/system/hetraid-monitor.service" \
        > "$scratch/units/hetraid-monitor.service"
    # verify exits 0 on a line it ignores: anything it says is a failure.
    said=$(MANPATH="$scratch/root/usr/share/man" systemd-analyze verify \
        "$scratch/units/hetraid@tank.service" "$scratch/units/hetraid-monitor.service" 2>&1)
    if [ -n "$said" ]; then
        echo "systemd-analyze verify: $said" >&2
        exit 1
    fi
    echo "units: systemd-analyze verify passed"
elif [ -n "${CI:-}" ]; then
    echo "systemd-analyze is missing (Debian package systemd): the units were not verified" >&2
    exit 1
fi
d="$scratch/array"
mkdir "$d"
for i in 0 1 2; do truncate -s 16M "$d/m$i.img"; done
"$bin" create --layout raid5 --name pkg "$d/m0.img" "$d/m1.img" "$d/m2.img" 2>/dev/null
st=$("$bin" status "$d/m0.img" "$d/m1.img" "$d/m2.img")
echo "${st%%$'\n'*}"
"$bin" status --test "$d/m0.img" "$d/m1.img" "$d/m2.img" >/dev/null
echo "OK: $deb installs and runs"
