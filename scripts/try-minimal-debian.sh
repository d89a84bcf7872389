#!/usr/bin/env bash
# Run the README's two commands on a minimal Debian 12, as a newcomer's machine would be:
# debootstrap --variant=minbase into a directory, put a clean clone of this repository in it,
# and, with that directory as the root of a private mount namespace (pivot_root, /proc, /sys
# and /dev bound in, a /run and /tmp of its own), run scripts/demo.sh until it serves and then
# scripts/test.sh.
#
#   scripts/try-minimal-debian.sh [ROOT]      (default /var/tmp/mokkafs-minbase; as root)
#
# The machine's own network is lent, not installed: its resolver, and the CA bundle pip
# trusts here (PIP_CERT, for a TLS-intercepting proxy). Nothing else of this machine's
# environment goes in (env -i); everything the project needs comes from its own set-up. ROOT
# is made afresh and left in place for inspection; delete it afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/var/tmp/mokkafs-minbase}
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap

# A fresh root every time: a set-up that ran in it before would have installed what it lacks.
rm -rf "$root"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >&2
rm -rf "$root/src"
git clone -q "$here" "$root/src"
cp /etc/resolv.conf "$root/etc/resolv.conf"
ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
cp "$ca" "$root/etc/lent-ca.crt"
cat > "$root/src.sh" <<'INNER'
set -eu
cd /src
python3 --version 2>/dev/null && echo "python3 was already there" || echo "no python3 yet"
echo "== scripts/demo.sh (stopped once it serves)"
setsid scripts/demo.sh > /tmp/demo.out 2>&1 &
demo=$!
for i in $(seq 1800); do grep -q "Press Ctrl-C" /tmp/demo.out && break; kill -0 $demo 2>/dev/null || break; sleep 1; done
cat /tmp/demo.out
kill -INT -$demo; wait $demo || true
grep -q "Press Ctrl-C" /tmp/demo.out
echo "== scripts/test.sh"
scripts/test.sh
INNER
unshare -m --propagation private sh -ec "
  # A real machine's / is a mount point of its own, and container runtimes pivot_root away
  # from it: so pivot into ROOT (a chroot would make every container fail to start).
  mount --bind '$root' '$root'
  mount -t proc proc '$root/proc'
  mount --rbind /sys '$root/sys'
  mount --rbind /dev '$root/dev'
  mount -t tmpfs -o mode=755 tmpfs '$root/run'
  mount -t tmpfs -o mode=1777 tmpfs '$root/tmp'
  cd '$root'
  mkdir -p .oldroot
  pivot_root . .oldroot
  exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    HOME=/root LANG=C.UTF-8 TERM=dumb PIP_CERT=/etc/lent-ca.crt /bin/sh -ec \
    'umount -l /.oldroot; rmdir /.oldroot; mount --make-rshared /; exec /bin/bash /src.sh'
"
