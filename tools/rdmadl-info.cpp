// SPDX-License-Identifier: MIT
// rdmadl-info: what rdmadl found (libraries, kernel, devices) and why RDMA is
// or is not usable here. See --help and rdmadl-info(1).
#include <arpa/inet.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rdmadl/loader.h"
#include "rdmadl/rdmadl.hpp"

namespace {

constexpr int exit_usable = 0, exit_no_library = 1, exit_no_device = 2, exit_no_match = 3,
              exit_usage = 64, exit_io = 74;

const char usage[] =
    "usage: rdmadl-info [-d DEV] [-i PORT] [-g INDEX] [--json] [--check] [--help]\n"
    "\n"
    "Prints what rdmadl's loader found: per library a summary, the requested and the\n"
    "real path, the highest version node, its symbols counted as bound, emulated and\n"
    "absent, and the load error; the stack state and the verdict (usable: yes or\n"
    "no, and why); and for each RDMA device its GUID, node type, transport, limits,\n"
    "ports (state, MTU, link layer, LID), the GID a queue pair would use by default\n"
    "and the GID table (index, GID, type, netdev, address).\n"
    "\n"
    "  -d, --ib-dev DEV       only the device DEV\n"
    "  -i, --ib-port PORT     only port PORT (of each device shown)\n"
    "  -g, --gid-index INDEX  only GID table entry INDEX (of each port shown)\n"
    "      --json             print the same as one JSON object (valid UTF-8: a byte\n"
    "                         that is not UTF-8 becomes \\ufffd)\n"
    "      --check            print nothing; only set the exit status\n"
    "  -h, --help             print this text\n"
    "\n"
    "A library's summary: \"complete for rdma-core R\" when every symbol its release\n"
    "defines is bound (symbols newer than that release are absent or emulated, as\n"
    "expected); upper case (PARTIAL, INCOMPATIBLE, LOAD-FAILED) when something is\n"
    "wrong with the file.\n"
    "\n"
    "Exit status (the same with and without --check):\n"
    "  0  RDMA is usable: a device opened and has an active port (among those shown)\n"
    "  1  no usable libibverbs: not installed, failed to load, or RDMADL_DISABLE=1\n"
    "  2  libibverbs loaded but no usable device: the kernel has no RDMA support,\n"
    "     no device exists, or no port is active\n"
    "  3  the device, port or GID index asked for with -d, -i or -g does not exist\n"
    " 64  bad command line\n"
    " 74  the output could not be written (a full disk, a closed stdout)\n"
    "\n"
    "Text output escapes control characters and bytes that are not UTF-8 in names\n"
    "and paths (\\n, \\t, \\xNN; a backslash as \\\\) and prints - for an empty field.\n"
    "\n"
    "Environment: RDMADL_IBVERBS_PATH, RDMADL_RDMACM_PATH, RDMADL_DISABLE=1,\n"
    "RDMADL_DEBUG=1 (see rdmadl-info(1) and rdmadl's README).\n";

// What the command line asks for.
struct options {
  bool json = false, check = false;
  std::string dev;                  // -d: empty = every device
  std::optional<unsigned> port;     // -i
  std::optional<std::uint32_t> gid; // -g
};

struct port_info {
  unsigned num;
  rdmadl::port_attr attr;
  std::vector<rdmadl::gid_entry> gids;
  std::string gids_error; // context::gid_table() failed
  // What context::select_gid() with the default selector picks: the GID a
  // queue pair created with default options uses on this port.
  std::optional<rdmadl::gid_entry> would_use;
  std::string would_use_error;
};
struct device_info {
  std::string name, error;
  std::uint64_t guid = 0;
  rdmadl::node_type node{};
  rdmadl::transport transport{};
  bool has_attr = false;
  rdmadl::device_attr attr;
  std::vector<port_info> ports;
  std::vector<std::pair<rdmadl::feature, bool>> features;
  rdmadl::provider_info provider;
};

// One library's symbols and the summary of them, shared by text and JSON.
struct library_view {
  std::size_t bound = 0;
  std::vector<std::string_view> emulated, absent;
  std::string release;          // "44.0", from the real file name; empty when unknown
  bool complete = false;        // every symbol of its own release bound
  std::size_t older_absent = 0; // absent or emulated at or below its version node
  std::string summary;
};

struct report {
  std::vector<rdmadl::library_status> libs;
  std::vector<library_view> views;
  rdmadl::stack_state stack{};
  std::vector<device_info> devices;
  std::string devices_error;
  std::string filter_error; // -d/-i/-g matched nothing
  bool usable = false;
  std::string why;
  int status = exit_no_library;
};

std::string guid_str(std::uint64_t g) {
  char b[24];
  std::snprintf(b, sizeof b, "%04x:%04x:%04x:%04x", unsigned(g >> 48) & 0xffff,
                unsigned(g >> 32) & 0xffff, unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
  return b;
}

// The length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 when the
// byte there does not start one (a stray continuation byte, an overlong form,
// a surrogate, beyond U+10FFFF, or a truncated sequence).
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  if (c < 0x80)
    return 1;
  // The lead bytes of well-formed sequences (Unicode's table 3-7): each range's
  // length and the bounds of its second byte; later bytes are 0x80 to 0xbf.
  struct lead_range {
    unsigned char first, last;
    std::size_t n;
    unsigned char lo, hi;
  };
  static constexpr lead_range leads[] = {
      {0xc2, 0xdf, 2, 0x80, 0xbf}, {0xe0, 0xe0, 3, 0xa0, 0xbf}, {0xe1, 0xec, 3, 0x80, 0xbf},
      {0xed, 0xed, 3, 0x80, 0x9f}, {0xee, 0xef, 3, 0x80, 0xbf}, {0xf0, 0xf0, 4, 0x90, 0xbf},
      {0xf1, 0xf3, 4, 0x80, 0xbf}, {0xf4, 0xf4, 4, 0x80, 0x8f},
  };
  const lead_range *r = std::find_if(std::begin(leads), std::end(leads), [&](const lead_range &l) {
    return c >= l.first && c <= l.last;
  });
  if (r == std::end(leads))
    return 0;
  if (i + r->n > s.size() || at(i + 1) < r->lo || at(i + 1) > r->hi)
    return 0;
  for (std::size_t k = 2; k < r->n; k++)
    if (at(i + k) < 0x80 || at(i + k) > 0xbf)
      return 0;
  return r->n;
}

// One field of the text output: control characters and bytes that are not
// UTF-8 escaped so that no path can start a line of its own or upset a
// terminal, "-" when empty.
std::string text(std::string_view s) {
  if (s.empty())
    return "-";
  std::string o;
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = utf8_len(s, i);
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c < 0x20 || c == 0x7f || n == 0) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    } else {
      o.append(s.substr(i, n));
      i += n;
      continue;
    }
    i++;
  }
  return o;
}

