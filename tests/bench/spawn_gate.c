/* The anchor of the out-of-process benchmarks: a gate as a program started
 * per decision, the way hook scripts are run. It reads the action from stdin
 * to its end and answers a pass on stdout. Minimal on purpose: what it costs
 * is the process, not the work. */
#include <unistd.h>

int main(void) {
  char buffer[4096];
  while (read(0, buffer, sizeof buffer) > 0) {
  }
  static const char verdict[] = "(:VERDICT :PASS)\n";
  return write(1, verdict, sizeof verdict - 1) == (ssize_t)(sizeof verdict - 1) ? 0 : 1;
}
