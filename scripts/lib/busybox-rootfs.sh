# Sourced by the test image scripts: busybox_rootfs DIR fills DIR with a minimal root filesystem —
# Debian's busybox-static with every applet linked, /etc/passwd and /etc/group (root, nobody),
# /tmp (1777) and /workspace.
busybox_rootfs() {
  local root="$1" busybox
  busybox="$(command -v busybox || true)"
  [ -n "$busybox" ] && file -L "$busybox" 2>/dev/null | grep -q "statically linked" || busybox=/bin/busybox
  [ -x "$busybox" ] || { echo "busybox-static is not installed (apt-get install busybox-static)" >&2; return 1; }
  chmod 755 "$root"
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,opt,tmp,workspace,etc,root,proc,sys,dev}
  chmod 1777 "$root/tmp"
  cp "$busybox" "$root/bin/busybox"
  local applet
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = "busybox" ] || ln -sf /bin/busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
}