// A JSON string: always valid UTF-8; a byte that does not belong to a
// well-formed UTF-8 sequence becomes U+FFFD.
std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = utf8_len(s, i);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else if (n == 0) {
      o += "\\ufffd";
    } else {
      o.append(s.substr(i, n));
      i += n;
      continue;
    }
    i++;
  }
  return o + "\"";
}

std::string json_opt(std::string_view s) {
  return s.empty() ? std::string("null") : json_str(s);
}

// "libibverbs.so.1.14.44.0" -> "44.0": rdma-core names each library's file
// after its soname, its ABI minor and the release. Empty otherwise.
std::string release_of(std::string_view path) {
  auto base = path.substr(path.rfind('/') + 1);
  auto so = base.find(".so.");
  if (so == std::string_view::npos)
    return {};
  std::vector<std::string_view> parts;
  for (auto rest = base.substr(so + 4);;) {
    auto dot = rest.find('.');
    parts.push_back(rest.substr(0, dot));
    if (dot == std::string_view::npos)
      break;
    rest = rest.substr(dot + 1);
  }
  if (parts.size() != 4)
    return {};
  for (auto p : parts)
    if (p.empty() || p.find_first_not_of("0123456789") != std::string_view::npos)
      return {};
  return std::string(parts[2]) + "." + std::string(parts[3]);
}

