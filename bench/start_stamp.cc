// start_stamp FILE: writes CLOCK_REALTIME in nanoseconds to FILE (atomically, via FILE.tmp and
// rename) and exits 0. start_latency runs it as a job: the stamp is the instant the job's
// process began running its own code. Kept free of libraries so that it starts fast.

#include <stdio.h>
#include <time.h>

int main(int argc, char** argv) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  if (argc != 2) {
    fprintf(stderr, "usage: start_stamp FILE\n");
    return 2;
  }
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]) >= static_cast<int>(sizeof tmp)) return 2;
  FILE* f = fopen(tmp, "w");
  if (f == nullptr) return 1;
  fprintf(f, "%lld\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
  if (fclose(f) != 0) return 1;
  return rename(tmp, argv[1]) == 0 ? 0 : 1;
}
