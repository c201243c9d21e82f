// A stand-in for hutch-agent, for testing guest images without the real agent.
// Build:  gcc -static -Os -o standin-agent scripts/image/standin-agent.c
// Use:    scripts/build-image.sh --agent ./standin-agent ...; scripts/image/boot-test.sh IMAGE_DIR
//
// As PID 1 it prints "HUTCH-STANDIN-OK <uname -r>" on the console, then a few facts the real agent
// relies on (uptime, mounts handed over by the initramfs, virtio-serial ports and their names,
// network interfaces, loaded modules), writes the same OK line to the virtio-serial port named
// hutch.agent, and ends the VM. How it ends is chosen on the kernel command line:
//   hutch.standin=poweroff (default) | reboot | halt | exit | panic
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/utsname.h>
#include <unistd.h>

static void readLine(const char* path, char* buf, size_t len) {
  buf[0] = '\0';
  FILE* f = fopen(path, "r");
  if (!f) return;
  if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

static void listDir(const char* label, const char* path) {
  DIR* d = opendir(path);
  printf("hutch-standin: %s:", label);
  if (d) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.') printf(" %s", e->d_name);
    closedir(d);
  } else {
    printf(" (%s: %s)", path, strerror(errno));
  }
  printf("\n");
}

int main(void) {
  struct utsname u;
  uname(&u);
  char up[128], cmdline[4096];
  readLine("/proc/uptime", up, sizeof up);
  printf("HUTCH-STANDIN-OK %s\n", u.release);
  printf("hutch-standin: pid %d, uptime %s\n", (int)getpid(), up);
  fflush(stdout);

  readLine("/proc/cmdline", cmdline, sizeof cmdline);
  printf("hutch-standin: cmdline: %s\n", cmdline);
  FILE* m = fopen("/proc/mounts", "r");
  if (m) {
    char line[512];
    while (fgets(line, sizeof line, m)) printf("hutch-standin: mount: %s", line);
    fclose(m);
  } else {
    printf("hutch-standin: /proc is not mounted\n");
  }

  // virtio-serial ports: devtmpfs names them /dev/vportNpM; the name given with
  // -device virtserialport,name=... is in /sys/class/virtio-ports/vportNpM/name.
  char agentDev[300] = "";
  DIR* d = opendir("/sys/class/virtio-ports");
  if (d) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char p[300], name[128];
      snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", e->d_name);
      readLine(p, name, sizeof name);
      printf("hutch-standin: virtio port /dev/%s name '%s'\n", e->d_name, name);
      if (strcmp(name, "hutch.agent") == 0) snprintf(agentDev, sizeof agentDev, "/dev/%s", e->d_name);
    }
    closedir(d);
  } else {
    printf("hutch-standin: no /sys/class/virtio-ports (virtio_console not loaded?)\n");
  }
  listDir("net", "/sys/class/net");
  listDir("block", "/sys/class/block");
  listDir("hwrng", "/sys/class/misc/hw_random");
  char rng[128];
  readLine("/sys/class/misc/hw_random/rng_current", rng, sizeof rng);
  printf("hutch-standin: rng_current: %s\n", rng);
  FILE* mods = fopen("/proc/modules", "r");
  if (mods) {
    char line[512];
    printf("hutch-standin: modules:");
    while (fgets(line, sizeof line, mods)) printf(" %.*s", (int)strcspn(line, " "), line);
    printf("\n");
    fclose(mods);
  }
  if (agentDev[0]) {
    int fd = open(agentDev, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      char msg[200];
      int n = snprintf(msg, sizeof msg, "HUTCH-STANDIN-OK %s\n", u.release);
      ssize_t w = write(fd, msg, (size_t)n);
      printf("hutch-standin: wrote %zd bytes to %s (%s)\n", w, agentDev, w < 0 ? strerror(errno) : "ok");
      usleep(200 * 1000);  // let the host side read it before the VM goes away
      close(fd);
    } else {
      printf("hutch-standin: open %s: %s\n", agentDev, strerror(errno));
    }
  }

  const char* how = "poweroff";
  char* p = strstr(cmdline, "hutch.standin=");
  static char buf[32];
  if (p) {
    snprintf(buf, sizeof buf, "%s", p + strlen("hutch.standin="));
    buf[strcspn(buf, " ")] = '\0';
    how = buf;
  }
  readLine("/proc/uptime", up, sizeof up);
  printf("hutch-standin: uptime %s, ending with %s\n", up, how);
  fflush(stdout);
  sync();
  if (strcmp(how, "reboot") == 0) reboot(RB_AUTOBOOT);
  else if (strcmp(how, "halt") == 0) reboot(RB_HALT_SYSTEM);
  else if (strcmp(how, "exit") == 0) return 0;  // PID 1 exits: kernel panic
  else if (strcmp(how, "panic") == 0) {
    int fd = open("/proc/sysrq-trigger", O_WRONLY);
    if (fd >= 0) (void)!write(fd, "c", 1);
  } else reboot(RB_POWER_OFF);
  printf("hutch-standin: %s returned: %s\n", how, strerror(errno));
  fflush(stdout);
  for (;;) pause();
}