// Whether version node a ("IBVERBS_1.18") is newer than b ("IBVERBS_1.14"):
// the same name before the numbers, and a higher dotted number.
bool newer_node(std::string_view a, std::string_view b) {
  auto split = [](std::string_view v, std::string_view &name, std::vector<unsigned> &nums) {
    auto u = v.rfind('_');
    if (u == std::string_view::npos)
      return false;
    name = v.substr(0, u);
    for (auto rest = v.substr(u + 1);;) {
      auto dot = rest.find('.');
      auto part = rest.substr(0, dot);
      unsigned n = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
      if (ec != std::errc() || p != part.data() + part.size())
        return false;
      nums.push_back(n);
      if (dot == std::string_view::npos)
        return true;
      rest = rest.substr(dot + 1);
    }
  };
  std::string_view an, bn;
  std::vector<unsigned> av, bv;
  if (!split(a, an, av) || !split(b, bn, bv) || an != bn)
    return false;
  return std::lexicographical_compare(bv.begin(), bv.end(), av.begin(), av.end());
}

// "1 symbol", "19 symbols".
std::string count(std::size_t n, std::string_view what) {
  return std::to_string(n) + " " + std::string(what) + (n == 1 ? "" : "s");
}

// The summary of each state that has nothing to count or name.
constexpr std::pair<rdmadl::library_state, const char *> plain_summaries[] = {
    {rdmadl::library_state::incompatible,
     "INCOMPATIBLE: not a usable rdma-core library (see error)"},
    {rdmadl::library_state::load_failed,
     "LOAD-FAILED: the file exists but cannot be loaded (see error)"},
    {rdmadl::library_state::not_found, "not found"},
    {rdmadl::library_state::disabled, "disabled (RDMADL_DISABLE=1)"},
    {rdmadl::library_state::skipped, "skipped (libibverbs is unusable)"},
    {rdmadl::library_state::not_loaded, "not loaded (nothing used it yet)"},
};

library_view view_of(const rdmadl::library_status &l) {
  library_view v;
  v.emulated = l.emulated;
  for (auto m : l.missing)
    if (std::find(l.emulated.begin(), l.emulated.end(), m) == l.emulated.end())
      v.absent.push_back(m);
  v.bound = l.symbol_count - l.missing.size();
  v.release = release_of(l.path);
  std::string what = v.release.empty()
                         ? std::string(l.version_node)
                         : "rdma-core " + v.release + " (" + std::string(l.version_node) + ")";
  using st = rdmadl::library_state;
  switch (l.state) {
  case st::loaded:
    v.complete = true;
    v.summary = "complete for " + what;
    break;
  case st::partial: {
    for (auto m : l.missing) {
      const char *node = nullptr;
      rdmadl_symbol_status(std::string(m).c_str(), &node);
      if (!node || !newer_node(node, l.version_node))
        v.older_absent++;
    }
    std::string counts = count(v.absent.size(), "newer symbol") + " absent";
    if (!v.emulated.empty())
      counts += ", " + std::to_string(v.emulated.size()) + " emulated";
    if (v.older_absent == 0) {
      v.complete = true;
      v.summary = "complete for " + what + ": " + counts;
    } else {
      v.summary = "PARTIAL: " + count(v.older_absent, "symbol") + " of " +
                  std::string(l.version_node) + " or older not found in the file (" +
                  std::to_string(v.absent.size()) + " absent, " +
                  std::to_string(v.emulated.size()) + " emulated)";
    }
    break;
  }
  default: // a state with nothing to count
    for (const auto &[state, text] : plain_summaries)
      if (state == l.state)
        v.summary = text;
    break;
  }
  return v;
}

// The netdev of a GID entry ("eth0"), empty when none or gone.
std::string netdev(const rdmadl::gid_entry &g) {
  char b[IF_NAMESIZE + 1] = {};
  if (!g.ndev_ifindex || !if_indextoname(g.ndev_ifindex, b))
    return {};
  return b;
}

