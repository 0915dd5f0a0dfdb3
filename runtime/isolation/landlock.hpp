// What the Landlock layers of this folder share: the constants of the ABI
// versions Debian 12's kernel headers predate, the ruleset attributes as of
// ABI 6, and the access masks each version handles.
#pragma once

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

// Debian 12's kernel headers stop at Landlock ABI 2; the values are the kernel's stable ABI.
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

namespace passepartout::landlock {

// struct landlock_ruleset_attr as of ABI 6 (Debian 12's header has only the first member).
struct RulesetAttributes {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};

// Every file access ABI `abi` can handle.
constexpr std::uint64_t every_fs_access(int abi) {
  std::uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0 (execute) to 12 (make_sym)
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return all;
}

// The accesses that change the file system (reading and executing left out).
constexpr std::uint64_t write_accesses(int abi) {
  std::uint64_t writes = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                         LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                         LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                         LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) writes |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) writes |= LANDLOCK_ACCESS_FS_TRUNCATE;
  return writes;
}

// A ruleset handling `fs_accesses` and, from ABI 6, signals to processes
// outside the domain; when `network` is false, TCP bind and connect too (ABI
// 4) and abstract Unix sockets (ABI 6). Each ABI is given the attributes it
// knows. The ruleset's descriptor, or -1 with errno set.
inline int create_ruleset(int abi, std::uint64_t fs_accesses, bool network) {
  RulesetAttributes attributes{fs_accesses, 0, 0};
  std::size_t size = sizeof attributes.handled_access_fs;
  if (abi >= 4) {
    size = offsetof(RulesetAttributes, scoped);
    if (!network) attributes.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
  }
  if (abi >= 6) {
    size = sizeof attributes;
    attributes.scoped = LANDLOCK_SCOPE_SIGNAL | (network ? 0 : LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET);
  }
  return static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attributes, size, 0U));
}

}  // namespace passepartout::landlock
