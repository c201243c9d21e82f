# Runs inside the chroot (/bin/sh -e) after the packages are installed and files/ is copied.

# The unprivileged user commands run as by default: uid/gid 1000, passwordless sudo.
if ! id hutch >/dev/null 2>&1; then
  groupadd --gid 1000 hutch
  useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash --groups sudo hutch
fi
# The user E2B's SDKs assume (docs/e2b.md): "user", home /home/user, passwordless sudo; the E2B
# API runs commands and file operations as this user unless the caller names another.
if ! id user >/dev/null 2>&1; then
  groupadd --gid 1001 user
  useradd --uid 1001 --gid 1001 --create-home --shell /bin/bash --groups sudo user
fi
printf 'hutch ALL=(ALL:ALL) NOPASSWD: ALL\nuser ALL=(ALL:ALL) NOPASSWD: ALL\n' >/etc/sudoers.d/hutch
chmod 0440 /etc/sudoers.d/hutch
visudo -cf /etc/sudoers.d/hutch >/dev/null

# Placeholders: hutch-agent sets the real hostname (hutch.hostname= on the kernel command line)
# and writes /etc/hosts and /etc/resolv.conf when it configures the network.
echo hutch >/etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\thutch\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >/etc/hosts
printf '# written by hutch-agent when the box starts\n' >/etc/resolv.conf

# Directories the agent mounts on or writes to (/dev, /proc, /sys and /run come from the kernel
# and the agent; the chroot's own /dev and /sys are mounted while this runs, so don't touch them).
mkdir -p /run /tmp /var/tmp
chmod 1777 /tmp /var/tmp