// The IP address a RoCE GID stands for: the IPv4 address of an IPv4-mapped
// GID, else the GID itself as an IPv6 address. Empty for an IB GID.
std::string address(const rdmadl::gid_entry &g) {
  if (g.type == rdmadl::gid_type::ib)
    return {};
  char b[INET6_ADDRSTRLEN] = {};
  if (g.value.is_ipv4_mapped()) {
    std::uint32_t a = g.value.ipv4();
    inet_ntop(AF_INET, &a, b, sizeof b);
  } else {
    inet_ntop(AF_INET6, g.value.raw.data(), b, sizeof b);
  }
  return b;
}

// Keeps the entries -g asks for; false when it asks for one the port lacks.
bool filter_gids(port_info &p, const options &o) {
  if (!o.gid)
    return true;
  auto keep = std::remove_if(p.gids.begin(), p.gids.end(),
                             [&](const rdmadl::gid_entry &g) { return g.index != *o.gid; });
  p.gids.erase(keep, p.gids.end());
  return !p.gids.empty();
}

report collect(const options &opt) {
  report r;
  // Every library, the lazily loaded ones loaded now: this reports what a
  // program calling them would get.
  for (auto lib : rdmadl::all_libraries) {
    rdmadl::load(lib);
    r.libs.push_back(rdmadl::status(lib));
    r.views.push_back(view_of(r.libs.back()));
  }
  r.stack = rdmadl::stack();
  std::vector<std::string> names;
  bool port_seen = false, gid_seen = false;
  if (r.stack == rdmadl::stack_state::ready) {
    auto list = rdmadl::device_list::get();
    if (!list)
      r.devices_error = list.error().message();
    else
      for (auto d : *list) {
        names.emplace_back(d.name());
        if (!opt.dev.empty() && d.name() != opt.dev)
          continue;
        device_info di;
        di.name = std::string(d.name());
        di.guid = d.guid();
        di.node = d.node();
        di.transport = d.transport_type();
        auto ctx = rdmadl::context::open(d);
        if (!ctx) {
          di.error = "cannot open: " + ctx.error().message();
          port_seen = gid_seen = true; // unknown: the report shows why
          r.devices.push_back(std::move(di));
          continue;
        }
        if (auto a = ctx->query_device()) {
          di.has_attr = true;
          di.attr = *a;
        } else {
          di.error = "query_device: " + a.error().message();
          port_seen = gid_seen = true;
        }
        for (unsigned p = 1; di.has_attr && p <= di.attr.phys_port_cnt; p++) {
          if (opt.port && p != *opt.port)
            continue;
          port_seen = true;
          port_info pi{p, {}, {}, {}, {}, {}};
          if (auto pa = ctx->query_port(static_cast<std::uint8_t>(p)))
            pi.attr = *pa;
          if (auto g = ctx->gid_table(static_cast<std::uint8_t>(p)))
            pi.gids = std::move(*g);
          else
            pi.gids_error = g.error().message();
          if (auto g = ctx->select_gid(static_cast<std::uint8_t>(p)))
            pi.would_use = *g;
          else
            pi.would_use_error = g.error().message();
          gid_seen |= filter_gids(pi, opt) || !pi.gids_error.empty();
          if (pi.attr.state == rdmadl::port_state::active)
            r.usable = true;
          di.ports.push_back(std::move(pi));
        }
        for (auto f : rdmadl::all_features)
          di.features.emplace_back(f, ctx->supports(f));
        di.provider = ctx->provider();
        r.devices.push_back(std::move(di));
      }
  }
  // The loader's verdict: the same sentence rdmadl_verdict() gives any program.
  auto d = rdmadl::diagnose();
  r.stack = d.state; // (one reading: the stack line agrees with the verdict)
  r.why = std::string(d.sentence);
  // With -d/-i the answer is about the ports shown (r.usable, from the loop).
  if (d.usable && (!opt.dev.empty() || opt.port) && !r.usable)
    r.why = "RDMA is usable, but no port selected with -d/-i is active";
  else
    r.usable = d.usable;
  r.status =
      r.usable ? exit_usable
      : (d.state == rdmadl::stack_state::disabled || d.state == rdmadl::stack_state::no_library)
          ? exit_no_library
          : exit_no_device;
  // A filter that matches nothing, once the devices could be listed.
  if (r.stack == rdmadl::stack_state::ready && r.devices_error.empty()) {
    std::string present;
    for (const auto &n : names)
      present += (present.empty() ? "" : ", ") + n;
    if (!opt.dev.empty() && r.devices.empty())
      r.filter_error = "no RDMA device '" + text(opt.dev) + "' (present: " + text(present) + ")";
    else if (opt.port && !port_seen)
      r.filter_error = "no port " + std::to_string(*opt.port) +
                       (opt.dev.empty() ? " on any device" : " on " + text(opt.dev));
    else if (opt.gid && !gid_seen)
      r.filter_error = "no GID index " + std::to_string(*opt.gid) + " on the ports shown";
    if (!r.filter_error.empty())
      r.status = exit_no_match;
  }
  return r;
}

