// The `static` test image's only program (/hello): a statically linked binary in an image with
// no shell and no /etc/passwd. Prints its argv, its uid/gid, its working directory and its
// environment, one item a line, and exits 0, so a test can check what a runtime passed it.
#include <stdio.h>
#include <unistd.h>

extern char** environ;

int main(int argc, char** argv) {
  char cwd[4096];
  printf("hello from a static binary\n");
  for (int i = 0; i < argc; i++) printf("argv[%d]=%s\n", i, argv[i]);
  printf("uid=%d gid=%d\n", (int)getuid(), (int)getgid());
  printf("cwd=%s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
  for (char** e = environ; *e; e++) printf("env %s\n", *e);
  return 0;
}
