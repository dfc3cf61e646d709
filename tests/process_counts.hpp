// SPDX-License-Identifier: MIT
// What a churn or exhaustion test counts of its own process, to show that a
// thousand connect/transfer/disconnect cycles (or a failed allocation) leave
// nothing behind: open file descriptors (/proc/self/fd), mappings
// (/proc/self/maps lines) and VmSize/VmRSS (/proc/self/status). Shared by the
// host suites (tests/cxx/) and the guest programs (tests/guest/); header-only.
#ifndef RDMADL_TESTS_PROCESS_COUNTS_HPP
#define RDMADL_TESTS_PROCESS_COUNTS_HPP

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace process_counts {

struct counts {
  int fds = -1;         // entries of /proc/self/fd, without the one reading it
  int maps = -1;        // lines of /proc/self/maps
  long vm_size_kb = -1; // VmSize of /proc/self/status
  long vm_rss_kb = -1;  // VmRSS
};

inline int open_fds() {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -1;
  int n = 0;
  while (const dirent *e = readdir(d))
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; // the directory stream's own descriptor
}

inline int map_lines() {
  std::FILE *f = std::fopen("/proc/self/maps", "r");
  if (!f)
    return -1;
  int n = 0;
  for (int c; (c = std::fgetc(f)) != EOF;)
    n += c == '\n';
  std::fclose(f);
  return n;
}

// The value in kB of FIELD ("VmSize:") in /proc/self/status, or -1.
inline long status_kb(const char *field) {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  long v = -1;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0) {
      v = std::strtol(line + n, nullptr, 10);
      break;
    }
  std::fclose(f);
  return v;
}

inline counts now() {
  counts c;
  c.fds = open_fds();
  c.maps = map_lines();
  c.vm_size_kb = status_kb("VmSize:");
  c.vm_rss_kb = status_kb("VmRSS:");
  return c;
}

// "fds 12 -> 12, maps 140 -> 140, VmSize 10240 -> 10240 kB, VmRSS 5120 -> 5130 kB"
inline std::string describe(const counts &a, const counts &b) {
  char s[256];
  std::snprintf(s, sizeof s,
                "fds %d -> %d, maps %d -> %d, VmSize %ld -> %ld kB, VmRSS %ld -> %ld kB", a.fds,
                b.fds, a.maps, b.maps, a.vm_size_kb, b.vm_size_kb, a.vm_rss_kb, b.vm_rss_kb);
  return s;
}

} // namespace process_counts

#endif // RDMADL_TESTS_PROCESS_COUNTS_HPP