void print_port_text(const port_info &p) {
  auto st = rdmadl::name(p.attr.state), ll = rdmadl::name(p.attr.link);
  std::printf("  port %u: %.*s, mtu %u (max %u), link layer %.*s, lid %u\n", p.num, int(st.size()),
              st.data(), p.attr.active_mtu, p.attr.max_mtu, int(ll.size()), ll.data(), p.attr.lid);
  if (p.would_use) {
    auto gt = rdmadl::name(p.would_use->type);
    auto a = address(*p.would_use);
    std::printf("    would use GID %u (%.*s%s%s)\n", p.would_use->index, int(gt.size()), gt.data(),
                a.empty() ? "" : ", ", a.c_str());
  } else {
    std::printf("    would use GID: none (%s)\n", text(p.would_use_error).c_str());
  }
  if (!p.gids_error.empty())
    std::printf("    gid table: %s\n", text(p.gids_error).c_str());
  for (const auto &g : p.gids) {
    auto gt = rdmadl::name(g.type);
    std::printf("    gid %3u: %s  %-7.*s  %-8s  %s\n", g.index, g.value.to_string().c_str(),
                int(gt.size()), gt.data(), text(netdev(g)).c_str(), text(address(g)).c_str());
  }
}

void print_text(const report &r) {
  std::printf("rdmadl-info %d.%d.%d\n", RDMADL_VERSION_MAJOR, RDMADL_VERSION_MINOR,
              RDMADL_VERSION_PATCH);
  for (std::size_t i = 0; i < r.libs.size(); i++) {
    const auto &l = r.libs[i];
    const auto &v = r.views[i];
    auto so = rdmadl::soname(rdmadl::all_libraries[i]);
    std::printf("%s: %s\n", text(so.substr(0, so.find(".so"))).c_str(), text(v.summary).c_str());
    std::printf("  state:        %s\n", text(l.state_name).c_str());
    std::printf("  requested:    %s\n", text(l.requested).c_str());
    std::printf("  path:         %s\n", text(l.path).c_str());
    std::printf("  version node: %s\n", text(l.version_node).c_str());
    // Bound, emulated (a fallback runs) and absent (EOPNOTSUPP) apart.
    std::printf("  symbols:      %zu bound, %zu emulated, %zu absent\n", v.bound, v.emulated.size(),
                v.absent.size());
    if (!v.emulated.empty()) {
      std::printf("  emulated:    ");
      for (auto m : v.emulated)
        std::printf(" %s", text(m).c_str());
      std::printf("\n");
    }
    // (Not listed when nothing was loaded: then every symbol is absent.)
    if (!v.absent.empty() && v.bound > 0) {
      std::printf("  absent:      ");
      for (auto m : v.absent)
        std::printf(" %s", text(m).c_str());
      std::printf("\n");
    }
    std::printf("  error:        %s\n", text(l.error).c_str());
  }
  auto sn = rdmadl::name(r.stack);
  std::printf("stack: %s\n", text(sn).c_str());
  // (The verdict comes escaped from the loader.)
  std::printf("usable: %s: %s\n", r.status == exit_usable ? "yes" : "no", r.why.c_str());
  for (const auto &d : r.devices) {
    auto nn = rdmadl::name(d.node), tn = rdmadl::name(d.transport);
    std::printf("device %s\n  guid:      %s\n  node type: %s\n  transport: %s\n",
                text(d.name).c_str(), guid_str(d.guid).c_str(), text(nn).c_str(), text(tn).c_str());
    if (!d.error.empty())
      std::printf("  error:     %s\n", text(d.error).c_str());
    if (d.has_attr) {
      const auto &a = d.attr;
      auto an = rdmadl::name(a.atomic);
      std::printf("  firmware:  %s\n  vendor:    0x%x part %u hw %u\n", text(a.fw_ver).c_str(),
                  a.vendor_id, a.vendor_part_id, a.hw_ver);
      std::printf("  node guid: %s, sys image guid: %s, page_size_cap 0x%" PRIx64 "\n",
                  guid_str(a.node_guid).c_str(), guid_str(a.sys_image_guid).c_str(),
                  a.page_size_cap);
      std::printf("  limits:    max_qp %d, max_qp_wr %d, max_cq %d, max_cqe %d, max_mr %d, "
                  "max_mr_size %" PRIu64 ", max_pd %d, max_sge %d, max_sge_rd %d,\n"
                  "             max_qp_rd_atom %d, max_qp_init_rd_atom %d, max_srq %d, "
                  "max_srq_wr %d, max_ah %d, atomic %.*s\n",
                  a.max_qp, a.max_qp_wr, a.max_cq, a.max_cqe, a.max_mr, a.max_mr_size, a.max_pd,
                  a.max_sge, a.max_sge_rd, a.max_qp_rd_atom, a.max_qp_init_rd_atom, a.max_srq,
                  a.max_srq_wr, a.max_ah, int(an.size()), an.data());
    }
    if (!d.provider.name.empty())
      std::printf("  provider:  %s (%s), direct verbs: %s\n", text(d.provider.name).c_str(),
                  text(d.provider.file).c_str(),
                  !d.provider.direct_verbs ? "none"
                  : d.provider.direct_verbs_usable
                      ? std::string(rdmadl::soname(*d.provider.direct_verbs)).c_str()
                      : "unusable");
    std::printf("  features: ");
    for (auto [f, yes] : d.features) {
      auto fn = rdmadl::name(f);
      std::printf(" %.*s=%s", int(fn.size()), fn.data(), yes ? "yes" : "no");
    }
    std::printf("\n");
    for (const auto &p : d.ports)
      print_port_text(p);
  }
}

template <class T> std::string num(const char *k, T v) {
  return std::string(", \"") + k + "\": " + std::to_string(v);
}

std::string gid_json(const rdmadl::gid_entry &g) {
  return "{\"index\": " + std::to_string(g.index) + ", \"gid\": " + json_str(g.value.to_string()) +
         ", \"type\": " + json_str(rdmadl::name(g.type)) +
         ", \"ifindex\": " + std::to_string(g.ndev_ifindex) +
         ", \"netdev\": " + json_opt(netdev(g)) + ", \"address\": " + json_opt(address(g)) + "}";
}

std::string device_json(const device_info &d) {
  std::string o = "{\"name\": " + json_str(d.name) + ", \"guid\": " + json_str(guid_str(d.guid)) +
                  ", \"node_type\": " + json_str(rdmadl::name(d.node)) +
                  ", \"transport\": " + json_str(rdmadl::name(d.transport));
  if (!d.error.empty())
    o += ", \"error\": " + json_str(d.error);
  if (d.has_attr) {
    const auto &a = d.attr;
    o += ", \"fw_ver\": " + json_str(a.fw_ver) + num("vendor_id", a.vendor_id) +
         num("vendor_part_id", a.vendor_part_id) + num("hw_ver", a.hw_ver) +
         ", \"node_guid\": " + json_str(guid_str(a.node_guid)) +
         ", \"sys_image_guid\": " + json_str(guid_str(a.sys_image_guid)) +
         ", \"limits\": {\"atomic_cap\": " + json_str(rdmadl::name(a.atomic));
    // Each field with its own type: the 64-bit sizes are unsigned.
    o += num("max_qp", a.max_qp) + num("max_qp_wr", a.max_qp_wr) + num("max_cq", a.max_cq) +
         num("max_cqe", a.max_cqe) + num("max_mr", a.max_mr) + num("max_mr_size", a.max_mr_size) +
         num("page_size_cap", a.page_size_cap) + num("max_pd", a.max_pd) +
         num("max_sge", a.max_sge) + num("max_sge_rd", a.max_sge_rd) +
         num("max_qp_rd_atom", a.max_qp_rd_atom) +
         num("max_qp_init_rd_atom", a.max_qp_init_rd_atom) + num("max_srq", a.max_srq) +
         num("max_srq_wr", a.max_srq_wr) + num("max_srq_sge", a.max_srq_sge) +
         num("max_ah", a.max_ah) + num("max_mcast_grp", a.max_mcast_grp) +
         num("device_cap_flags", a.device_cap_flags) +
         num("phys_port_cnt", unsigned(a.phys_port_cnt)) + "}";
  }
  if (!d.provider.name.empty())
    o += ", \"provider\": {\"name\": " + json_str(d.provider.name) +
         ", \"file\": " + json_str(d.provider.file) + ", \"direct_verbs\": " +
         (d.provider.direct_verbs ? json_str(rdmadl::soname(*d.provider.direct_verbs))
                                  : std::string("null")) +
         ", \"direct_verbs_usable\": " + (d.provider.direct_verbs_usable ? "true" : "false") + "}";
  o += ", \"features\": {";
  for (std::size_t k = 0; k < d.features.size(); k++)
    o += (k ? ", " : "") + json_str(rdmadl::name(d.features[k].first)) + ": " +
         (d.features[k].second ? "true" : "false");
  o += "}, \"ports\": [";
  for (std::size_t k = 0; k < d.ports.size(); k++) {
    const auto &p = d.ports[k];
    o += std::string(k ? ", " : "") + "{\"port\": " + std::to_string(p.num) +
         ", \"state\": " + json_str(rdmadl::name(p.attr.state)) +
         num("active_mtu", p.attr.active_mtu) + num("max_mtu", p.attr.max_mtu) +
         ", \"link_layer\": " + json_str(rdmadl::name(p.attr.link)) + num("lid", p.attr.lid) +
         num("gid_tbl_len", p.attr.gid_tbl_len) + ", \"would_use_gid\": " +
         (p.would_use ? std::to_string(p.would_use->index) : std::string("null"));
    if (!p.would_use)
      o += ", \"would_use_gid_error\": " + json_str(p.would_use_error);
    if (!p.gids_error.empty())
      o += ", \"gids_error\": " + json_str(p.gids_error);
    o += ", \"gids\": [";
    for (std::size_t g = 0; g < p.gids.size(); g++)
      o += (g ? ", " : "") + gid_json(p.gids[g]);
    o += "]}";
  }
  return o + "]}";
}

void print_json(const report &r) {
  std::string o = "{\n  \"version\": \"" + std::to_string(RDMADL_VERSION_MAJOR) + "." +
                  std::to_string(RDMADL_VERSION_MINOR) + "." +
                  std::to_string(RDMADL_VERSION_PATCH) + "\",\n  \"libraries\": {";
  auto list = [](const std::vector<std::string_view> &v) {
    std::string s = "[";
    for (std::size_t k = 0; k < v.size(); k++)
      s += (k ? ", " : "") + json_str(v[k]);
    return s + "]";
  };
  for (std::size_t i = 0; i < r.libs.size(); i++) {
    const auto &l = r.libs[i];
    const auto &v = r.views[i];
    auto so = rdmadl::soname(rdmadl::all_libraries[i]);
    o += std::string(i ? "," : "") + "\n    " + json_str(so.substr(0, so.find(".so"))) +
         ": {\"soname\": " + json_str(so) + ", \"state\": " + json_str(l.state_name) +
         ", \"summary\": " + json_str(v.summary) +
         ", \"complete\": " + (v.complete ? "true" : "false") +
         ", \"release\": " + json_opt(v.release) + ", \"requested\": " + json_opt(l.requested) +
         ", \"path\": " + json_opt(l.path) + ", \"version_node\": " + json_opt(l.version_node) +
         ", \"error\": " + json_opt(l.error) + num("symbols", l.symbol_count) +
         num("bound", v.bound) + num("emulated_count", v.emulated.size()) +
         num("absent_count", v.absent.size()) + ", \"emulated\": " + list(v.emulated) +
         ", \"absent\": " + list(v.absent) + "}";
  }
  o += "\n  },\n  \"stack\": " + json_str(rdmadl::name(r.stack)) +
       ",\n  \"usable\": " + (r.status == exit_usable ? "true" : "false") +
       ",\n  \"reason\": " + json_str(r.why) + ",\n  \"exit_status\": " + std::to_string(r.status) +
       ",\n  \"devices\": [";
  for (std::size_t i = 0; i < r.devices.size(); i++)
    o += std::string(i ? "," : "") + "\n    " + device_json(r.devices[i]);
  o += "\n  ]\n}\n";
  std::fputs(o.c_str(), stdout);
}

// Whether everything printed reached stdout; says why not on stderr.
bool flushed() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout))
    return true;
  std::fprintf(stderr, "rdmadl-info: cannot write the output: %s\n",
               errno ? std::strerror(errno) : "write error");
  return false;
}

// A decimal number no greater than max, else nothing.
std::optional<unsigned> parse_num(std::string_view s, unsigned max) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v > max)
    return std::nullopt;
  return v;
}

// Parses argv into o; returns -1 to go on, else the exit status to return.
int parse(int argc, char **argv, options &o) {
  auto bad = [](const char *what, std::string_view arg) {
    std::fprintf(stderr, "rdmadl-info: %s '%s'\n%s", what, text(arg).c_str(), usage);
    return exit_usage;
  };
  for (int i = 1; i < argc; i++) {
    std::string_view a = argv[i];
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--check") {
      o.check = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return flushed() ? 0 : exit_io;
    }
    // The options with a value: "-d X", "-dX", "--ib-dev X", "--ib-dev=X".
    static constexpr struct {
      char s;
      std::string_view l;
    } with_value[] = {{'d', "--ib-dev"}, {'i', "--ib-port"}, {'g', "--gid-index"}};
    char which = 0;
    std::optional<std::string_view> value;
    for (auto w : with_value) {
      if (a.size() >= 2 && a[0] == '-' && a[1] == w.s) {
        which = w.s;
        if (a.size() > 2)
          value = a.substr(2);
      } else if (a == w.l) {
        which = w.s;
      } else if (a.substr(0, w.l.size() + 1) == std::string(w.l) + "=") {
        which = w.s;
        value = a.substr(w.l.size() + 1);
      }
    }
    if (!which)
      return bad("unknown option", a);
    if (!value) {
      if (i + 1 >= argc)
        return bad("missing value for", a);
      value = argv[++i];
    }
    if (which == 'd') {
      if (value->empty())
        return bad("empty device name for", a);
      o.dev = std::string(*value);
    } else if (which == 'i') {
      auto n = parse_num(*value, 255);
      if (!n || *n == 0)
        return bad("not a port number (1-255):", *value);
      o.port = *n;
    } else {
      auto n = parse_num(*value, 0xffffffffu);
      if (!n)
        return bad("not a GID index:", *value);
      o.gid = *n;
    }
  }
  return -1;
}

} // namespace

int main(int argc, char **argv) {
  options opt;
  if (int st = parse(argc, argv, opt); st >= 0)
    return st;
  report r = collect(opt);
  if (!r.filter_error.empty()) {
    if (!opt.check)
      std::fprintf(stderr, "rdmadl-info: %s\n", r.filter_error.c_str());
    return r.status;
  }
  if (opt.check)
    return r.status;
  if (opt.json)
    print_json(r);
  else
    print_text(r);
  return flushed() ? r.status : exit_io;
}
